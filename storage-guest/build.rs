//! Rebuild the guest when the WIT contract changes: `wit_bindgen::generate!`
//! reads `../wit` at compile time, which cargo does not track by itself.

fn main() {
    println!("cargo:rerun-if-changed=../wit");
}
