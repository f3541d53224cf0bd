#!/usr/bin/env python3
"""Requests/s and latency of the gateway against nginx and SeaweedFS's filer, in one run.

    scripts/peer-bench.py [--duration 8s] [--rounds 3] [--concurrency 8]
                          [--native] [--perf] [--s3]
                          [--gateway target/release/gateway] [--weed .tools/venv/bin/weed]
                          [--out results.json]

The three servers run on loopback on this machine, on ports the script
picks, their data in one temp dir:

  gateway   its defaults (16 instances, SQLite and blobs in --data-dir). It
            hashes every upload in Wasm and fsyncs it before it answers,
            and verifies every download.
  nginx     a plain WebDAV store (deploy/nginx-webdav.conf, 2 workers,
            sendfile): the ceiling, with no index, no hashing, no fsync.
  seaweed   SeaweedFS's filer (`weed mini`: master, volume, filer and S3 in
            one process, started and stopped by scripts/s3-bench.py's own
            functions), the storage peer with a metadata index: the same
            HTTP PUT of a raw body to a path and GET of it. As it comes it
            does not fsync.

The same client, `hey -z DURATION -c C`, drives all three with the same
random bodies at the same concurrency:

  GET 1 MiB and PUT 4 KiB   at every concurrency in --concurrency (8)
  GET 4 KiB and PUT 1 MiB   at the largest one

A GET row reads one file uploaded to every server beforehand; a PUT row
overwrites one path again and again with the same body (replace-in-place
writes). Each row runs on every server in turn (gateway, nginx, seaweed);
with --rounds N (3) the whole table runs N times, interleaved, and each cell
is the median over rounds; gateway/nginx and gateway/SeaweedFS are ratios
of those medians. Any answer other than 2xx, and any error hey reports, is
counted and shown. At the end each file is read once from every server and
must hold exactly the bytes uploaded; the gateway's ETag must be their
SHA-256 and the filer's their MD5. A mismatch exits 1.

With --native a fourth server joins every row: a second gateway started with
`--handler native`, the same handler logic compiled into the gateway and run
against the same host functions, without Wasm. Its column and the
wasm/native ratio say what Wasm itself costs, per request type.

With --perf, `perf stat -e task-clock,context-switches -p PIDS` counts each
server's processes (nginx: master and workers) over its GET 4 KiB row, from
just before hey starts to just after it ends, and the script prints CPU time
and context switches per request, medians over rounds (the issue's goal for
the gateway: at most 60 us of CPU per GET of 4 KiB). perf slows that row a
little on every server alike.

With --s3, scripts/s3-bench.py then runs with the same --duration, --rounds,
the largest concurrency, --gateway and --weed: the gateway's S3 API against
SeaweedFS's S3, its own table (--out x.json gives it x.s3.json). It is
the S3 half of this comparison and can be run alone.

Needs Debian's nginx and hey (apt-get install -y nginx hey), SeaweedFS's
`weed` (scripts/install-test-deps.sh puts it in .tools/venv/bin), perf for
--perf (apt-get install -y linux-perf), and a release gateway
(flock /tmp/cargo.lock cargo build --release -p gateway).
"""

import argparse
import hashlib
import importlib.util
import json
import os
import pwd
import re
import shutil
import signal
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
S3_BENCH = ROOT / "scripts" / "s3-bench.py"
SIZES = {"1 MiB": 1 << 20, "4 KiB": 4 << 10}
# Every server a run may start, in the order each row runs on them; `servers(args)` picks this run's.
ALL_SERVERS = ("gateway", "baseline", "native", "nginx", "seaweed")
LABELS = {"gateway": "gateway", "native": "native", "baseline": "baseline gateway",
          "nginx": "nginx", "seaweed": "SeaweedFS filer"}
START_TIMEOUT = 60
# The row whose CPU and context switches --perf counts.
PERF_ROW = ("GET", "4 KiB")


def servers(args):
    wanted = {"native": args.native, "baseline": bool(args.baseline)}
    return tuple(s for s in ALL_SERVERS if wanted.get(s, True))


def is_gateway(server):
    return server in ("gateway", "native", "baseline")


def load_s3_bench():
    """scripts/s3-bench.py as a module: its `weed mini` start and stop and its port picker, not copied here."""
    spec = importlib.util.spec_from_file_location("s3_bench", S3_BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def file_path(method, size):
    """The one path a row reads or overwrites, the same on every server."""
    return f"/files/peer-bench/{method.lower()}-{SIZES[size]}.bin"


def wait_answering(url, process, log, timeout=START_TIMEOUT):
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


def put(url, body, retry_for=0):
    """PUT `body`; with `retry_for` seconds, errors are retried until then (a filer whose volume
    server has not registered yet answers 5xx for a moment)."""
    deadline = time.time() + retry_for
    while True:
        request = urllib.request.Request(url, data=body, method="PUT",
                                         headers={"Content-Type": "application/octet-stream"})
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                answer.read()
            return
        except OSError:
            if time.time() > deadline:
                raise
            time.sleep(0.5)


def hey(binary, url, duration, concurrency, body_file=None):
    """One `hey` run, parsed: requests/s, p50/p99 in ms, how many requests and how many failed."""
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
        "requests": sum(statuses.values()) + transport_errors,
        "errors": sum(n for code, n in statuses.items() if not 200 <= code < 300) + transport_errors,
    }


def process_tree(pid):
    """`pid` and its descendants (nginx: the master and its workers)."""
    pids, queue = [], [pid]
    while queue:
        current = queue.pop()
        pids.append(current)
        for task in Path(f"/proc/{current}/task").glob("*"):
            try:
                queue += [int(child) for child in (task / "children").read_text().split()]
            except OSError:
                pass
    return pids


def perf_start(perf, pid):
    """`perf stat` counting CPU time and context switches of `pid`'s processes until perf_end."""
    process = subprocess.Popen(
        [perf, "stat", "-x", ",", "-e", "task-clock,context-switches",
         "-p", ",".join(str(p) for p in process_tree(pid))],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(0.3)  # attached before the load starts; the idle server adds next to nothing
    return process


def perf_end(process, requests):
    """Stop `perf stat` and divide its counts by `requests`: CPU us and context switches per request."""
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=30)
    counts = {}
    for line in err.splitlines():
        fields = line.split(",")
        if len(fields) >= 3 and fields[2] in ("task-clock", "context-switches"):
            try:
                counts[fields[2]] = float(fields[0])
            except ValueError:  # <not counted>, <not supported>
                pass
    if len(counts) != 2 or not requests:
        sys.exit(f"perf stat counted nothing usable ({process.returncode}):\n{err[-2000:]}")
    return {"cpu_us_per_request": counts["task-clock"] * 1000 / requests,  # task-clock is in ms
            "context_switches_per_request": counts["context-switches"] / requests}


def verify(urls, bodies, files):
    """Each file read once from each server: the bytes uploaded, the gateway's ETag their SHA-256,
    the filer's their MD5."""
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
            digest = (hashlib.sha256(bodies[size]).hexdigest() if is_gateway(server)
                      else hashlib.md5(bodies[size]).hexdigest() if server == "seaweed" else None)
            if digest is not None and etag != f'"{digest}"':
                problems.append(f"{server} {path}: ETag {etag}, expected \"{digest}\"")
    return problems


def fmt(value, digits=1):
    return "–" if value is None else f"{value:.{digits}f}"


def ratio(a, b):
    return None if a is None or not b else a / b


def summarise(runs, rows, names):
    """One cell per row: each server's medians over rounds, its failures summed, and the ratios."""
    table = []
    for method, size, c in rows:
        cell = {"request": f"{method} {size}", "concurrency": c}
        for server in names:
            mine = [r for r in runs
                    if (r["request"], r["concurrency"], r["server"]) == (cell["request"], c, server)]
            for key in ("requests_per_second", "p50_ms", "p99_ms",
                        "cpu_us_per_request", "context_switches_per_request"):
                values = [r[key] for r in mine if r.get(key) is not None]
                cell[f"{server}_{key}"] = statistics.median(values) if values else None
            cell[f"{server}_errors"] = sum(r["errors"] for r in mine)
        gateway = cell["gateway_requests_per_second"]
        cell["nginx_ratio"] = ratio(gateway, cell["nginx_requests_per_second"])
        cell["seaweed_ratio"] = ratio(gateway, cell["seaweed_requests_per_second"])
        if "native" in names:
            cell["wasm_native_ratio"] = ratio(gateway, cell["native_requests_per_second"])
        if "baseline" in names:
            cell["baseline_ratio"] = ratio(gateway, cell["baseline_requests_per_second"])
        table.append(cell)
    return table


def print_table(table, args, names):
    rounds = f"median of {args.rounds} interleaved rounds" if args.rounds > 1 else "1 round"
    print(f"\nhey -z {args.duration} per cell, {rounds}, every server on 127.0.0.1 of this machine "
          f"({os.cpu_count()} cores, shared with hey). PUT rows overwrite one path on each server "
          f"with the same body (replace-in-place writes); the gateway hashes and fsyncs each upload "
          f"and verifies each download, nginx and SeaweedFS's filer (as it comes) do not fsync. "
          f"–: under 100 answers, hey gives no p99.\n")
    native = "native" in names
    baseline = "baseline" in names
    head = ("| request | c | gateway req/s | nginx req/s | SeaweedFS filer req/s | gateway / nginx "
            "| gateway / SeaweedFS |" + (" native req/s | wasm / native |" if native else "")
            + (" baseline req/s | gateway / baseline |" if baseline else ""))
    head += "".join(f" {LABELS[server]} p50 / p99 ms |" for server in names)
    head += f" failed {' / '.join(names)} |"
    print(head)
    print("|---" * (head.count("|") - 1) + "|")
    for cell in table:
        line = (f"| {cell['request']} | {cell['concurrency']} | {fmt(cell['gateway_requests_per_second'])} "
                f"| {fmt(cell['nginx_requests_per_second'])} | {fmt(cell['seaweed_requests_per_second'])} "
                f"| {fmt(cell['nginx_ratio'], 2)}x | {fmt(cell['seaweed_ratio'], 2)}x |")
        if native:
            line += f" {fmt(cell['native_requests_per_second'])} | {fmt(cell['wasm_native_ratio'], 2)}x |"
        if baseline:
            line += f" {fmt(cell['baseline_requests_per_second'])} | {fmt(cell['baseline_ratio'], 2)}x |"
        line += "".join(f" {fmt(cell[f'{server}_p50_ms'])} / {fmt(cell[f'{server}_p99_ms'])} |"
                        for server in names)
        line += f" {' / '.join(str(cell[f'{server}_errors']) for server in names)} |"
        print(line)
    if args.perf:
        # The one row of that request: it runs at the largest concurrency only.
        cell = next(c for c in table if c["request"] == " ".join(PERF_ROW))
        print(f"\nperf stat over the {cell['request']} row (c={cell['concurrency']}), {rounds}; "
              f"the goal for the gateway is at most 60 us of CPU per request:\n")
        print("| server | CPU us / request | context switches / request |")
        print("|---|---|---|")
        for server in names:
            print(f"| {LABELS[server]} | {fmt(cell[f'{server}_cpu_us_per_request'])} "
                  f"| {fmt(cell[f'{server}_context_switches_per_request'], 2)} |")


def run(args):
    """The peer table; returns the process's exit status."""
    names = servers(args)
    concurrencies = sorted({int(c) for c in args.concurrency.split(",")})
    rows = [(method, size, c) for method, size, at in
            (("GET", "1 MiB", concurrencies), ("GET", "4 KiB", concurrencies[-1:]),
             ("PUT", "1 MiB", concurrencies[-1:]), ("PUT", "4 KiB", concurrencies))
            for c in at]
    perf_row = (*PERF_ROW, concurrencies[-1])
    # /usr/sbin is not on everyone's PATH.
    wanted = ("nginx", "hey") + (("perf",) if args.perf else ())
    tools = {tool: shutil.which(tool) or shutil.which(tool, path="/usr/sbin:/usr/local/sbin") for tool in wanted}
    for tool, found in tools.items():
        if found is None:
            sys.exit(f"{tool} is missing: apt-get install -y "
                     f"{'linux-perf' if tool == 'perf' else 'nginx hey'} (Debian's packages)")
    if not Path(args.gateway).is_file():
        sys.exit(f"{args.gateway} is missing: flock /tmp/cargo.lock cargo build --release -p gateway")
    if not Path(args.weed).is_file():
        sys.exit(f"{args.weed} is missing: scripts/install-test-deps.sh installs SeaweedFS")
    s3_bench = load_s3_bench()

    started = time.time()
    work = Path(tempfile.mkdtemp(prefix="peer-bench-"))
    nginx_dir = work / "nginx"
    (nginx_dir / "files").mkdir(parents=True)
    bodies = {size: os.urandom(n) for size, n in SIZES.items()}
    body_files = {size: work / f"body-{n}.bin" for size, n in SIZES.items()}
    for size, path in body_files.items():
        path.write_bytes(bodies[size])
    # s3-bench's picker never hands out a port twice, also to weed's components.
    ports = {server: s3_bench.free_port() for server in names if server != "seaweed"}
    urls = {server: f"http://127.0.0.1:{port}" for server, port in ports.items()}
    logs = {server: work / f"{server}.log" for server in names}
    processes = {}
    seaweed = None
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
            binary = args.baseline if server == "baseline" else args.gateway
            processes[server] = subprocess.Popen(
                [binary, "--listen", f"127.0.0.1:{ports[server]}", "--data-dir", str(work / server),
                 "--handler", "native" if server == "native" else "wasm"],
                stdout=subprocess.DEVNULL, stderr=open(logs[server], "w"),
                env={**os.environ, "RUST_LOG": "warn"}, start_new_session=True)
        seaweed = s3_bench.start_seaweed(args.weed, work)
        processes["seaweed"], logs["seaweed"], urls["seaweed"] = (
            seaweed["process"], seaweed["log"], seaweed["filer"])
        for server in filter(is_gateway, names):
            wait_answering(urls[server] + "/healthz", processes[server], logs[server])
        for server in ("nginx", "seaweed"):
            wait_answering(urls[server] + "/", processes[server], logs[server])
        urls = {server: urls[server] for server in names}  # in the rows' order

        files = {file_path(method, size): size for method in ("GET", "PUT") for size in SIZES}
        for server in names:
            for size in SIZES:
                put(urls[server] + file_path("GET", size), bodies[size],
                    retry_for=START_TIMEOUT if server == "seaweed" else 0)

        runs = []
        for round_ in range(args.rounds):
            for method, size, c in rows:
                for server in names:
                    perf = (perf_start(tools["perf"], processes[server].pid)
                            if args.perf and (method, size, c) == perf_row else None)
                    result = hey(tools["hey"], urls[server] + file_path(method, size), args.duration, c,
                                 body_files[size] if method == "PUT" else None)
                    if perf:
                        result.update(perf_end(perf, result["requests"]))
                    runs.append({"round": round_, "request": f"{method} {size}", "concurrency": c,
                                 "server": server, **result})
                    print(f"round {round_ + 1} {method} {size} c={c} {server:7} "
                          f"{result['requests_per_second']:9.1f} req/s  p50 {fmt(result['p50_ms'])} ms  "
                          f"p99 {fmt(result['p99_ms'])} ms  statuses {result['statuses']}  "
                          f"errors {result['errors']}"
                          + (f"  CPU {result['cpu_us_per_request']:.1f} us/req, "
                             f"{result['context_switches_per_request']:.2f} cs/req" if perf else ""),
                          file=sys.stderr)

        problems = verify(urls, bodies, files)
        table = summarise(runs, rows, names)
        print_table(table, args, names)
        errors = sum(c[f"{server}_errors"] for c in table for server in names)
        print(f"\nverified: {len(files)} files read back from every server, "
              f"{'all bytes and ETags match' if not problems else f'{len(problems)} MISMATCHES'}; "
              f"{errors} failed requests; {time.time() - started:.0f} s in all.")
        if args.out:
            Path(args.out).write_text(json.dumps({
                "duration": args.duration, "rounds": args.rounds, "cores": os.cpu_count(),
                "table": table, "runs": runs, "verification_problems": problems}, indent=2))
        if problems:
            print("verification failed:\n  " + "\n  ".join(problems), file=sys.stderr)
            return 1
        return 0
    finally:
        for server in filter(is_gateway, names):
            stop(processes.get(server), signal.SIGTERM)
        stop(processes.get("nginx"), signal.SIGQUIT)  # graceful: workers finish, then exit
        if seaweed:
            s3_bench.stop(seaweed["process"])
            # weed puts its gRPC sockets in /tmp whatever TMPDIR says; SIGKILL leaves them behind.
            for name, port in seaweed["grpc_ports"].items():
                try:
                    os.remove(f"/tmp/seaweedfs-{name}-grpc-{port}.sock")
                except OSError:
                    pass
        shutil.rmtree(work, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", default="8s", help="per hey run (hey's -z): 8s, 1m")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", default="8", help="comma-separated, e.g. 1,8")
    parser.add_argument("--gateway", default=str(ROOT / "target" / "release" / "gateway"))
    parser.add_argument("--weed", default=shutil.which("weed") or str(ROOT / ".tools" / "venv" / "bin" / "weed"))
    parser.add_argument("--native", action="store_true",
                        help="also run a gateway with --handler native: the wasm/native ratio")
    parser.add_argument("--baseline", metavar="GATEWAY",
                        help="another gateway binary (e.g. built from the commit before a change) in "
                             "every row: before/after pairs from one run")
    parser.add_argument("--perf", action="store_true",
                        help="perf stat over the GET 4 KiB row: CPU us and context switches per request")
    parser.add_argument("--s3", action="store_true",
                        help="then run scripts/s3-bench.py: the gateway's S3 against SeaweedFS's")
    parser.add_argument("--out", help="also write every run's numbers here as JSON")
    args = parser.parse_args()

    status = run(args)
    if args.s3:
        command = [sys.executable, str(S3_BENCH), "--duration", args.duration, "--rounds", str(args.rounds),
                   "--concurrency", str(max(int(c) for c in args.concurrency.split(","))),
                   "--gateway", args.gateway, "--weed", args.weed]
        if args.out:
            command += ["--out", str(Path(args.out).with_suffix(".s3.json"))]
        print(f"\n{' '.join(command)}", flush=True)
        status = status or subprocess.run(command).returncode
    sys.exit(status)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit("interrupted; every server stopped")
