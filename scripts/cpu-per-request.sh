#!/usr/bin/env bash
# CPU time and context switches per request of one gateway, from perf stat:
# a gateway on its defaults in a temp data dir, one file of SIZE bytes, then
# `hey -z 5s -c 8` GETs of it (or PUTs of the same body to another path with
# METHOD=PUT), perf stat counting on the gateway's process meanwhile.
#   scripts/cpu-per-request.sh [GATEWAY] [SIZE]     # defaults: target/release/gateway 4096
#   METHOD=PUT scripts/cpu-per-request.sh …
#   METHOD=PUT FRESH=1 scripts/cpu-per-request.sh …  # new content each PUT
# Run it for two builds in turn (a few rounds, interleaved) to pair a change.
# Needs hey and perf (apt-get install -y hey linux-perf). Sends traffic only to
# 127.0.0.1 and stops the gateway it started.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
gateway=${1:-$root/target/release/gateway}
size=${2:-4096}
method=${METHOD:-GET}
perf=$(command -v perf || echo /usr/sbin/perf)
work=$(mktemp -d)
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$gateway" --listen "127.0.0.1:$port" --data-dir "$work/data" >"$work/gateway.log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 100); do
  curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break
  sleep 0.1
done
head -c "$size" /dev/urandom >"$work/body"
curl -sf -T "$work/body" "http://127.0.0.1:$port/files/get.bin" >/dev/null
"$perf" stat -e task-clock,context-switches -p "$pid" -o "$work/stat" -- sleep 5.5 &
counting=$!
sleep 0.2
if [ "$method" = PUT ] && [ "${FRESH:-0}" = 1 ]; then
  # New content every time (hey sends one body again and again, which the
  # gateway stores once): 8 Python threads, each overwriting its own path
  # with SIZE bytes whose first 16 are fresh; hey's summary lines faked so
  # the count below reads them. The client's own CPU is not counted.
  python3 - "$port" "$size" >"$work/hey.out" <<'PY'
import http.client, os, sys, threading, time
port, size = int(sys.argv[1]), int(sys.argv[2])
done, failed, lock = [0], [0], threading.Lock()
def client(n):
    conn, end, ok, bad = http.client.HTTPConnection("127.0.0.1", port), time.time() + 5, 0, 0
    while time.time() < end:
        conn.request("PUT", f"/files/fresh/{n}.bin", os.urandom(16) + b"x" * max(size - 16, 0))
        answer = conn.getresponse()
        answer.read()
        if 200 <= answer.status < 300: ok += 1
        else: bad += 1
    with lock:
        done[0] += ok
        failed[0] += bad
threads = [threading.Thread(target=client, args=(n,)) for n in range(8)]
started = time.time()
for t in threads: t.start()
for t in threads: t.join()
print(f"Requests/sec: {(done[0] + failed[0]) / (time.time() - started):.4f}")
print(f"  [201]\t{done[0]} responses")
if failed[0]: print(f"  [500]\t{failed[0]} responses")
PY
elif [ "$method" = PUT ]; then
  hey -z 5s -c 8 -m PUT -D "$work/body" "http://127.0.0.1:$port/files/put.bin" >"$work/hey.out"
else
  hey -z 5s -c 8 "http://127.0.0.1:$port/files/get.bin" >"$work/hey.out"
fi
wait "$counting"
python3 - "$work/stat" "$work/hey.out" "$method" "$size" <<'PY'
import re, sys
stat, hey = open(sys.argv[1]).read(), open(sys.argv[2]).read()
clock_ms = float(re.search(r"([\d.,]+)\s+msec task-clock", stat).group(1).replace(",", ""))
switches = int(re.search(r"([\d,]+)\s+context-switches", stat).group(1).replace(",", ""))
answered = sum(int(n) for n in re.findall(r"\[2\d\d\]\s+(\d+) responses", hey))
failed = sum(int(n) for n in re.findall(r"\[[^2]\d\d\]\s+(\d+) responses", hey))
rate = float(re.search(r"Requests/sec:\s+([\d.]+)", hey).group(1))
print(f"{sys.argv[3]} {sys.argv[4]} B: {rate:.0f} req/s, {clock_ms * 1000 / answered:.1f} us CPU and "
      f"{switches / answered:.2f} context switches per request ({answered} answered, {failed} failed)")
PY
