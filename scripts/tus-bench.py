#!/usr/bin/env python3
"""Resumable uploads (tus, S3 multipart) against a plain PUT, in one run (issue 35).

    scripts/tus-bench.py [--gateway target/release/gateway] [--size 1GiB]
                         [--chunk 0,8MiB] [--rounds 3] [--concurrent 10]
                         [--disk-part 8MiB] [--memory-budget SIZE]
                         [--multipart-size 6GiB] [--part-size 64MiB] [--skip-multipart]
                         [--dir /tmp] [--out results.json]

Starts the gateway on loopback ports it picks (data in a temp dir under
--dir), on its defaults but `--versions=false` (so a file deleted after its
check frees its blob at once) and `--s3-listen` (unless --skip-multipart),
writes one random file of --size and uploads it. Every upload is new
content (the file's last 16 bytes replaced by a tag of its own, since the
gateway stores identical content once) and every stored file's SHA-256
(`/files/…?meta`) must be its content's; it is deleted after the check.

--chunk is a list of tus modes: 0 is ONE PATCH for the whole file (what
tus-js-client, Uppy and tuspy send by default), N is PATCHes of N bytes (the
web page sends 8 MiB). The tus client is Python's http.client on one
keep-alive connection (`POST /uploads/`, then the PATCHes, bodies streamed
from the file 1 MiB at a time); the PUT is curl -T.

  1. disk: for each mode, one tus upload while a thread sums the data
     directory's real usage (st_blocks x 512, os.scandir, every 100 ms).
     Peak (above the data dir's usage before the upload) against the file
     plus one part (the mode's chunk, at least --disk-part).
  2. speed: PUT and each mode, interleaved (the order rotated each round),
     --rounds times; medians and tus/PUT (goal >= 0.9x).
  3. cut at 90 %: for each mode, the PATCH that spans 90 % of the file is
     sent on a raw socket up to that byte, then the connection closes; the
     client asks HEAD until the offset holds still and goes on from there.
     In flight = bytes written into the cut PATCH minus what HEAD says was
     kept beyond its start; re-sent = all bytes sent minus the file's size
     (goal: re-sent <= in flight; equal for a client that resumes where
     HEAD says, so the size of "in flight" is what the server lost).
  4. --concurrent uploads at once in the first mode (threads); the
     gateway's peak RSS (VmHWM, reset through /proc/PID/clear_refs before
     the phase; and VmRSS sampled every 100 ms) against the memory budget
     (`memory_budget_bytes` of `/admin/pool`) + 256 MiB. The gateway's
     default budget is half the machine's memory; --memory-budget sets it.
  5. S3 multipart (scripts/multipart-bench.py, run with .tools/venv's
     Python, else this one, for boto3, on this gateway, without
     AWS_CA_BUNDLE): --multipart-size in --part-size parts in order; the
     completion's own time against the parts' (goal <= 10 %).

Prints a table; --out also writes every number as JSON. Exit 1 when a check
fails (not when a goal is missed). Stops the gateway by PID and removes its
data, also on errors. Needs curl, boto3 in .tools/venv (unless
--skip-multipart), a release gateway, and free disk under --dir: the file,
plus 2 x --size per concurrent upload or 2 x --multipart-size, whichever is
more (today's completion writes a second copy), plus 0.5 GiB; it refuses
to start with less. Loopback only.
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
MIB, GIB = 1 << 20, 1 << 30
BLOCK = 1 << 20
HERE = os.path.dirname(os.path.abspath(__file__))


def size(text):
    text = text.strip().lower()
    for unit, factor in UNITS.items():
        if text.endswith(unit):
            return int(float(text[: -len(unit)]) * factor)
    return int(text)


def mode(chunk):
    return "single PATCH" if chunk == 0 else f"{chunk / MIB:g} MiB PATCHes"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Source:
    """The random file; each upload's content is it with the last 16 bytes replaced by a tag."""

    def __init__(self, path, length):
        self.path, self.length, self.count = path, length, 0
        self.run = os.urandom(8).hex()
        prefix = hashlib.sha256()
        with open(path, "wb") as out:
            left = length
            while left:
                block = os.urandom(min(left, 16 * MIB))
                written = length - left
                prefix.update(block[: max(0, length - 16 - written)])
                out.write(block)
                left -= len(block)
        self.prefix = prefix

    def tag(self):
        self.count += 1
        return hashlib.sha256(f"{self.run}-{self.count}".encode()).digest()[:16]

    def sha256(self, tag):
        digest = self.prefix.copy()
        digest.update(tag)
        return digest.hexdigest()

    def stamp(self, tag):
        """Write `tag` into the file itself (for curl, which reads the file)."""
        with open(self.path, "r+b") as f:
            f.seek(self.length - 16)
            f.write(tag)


class Body:
    """Bytes [offset, offset + length) of a source with its tag, read as a file."""

    def __init__(self, source, tag, offset, length):
        self.source, self.tag = source, tag
        self.pos, self.end = offset, offset + length
        self.file = open(source.path, "rb")
        self.file.seek(offset)

    def read(self, n=-1):
        n = self.end - self.pos if n is None or n < 0 else min(n, self.end - self.pos)
        if n <= 0:
            self.file.close()
            return b""
        data = self.file.read(n)
        start, lo, hi = self.source.length - 16, max(self.pos, self.source.length - 16), self.pos + len(data)
        if lo < hi:
            data = data[: lo - self.pos] + self.tag[lo - start: hi - start] + data[hi - self.pos:]
        self.pos += len(data)
        return data


class Tus:
    """A minimal tus 1.0 client on one keep-alive connection; `sent` counts PATCH body bytes."""

    def __init__(self, port):
        self.port, self.sent = port, 0
        self.connect()

    def connect(self):
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=1800, blocksize=BLOCK)

    def request(self, method, url, body=None, headers=None):
        self.conn.request(method, url, body=body, headers={"Tus-Resumable": "1.0.0", **(headers or {})})
        answer = self.conn.getresponse()
        answer.read()
        return answer

    def create(self, path, length):
        meta = "path " + base64.b64encode(path.encode()).decode()
        answer = self.request("POST", "/uploads/", headers={
            "Upload-Length": str(length), "Upload-Metadata": meta})
        assert answer.status == 201, f"POST /uploads/: {answer.status}"
        return answer.getheader("Location")

    def patch(self, url, source, tag, offset, length):
        answer = self.request("PATCH", url, body=Body(source, tag, offset, length), headers={
            "Content-Type": "application/offset+octet-stream", "Upload-Offset": str(offset),
            "Content-Length": str(length)})
        self.sent += length
        assert answer.status == 204, f"PATCH at {offset}: {answer.status}"

    def offset(self, url):
        answer = self.request("HEAD", url)
        assert answer.status == 200, f"HEAD: {answer.status}"
        return int(answer.getheader("Upload-Offset"))

    def settled_offset(self, url):
        """HEAD until three answers 200 ms apart agree (the server may still be noting the cut)."""
        seen, deadline = [], time.time() + 15
        while len(seen) < 3 or len(set(seen[-3:])) > 1:
            if time.time() > deadline:
                break
            time.sleep(0.2)
            seen.append(self.offset(url))
        return seen[-1]

    def upload(self, path, source, tag, chunk, cut_at=None):
        """Upload `source` with `tag` in PATCHes of `chunk` (0: one); cut the PATCH spanning `cut_at`."""
        length = source.length
        url = self.create(path, length)
        offset, cut = 0, None
        while offset < length:
            n = length - offset if chunk == 0 else min(chunk, length - offset)
            if cut_at is not None and cut is None and offset <= cut_at < offset + n:
                written = cut_at - offset or n // 2
                self.cut(url, source, tag, offset, n, written)
                after = self.settled_offset(url)
                cut = {"patch_start": offset, "patch_length": n, "written": written,
                       "offset_after": after, "kept": max(0, after - offset),
                       "in_flight": written - max(0, after - offset)}
                offset = after
                continue
            self.patch(url, source, tag, offset, n)
            offset += n
        return cut

    def cut(self, url, source, tag, offset, length, written):
        """Send `written` bytes of a PATCH of `length` on a socket of its own, then close it."""
        raw = socket.create_connection(("127.0.0.1", self.port))
        raw.sendall((f"PATCH {url} HTTP/1.1\r\nHost: 127.0.0.1\r\nTus-Resumable: 1.0.0\r\n"
                     f"Content-Type: application/offset+octet-stream\r\n"
                     f"Upload-Offset: {offset}\r\nContent-Length: {length}\r\n\r\n").encode())
        body = Body(source, tag, offset, written)
        while piece := body.read(BLOCK):
            raw.sendall(piece)
        self.sent += written
        raw.close()
        self.conn.close()
        self.connect()


def put(port, path, source, tag):
    source.stamp(tag)
    out = subprocess.run(
        ["curl", "-sS", "--fail", "-o", "/dev/null", "-w", "%{time_total}", "-T", source.path,
         f"http://127.0.0.1:{port}/files/{path}"], check=True, capture_output=True, text=True).stdout
    return float(out.strip())


def check(port, path, source, tag, problems):
    """The stored file's SHA-256 must be its content's; then delete it (frees its blob)."""
    base = f"http://127.0.0.1:{port}/files/{path}"
    try:
        with urllib.request.urlopen(base + "?meta") as answer:
            got = json.load(answer).get("sha256")
        if got != source.sha256(tag):
            problems.append(f"{path}: SHA-256 {got}, expected {source.sha256(tag)}")
        urllib.request.urlopen(urllib.request.Request(base, method="DELETE")).read()
    except OSError as error:
        problems.append(f"{path}: {error}")


def usage(root, seen=None):
    """Bytes the files under `root` take on disk (each inode once)."""
    seen = set() if seen is None else seen
    total = 0
    try:
        entries = list(os.scandir(root))
    except OSError:  # removed while we looked
        return 0
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                total += usage(entry.path, seen)
                continue
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) not in seen:
            seen.add((st.st_dev, st.st_ino))
            total += st.st_blocks * 512
    return total


class Sampler(threading.Thread):
    """Calls `measure` every `interval` seconds until stopped; keeps the peak."""

    def __init__(self, measure, interval=0.1):
        super().__init__(daemon=True)
        self.measure, self.interval = measure, interval
        self.peak, self.samples, self.done = 0, 0, threading.Event()

    def run(self):
        while True:
            try:
                self.peak = max(self.peak, self.measure())
                self.samples += 1
            except OSError:
                pass
            if self.done.wait(self.interval):
                break

    def stop(self):
        self.done.set()
        self.join()
        self.peak = max(self.peak, self.measure())
        return self.peak


def proc_status(pid, field):
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith(field + ":"))


def multipart_python():
    venv = os.path.join(HERE, "..", ".tools", "venv", "bin", "python")
    return venv if os.path.exists(venv) else sys.executable


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gateway", default="target/release/gateway")
    parser.add_argument("--size", default="1GiB", type=size)
    parser.add_argument("--chunk", default="0,8MiB", type=lambda text: [size(t) for t in text.split(",")],
                        help="tus modes, comma-separated: 0 is one PATCH, N PATCHes of N bytes")
    parser.add_argument("--rounds", default=3, type=int)
    parser.add_argument("--concurrent", default=10, type=int)
    parser.add_argument("--disk-part", default="8MiB", type=size,
                        help="one part, for the disk limit (file + one part) of a single PATCH")
    parser.add_argument("--memory-budget", help="passed to the gateway (default: the gateway's own)")
    parser.add_argument("--multipart-size", default="6GiB", type=size)
    parser.add_argument("--part-size", default="64MiB", type=size)
    parser.add_argument("--skip-multipart", action="store_true")
    parser.add_argument("--dir", default=tempfile.gettempdir())
    parser.add_argument("--out")
    args = parser.parse_args()
    if args.size < 16 * 2 or args.rounds < 1 or any(c < 0 for c in args.chunk):
        sys.exit("--size must be at least 32 bytes, --rounds at least 1, chunks 0 or more")
    if not args.skip_multipart and args.part_size < 5 * MIB:
        sys.exit("--part-size must be at least 5 MiB (S3's minimum part)")
    if not os.path.isfile(args.gateway):
        sys.exit(f"{args.gateway} is missing: flock /tmp/cargo.lock cargo build --release -p gateway")
    needed = (args.size + max(2 * args.size * max(args.concurrent, 1),
                              0 if args.skip_multipart else 2 * args.multipart_size) + GIB // 2)
    free = shutil.disk_usage(args.dir).free
    if free < needed:
        sys.exit(f"not enough free disk under {args.dir}: {free / GIB:.1f} GiB free, {needed / GIB:.1f} GiB "
                 f"needed (the file, then 2 x --size per concurrent upload or 2 x --multipart-size, "
                 f"whichever is more, + 0.5 GiB); lower --size, --concurrent or --multipart-size, "
                 f"or pick another --dir")

    work = tempfile.mkdtemp(prefix="tus-bench-", dir=args.dir)
    data_dir = os.path.join(work, "data")
    port, s3_port = free_port(), free_port()
    command = [args.gateway, "--data-dir", data_dir, "--listen", f"127.0.0.1:{port}", "--versions=false"]
    if not args.skip_multipart:
        command += ["--s3-listen", f"127.0.0.1:{s3_port}"]
    if args.memory_budget:
        command += ["--memory-budget", args.memory_budget]
    log_path = os.path.join(work, "gateway.log")
    gateway = subprocess.Popen(command, stdout=open(log_path, "wb"), stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL)
    results = {"size": args.size, "chunks": args.chunk, "rounds": args.rounds, "cores": os.cpu_count(),
               "load_average_before": os.getloadavg()}
    problems = []
    L = args.size
    try:
        for _ in range(600):
            if gateway.poll() is not None:
                raise SystemExit(f"the gateway exited with {gateway.returncode}")
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz").read()
                break
            except OSError:
                time.sleep(0.1)
        source = Source(os.path.join(work, "file.bin"), L)

        print("disk peak during one upload per mode", file=sys.stderr)
        results["disk"] = {}
        for chunk in args.chunk:
            tag, path = source.tag(), f"disk-{chunk}.bin"
            baseline = usage(data_dir)
            sampler = Sampler(lambda: usage(data_dir))
            sampler.start()
            Tus(port).upload(path, source, tag, chunk)
            peak = sampler.stop()
            check(port, path, source, tag, problems)
            part = max(chunk, args.disk_part)
            results["disk"][mode(chunk)] = {
                "baseline": baseline, "peak": peak, "peak_above_baseline": peak - baseline,
                "peak_minus_file": peak - baseline - L, "one_part": part, "samples": sampler.samples,
                "within_file_plus_part": peak - baseline <= L + part}

        print("speed: PUT and tus, interleaved", file=sys.stderr)
        kinds = ["PUT"] + args.chunk
        speeds = {kind: [] for kind in kinds}
        for round_ in range(args.rounds):
            for kind in kinds[round_ % len(kinds):] + kinds[: round_ % len(kinds)]:
                tag, path = source.tag(), f"speed-{round_}-{kind}.bin"
                started = time.perf_counter()
                if kind == "PUT":
                    seconds = put(port, path, source, tag)
                else:
                    Tus(port).upload(path, source, tag, kind)
                    seconds = time.perf_counter() - started
                speeds[kind].append(L / seconds / 1e6)
                check(port, path, source, tag, problems)
        results["put_mb_s"] = statistics.median(speeds["PUT"])
        results["tus"] = {mode(c): {"mb_s": statistics.median(speeds[c]), "rounds_mb_s": speeds[c],
                                    "over_put": statistics.median(speeds[c]) / results["put_mb_s"],
                                    "rounds_over_put": [t / p for t, p in zip(speeds[c], speeds["PUT"])]}
                          for c in args.chunk}
        results["put_rounds_mb_s"] = speeds["PUT"]

        print("cut at 90 %", file=sys.stderr)
        results["cut"] = {}
        for chunk in args.chunk:
            tag, path, client = source.tag(), f"cut-{chunk}.bin", Tus(port)
            cut = client.upload(path, source, tag, chunk, cut_at=int(L * 0.9))
            cut["sent"], cut["resent"] = client.sent, client.sent - L
            if cut["offset_after"] < cut["patch_start"]:
                problems.append(f"cut ({mode(chunk)}): HEAD went back to {cut['offset_after']}, "
                                f"before the cut PATCH's start {cut['patch_start']}")
            results["cut"][mode(chunk)] = cut
            check(port, path, source, tag, problems)

        print(f"{args.concurrent} concurrent uploads, {mode(args.chunk[0])}", file=sys.stderr)
        try:
            with open(f"/proc/{gateway.pid}/clear_refs", "w") as clear:
                clear.write("5")  # resets VmHWM to the current RSS
            results["hwm_reset"] = True
        except OSError:
            results["hwm_reset"] = False
        rss = Sampler(lambda: proc_status(gateway.pid, "VmRSS"))
        rss.start()
        tags = [source.tag() for _ in range(args.concurrent)]

        def one(n):
            try:
                Tus(port).upload(f"many-{n}.bin", source, tags[n], args.chunk[0])
            except Exception as error:  # reported below
                problems.append(f"concurrent upload {n}: {error!r}")

        started = time.perf_counter()
        threads = [threading.Thread(target=one, args=(n,)) for n in range(args.concurrent)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        results["concurrent"] = {"uploads": args.concurrent, "mode": mode(args.chunk[0]),
                                 "seconds": time.perf_counter() - started,
                                 "peak_rss_sampled": rss.stop(), "vm_hwm": proc_status(gateway.pid, "VmHWM")}
        for n in range(args.concurrent):
            check(port, f"many-{n}.bin", source, tags[n], problems)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/admin/pool") as answer:
            budget = json.load(answer)["memory_budget_bytes"]
        results["concurrent"].update(memory_budget=budget, limit=budget + 256 * MIB,
                                     within_limit=results["concurrent"]["vm_hwm"] <= budget + 256 * MIB)

        if not args.skip_multipart:
            print(f"S3 multipart {args.multipart_size / MIB:.0f} MiB", file=sys.stderr)
            os.remove(source.path)
            out = os.path.join(work, "multipart.json")
            env = {k: v for k, v in os.environ.items() if k != "AWS_CA_BUNDLE"}
            done = subprocess.run(
                [multipart_python(), os.path.join(HERE, "multipart-bench.py"), "--gateway", args.gateway,
                 "--rest-port", str(port), "--s3-port", str(s3_port), "--data-dir", data_dir,
                 "--multipart-size", str(args.multipart_size), "--part-size", str(args.part_size),
                 "--out", out], env=env)
            if not os.path.exists(out):
                raise SystemExit(f"scripts/multipart-bench.py failed ({done.returncode})")
            with open(out) as f:
                results["multipart"] = json.load(f)
            problems += results["multipart"].pop("problems")
    except BaseException:
        with open(log_path, errors="replace") as log:
            print("the gateway's log ends:\n" + log.read()[-3000:], file=sys.stderr)
        raise
    finally:
        gateway.terminate()
        try:
            gateway.wait(timeout=30)
        except subprocess.TimeoutExpired:
            gateway.kill()
            gateway.wait()
        shutil.rmtree(work, ignore_errors=True)

    results["load_average_after"] = os.getloadavg()
    results["problems"] = problems
    report(results, args)
    if args.out:
        with open(args.out, "w") as out:
            json.dump(results, out, indent=2)
    if problems:
        print("CHECKS FAILED:\n  " + "\n  ".join(problems[:50]), file=sys.stderr)
        return 1
    return 0


def report(r, args):
    mib = lambda n: f"{n / MIB:.1f} MiB"  # noqa: E731
    yes = lambda ok: "yes" if ok else "NO"  # noqa: E731
    L = r["size"]
    print(f"\n{L / MIB:.0f} MiB file, median of {r['rounds']} interleaved rounds; {r['cores']} cores; load "
          f"average {r['load_average_before'][0]:.2f} before, {r['load_average_after'][0]:.2f} after.\n")
    print("| measure | result | goal | met |\n|---|---|---|---|")
    print(f"| PUT (curl -T) | {r['put_mb_s']:.0f} MB/s | | |")
    for name, tus in r["tus"].items():
        print(f"| tus, {name} | {tus['mb_s']:.0f} MB/s = {tus['over_put']:.2f}x PUT | >= 0.9x PUT "
              f"| {yes(tus['over_put'] >= 0.9)} |")
    for name, cut in r["cut"].items():
        print(f"| cut at 90 %, {name} | in flight {mib(cut['in_flight'])} (written {mib(cut['written'])} "
              f"into the PATCH at {mib(cut['patch_start'])}, kept {mib(cut['kept'])}); re-sent "
              f"{mib(cut['resent'])} | re-sent <= in flight | {yes(cut['resent'] <= cut['in_flight'])} |")
    for name, disk in r["disk"].items():
        print(f"| disk peak, {name} | {mib(disk['peak_above_baseline'])} above the data dir's "
              f"{mib(disk['baseline'])} before; file + {mib(disk['peak_minus_file'])} | <= file + "
              f"{mib(disk['one_part'])} | {yes(disk['within_file_plus_part'])} |")
    c = r["concurrent"]
    print(f"| {c['uploads']} concurrent, {c['mode']} | peak RSS {mib(c['vm_hwm'])} (VmHWM"
          f"{'' if r['hwm_reset'] else ' since start'}; sampled {mib(c['peak_rss_sampled'])}), "
          f"{c['seconds']:.1f} s | <= budget {mib(c['memory_budget'])} + 256 MiB | {yes(c['within_limit'])} |")
    if "multipart" in r:
        m = r["multipart"]
        print(f"| S3 multipart {m['multipart_size'] / MIB:.0f} MiB, {m['parts']} x "
              f"{m['part_size'] / MIB:.0f} MiB in order | parts {m['upload_seconds']:.1f} s "
              f"({m['upload_mb_s']:.0f} MB/s), completion {m['complete_seconds']:.1f} s = "
              f"{100 * m['complete_over_upload']:.1f} % ({100 * m['complete_over_upload_less_client_hash']:.1f} "
              f"% less the client's {m['client_sha256_seconds']:.1f} s of payload SHA-256) | <= 10 % "
              f"| {yes(m['complete_over_upload_less_client_hash'] <= 0.10)} |")
    failed = len(r["problems"])
    print(f"\nchecks: every stored file's SHA-256{' and the multipart ETag' if 'multipart' in r else ''}: "
          f"{f'{failed} FAILED' if failed else 'all match'}")


if __name__ == "__main__":
    sys.exit(main())
