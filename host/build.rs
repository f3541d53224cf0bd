//! Builds `storage-guest` for `wasm32-wasip2` and hands the component's path
//! to the crate as `STORAGE_GUEST_WASM`, so the gateway embeds it.
//!
//! The target is added with rustup when it is missing: a `rust-toolchain.toml`
//! does not install targets where `RUSTUP_AUTO_INSTALL=0`.

use std::env;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};

const TARGET: &str = "wasm32-wasip2";

fn main() {
    let manifest_dir =
        PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let guest_dir = manifest_dir.join("../storage-guest");
    for watched in [
        "../storage-guest/src",
        "../storage-guest/Cargo.toml",
        "../storage-guest/build.rs",
        "../handler/src",
        "../handler/Cargo.toml",
        "../wit",
        "../Cargo.lock",
    ] {
        println!("cargo:rerun-if-changed={watched}");
    }

    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    ensure_target(&rustc);

    // A separate target directory: the outer cargo holds the lock on its own.
    let target_dir = out_dir.join("guest-target");
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut build = Command::new(cargo);
    build
        .current_dir(&guest_dir)
        .args([
            "build",
            "--release",
            "--package",
            "storage-guest",
            "--target",
            TARGET,
        ])
        .arg("--target-dir")
        .arg(&target_dir);
    // Flags meant for the host build must not leak into the guest build.
    for var in [
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_TARGET_DIR",
    ] {
        build.env_remove(var);
    }
    // Wasm SIMD (which wasmtime compiles to the host's vector instructions)
    // for BLAKE3's verification of downloads, and wherever LLVM finds use.
    build.env(
        "CARGO_TARGET_WASM32_WASIP2_RUSTFLAGS",
        "-C target-feature=+simd128",
    );
    let status = build
        .status()
        .expect("could not run cargo to build storage-guest");
    check(
        status,
        "building storage-guest for wasm32-wasip2 failed (see the cargo output above)",
    );

    let built = target_dir.join(TARGET).join("release/storage_guest.wasm");
    let embedded = out_dir.join("storage_guest.wasm");
    std::fs::copy(&built, &embedded).unwrap_or_else(|e| panic!("copying {}: {e}", built.display()));
    println!("cargo:rustc-env=STORAGE_GUEST_WASM={}", embedded.display());
}

/// Make sure the standard library for the guest target is installed.
fn ensure_target(rustc: &str) {
    if target_installed(rustc) {
        return;
    }
    println!("cargo:warning=the {TARGET} target is missing; running `rustup target add {TARGET}`");
    let added = Command::new("rustup")
        .args(["target", "add", TARGET])
        .status();
    match added {
        Ok(status) => check(status, &format!("`rustup target add {TARGET}` failed")),
        Err(error) => panic!(
            "the {TARGET} target is not installed and rustup could not be run ({error}).\n\
             Install the target for your toolchain (with rustup: `rustup target add {TARGET}`) and build again."
        ),
    }
    if !target_installed(rustc) {
        panic!(
            "`rustup target add {TARGET}` ran, but {rustc} still has no {TARGET} standard library"
        );
    }
}

fn target_installed(rustc: &str) -> bool {
    let Ok(output) = Command::new(rustc).args(["--print", "sysroot"]).output() else {
        return false;
    };
    let sysroot = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    Path::new(&sysroot)
        .join("lib/rustlib")
        .join(TARGET)
        .join("lib")
        .is_dir()
}

fn check(status: ExitStatus, message: &str) {
    if !status.success() {
        panic!("{message} ({status})");
    }
}
