//! Finding the external programs the tests start.
//!
//! `scripts/install-test-deps.sh` installs the PyPI tools (SeaweedFS's
//! `weed`, …) into a virtualenv at `.tools/venv` in the workspace rather than
//! into the system Python, which Debian refuses to let pip touch (PEP 668).
//! Nothing activates that virtualenv, so the tests look there themselves.

use std::env;
use std::ffi::OsString;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use anyhow::bail;

/// A directory searched before any other, for tools installed elsewhere.
pub const TOOLS_ENV: &str = "WASM_STORAGE_TOOLS";
/// Where `scripts/install-test-deps.sh` puts the PyPI tools' executables,
/// relative to the workspace root.
const VENV_BIN: &str = ".tools/venv/bin";

/// The executable called `name`: in `$WASM_STORAGE_TOOLS` (a directory, if
/// set), then in the workspace's `.tools/venv/bin`, then on `PATH`.
///
/// The error names every place searched and the script that installs it.
pub fn find_tool(name: &str) -> anyhow::Result<PathBuf> {
    let dirs = search_dirs(env::var_os(TOOLS_ENV), &venv_bin(), env::var_os("PATH"));
    match find_in(name, &dirs) {
        Some(path) => Ok(path),
        None => bail!(
            "`{name}` not found in ${TOOLS_ENV}, {} or PATH: \
             run scripts/install-test-deps.sh (as root) to install every test dependency",
            venv_bin().display()
        ),
    }
}

/// `<workspace root>/.tools/venv/bin`; this crate sits one level below the root.
fn venv_bin() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).join(VENV_BIN)
}

/// The directories to search, in order. An empty `$WASM_STORAGE_TOOLS`
/// counts as unset.
fn search_dirs(tools: Option<OsString>, venv_bin: &Path, path: Option<OsString>) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = tools
        .filter(|dir| !dir.is_empty())
        .map(PathBuf::from)
        .into_iter()
        .collect();
    dirs.push(venv_bin.to_path_buf());
    if let Some(path) = path {
        dirs.extend(env::split_paths(&path));
    }
    dirs
}

/// The first executable file called `name` in `dirs`.
fn find_in(name: &str, dirs: &[PathBuf]) -> Option<PathBuf> {
    dirs.iter().map(|dir| dir.join(name)).find(|path| {
        // Follows symlinks: a venv's entries may be links to the real binary.
        fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, mode: u32) -> PathBuf {
        let path = dir.join(name);
        fs::write(&path, "#!/bin/sh\n").expect("writing a fake tool");
        fs::set_permissions(&path, fs::Permissions::from_mode(mode)).expect("chmod");
        path
    }

    #[test]
    fn tools_dir_then_venv_then_path() {
        let root = tempfile::tempdir().expect("temp dir");
        let [tools, venv, on_path] = ["tools", "venv", "bin"].map(|d| {
            let dir = root.path().join(d);
            fs::create_dir(&dir).expect("mkdir");
            dir
        });
        let path = env::join_paths([&on_path]).expect("a PATH of one dir");
        let dirs = search_dirs(Some(tools.clone().into()), &venv, Some(path));
        assert_eq!(dirs, [tools.clone(), venv.clone(), on_path.clone()]);

        assert_eq!(find_in("weed", &dirs), None);
        let last = write(&on_path, "weed", 0o755);
        assert_eq!(find_in("weed", &dirs), Some(last));
        let middle = write(&venv, "weed", 0o755);
        assert_eq!(find_in("weed", &dirs), Some(middle));
        let first = write(&tools, "weed", 0o755);
        assert_eq!(find_in("weed", &dirs), Some(first));
    }

    #[test]
    fn skips_what_cannot_run() {
        let root = tempfile::tempdir().expect("temp dir");
        let [a, b] = ["a", "b"].map(|d| {
            let dir = root.path().join(d);
            fs::create_dir(&dir).expect("mkdir");
            dir
        });
        write(&a, "weed", 0o644);
        fs::create_dir(b.join("weed")).expect("mkdir");
        assert_eq!(find_in("weed", &[a.clone(), b.clone()]), None);
        let runnable = write(&b, "rclone", 0o700);
        assert_eq!(find_in("rclone", &[a, b]), Some(runnable));
    }

    #[test]
    fn empty_tools_env_is_unset() {
        let venv = Path::new("/nonexistent/venv/bin");
        let dirs = search_dirs(Some(OsString::new()), venv, None);
        assert_eq!(dirs, [venv.to_path_buf()]);
    }

    #[test]
    fn error_names_the_script() {
        let err = find_tool("no-such-tool-wasm-storage")
            .expect_err("no such tool")
            .to_string();
        assert!(err.contains("scripts/install-test-deps.sh"), "{err}");
        assert!(err.contains(".tools/venv/bin"), "{err}");
    }
}
