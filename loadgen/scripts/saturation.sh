#!/usr/bin/env bash
# Does one loadgen process saturate one gateway? Throughput by concurrency, and
# the CPU seconds each process used (utime+stime from /proc/PID/stat).
# Build first: cargo build --release -p gateway -p loadgen
# Run from the repository root: bash loadgen/scripts/saturation.sh
set -eu
cd "$(dirname "$0")/../.."
rm -rf /tmp/sat-data
./target/release/gateway --data-dir /tmp/sat-data --listen 127.0.0.1:8090 --estimator-mode monitor >/dev/null 2>&1 &
gw=$!
sleep 1.5
tick=$(getconf CLK_TCK)
cpu() { awk -v tick="$tick" '{print ($14+$15)/tick}' /proc/"$1"/stat; }
echo "| concurrency | req/s | MB/s | p50 ms | p99 ms | gateway CPU s | loadgen CPU s | run s |"
echo "|---|---|---|---|---|---|---|---|"
for c in 1 2 4 8 16 32; do
  g0=$(cpu $gw)
  ./target/release/loadgen run --url http://127.0.0.1:8090 --op download --mean 1048576 --stddev 0 --working-set 16 \
     --concurrency $c --duration 10s --prefix sat --json /tmp/sat-$c.json >/dev/null 2>/tmp/sat-$c.err &
  lg=$!
  l=0
  while kill -0 $lg 2>/dev/null; do l=$(cpu $lg 2>/dev/null || echo "$l"); sleep 0.2; done
  wait $lg
  g1=$(cpu $gw)
  python3 - "$c" "$g0" "$g1" "$l" <<'PY'
import json,sys
c,g0,g1,l=sys.argv[1],float(sys.argv[2]),float(sys.argv[3]),float(sys.argv[4])
s=json.load(open(f"/tmp/sat-{c}.json"))
print(f"| {c} | {s['requests_per_second']:.0f} | {s['megabytes_per_second']:.0f} | {s['latency_ms']['p50']:.2f} | {s['latency_ms']['p99']:.2f} | {g1-g0:.1f} | {l:.1f} | {s['seconds']:.1f} |")
PY
done
kill $gw
