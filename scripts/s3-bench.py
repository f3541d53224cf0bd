#!/usr/bin/env python3
"""Requests/s and latency of the gateway's S3 API against SeaweedFS's, in one run.

    scripts/s3-bench.py [--duration 10s] [--rounds 3] [--concurrency 8]
                        [--gateway target/release/gateway] [--weed .tools/venv/bin/weed]
                        [--only gateway|seaweed] [--baseline GATEWAY] [--out results.json]

Both servers run on 127.0.0.1 of this machine, their data in one temp dir
under /var/tmp (the same disk), each as it comes:

  gateway   `gateway --s3-listen` on its defaults (16 Wasm instances, SQLite
            index and blobs in --data-dir), an open gateway (no user) with an
            S3 key made by `gateway key create` (the open tree's key). It
            hashes every upload in Wasm, fsyncs the blob and its directory
            and commits the SQLite index (synchronous = FULL) before it
            answers, and verifies every download.
  seaweed   `weed mini` (master, volume, filer, S3 in one process, every port
            picked fresh), credentials from AWS_ACCESS_KEY_ID /
            AWS_SECRET_ACCESS_KEY as testsupport/src/seaweed.rs does. As it
            comes it does not fsync: the per-path `fsync` option
            (fs.configure) is off by default, so an answered PUT is in the
            page cache of its volume file and filer store, not yet on disk.

The rows, at concurrency --concurrency (8):

  GET 4 KiB, GET 1 MiB   every request reads one object uploaded beforehand
  PUT 4 KiB, PUT 1 MiB   each client thread overwrites its own key again and
                         again, and every body is different (see below)

With --baseline GATEWAY, a second gateway (an earlier build, started the
same way with a data dir of its own) joins every row, and gateway/baseline
is the ratio of their requests/s: before and after in one run.

Rows alternate gateway, seaweed; with --rounds N (3) the whole table runs N
times, interleaved (gateway, seaweed, gateway, seaweed...), and each cell is
the median over rounds: requests/s, p50 and p99 latency (time to the last
byte of the answer), and gateway/seaweed, the ratio of requests/s. Any answer
other than 2xx and any transport error is counted and shown.

The client. Python boto3 with threads would be the bottleneck (the GIL), so
requests are sent by a small Go client (stdlib net/http, keep-alive, one
goroutine per connection), compiled by this script from the source below
with `go build` (Go >= 1.21, no module downloads). It sends presigned URLs
made by boto3 (`generate_presigned_url`, SigV4 in the query, 24 h expiry),
which both servers verify as real SigV4 on every request. It is not `hey`
because `hey -D` sends one body again and again: the gateway stores blobs by
their SHA-256, so an upload of content it already has skips the blob write
and fsync, while SeaweedFS writes every copy. So each PUT body here is the
same random bytes with its first 16 replaced by (thread, sequence number):
every upload is new content for both servers, at no cost to the client.
A presigned PUT is signed with UNSIGNED-PAYLOAD, so neither server checks a
payload hash; Content-MD5 and checksums are not sent.

Checks: the client compares every GET body with the bytes uploaded; after
each PUT cell every thread's key is read back (boto3, signed) and must hold
the last body that thread had answered with 2xx, with the MD5 ETag; at the
end every GET object is read back once more. Any mismatch exits 1.

The run is bounded: each cell lasts --duration plus the requests then in
flight (the client's per-request timeout is 60 s); the servers start within
60 s or the run stops; both are stopped (SIGTERM, then SIGKILL) and their
files deleted at the end, also on errors and Ctrl-C. Loopback only.

Needs Go (go build), boto3 (python3 -m pip install boto3, or Debian's
python3-boto3), SeaweedFS's `weed` (scripts/install-test-deps.sh puts it in
.tools/venv/bin) and a release gateway:
flock /tmp/cargo.lock cargo build --release -p gateway.
Both servers and the client share this machine's cores: the table says how
many.
"""

import argparse
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SIZES = {"4 KiB": 4 << 10, "1 MiB": 1 << 20}
ALL_SERVERS = ("gateway", "baseline", "seaweed")
BUCKET = "s3-bench"
REGION = "us-east-1"
SEAWEED_ACCESS = "s3-bench-access"
SEAWEED_SECRET = "s3-bench-secret-key-0123456789"
# weed mini's components that serve HTTP, each with gRPC on HTTP + 10000.
SEAWEED_COMPONENTS = ("master", "volume", "filer", "s3", "admin")
GRPC_OFFSET = 10000
START_TIMEOUT = 60
PRESIGN_EXPIRY = 24 * 3600

CLIENT_GO = r'''
// s3-bench's load client: -c goroutines, each with its own URL
// (line i % n of -urls), send -method until -duration is over, then one
// JSON summary on stdout.
package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"
)

type summary struct {
	Requests        int            `json:"requests"`
	Seconds         float64        `json:"seconds"`
	Rate            float64        `json:"requests_per_second"`
	P50             *float64       `json:"p50_ms"`
	P99             *float64       `json:"p99_ms"`
	Statuses        map[string]int `json:"statuses"`
	TransportErrors int            `json:"transport_errors"`
	FirstError      string         `json:"first_error,omitempty"`
	Mismatches      int            `json:"mismatches"`
	LastOK          []int64        `json:"last_ok_seq"`
}

type worker struct {
	latencies  []time.Duration
	statuses   map[int]int
	transport  int
	firstError string
	mismatches int
	lastOK     int64
}

func main() {
	method := flag.String("method", "GET", "GET or PUT")
	urlsFile := flag.String("urls", "", "file of URLs, one a line")
	bodyFile := flag.String("body", "", "PUT: the body, its first 16 bytes replaced by (thread, seq); GET: the content expected")
	conc := flag.Int("c", 8, "concurrency")
	duration := flag.Duration("duration", 10*time.Second, "how long to start new requests")
	flag.Parse()

	raw, err := os.ReadFile(*urlsFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var urls []string
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" {
			urls = append(urls, line)
		}
	}
	body, err := os.ReadFile(*bodyFile)
	if err != nil || len(urls) == 0 || len(body) < 16 {
		fmt.Fprintln(os.Stderr, "need -urls (non-empty) and -body (>= 16 bytes):", err)
		os.Exit(2)
	}
	client := &http.Client{
		Timeout: 60 * time.Second,
		Transport: &http.Transport{
			MaxIdleConns:        2 * *conc,
			MaxIdleConnsPerHost: 2 * *conc,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
		},
	}
	workers := make([]*worker, *conc)
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(*duration)
	for i := range workers {
		w := &worker{statuses: map[int]int{}, lastOK: -1, latencies: make([]time.Duration, 0, 1<<14)}
		workers[i] = w
		wg.Add(1)
		go func(id int, url string) {
			defer wg.Done()
			mine := append([]byte(nil), body...)
			var got bytes.Buffer
			got.Grow(len(body) + 512)
			for seq := int64(0); time.Now().Before(deadline); seq++ {
				var req *http.Request
				if *method == "PUT" {
					binary.BigEndian.PutUint64(mine[0:8], uint64(id))
					binary.BigEndian.PutUint64(mine[8:16], uint64(seq))
					req, _ = http.NewRequest("PUT", url, bytes.NewReader(mine))
					req.Header.Set("Content-Type", "application/octet-stream")
				} else {
					req, _ = http.NewRequest("GET", url, nil)
				}
				t0 := time.Now()
				resp, err := client.Do(req)
				if err == nil {
					got.Reset()
					_, err = got.ReadFrom(resp.Body)
					resp.Body.Close()
				}
				elapsed := time.Since(t0)
				if err != nil {
					w.transport++
					if w.firstError == "" {
						w.firstError = err.Error()
					}
					time.Sleep(10 * time.Millisecond)
					continue
				}
				w.latencies = append(w.latencies, elapsed)
				w.statuses[resp.StatusCode]++
				if resp.StatusCode/100 != 2 {
					if w.firstError == "" {
						w.firstError = fmt.Sprintf("%d: %.300s", resp.StatusCode, got.String())
					}
					continue
				}
				if *method == "PUT" {
					w.lastOK = seq
				} else if !bytes.Equal(got.Bytes(), body) {
					w.mismatches++
				}
			}
		}(i, urls[i%len(urls)])
	}
	wg.Wait()
	seconds := time.Since(start).Seconds()

	s := summary{Statuses: map[string]int{}, Seconds: seconds}
	var all []time.Duration
	for _, w := range workers {
		all = append(all, w.latencies...)
		for code, n := range w.statuses {
			s.Statuses[fmt.Sprint(code)] += n
		}
		s.TransportErrors += w.transport
		s.Mismatches += w.mismatches
		s.LastOK = append(s.LastOK, w.lastOK)
		if s.FirstError == "" {
			s.FirstError = w.firstError
		}
	}
	s.Requests = len(all) + s.TransportErrors
	s.Rate = float64(len(all)) / seconds
	sort.Slice(all, func(a, b int) bool { return all[a] < all[b] })
	pct := func(p float64) *float64 {
		if len(all) == 0 {
			return nil
		}
		i := int(p*float64(len(all))+0.999999) - 1
		if i < 0 {
			i = 0
		}
		ms := float64(all[i].Microseconds()) / 1000
		return &ms
	}
	s.P50, s.P99 = pct(0.50), pct(0.99)
	out, _ := json.Marshal(s)
	os.Stdout.Write(append(out, '\n'))
}
'''


def free_port(also_grpc=False, taken=set()):
    """A free loopback port (with port + 10000 free too, for weed's gRPC), never one handed out before."""
    for _ in range(1000):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        if port in taken or port + GRPC_OFFSET in taken:
            continue
        if also_grpc:
            if port + GRPC_OFFSET > 65535:
                continue
            try:
                with socket.socket() as twin:
                    twin.bind(("127.0.0.1", port + GRPC_OFFSET))
            except OSError:
                continue
        taken.update((port, port + GRPC_OFFSET))
        return port
    sys.exit("no free loopback port")


def stop(process, timeout=30):
    """SIGTERM to the process group, SIGKILL after `timeout`."""
    if process is None or process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    except ProcessLookupError:
        pass


def tail(path, n=3000):
    try:
        return Path(path).read_text(errors="replace")[-n:]
    except OSError:
        return ""


def s3_client(endpoint, access, secret):
    import boto3
    from botocore.config import Config
    return boto3.client(
        "s3", endpoint_url=endpoint, aws_access_key_id=access, aws_secret_access_key=secret,
        region_name=REGION,
        config=Config(signature_version="s3v4", s3={"addressing_style": "path"},
                      retries={"max_attempts": 1}, connect_timeout=5, read_timeout=60,
                      request_checksum_calculation="when_required",
                      response_checksum_validation="when_required"))


def wait_bucket_ready(client, process, log, create):
    """Until the bucket answers HeadBucket (created first when `create`), or the deadline."""
    deadline = time.time() + START_TIMEOUT
    last = None
    while time.time() < deadline:
        if process.poll() is not None:
            sys.exit(f"{process.args[0]} exited with {process.returncode}:\n{tail(log)}")
        try:
            if create:
                try:
                    client.create_bucket(Bucket=BUCKET)
                except client.exceptions.BucketAlreadyOwnedByYou:
                    pass
            client.head_bucket(Bucket=BUCKET)
            return
        except Exception as error:  # not up yet: connection refused, 404, 503...
            last = error
            time.sleep(0.2)
    sys.exit(f"bucket {BUCKET} not ready within {START_TIMEOUT} s (last: {last}):\n{tail(log)}")


def start_seaweed(weed, work):
    base = work / "seaweed"
    data, logs = base / "data", base / "logs"
    data.mkdir(parents=True)
    logs.mkdir()
    ports = {name: free_port(also_grpc=True) for name in SEAWEED_COMPONENTS}
    command = [weed, f"-logdir={logs}", "mini", f"-dir={data}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
               "-admin.ui=false", "-webdav=false", "-master.telemetry=false", "-volume.preStopSeconds=0",
               f"-webdav.port={free_port()}", f"-debug.port={free_port()}",
               f"-s3.debug.port={free_port()}", "-s3.port.iceberg=0", "-s3.port.lance=0",
               f"-filer.localSocket={base / 'filer.sock'}", f"-s3.localSocket={base / 's3.sock'}"]
    for name, port in ports.items():
        command += [f"-{name}.port={port}", f"-{name}.port.grpc={port + GRPC_OFFSET}"]
    log = base / "weed.log"
    env = {k: v for k, v in os.environ.items() if k not in ("AWS_CA_BUNDLE", "S3_BUCKET")}
    env.update(AWS_ACCESS_KEY_ID=SEAWEED_ACCESS, AWS_SECRET_ACCESS_KEY=SEAWEED_SECRET, TMPDIR=str(base))
    process = subprocess.Popen(command, cwd=base, env=env, stdin=subprocess.DEVNULL,
                               stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True)
    endpoint = f"http://127.0.0.1:{ports['s3']}"
    return {"process": process, "log": log, "endpoint": endpoint, "access": SEAWEED_ACCESS,
            "secret": SEAWEED_SECRET, "grpc_ports": {n: p + GRPC_OFFSET for n, p in ports.items()},
            "filer": f"http://127.0.0.1:{ports['filer']}"}  # for scripts/peer-bench.py


def start_gateway(binary, work, name="gateway"):
    data_dir = work / name
    data_dir.mkdir()
    log = data_dir.parent / f"{name}.log"
    rest, s3 = free_port(), free_port()
    env = {**os.environ, "RUST_LOG": "warn"}
    process = subprocess.Popen(
        [binary, "--listen", f"127.0.0.1:{rest}", "--s3-listen", f"127.0.0.1:{s3}", "--data-dir", str(data_dir)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=open(log, "w"), env=env,
        start_new_session=True)
    # The index exists once the gateway answers; then the CLI adds the open tree's key to it.
    deadline = time.time() + START_TIMEOUT
    while True:
        if process.poll() is not None:
            sys.exit(f"gateway exited with {process.returncode}:\n{tail(log)}")
        try:
            socket.create_connection(("127.0.0.1", s3), timeout=1).close()
            break
        except OSError:
            if time.time() > deadline:
                sys.exit(f"the gateway's S3 port did not open within {START_TIMEOUT} s:\n{tail(log)}")
            time.sleep(0.2)
    key = subprocess.run([binary, "--data-dir", str(data_dir), "key", "create", "--label", "s3-bench"],
                         capture_output=True, text=True, env=env, timeout=60)
    fields = key.stdout.split()
    if key.returncode != 0 or len(fields) != 2:
        sys.exit(f"gateway key create failed ({key.returncode}): {key.stdout}{key.stderr}")
    return {"process": process, "log": log, "endpoint": f"http://127.0.0.1:{s3}",
            "access": fields[0], "secret": fields[1]}


def build_client(work):
    go = shutil.which("go") or ("/usr/local/go/bin/go" if Path("/usr/local/go/bin/go").exists() else None)
    if go is None:
        sys.exit("go is missing: the load client is built with `go build` (Go >= 1.21)")
    source = work / "client" / "main.go"
    source.parent.mkdir()
    source.write_text(CLIENT_GO)
    binary = work / "client" / "s3-bench-client"
    env = {**os.environ, "GOFLAGS": "-buildvcs=false", "GO111MODULE": "off"}
    out = subprocess.run([go, "build", "-o", str(binary), str(source)], capture_output=True, text=True,
                         env=env, cwd=source.parent, timeout=300)
    if out.returncode != 0:
        sys.exit(f"go build failed:\n{out.stdout}{out.stderr}")
    return binary


def key_of(method, size, worker=None):
    n = SIZES[size]
    return f"get-{n}.bin" if method == "GET" else f"put-{n}-w{worker}.bin"


def put_body(base, worker, seq):
    return struct.pack(">QQ", worker, seq) + base[16:]


def md5_etag(body):
    return f'"{hashlib.md5(body).hexdigest()}"'


def read_back(client, key, expected, server):
    """Problems with `key` on `server`: its bytes and its ETag must be those of `expected`."""
    try:
        answer = client.get_object(Bucket=BUCKET, Key=key)
        got, etag = answer["Body"].read(), answer.get("ETag")
    except Exception as error:
        return [f"{server} {key}: {error}"]
    problems = []
    if got != expected:
        problems.append(f"{server} {key}: the {len(got)} bytes read are not the {len(expected)} written")
    if etag != md5_etag(expected):
        problems.append(f"{server} {key}: ETag {etag}, expected {md5_etag(expected)}")
    return problems


def check_signatures_verified(client, server):
    """A presigned GET answers 200 and the same URL with its signature altered 403: SigV4 is checked.

    (Unsigned requests are not tried: the open gateway serves them on loopback, by design.)"""
    import urllib.error
    import urllib.request
    url = client.generate_presigned_url("get_object", Params={"Bucket": BUCKET, "Key": key_of("GET", "4 KiB")},
                                        ExpiresIn=PRESIGN_EXPIRY)
    signature = re.search(r"X-Amz-Signature=([0-9a-f]+)", url).group(1)
    altered = url.replace(signature, signature[:-1] + ("0" if signature[-1] != "0" else "1"))
    expected = {"signed": 200, "altered signature": 403}
    problems = []
    for case, target in (("signed", url), ("altered signature", altered)):
        try:
            with urllib.request.urlopen(target, timeout=30) as answer:
                status = answer.status
        except urllib.error.HTTPError as error:
            status = error.code
        except OSError as error:
            status = str(error)
        if status != expected[case]:
            problems.append(f"{server}: a {case} presigned GET answered {status}, expected {expected[case]}")
    return problems


def run_cell(client_binary, work, method, size, concurrency, duration, urls, body_file):
    urls_file = work / "urls.txt"
    urls_file.write_text("\n".join(urls) + "\n")
    command = [str(client_binary), "-method", method, "-urls", str(urls_file), "-body", str(body_file),
               "-c", str(concurrency), "-duration", duration]
    out = subprocess.run(command, capture_output=True, text=True, timeout=parse_seconds(duration) + 180)
    if out.returncode != 0:
        sys.exit(f"the client failed ({out.returncode}): {' '.join(command)}\n{out.stdout}{out.stderr}")
    result = json.loads(out.stdout)
    result["statuses"] = {int(code): n for code, n in result["statuses"].items()}
    result["errors"] = (sum(n for code, n in result["statuses"].items() if not 200 <= code < 300)
                        + result["transport_errors"])
    return result


def parse_seconds(duration):
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m)", duration)
    if not match:
        sys.exit(f"--duration {duration!r}: use e.g. 10s, 1m, 500ms")
    value, unit = float(match.group(1)), match.group(2)
    return value * {"ms": 0.001, "s": 1, "m": 60}[unit]


def fmt(value):
    return "–" if value is None else f"{value:.1f}"


def summarise(runs, rows, names):
    table = []
    for method, size, c in rows:
        cell = {"request": f"{method} {size}", "concurrency": c}
        for server in names:
            mine = [r for r in runs if (r["request"], r["concurrency"], r["server"]) == (cell["request"], c, server)]
            for key in ("requests_per_second", "p50_ms", "p99_ms"):
                values = [r[key] for r in mine if r[key] is not None]
                cell[f"{server}_{key}"] = statistics.median(values) if values else None
            cell[f"{server}_errors"] = sum(r["errors"] for r in mine)
            cell[f"{server}_mismatches"] = sum(r["mismatches"] for r in mine)
        if "gateway" in names and "seaweed" in names:
            cell["ratio"] = cell["gateway_requests_per_second"] / (cell["seaweed_requests_per_second"] or 1e-9)
        if "gateway" in names and "baseline" in names:
            cell["baseline_ratio"] = (cell["gateway_requests_per_second"]
                                      / (cell["baseline_requests_per_second"] or 1e-9))
        table.append(cell)
    return table


def print_table(table, args, names):
    rounds = f"median of {args.rounds} interleaved rounds" if args.rounds > 1 else "1 round"
    print(f"\n{args.duration} per cell at concurrency {args.concurrency}, {rounds}, presigned SigV4 URLs, "
          f"both servers on 127.0.0.1 of this machine ({os.cpu_count()} cores, shared with the Go client), "
          f"data on the same disk. PUT rows: each thread overwrites its own key with new content every "
          f"time; the gateway fsyncs each upload before answering, SeaweedFS (as it comes) does not.\n")
    head = "| request | c |"
    for server in names:
        head += f" {server} req/s |"
    if "baseline" in names:
        head += " gateway/baseline |"
    if "gateway" in names and "seaweed" in names:
        head += " gateway/seaweed |"
    for server in names:
        head += f" {server} p50 ms | {server} p99 ms |"
    head += f" failed {' / '.join(names)} |"
    print(head)
    print("|---" * (head.count("|") - 1) + "|")
    for cell in table:
        line = f"| {cell['request']} | {cell['concurrency']} |"
        for server in names:
            line += f" {fmt(cell[f'{server}_requests_per_second'])} |"
        if "baseline" in names:
            line += f" {cell['baseline_ratio']:.2f}x |"
        if "gateway" in names and "seaweed" in names:
            line += f" {cell['ratio']:.2f}x |"
        for server in names:
            line += f" {fmt(cell[f'{server}_p50_ms'])} | {fmt(cell[f'{server}_p99_ms'])} |"
        line += f" {' / '.join(str(cell[f'{server}_errors']) for server in names)} |"
        print(line)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", default="10s", help="per cell: 10s, 1m, 500ms")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--gateway", default=str(ROOT / "target" / "release" / "gateway"))
    parser.add_argument("--weed", default=shutil.which("weed") or str(ROOT / ".tools" / "venv" / "bin" / "weed"))
    parser.add_argument("--only", choices=ALL_SERVERS, help="run one server alone (no ratio)")
    parser.add_argument("--baseline", metavar="GATEWAY",
                        help="a second gateway binary (an earlier build) in every row: before/after in one run")
    parser.add_argument("--out", help="also write every run's numbers here as JSON")
    args = parser.parse_args()
    parse_seconds(args.duration)
    if args.only:
        names = (args.only,)
    else:
        names = tuple(server for server in ALL_SERVERS if server != "baseline" or args.baseline)
    try:
        import boto3  # noqa: F401
    except ImportError:
        sys.exit("boto3 is missing: python3 -m pip install boto3 (or apt-get install python3-boto3)")
    if "gateway" in names and not Path(args.gateway).is_file():
        sys.exit(f"{args.gateway} is missing: flock /tmp/cargo.lock cargo build --release -p gateway")
    if "seaweed" in names and not Path(args.weed).is_file():
        sys.exit(f"{args.weed} is missing: scripts/install-test-deps.sh installs SeaweedFS")

    rows = [(method, size, args.concurrency) for method in ("GET", "PUT") for size in SIZES]
    started = time.time()
    load_before = os.getloadavg()
    Path("/var/tmp").mkdir(exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="s3-bench-", dir="/var/tmp"))
    servers = {}
    try:
        client_binary = build_client(work)
        bodies = {size: os.urandom(n) for size, n in SIZES.items()}
        body_files = {size: work / f"body-{n}.bin" for size, n in SIZES.items()}
        for size, path in body_files.items():
            path.write_bytes(bodies[size])

        if "gateway" in names:
            servers["gateway"] = start_gateway(args.gateway, work)
        if "baseline" in names:
            servers["baseline"] = start_gateway(args.baseline, work, "baseline")
        if "seaweed" in names:
            servers["seaweed"] = start_seaweed(args.weed, work)
        clients = {}
        for server in names:
            s = servers[server]
            clients[server] = s3_client(s["endpoint"], s["access"], s["secret"])
            wait_bucket_ready(clients[server], s["process"], s["log"], create=True)

        problems = []
        for server in names:
            for size in SIZES:
                answer = clients[server].put_object(Bucket=BUCKET, Key=key_of("GET", size), Body=bodies[size])
                if answer.get("ETag") != md5_etag(bodies[size]):
                    problems.append(f"{server} PUT {key_of('GET', size)}: ETag {answer.get('ETag')}, "
                                    f"expected {md5_etag(bodies[size])}")
                problems += read_back(clients[server], key_of("GET", size), bodies[size], server)
        if problems:
            sys.exit("the objects read are not those written:\n  " + "\n  ".join(problems))

        for server in names:
            problems += check_signatures_verified(clients[server], server)
        if problems:
            sys.exit("\n  ".join(["a server does not verify SigV4 as expected:"] + problems))

        def urls(server, method, size, c):
            s3 = clients[server]
            operation = "get_object" if method == "GET" else "put_object"
            keys = [key_of("GET", size)] if method == "GET" else [key_of("PUT", size, w) for w in range(c)]
            return [s3.generate_presigned_url(operation, Params={"Bucket": BUCKET, "Key": k},
                                              ExpiresIn=PRESIGN_EXPIRY) for k in keys]

        runs = []
        for round_ in range(args.rounds):
            for method, size, c in rows:
                for server in names:
                    result = run_cell(client_binary, work, method, size, c, args.duration,
                                      urls(server, method, size, c), body_files[size])
                    if result["mismatches"]:
                        problems.append(f"{server} {method} {size} round {round_ + 1}: "
                                        f"{result['mismatches']} GET bodies differ from the object uploaded")
                    if method == "PUT":
                        for worker, seq in enumerate(result["last_ok_seq"]):
                            if seq >= 0:
                                problems += read_back(clients[server], key_of("PUT", size, worker),
                                                      put_body(bodies[size], worker, seq), server)
                    runs.append({"round": round_, "request": f"{method} {size}", "concurrency": c,
                                 "server": server, **result})
                    print(f"round {round_ + 1} {method} {size} c={c} {server:7} "
                          f"{result['requests_per_second']:9.1f} req/s  p50 {fmt(result['p50_ms'])} ms  "
                          f"p99 {fmt(result['p99_ms'])} ms  statuses {result['statuses']}  "
                          f"errors {result['errors']}"
                          + (f" (first: {result['first_error']})" if result.get("first_error") else ""),
                          file=sys.stderr)

        for server in names:
            for size in SIZES:
                problems += read_back(clients[server], key_of("GET", size), bodies[size], server)
        table = summarise(runs, rows, names)
        print_table(table, args, names)
        errors = sum(cell[f"{server}_errors"] for cell in table for server in names)
        print(f"\nverified: every GET body, every PUT thread's key after each cell and the GET objects at "
              f"the end; {'all bytes and ETags match' if not problems else f'{len(problems)} MISMATCHES'}; "
              f"{errors} failed requests; {time.time() - started:.0f} s in all. Load average (1, 5, 15 min) "
              f"before: {' '.join(f'{x:.2f}' for x in load_before)}, after: "
              f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} (other work on this machine skews the table).")
        if args.out:
            Path(args.out).write_text(json.dumps({
                "duration": args.duration, "rounds": args.rounds, "concurrency": args.concurrency,
                "cores": os.cpu_count(), "load_average_before": load_before,
                "load_average_after": os.getloadavg(), "table": table, "runs": runs, "verification_problems": problems},
                indent=2))
        if problems:
            sys.exit("verification failed:\n  " + "\n  ".join(problems[:50]))
    finally:
        for server in servers.values():
            stop(server["process"])
        # weed puts its gRPC sockets in /tmp whatever TMPDIR says; SIGKILL leaves them behind.
        for name, port in servers.get("seaweed", {}).get("grpc_ports", {}).items():
            try:
                os.remove(f"/tmp/seaweedfs-{name}-grpc-{port}.sock")
            except OSError:
                pass
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit("interrupted; the servers stopped")
