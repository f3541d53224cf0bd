#!/usr/bin/env python3
"""Requests/s and latency of the gateway against nginx (WebDAV), in one run.

    scripts/peer-bench.py [--duration 8s] [--rounds 1] [--concurrency 1,8]
                          [--native] [--gateway target/release/gateway]
                          [--out results.json]

Both servers run on loopback on this machine: the gateway on its defaults
(16 instances, SQLite and blobs in a temp --data-dir) and nginx as a plain
WebDAV store (deploy/nginx-webdav.conf, 2 workers, files in a temp dir).
The same client, `hey -z DURATION -c C`, drives both with the same random
bodies at the same concurrency:

  GET 1 MiB and PUT 4 KiB   at every concurrency in --concurrency
  GET 4 KiB and PUT 1 MiB   at the largest one

A GET row reads one file uploaded to both beforehand; a PUT row overwrites
one path again and again (replace-in-place writes). Rows alternate gateway,
nginx; with --rounds N the whole table runs N times, interleaved, and each
cell is the median over rounds. Any answer other than 2xx, and any error hey
reports, is counted and shown. The gateway hashes every upload in Wasm and
fsyncs it before it answers, and verifies every download; nginx does
neither, so the ratio is the price of those guarantees plus the gateway's
own overhead. At the end each file is read once from both servers and must
hold exactly the bytes uploaded, and the gateway's ETag must be their
SHA-256; a mismatch exits 1.

With --native a third server joins every row: a second gateway started with
`--handler native`, the same handler logic compiled into the gateway and run
against the same host functions, without Wasm. Its column and the
wasm/native ratio say what Wasm itself costs, per request type.

Needs Debian's nginx and hey (apt-get install -y nginx hey) and a release
gateway (cargo build --release -p gateway).
"""

import argparse
import hashlib
import json
import os
import pwd
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NGINX_CONF = ROOT / "deploy" / "nginx-webdav.conf"
SIZES = {"1 MiB": 1 << 20, "4 KiB": 4 << 10}
# Every server a run may start; `servers(args)` picks this run's.
ALL_SERVERS = ("gateway", "native", "nginx")


def servers(args):
    return tuple(s for s in ALL_SERVERS if s != "native" or args.native)


def is_gateway(server):
    return server in ("gateway", "native")


def file_path(method, size):
    """The one path a row reads or overwrites, the same on both servers."""
    return f"/files/peer-bench/{method.lower()}-{SIZES[size]}.bin"


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_answering(url, process, log, timeout=60):
    """Until `url` gives any HTTP answer (a 404 will do: the server is up)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if process.poll() is not None:
            sys.exit(f"{process.args[0]} exited with {process.returncode}:\n{log.read_text()[-2000:]}")
        try:
            urllib.request.urlopen(url, timeout=2).close()
            return
        except urllib.error.HTTPError:
            return
        except OSError:
            time.sleep(0.2)
    sys.exit(f"{url} did not answer within {timeout} s:\n{log.read_text()[-2000:]}")


def stop(process, first_signal, timeout=30):
    if process is None or process.poll() is not None:
        return
    process.send_signal(first_signal)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def put(url, body):
    request = urllib.request.Request(url, data=body, method="PUT",
                                     headers={"Content-Type": "application/octet-stream"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        answer.read()


def hey(binary, url, duration, concurrency, body_file=None):
    """One `hey` run, parsed: requests/s, p50/p99 in ms, and how many failed."""
    command = [binary, "-z", duration, "-c", str(concurrency)]
    if body_file:
        command += ["-m", "PUT", "-D", str(body_file), "-T", "application/octet-stream"]
    out = subprocess.run(command + [url], capture_output=True, text=True)
    text = out.stdout
    rate = re.search(r"Requests/sec:\s+([\d.]+)", text)
    if out.returncode != 0 or rate is None:
        sys.exit(f"hey failed ({out.returncode}): {' '.join(command + [url])}\n{text}{out.stderr}")
    latency = {int(p): float(s) * 1000 for p, s in re.findall(r"^\s+(\d+)% in ([\d.]+) secs", text, re.M)}
    statuses = {int(code): int(n) for code, n in re.findall(r"^\s+\[(\d{3})\]\s+(\d+) responses", text, re.M)}
    errors_section = text.split("Error distribution:", 1)[1] if "Error distribution:" in text else ""
    transport_errors = sum(int(n) for n in re.findall(r"^\s+\[(\d+)\]\s", errors_section, re.M))
    return {
        "requests_per_second": float(rate.group(1)),
        "p50_ms": latency.get(50), "p99_ms": latency.get(99),
        "statuses": statuses,
        "errors": sum(n for code, n in statuses.items() if not 200 <= code < 300) + transport_errors,
    }


def verify(urls, bodies, files):
    """Each file read once from each server: the bytes uploaded, and the gateway's ETag their digest."""
    problems = []
    for path, size in files.items():
        for server in urls:
            try:
                with urllib.request.urlopen(urls[server] + path, timeout=30) as answer:
                    got, etag = answer.read(), answer.headers.get("ETag")
            except OSError as error:
                problems.append(f"{server} {path}: {error}")
                continue
            if got != bodies[size]:
                problems.append(f"{server} {path}: the {len(got)} bytes read are not "
                                f"the {len(bodies[size])} uploaded")
            digest = hashlib.sha256(bodies[size]).hexdigest()
            if is_gateway(server) and etag != f'"{digest}"':
                problems.append(f"{server} {path}: ETag {etag}, expected \"{digest}\"")
    return problems


def fmt(value):
    return "–" if value is None else f"{value:.1f}"


def summarise(runs, rows, names):
    """One cell per row: each server's medians over rounds, its failures summed, and the ratios."""
    table = []
    for method, size, c in rows:
        cell = {"request": f"{method} {size}", "concurrency": c}
        for server in names:
            mine = [r for r in runs
                    if (r["request"], r["concurrency"], r["server"]) == (cell["request"], c, server)]
            for key in ("requests_per_second", "p50_ms", "p99_ms"):
                values = [r[key] for r in mine if r[key] is not None]
                cell[f"{server}_{key}"] = statistics.median(values) if values else None
            cell[f"{server}_errors"] = sum(r["errors"] for r in mine)
        cell["ratio"] = cell["gateway_requests_per_second"] / (cell["nginx_requests_per_second"] or 1e-9)
        if "native" in names:
            cell["wasm_native_ratio"] = (cell["gateway_requests_per_second"]
                                         / (cell["native_requests_per_second"] or 1e-9))
        table.append(cell)
    return table


def print_table(table, args, names):
    rounds = f"median of {args.rounds} rounds" if args.rounds > 1 else "1 round"
    print(f"\nhey -z {args.duration} per cell, {rounds}, both servers on 127.0.0.1 of this machine "
          f"({os.cpu_count()} cores, shared with hey). PUT rows overwrite one path on each server "
          f"(replace-in-place writes); the gateway hashes and fsyncs each upload and verifies each "
          f"download, nginx does neither. –: under 100 answers, hey gives no p99.\n")
    native = "native" in names
    print("| request | c | gateway req/s | nginx req/s | gateway/nginx | gateway p50 ms | gateway p99 ms "
          "| nginx p50 ms | nginx p99 ms |"
          + (" native req/s | wasm/native | native p50 ms | native p99 ms |" if native else "")
          + f" failed {' / '.join(names)} |")
    print("|---" * (10 + 4 * native) + "|")
    for cell in table:
        extra = (f" {cell['native_requests_per_second']:.1f} | {cell['wasm_native_ratio']:.2f}x "
                 f"| {fmt(cell['native_p50_ms'])} | {fmt(cell['native_p99_ms'])} |") if native else ""
        print(f"| {cell['request']} | {cell['concurrency']} | {cell['gateway_requests_per_second']:.1f} "
              f"| {cell['nginx_requests_per_second']:.1f} | {cell['ratio']:.2f}x "
              f"| {fmt(cell['gateway_p50_ms'])} | {fmt(cell['gateway_p99_ms'])} "
              f"| {fmt(cell['nginx_p50_ms'])} | {fmt(cell['nginx_p99_ms'])} |{extra} "
              f"{' / '.join(str(cell[f'{server}_errors']) for server in names)} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", default="8s", help="per hey run (hey's -z): 8s, 1m")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--concurrency", default="1,8", help="comma-separated, e.g. 1,8")
    parser.add_argument("--gateway", default=str(ROOT / "target" / "release" / "gateway"))
    parser.add_argument("--native", action="store_true",
                        help="also run a gateway with --handler native: the wasm/native ratio")
    parser.add_argument("--out", help="also write every run's numbers here as JSON")
    args = parser.parse_args()
    names = servers(args)

    concurrencies = sorted({int(c) for c in args.concurrency.split(",")})
    rows = [(method, size, c) for method, size, at in
            (("GET", "1 MiB", concurrencies), ("GET", "4 KiB", concurrencies[-1:]),
             ("PUT", "1 MiB", concurrencies[-1:]), ("PUT", "4 KiB", concurrencies))
            for c in at]
    # /usr/sbin is not on everyone's PATH.
    tools = {tool: shutil.which(tool) or shutil.which(tool, path="/usr/sbin:/usr/local/sbin")
             for tool in ("nginx", "hey")}
    for tool, found in tools.items():
        if found is None:
            sys.exit(f"{tool} is missing: apt-get install -y nginx hey (Debian's packages)")
    if not Path(args.gateway).is_file():
        sys.exit(f"{args.gateway} is missing: cargo build --release -p gateway")

    started = time.time()
    work = Path(tempfile.mkdtemp(prefix="peer-bench-"))
    nginx_dir = work / "nginx"
    (nginx_dir / "files").mkdir(parents=True)
    bodies = {size: os.urandom(n) for size, n in SIZES.items()}
    body_files = {size: work / f"body-{n}.bin" for size, n in SIZES.items()}
    for size, path in body_files.items():
        path.write_bytes(bodies[size])
    ports = {server: free_port() for server in names}
    urls = {server: f"http://127.0.0.1:{port}" for server, port in ports.items()}
    logs = {server: work / f"{server}.log" for server in names}
    processes = {}
    try:
        conf = nginx_dir / "nginx.conf"
        conf.write_text(NGINX_CONF.read_text()
                        .replace("@LISTEN@", f"127.0.0.1:{ports['nginx']}")
                        .replace("@USER@", pwd.getpwuid(os.geteuid()).pw_name))
        # daemon off in the config: this PID is the master's (also in nginx.pid).
        processes["nginx"] = subprocess.Popen(
            [tools["nginx"], "-p", str(nginx_dir), "-c", str(conf), "-e", str(logs["nginx"])],
            stdout=subprocess.DEVNULL, stderr=open(logs["nginx"], "a"), start_new_session=True)
        for server in filter(is_gateway, names):
            processes[server] = subprocess.Popen(
                [args.gateway, "--listen", f"127.0.0.1:{ports[server]}", "--data-dir", str(work / server),
                 "--handler", "native" if server == "native" else "wasm"],
                stdout=subprocess.DEVNULL, stderr=open(logs[server], "w"),
                env={**os.environ, "RUST_LOG": "warn"}, start_new_session=True)
        for server in filter(is_gateway, names):
            wait_answering(urls[server] + "/healthz", processes[server], logs[server])
        wait_answering(urls["nginx"] + "/", processes["nginx"], logs["nginx"])

        files = {file_path(method, size): size for method in ("GET", "PUT") for size in SIZES}
        for server in names:
            for size in SIZES:
                put(urls[server] + file_path("GET", size), bodies[size])

        runs = []
        for round_ in range(args.rounds):
            for method, size, c in rows:
                for server in names:
                    result = hey(tools["hey"], urls[server] + file_path(method, size), args.duration, c,
                                 body_files[size] if method == "PUT" else None)
                    runs.append({"round": round_, "request": f"{method} {size}", "concurrency": c,
                                 "server": server, **result})
                    print(f"round {round_ + 1} {method} {size} c={c} {server:7} "
                          f"{result['requests_per_second']:9.1f} req/s  p50 {fmt(result['p50_ms'])} ms  "
                          f"p99 {fmt(result['p99_ms'])} ms  statuses {result['statuses']}  "
                          f"errors {result['errors']}", file=sys.stderr)

        problems = verify(urls, bodies, files)
        table = summarise(runs, rows, names)
        print_table(table, args, names)
        errors = sum(c[f"{server}_errors"] for c in table for server in names)
        print(f"\nverified: {len(files)} files read back from every server, "
              f"{'all bytes and ETags match' if not problems else f'{len(problems)} MISMATCHES'}; "
              f"{errors} failed requests; {time.time() - started:.0f} s in all.")
        if args.out:
            Path(args.out).write_text(json.dumps({
                "duration": args.duration, "rounds": args.rounds, "table": table, "runs": runs,
                "verification_problems": problems}, indent=2))
        if problems:
            sys.exit("verification failed:\n  " + "\n  ".join(problems))
    finally:
        for server in filter(is_gateway, names):
            stop(processes.get(server), signal.SIGTERM)
        stop(processes.get("nginx"), signal.SIGQUIT)  # graceful: workers finish, then exit
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit("interrupted; both servers stopped")
