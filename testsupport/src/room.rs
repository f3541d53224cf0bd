//! Temporary directories on a filesystem with room to spare.
//!
//! A CI machine's disk is shared and sometimes nearly full. Some servers
//! refuse to write long before it is: `weed mini` keeps 1 % of its disk
//! free (2.5 GiB of a 252 GiB disk) and answers every upload 500 below
//! that; Chromium fails a large download into a blob when its profile's
//! disk is short. [`roomy_temp_dir`] picks the temp dir when its disk has
//! the room, else `/dev/shm` (tmpfs, backed by memory).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use tempfile::TempDir;

/// Bytes free and total size of the filesystem holding `dir` (`df -B1`).
pub fn disk_space(dir: &Path) -> Option<(u64, u64)> {
    let out = Command::new("df")
        .args(["-B1", "--output=avail,size"])
        .arg(dir)
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut numbers = text.lines().last()?.split_whitespace();
    let free = numbers.next()?.parse().ok()?;
    let size = numbers.next()?.parse().ok()?;
    Some((free, size))
}

/// A fresh directory named `prefix…` where `need` bytes fit and 1 % of the
/// filesystem stays free besides: under the temp dir if its disk has that
/// room, else on `/dev/shm`. An error says what each place had.
pub fn roomy_temp_dir(prefix: &str, need: u64) -> anyhow::Result<TempDir> {
    let candidates = [std::env::temp_dir(), PathBuf::from("/dev/shm")];
    let mut seen = Vec::new();
    for place in &candidates {
        let Some((free, size)) = disk_space(place) else {
            seen.push(format!("{}: df cannot say", place.display()));
            continue;
        };
        if free >= need.saturating_add(size / 100) {
            return tempfile::Builder::new()
                .prefix(prefix)
                .tempdir_in(place)
                .with_context(|| format!("creating a temp dir in {}", place.display()));
        }
        seen.push(format!("{}: {free} of {size} bytes free", place.display()));
    }
    bail!(
        "no room for {need} bytes plus 1 % of the disk ({}): the machine, not the code under test",
        seen.join("; ")
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn a_need_the_temp_dir_cannot_hold_lands_on_dev_shm() {
        let temp = std::env::temp_dir();
        let (free, _) = disk_space(&temp).expect("df answers for the temp dir");
        let need = free + 1;
        match disk_space(Path::new("/dev/shm")) {
            Some((shm_free, shm_size)) if shm_free >= need + shm_size / 100 => {
                let dir = roomy_temp_dir("room-test-", need).unwrap();
                assert!(
                    dir.path().starts_with("/dev/shm"),
                    "{}",
                    dir.path().display()
                );
            }
            _ => eprintln!("skipped: /dev/shm cannot hold {need} bytes either"),
        }
    }

    #[test]
    fn a_need_no_place_can_hold_is_an_error_that_says_what_each_had() {
        let error = roomy_temp_dir("room-test-", u64::MAX / 2)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("/dev/shm") && error.contains("bytes free"),
            "{error}"
        );
    }
}
