#!/usr/bin/env python3
"""Requests/s for 1 MiB uploads and downloads on the three topologies, in one run.

    scripts/scale-out-bench.py [--rounds 3] [--duration 10s] [--concurrency 8]

Targets, each driven by the same `loadgen run` (every response verified,
every upload a new blob: --fresh-bodies):

  sqlite-local  one gateway on SQLite + a local data dir (the embedded default)
  pg-s3 x1      one gateway of the scale-out topology (PostgreSQL + SeaweedFS)
  pg-s3 x2      both of its gateways, through HAProxy

The scale-out topology is scripts/scale-out.sh's (real processes on
loopback). Rounds are interleaved (target by target, round after round) so a
slow phase of the machine hits every target alike; the table gives the
median over rounds, its ratio to sqlite-local, and where the CPU went during
the median round (seconds of CPU per second of run, by process group).
Needs release builds of gateway and loadgen (cargo build --release -p
gateway -p loadgen) and what scripts/scale-out.sh needs.
"""

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / "target" / "release"
SINGLE_PORT = int(os.environ.get("SINGLE_PORT", "8089"))
LB_PORT = int(os.environ.get("LB_PORT", "8090"))
GATEWAY_A_PORT = int(os.environ.get("GATEWAY_A_PORT", "8091"))
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pids):
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / TICK
        except (FileNotFoundError, ProcessLookupError, IndexError):
            pass
    return total


def pids_named(name):
    out = subprocess.run(["pgrep", "-x", name], capture_output=True, text=True).stdout
    return [int(pid) for pid in out.split()]


def wait_healthy(url, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(url + "/healthz", timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    sys.exit(f"{url} did not become healthy")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", default="10s")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--json", help="also write every run's numbers here")
    args = parser.parse_args()

    for binary in ("gateway", "loadgen"):
        if not (BIN / binary).exists():
            sys.exit(f"{BIN / binary} is missing: cargo build --release -p gateway -p loadgen")
    work = Path(tempfile.mkdtemp(prefix="scale-out-bench-"))
    work.chmod(0o755)  # PostgreSQL runs as its own user when we are root
    topology = ["bash", str(ROOT / "scripts" / "scale-out.sh")]
    single = None
    try:
        single_log = open(work / "single.log", "w")
        single = subprocess.Popen(
            [str(BIN / "gateway"), "--listen", f"127.0.0.1:{SINGLE_PORT}",
             "--data-dir", str(work / "single")],
            stdout=subprocess.DEVNULL, stderr=single_log, env={**os.environ, "RUST_LOG": "warn"})
        subprocess.run(topology + ["start", "--dir", str(work / "scale-out"),
                                   "--gateway", str(BIN / "gateway")],
                       check=True, stdout=subprocess.DEVNULL)
        pids = {
            line.split()[0]: int(line.split()[1])
            for line in (work / "scale-out" / "pids").read_text().splitlines()
            if len(line.split()) >= 2 and line.split()[1].isdigit()
        }
        targets = {
            "sqlite-local": f"http://127.0.0.1:{SINGLE_PORT}",
            "pg-s3 x1": f"http://127.0.0.1:{GATEWAY_A_PORT}",
            "pg-s3 x2": f"http://127.0.0.1:{LB_PORT}",
        }
        for url in targets.values():
            wait_healthy(url)
        groups = {
            "gateways": lambda: [single.pid] + [pid for name, pid in pids.items() if name.startswith("gateway")],
            "postgres": lambda: pids_named("postgres"),
            "weed": lambda: pids_named("weed"),
            "haproxy": lambda: pids_named("haproxy"),
        }

        runs = []
        for round_ in range(args.rounds):
            for target, url in targets.items():
                for op in ("upload", "download"):
                    out = work / f"{target.replace(' ', '')}-{op}-{round_}.json"
                    before = {group: cpu_seconds(find()) for group, find in groups.items()}
                    started = time.time()
                    loadgen = subprocess.run(
                        [str(BIN / "loadgen"), "run", "--url", url, "--op", op,
                         "--mean", "1048576", "--stddev", "0",
                         "--min-size", "1048576", "--max-size", "1048576",
                         "--working-set", "16", "--fresh-bodies",
                         "--concurrency", str(args.concurrency), "--duration", args.duration,
                         "--prefix", f"bench-{op}", "--json", str(out)],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                        env={**os.environ, "RUST_LOG": "warn"})
                    elapsed = time.time() - started
                    summary = json.loads(out.read_text())
                    cpu = {group: (cpu_seconds(find()) - before[group]) / elapsed
                           for group, find in groups.items()}
                    runs.append({"round": round_, "target": target, "op": op,
                                 "requests_per_second": summary["requests_per_second"],
                                 "failed": summary["failed"], "p50_ms": summary["latency_ms"]["p50"],
                                 "p99_ms": summary["latency_ms"]["p99"], "cpu": cpu,
                                 "loadgen_exit": loadgen.returncode})
                    print(f"round {round_ + 1} {target:12} {op:8} "
                          f"{summary['requests_per_second']:7.1f} req/s  failed {summary['failed']}",
                          file=sys.stderr)

        print(f"\n1 MiB bodies, concurrency {args.concurrency}, {args.duration} per run, "
              f"median of {args.rounds} rounds\n")
        print("| request | topology | req/s | vs sqlite-local | p50 ms | p99 ms | failed "
              "| CPU/s: gateways | postgres | weed | haproxy |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for op in ("upload", "download"):
            base = None
            for target in targets:
                mine = sorted((r for r in runs if r["target"] == target and r["op"] == op),
                              key=lambda r: r["requests_per_second"])
                median = mine[len(mine) // 2]
                rate = statistics.median(r["requests_per_second"] for r in mine)
                base = base or rate
                cpu = median["cpu"]
                print(f"| {op} 1 MiB | {target} | {rate:.1f} | {rate / base:.2f}x "
                      f"| {median['p50_ms']:.1f} | {median['p99_ms']:.1f} "
                      f"| {sum(r['failed'] for r in mine)} | {cpu['gateways']:.2f} "
                      f"| {cpu['postgres']:.2f} | {cpu['weed']:.2f} | {cpu['haproxy']:.2f} |")
        if args.json:
            Path(args.json).write_text(json.dumps(runs, indent=2))
    finally:
        if single is not None:
            single.send_signal(signal.SIGTERM)
            try:
                single.wait(timeout=30)
            except subprocess.TimeoutExpired:
                single.kill()
        subprocess.run(topology + ["stop", "--dir", str(work / "scale-out")],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
