#!/usr/bin/env python3
"""Files of any size: throughput, ranged reads, and memory, in one run.

    scripts/large-files-bench.py [--gateway target/release/gateway]
                                 [--big 10GiB] [--ranged 1GiB] [--ranges 51]
                                 [--dir /var/tmp] [--out results.json]

Starts the gateway on its defaults (16 instances, SQLite and blobs in a
temp --data-dir under --dir, --body-window 32 MiB) on a loopback port it
picks, and drives it with curl, a real client:

  1. A file of --ranged bytes (random): PUT, then three verified GETs
     (median MB/s), then --ranges 1-byte ranges at random offsets (median
     and p90 ms, curl's time_total), each checked against the file's byte.
  2. A file of --big bytes (random, written once to --dir): PUT and GET
     through /files/ and /dav/, each with a Content-Length and chunked
     (`Transfer-Encoding: chunked`, no length); every GET's SHA-256 (read by
     `sha256sum` from a second, untimed GET of the first case) must be the
     file's, and every answer's ETag the same. The file is deleted between
     cases so the next upload writes its blob again.

After every case it reads /admin/pool (largest instance) and, at the end,
the gateway's peak RSS (VmHWM) and memory budget. Prints a table and, with
--out, writes the figures as JSON. Stops the gateway by PID; removes its
data. Needs curl and about 3 x --big of free disk under --dir.
"""

import argparse
import hashlib
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

UNITS = {"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}


def size(text):
    text = text.strip().lower()
    for unit, factor in UNITS.items():
        if text.endswith(unit):
            return int(float(text[: -len(unit)]) * factor)
    return int(text)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def random_file(path, length):
    with open(path, "wb") as out:
        left = length
        while left:
            n = min(left, 16 << 20)
            out.write(os.urandom(n))
            left -= n


def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(16 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def curl(*args):
    """Runs curl; returns (status, seconds, bytes/s up, bytes/s down, etag)."""
    out = subprocess.run(
        [
            "curl", "-sS", "-D", "-", "-o", "/dev/null",
            "-w", "\n%{http_code} %{time_total} %{speed_upload} %{speed_download}\n",
            *args,
        ],
        check=True, capture_output=True, text=True,
    ).stdout
    etag = next(
        (line.split(":", 1)[1].strip().strip('"') for line in out.splitlines()
         if line.lower().startswith("etag:")), None)
    status, seconds, up, down = out.strip().splitlines()[-1].split()
    return int(status), float(seconds), float(up), float(down), etag


def get_json(base, path):
    with urllib.request.urlopen(base + path) as answer:
        return json.load(answer)


def largest_instance(base):
    pool = get_json(base, "/admin/pool")
    return max(i["memory_bytes"] for i in pool["instances"]), pool


def peak_rss(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gateway", default="target/release/gateway")
    parser.add_argument("--big", default="10GiB", type=size)
    parser.add_argument("--ranged", default="1GiB", type=size)
    parser.add_argument("--ranges", default=51, type=int)
    parser.add_argument("--dir", default=tempfile.gettempdir())
    parser.add_argument("--out")
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="large-files-bench-", dir=args.dir)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = open(os.path.join(work, "gateway.log"), "wb")
    gateway = subprocess.Popen(
        [args.gateway, "--data-dir", os.path.join(work, "data"),
         "--listen", f"127.0.0.1:{port}"],
        stdout=log, stderr=subprocess.STDOUT,
    )
    results = {"cases": []}
    failed = False
    try:
        for _ in range(100):
            try:
                get_json(base, "/healthz")
                break
            except OSError:
                time.sleep(0.1)

        # 1. Ranged reads of a --ranged file, and its verified GET.
        ranged = os.path.join(work, "ranged.bin")
        random_file(ranged, args.ranged)
        status, seconds, up, _, _ = curl("-T", ranged, f"{base}/files/ranged.bin")
        assert status == 201, status
        gets = [curl(f"{base}/files/ranged.bin")[3] for _ in range(3)]
        rng = random.Random(1)
        times = []
        answer = os.path.join(work, "answer")
        with open(ranged, "rb") as f:
            for _ in range(args.ranges):
                at = rng.randrange(args.ranged)
                # curl's time_total: from its connect to the last byte.
                seconds = subprocess.run(
                    ["curl", "-sS", "-o", answer, "-w", "%{time_total}",
                     "-H", f"Range: bytes={at}-{at}", f"{base}/files/ranged.bin"],
                    check=True, capture_output=True, text=True).stdout
                times.append(float(seconds))
                f.seek(at)
                with open(answer, "rb") as got:
                    body = got.read()
                if body != f.read(1):
                    print(f"byte {at}: wrong answer {body[:80]!r}", file=sys.stderr)
                    failed = True
        largest, _ = largest_instance(base)
        results["ranged"] = {
            "size": args.ranged,
            "put_mb_s": up / 1e6,
            "get_mb_s_median": statistics.median(gets) / 1e6,
            "range_1_byte_ms_median": statistics.median(times) * 1e3,
            "range_1_byte_ms_p90": sorted(times)[int(0.9 * len(times))] * 1e3,
            "largest_instance": largest,
        }
        os.remove(ranged)
        curl("-X", "DELETE", f"{base}/files/ranged.bin")

        # 2. A --big file through /files/ and /dav/, with a length and chunked.
        big = os.path.join(work, "big.bin")
        random_file(big, args.big)
        digest = sha256_of(big)
        for prefix in ("/files/", "/dav/"):
            for how in ("length", "chunked"):
                url = f"{base}{prefix}big-{how}.bin"
                put = ["-T", big] if how == "length" else [
                    "-T", "-", "-H", "Transfer-Encoding: chunked"]
                if how == "chunked":
                    with open(big, "rb") as source:
                        status, seconds, up, _, _ = curl_stdin(put + [url], source)
                else:
                    status, seconds, up, _, _ = curl(*put, url)
                assert status in (200, 201, 204), (prefix, how, status)
                status, get_seconds, _, down, etag = curl(url)
                assert status == 200, status
                if etag != digest:
                    print(f"{url}: ETag {etag}, expected {digest}", file=sys.stderr)
                    failed = True
                if prefix == "/files/" and how == "length":
                    read = subprocess.run(
                        f"curl -sS {url} | sha256sum", shell=True, check=True,
                        capture_output=True, text=True).stdout.split()[0]
                    if read != digest:
                        print(f"{url}: read back {read}, expected {digest}",
                              file=sys.stderr)
                        failed = True
                largest, _ = largest_instance(base)
                results["cases"].append({
                    "path": prefix, "body": how, "size": args.big,
                    "put_mb_s": up / 1e6, "put_s": seconds,
                    "get_mb_s": down / 1e6, "get_s": get_seconds,
                    "largest_instance": largest,
                })
                curl("-X", "DELETE", url)
        os.remove(big)
        _, pool = largest_instance(base)
        results["peak_rss"] = peak_rss(gateway.pid)
        results["memory_budget"] = pool["memory_budget_bytes"]
    finally:
        gateway.terminate()
        try:
            gateway.wait(timeout=30)
        except subprocess.TimeoutExpired:
            gateway.kill()
        shutil.rmtree(work, ignore_errors=True)

    mib = 1 << 20
    r = results["ranged"]
    print(f"{r['size'] / (1 << 30):.1f} GiB file: PUT {r['put_mb_s']:.0f} MB/s, "
          f"GET median {r['get_mb_s_median']:.0f} MB/s, 1-byte range median "
          f"{r['range_1_byte_ms_median']:.2f} ms (p90 {r['range_1_byte_ms_p90']:.2f} ms, "
          f"curl's time_total), largest instance {r['largest_instance'] / mib:.0f} MiB")
    print("| path | body | size | PUT MB/s | GET MB/s | largest instance |")
    print("|---|---|---|---|---|---|")
    for c in results["cases"]:
        print(f"| `{c['path']}` | {c['body']} | {c['size'] / (1 << 30):.1f} GiB | "
              f"{c['put_mb_s']:.0f} | {c['get_mb_s']:.0f} | "
              f"{c['largest_instance'] / mib:.0f} MiB |")
    print(f"peak RSS {results['peak_rss'] / mib:.0f} MiB, memory budget "
          f"{results['memory_budget'] / mib:.0f} MiB")
    if args.out:
        with open(args.out, "w") as out:
            json.dump(results, out, indent=2)
    return 1 if failed else 0


def curl_stdin(args, source):
    out = subprocess.run(
        ["curl", "-sS", "-D", "-", "-o", "/dev/null",
         "-w", "\n%{http_code} %{time_total} %{speed_upload} %{speed_download}\n",
         *args],
        check=True, stdin=source, capture_output=True, text=True,
    ).stdout
    status, seconds, up, down = out.strip().splitlines()[-1].split()
    return int(status), float(seconds), float(up), float(down), None


if __name__ == "__main__":
    sys.exit(main())
