#!/usr/bin/env bash
# Run every libFuzzer target in fuzz/ (one per function of
# `gateway::fuzzing`) for SECONDS_PER_TARGET seconds each (default 60),
# print how many inputs each one ran, and fail if any of them crashed.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET]
#
# Needs a nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`).
# Without them it fails, unless FUZZ_OPTIONAL=1: then it prints SKIPPED and
# succeeds (for machines that only have stable; `cargo test` still runs
# the proptest fallback, gateway/tests/fuzz_parsers.rs).
#
# The gateway's build script builds the Wasm guest with the same toolchain,
# so that toolchain needs the wasm32-wasip2 target. A nightly without it
# (and no network to add it) is replaced by stable when the sanitizer is
# `none`: libFuzzer's coverage flags are all stable then.
#
# The corpus each target grows goes to fuzz/corpus/<target>/ (not
# committed); the committed seeds are read from fuzz/seeds/<target>/.
# Crashing inputs land in fuzz/artifacts/<target>/.
#
# Environment:
#   FUZZ_OPTIONAL=1      skip (exit 0) when nightly or cargo-fuzz is missing
#   FUZZ_TOOLCHAIN=...   the toolchain to build with (default nightly)
#   FUZZ_SANITIZER=...   cargo-fuzz --sanitizer (default none: the targets are
#                        safe Rust, and AddressSanitizer over wasmtime makes
#                        the build several times slower)
#   FUZZ_TARGETS="a b"   only these targets

set -euo pipefail

seconds="${1:-60}"
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$seconds" -eq 0 ]; then
    echo "usage: $0 [SECONDS_PER_TARGET]  (a positive whole number, not '$seconds')" >&2
    exit 2
fi

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
fuzz_dir="$root/fuzz"
sanitizer="${FUZZ_SANITIZER:-none}"

missing() {
    if [ "${FUZZ_OPTIONAL:-0}" = "1" ]; then
        echo "SKIPPED: $1 (FUZZ_OPTIONAL=1; gateway/tests/fuzz_parsers.rs still runs in cargo test)"
        exit 0
    fi
    echo "error: $1" >&2
    echo "(set FUZZ_OPTIONAL=1 to skip instead of failing)" >&2
    exit 1
}

if ! command -v cargo >/dev/null 2>&1; then
    missing "cargo is not installed"
fi
toolchain="${FUZZ_TOOLCHAIN:-nightly}"
if ! cargo "+$toolchain" --version >/dev/null 2>&1; then
    missing "no $toolchain toolchain: rustup toolchain install $toolchain"
fi
if ! cargo "+$toolchain" fuzz --version >/dev/null 2>&1; then
    missing "cargo-fuzz is not installed: cargo install cargo-fuzz --locked"
fi

# Whether toolchain $1 has the standard library for the guest's target.
has_guest_target() {
    local sysroot
    sysroot="$(rustc "+$1" --print sysroot 2>/dev/null)" || return 1
    [ -d "$sysroot/lib/rustlib/wasm32-wasip2/lib" ]
}
if ! has_guest_target "$toolchain" && ! rustup "+$toolchain" target add wasm32-wasip2 >/dev/null 2>&1; then
    if [ "$sanitizer" = "none" ] && [ -z "${FUZZ_TOOLCHAIN:-}" ] && has_guest_target stable; then
        echo "note: $toolchain has no wasm32-wasip2 standard library and it could not be added;"
        echo "      building with stable instead (with --sanitizer none nothing needs nightly)"
        toolchain=stable
    else
        missing "$toolchain has no wasm32-wasip2 target, which the gateway's build script needs: rustup +$toolchain target add wasm32-wasip2"
    fi
fi

cd "$root"
if [ -n "${FUZZ_TARGETS:-}" ]; then
    read -r -a targets <<<"$FUZZ_TARGETS"
else
    mapfile -t targets < <(cargo "+$toolchain" fuzz list)
fi
if [ "${#targets[@]}" -eq 0 ]; then
    echo "error: no fuzz targets found in $fuzz_dir" >&2
    exit 1
fi

# One build for every target (debug assertions on, so an overflow panics),
# so the per-target timings below are fuzzing time only.
echo "building ${#targets[@]} fuzz targets (toolchain: $toolchain, sanitizer: $sanitizer)..."
cargo "+$toolchain" fuzz build --debug-assertions --sanitizer "$sanitizer"

logs="$(mktemp -d)"
trap 'rm -rf "$logs"' EXIT

failed=()
summary=()
for target in "${targets[@]}"; do
    corpus="$fuzz_dir/corpus/$target"
    seeds="$fuzz_dir/seeds/$target"
    mkdir -p "$corpus" "$seeds"
    log="$logs/$target.log"
    echo "fuzzing $target for ${seconds}s..."
    status=0
    cargo "+$toolchain" fuzz run --debug-assertions --sanitizer "$sanitizer" \
        "$target" "$corpus" "$seeds" -- \
        -max_total_time="$seconds" -rss_limit_mb=2048 -print_final_stats=1 \
        >"$log" 2>&1 || status=$?
    executions="$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$log" | tail -n 1)"
    if [ -z "$executions" ]; then
        # Without final stats (a crash), the last status line's count.
        executions="$(grep -o '^#[0-9]*' "$log" | tail -n 1 | tr -d '#')"
    fi
    corpus_size="$(find "$corpus" -type f | wc -l)"
    if [ "$status" -eq 0 ]; then
        summary+=("$(printf '%-16s ok     %12s executions  corpus %s' "$target" "${executions:-?}" "$corpus_size")")
    else
        failed+=("$target")
        summary+=("$(printf '%-16s FAILED %12s executions  (exit %s)' "$target" "${executions:-?}" "$status")")
        echo "---- $target failed (exit $status); the end of its log:" >&2
        tail -n 60 "$log" >&2
        echo "---- crashing inputs, if any, are in $fuzz_dir/artifacts/$target/" >&2
    fi
done

echo
echo "target           result   executions"
printf '%s\n' "${summary[@]}"
if [ "${#failed[@]}" -gt 0 ]; then
    echo "FAILED: ${failed[*]}" >&2
    exit 1
fi
echo "all ${#targets[@]} targets ran ${seconds}s each without a crash"
