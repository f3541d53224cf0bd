#!/usr/bin/env python3
"""Resumable uploads (tus) against a plain PUT, in one run.

    scripts/tus-bench.py [--gateway target/release/gateway] [--size 1GiB]
                         [--chunk 8MiB] [--rounds 3] [--concurrent 10]
                         [--dir /var/tmp] [--out results.json]

Starts the gateway on its defaults on a loopback port it picks (data in a
temp dir under --dir) and uploads one random file of --size:

  1. `PUT /files/…` with curl, and a tus upload from Python's http.client
     (one keep-alive connection, `POST /uploads/` then `PATCH`es of
     --chunk, as the web page sends them), interleaved, --rounds times:
     medians and their ratio.
  2. A tus upload cut at 90 %: the connection is closed halfway through a
     PATCH; the client asks `HEAD` for the offset and goes on from there.
     Reports the bytes sent beyond the file's size (what was re-sent).
  3. --concurrent tus uploads of the file at once (threads), then the
     gateway's peak RSS (VmHWM) against its memory budget.

Every stored file's ETag must be the file's SHA-256. Stops the gateway by
PID and removes its data. Needs curl and about (--concurrent + 3) x --size
of free disk under --dir.
"""

import argparse
import base64
import hashlib
import http.client
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

UNITS = {"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30}


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


class Tus:
    """A minimal tus 1.0 client on one keep-alive connection."""

    def __init__(self, port):
        self.port = port
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        self.sent = 0

    def request(self, method, url, body=None, headers=None):
        headers = {"Tus-Resumable": "1.0.0", **(headers or {})}
        self.conn.request(method, url, body=body, headers=headers)
        answer = self.conn.getresponse()
        answer.read()
        return answer

    def create(self, path, length):
        meta = "path " + base64.b64encode(path.encode()).decode()
        answer = self.request("POST", "/uploads/", headers={
            "Upload-Length": str(length), "Upload-Metadata": meta})
        assert answer.status == 201, answer.status
        return answer.getheader("Location")

    def patch(self, url, offset, chunk):
        answer = self.request("PATCH", url, body=chunk, headers={
            "Content-Type": "application/offset+octet-stream",
            "Upload-Offset": str(offset)})
        self.sent += len(chunk)
        assert answer.status == 204, answer.status
        return answer

    def offset(self, url):
        answer = self.request("HEAD", url)
        return int(answer.getheader("Upload-Offset"))

    def upload(self, path, source, length, chunk, cut_at=None):
        url = self.create(path, length)
        offset = 0
        etag = None
        with open(source, "rb") as f:
            while offset < length:
                if cut_at is not None and offset >= cut_at:
                    self.cut(url, offset, f.read(chunk))
                    cut_at = None
                    offset = self.offset(url)
                    f.seek(offset)
                    continue
                piece = f.read(chunk)
                answer = self.patch(url, offset, piece)
                offset += len(piece)
                etag = answer.getheader("ETag")
        return etag

    def cut(self, url, offset, piece):
        """Send half of a PATCH and close the connection."""
        raw = socket.create_connection(("127.0.0.1", self.port))
        head = (f"PATCH {url} HTTP/1.1\r\nHost: 127.0.0.1\r\nTus-Resumable: 1.0.0\r\n"
                f"Content-Type: application/offset+octet-stream\r\n"
                f"Upload-Offset: {offset}\r\nContent-Length: {len(piece)}\r\n\r\n")
        raw.sendall(head.encode() + piece[: len(piece) // 2])
        self.sent += len(piece) // 2
        raw.close()
        time.sleep(0.5)
        self.conn.close()
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)


def put(port, path, source):
    out = subprocess.run(
        ["curl", "-sS", "-o", "/dev/null", "-D", "-", "-w", "%{time_total}",
         "-T", source, f"http://127.0.0.1:{port}/files/{path}"],
        check=True, capture_output=True, text=True).stdout
    etag = next(line.split(":", 1)[1].strip() for line in out.splitlines()
                if line.lower().startswith("etag:")) if "etag" in out.lower() else None
    return float(out.strip().splitlines()[-1]), etag


def meta(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/files/{path}?meta") as answer:
        return json.load(answer)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gateway", default="target/release/gateway")
    parser.add_argument("--size", default="1GiB", type=size)
    parser.add_argument("--chunk", default="8MiB", type=size)
    parser.add_argument("--rounds", default=3, type=int)
    parser.add_argument("--concurrent", default=10, type=int)
    parser.add_argument("--dir", default=tempfile.gettempdir())
    parser.add_argument("--out")
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="tus-bench-", dir=args.dir)
    port = free_port()
    log = open(os.path.join(work, "gateway.log"), "wb")
    gateway = subprocess.Popen(
        [args.gateway, "--data-dir", os.path.join(work, "data"),
         "--listen", f"127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT)
    results = {}
    failed = False
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz").read()
                break
            except OSError:
                time.sleep(0.1)
        source = os.path.join(work, "file.bin")
        digest = hashlib.sha256()
        with open(source, "wb") as out:
            left = args.size
            while left:
                block = os.urandom(min(left, 16 << 20))
                digest.update(block)
                out.write(block)
                left -= len(block)
        digest = digest.hexdigest()

        puts, tuses = [], []
        for round_ in range(args.rounds):
            seconds, _ = put(port, f"put-{round_}.bin", source)
            puts.append(args.size / seconds / 1e6)
            started = time.perf_counter()
            Tus(port).upload(f"tus-{round_}.bin", source, args.size, args.chunk)
            tuses.append(args.size / (time.perf_counter() - started) / 1e6)
            for path in (f"put-{round_}.bin", f"tus-{round_}.bin"):
                if meta(port, path)["sha256"] != digest:
                    print(f"{path}: wrong SHA-256", file=sys.stderr)
                    failed = True
        results["put_mb_s"] = statistics.median(puts)
        results["tus_mb_s"] = statistics.median(tuses)
        results["tus_over_put"] = results["tus_mb_s"] / results["put_mb_s"]

        client = Tus(port)
        cut_at = (int(args.size * 0.9) // args.chunk) * args.chunk
        client.upload("cut.bin", source, args.size, args.chunk, cut_at=cut_at)
        results["resent_bytes"] = client.sent - args.size
        if meta(port, "cut.bin")["sha256"] != digest:
            print("cut.bin: wrong SHA-256", file=sys.stderr)
            failed = True

        errors = []

        def one(n):
            try:
                Tus(port).upload(f"many-{n}.bin", source, args.size, args.chunk)
            except Exception as error:  # reported below
                errors.append(f"upload {n}: {error!r}")

        started = time.perf_counter()
        threads = [threading.Thread(target=one, args=(n,)) for n in range(args.concurrent)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        results["concurrent_seconds"] = time.perf_counter() - started
        for n in range(args.concurrent):
            if meta(port, f"many-{n}.bin")["sha256"] != digest:
                errors.append(f"many-{n}.bin: wrong SHA-256")
        if errors:
            print("\n".join(errors), file=sys.stderr)
            failed = True
        with open(f"/proc/{gateway.pid}/status") as status:
            results["peak_rss"] = next(int(line.split()[1]) * 1024 for line in status
                                       if line.startswith("VmHWM:"))
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/admin/pool") as answer:
            results["memory_budget"] = json.load(answer)["memory_budget_bytes"]
    finally:
        gateway.terminate()
        try:
            gateway.wait(timeout=30)
        except subprocess.TimeoutExpired:
            gateway.kill()
        shutil.rmtree(work, ignore_errors=True)

    mib = 1 << 20
    print(f"{args.size / mib:.0f} MiB, chunks of {args.chunk / mib:.0f} MiB, "
          f"median of {args.rounds}: PUT {results['put_mb_s']:.0f} MB/s, tus "
          f"{results['tus_mb_s']:.0f} MB/s ({results['tus_over_put']:.2f}x)")
    print(f"cut at 90 %: {results['resent_bytes'] / mib:.1f} MiB sent again "
          f"(a chunk is {args.chunk / mib:.0f} MiB)")
    print(f"{args.concurrent} concurrent tus uploads: {results['concurrent_seconds']:.1f} s, "
          f"peak RSS {results['peak_rss'] / mib:.0f} MiB (budget "
          f"{results['memory_budget'] / mib:.0f} MiB)")
    if args.out:
        with open(args.out, "w") as out:
            json.dump(results, out, indent=2)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
