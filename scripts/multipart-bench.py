#!/usr/bin/env python3
"""An S3 multipart upload's completion time against its parts' upload time.

    .tools/venv/bin/python scripts/multipart-bench.py [--gateway target/release/gateway]
        [--multipart-size 6GiB] [--part-size 64MiB] [--dir /tmp] [--out results.json]

Starts the gateway on its defaults with `--s3-listen` on loopback ports it
picks (data in a temp dir under --dir), makes an S3 key for the open tree
with `gateway key create` (as scripts/s3-bench.py does), and with boto3 on
one connection: CreateMultipartUpload, UploadPart of --part-size parts in
order (the last one shorter when the sizes do not divide), then
CompleteMultipartUpload. Reports

  upload     CreateMultipartUpload up to the last UploadPart's answer
  complete   the CompleteMultipartUpload request's own time (the client
             waits for its answer however long it takes)
  ratio      complete / upload (issue 35's goal: <= 10 % with parts in order)

boto3 signs each part's payload with SHA-256 over plain HTTP (over HTTPS it
would send UNSIGNED-PAYLOAD), which is client time inside `upload`: it is
timed on one part and reported too, with the ratio against the upload time
less that hashing (the stricter figure).

Every part is the same random bytes with its last 16 replaced by (run,
part number), so each part and the object are new content. Checks: the
completion's ETag is S3's MD5 of the parts' MD5s, and the stored file's
SHA-256 and size (the gateway's `/files/BUCKET/KEY?meta`) are the object's;
a mismatch exits 1. The object is deleted at the end.

scripts/tus-bench.py runs this against its own gateway (--rest-port,
--s3-port, --data-dir: no gateway is started then). Needs boto3 (in
.tools/venv, scripts/install-test-deps.sh), a release gateway, and about
2 x --multipart-size free under --dir (today's completion writes the
object again beside its parts). Unset AWS_CA_BUNDLE for a plain-HTTP
endpoint (this script drops it from its own environment). Loopback only.
"""

import argparse
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

os.environ.pop("AWS_CA_BUNDLE", None)  # the endpoint is plain HTTP on loopback

UNITS = {"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30}
BUCKET = "multipart-bench"
MIB = 1 << 20


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


def needed_disk(multipart_size):
    """Free bytes the run needs: the parts and today's second copy, plus a margin."""
    return 2 * multipart_size + 512 * MIB


def start_gateway(binary, work):
    """A gateway on loopback ports of its own; (process, rest port, s3 port, data dir)."""
    data_dir = os.path.join(work, "data")
    rest, s3 = free_port(), free_port()
    log = open(os.path.join(work, "gateway.log"), "wb")
    process = subprocess.Popen(
        [binary, "--data-dir", data_dir, "--listen", f"127.0.0.1:{rest}",
         "--s3-listen", f"127.0.0.1:{s3}"], stdout=log, stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL)
    for _ in range(600):
        if process.poll() is not None:
            sys.exit(f"the gateway exited with {process.returncode}; see {log.name}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{rest}/healthz").read()
            socket.create_connection(("127.0.0.1", s3), timeout=1).close()
            return process, rest, s3, data_dir
        except OSError:
            time.sleep(0.1)
    process.kill()
    sys.exit("the gateway did not answer within 60 s")


def s3_client(binary, data_dir, s3_port):
    import boto3
    from botocore.config import Config
    key = subprocess.run([binary, "--data-dir", data_dir, "key", "create", "--label", "multipart-bench"],
                         capture_output=True, text=True, timeout=60)
    fields = key.stdout.split()
    if key.returncode != 0 or len(fields) != 2:
        sys.exit(f"gateway key create failed ({key.returncode}): {key.stdout}{key.stderr}")
    return boto3.client(
        "s3", endpoint_url=f"http://127.0.0.1:{s3_port}", aws_access_key_id=fields[0],
        aws_secret_access_key=fields[1], region_name="us-east-1",
        config=Config(signature_version="s3v4", s3={"addressing_style": "path"},
                      retries={"max_attempts": 1}, connect_timeout=10, read_timeout=3600,
                      request_checksum_calculation="when_required",
                      response_checksum_validation="when_required"))


def run(client, rest_port, total, part_size):
    """One multipart upload of `total` bytes; its numbers and the problems found."""
    try:
        client.create_bucket(Bucket=BUCKET)
    except client.exceptions.BucketAlreadyOwnedByYou:
        pass
    run_id = os.urandom(8)
    base = os.urandom(min(part_size, total))
    lengths = [min(part_size, total - start) for start in range(0, total, part_size)]
    tagged_md5 = hashlib.md5(base[:-16])  # every full part: this prefix, then its tag

    def part(number, length):
        tag = run_id + number.to_bytes(8, "big")
        return base[: length - 16] + tag if length >= 16 else tag[-length:]

    first = part(1, lengths[0])
    started = time.perf_counter()
    hashlib.sha256(first).digest()  # what botocore does to every part over plain HTTP
    hash_once = time.perf_counter() - started
    del first
    key = f"object-{run_id.hex()}.bin"
    started = time.perf_counter()
    upload_id = client.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]
    done = []
    for number, length in enumerate(lengths, 1):
        answer = client.upload_part(Bucket=BUCKET, Key=key, UploadId=upload_id, PartNumber=number,
                                    Body=part(number, length))
        done.append({"PartNumber": number, "ETag": answer["ETag"]})
    upload = time.perf_counter() - started
    started = time.perf_counter()
    answer = client.complete_multipart_upload(Bucket=BUCKET, Key=key, UploadId=upload_id,
                                              MultipartUpload={"Parts": done})
    complete = time.perf_counter() - started

    problems = []
    md5s, whole = [], hashlib.sha256()
    for number, length in enumerate(lengths, 1):
        body = part(number, length)
        whole.update(body)
        if length == part_size:
            digest = tagged_md5.copy()
            digest.update(body[-16:])
        else:
            digest = hashlib.md5(body)
        md5s.append(digest.digest())
    etag = f'"{hashlib.md5(b"".join(md5s)).hexdigest()}-{len(lengths)}"'
    if answer.get("ETag") != etag:
        problems.append(f"{key}: completion ETag {answer.get('ETag')}, expected {etag}")
    with urllib.request.urlopen(f"http://127.0.0.1:{rest_port}/files/{BUCKET}/{key}?meta") as meta:
        meta = json.load(meta)
    if meta.get("sha256") != whole.hexdigest() or meta.get("size") != total:
        problems.append(f"{key}: stored SHA-256 {meta.get('sha256')} size {meta.get('size')}, "
                        f"expected {whole.hexdigest()} size {total}")
    client.delete_object(Bucket=BUCKET, Key=key)
    client_hash = hash_once * len(lengths)
    return {
        "multipart_size": total, "part_size": part_size, "parts": len(lengths),
        "upload_seconds": upload, "upload_mb_s": total / upload / 1e6,
        "complete_seconds": complete, "complete_over_upload": complete / upload,
        "client_sha256_seconds": client_hash,
        "complete_over_upload_less_client_hash": complete / max(upload - client_hash, 1e-9),
    }, problems


def describe(result):
    return (f"S3 multipart {result['multipart_size'] / MIB:.0f} MiB in {result['parts']} parts of "
            f"{result['part_size'] / MIB:.0f} MiB, in order: upload {result['upload_seconds']:.1f} s "
            f"({result['upload_mb_s']:.0f} MB/s), completion {result['complete_seconds']:.1f} s = "
            f"{100 * result['complete_over_upload']:.1f} % of the upload "
            f"({100 * result['complete_over_upload_less_client_hash']:.1f} % less the client's "
            f"{result['client_sha256_seconds']:.1f} s of payload SHA-256; goal <= 10 %)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gateway", default="target/release/gateway")
    parser.add_argument("--multipart-size", default="6GiB", type=size)
    parser.add_argument("--part-size", default="64MiB", type=size)
    parser.add_argument("--dir", default=tempfile.gettempdir())
    parser.add_argument("--out")
    parser.add_argument("--rest-port", type=int, help="use this running gateway (with --s3-port, --data-dir)")
    parser.add_argument("--s3-port", type=int)
    parser.add_argument("--data-dir")
    args = parser.parse_args()
    try:
        import boto3  # noqa: F401
    except ImportError:
        sys.exit("boto3 is missing: run this with .tools/venv/bin/python (scripts/install-test-deps.sh)")
    if not os.path.isfile(args.gateway):
        sys.exit(f"{args.gateway} is missing: flock /tmp/cargo.lock cargo build --release -p gateway")
    if args.part_size < 5 * MIB or args.multipart_size < 16:
        sys.exit("--part-size must be at least 5 MiB (S3's minimum) and --multipart-size at least 16 bytes")
    attached = args.rest_port is not None
    if attached and (args.s3_port is None or args.data_dir is None):
        sys.exit("--rest-port needs --s3-port and --data-dir")

    work = None
    gateway = None
    try:
        if attached:
            rest, s3, data_dir = args.rest_port, args.s3_port, args.data_dir
        else:
            free = shutil.disk_usage(args.dir).free
            if free < needed_disk(args.multipart_size):
                sys.exit(f"not enough free disk under {args.dir}: {free / (1 << 30):.1f} GiB free, "
                         f"{needed_disk(args.multipart_size) / (1 << 30):.1f} GiB needed "
                         f"(2 x --multipart-size + 0.5 GiB)")
            work = tempfile.mkdtemp(prefix="multipart-bench-", dir=args.dir)
            gateway, rest, s3, data_dir = start_gateway(args.gateway, work)
        client = s3_client(args.gateway, data_dir, s3)
        result, problems = run(client, rest, args.multipart_size, args.part_size)
    finally:
        if gateway is not None:
            gateway.terminate()
            try:
                gateway.wait(timeout=30)
            except subprocess.TimeoutExpired:
                gateway.kill()
                gateway.wait()
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)
    result["problems"] = problems
    print(describe(result), file=sys.stderr if attached else sys.stdout)
    if args.out:
        with open(args.out, "w") as out:
            json.dump(result, out, indent=2)
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
