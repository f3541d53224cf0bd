#!/usr/bin/env bash
# p99 of ~1 MiB downloads with recycling off (--estimator-mode monitor) and on
# (the defaults: the estimator replaces instances at its 1 % restart budget),
# each arm on a fresh gateway process over the same corpus, the arms
# interleaved ROUNDS times. Needs release builds of gateway and loadgen:
#   cargo build --release -p gateway -p loadgen
#   scripts/recycling-p99.sh [ROUNDS] [DURATION]      # defaults: 2 30s
# GATEWAY=PATH and LOADGEN=PATH run other builds (e.g. one kept from before a change).
# Sends traffic only to 127.0.0.1 and stops every gateway it started.
set -euo pipefail
rounds=${1:-2}
duration=${2:-30s}
root=$(cd "$(dirname "$0")/.." && pwd)
gateway=${GATEWAY:-$root/target/release/gateway}
loadgen=${LOADGEN:-$root/target/release/loadgen}
work=$(mktemp -d)
port=18090
trap 'rm -rf "$work"' EXIT

"$loadgen" corpus --dir "$work/corpus" --count 256 --mean 1048576 --stddev 262144 >/dev/null
printf '| arm | round | req/s | p50 ms | p99 ms | replacements | failed |\n|---|---|---|---|---|---|---|\n'
for round in $(seq "$rounds"); do
  for arm in monitor default; do
    flags=()
    [ "$arm" = monitor ] && flags=(--estimator-mode monitor)
    "$gateway" --data-dir "$work/data-$arm-$round" --listen "127.0.0.1:$port" "${flags[@]}" \
      >"$work/gateway-$arm-$round.log" 2>&1 &
    pid=$!
    for _ in $(seq 100); do
      curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break
      sleep 0.1
    done
    "$loadgen" run --url "http://127.0.0.1:$port" --op download --corpus "$work/corpus" \
      --concurrency 8 --duration "$duration" --json "$work/$arm-$round.json" \
      >"$work/loadgen-$arm-$round.log" 2>&1 || { cat "$work/loadgen-$arm-$round.log"; exit 1; }
    curl -sf "http://127.0.0.1:$port/admin/pool" >"$work/pool-$arm-$round.json"
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    python3 - "$work/$arm-$round.json" "$work/pool-$arm-$round.json" "$arm" "$round" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))
pool = json.load(open(sys.argv[2]))
latency = run["latency_ms"]
replaced = sum(pool.get("replacements", {}).values())
print(f"| {sys.argv[3]} | {sys.argv[4]} | {run['requests_per_second']:.1f} | "
      f"{latency['p50']:.2f} | {latency['p99']:.2f} | {replaced} "
      f"({100 * replaced / max(run['requests'], 1):.2f} %) | {run['failed']} |")
PY
  done
done
