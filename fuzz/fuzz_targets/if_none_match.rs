#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| gateway::fuzzing::if_none_match(data));
