"""Uploads a file to a tus server with tuspy, for gateway/tests/tus.rs.

Resumes the upload whose URL is in --url-file when that file is there (the
URL tuspy got from the creation POST is written to it). Stops after
--chunks PATCHes when asked, and can then cut the next PATCH by hand: send
its headers and only --cut bytes of its body, then close the connection.
--pace slows every PATCH body down (a slow link), so that the test can kill
the gateway in the middle of one.

Prints one JSON object on stdout, whatever happened:
  url           the upload's URL
  created       whether this run created the upload (else it resumed)
  start_offset  the server's offset when this run began (its HEAD on resume)
  acknowledged  the offset of the server's last answer to this run
  sent          every body byte this run sent, the cut PATCH's included
  patches       [offset, length] of each PATCH the server answered
  error         what ended the run early, if anything (exit status 3)
and appends the server's new offset to --progress after each answered PATCH.
"""

import argparse
import json
import os
import socket
import sys
import time
from urllib.parse import urlsplit

import requests
from tusclient import client as tus_client
from tusclient import request as tus_request

parser = argparse.ArgumentParser()
parser.add_argument("endpoint", help="the creation URL, e.g. http://127.0.0.1:8080/uploads/")
parser.add_argument("--file", required=True)
parser.add_argument("--url-file", required=True)
parser.add_argument("--chunk-size", type=int, required=True)
parser.add_argument("--path", help="Upload-Metadata `path`: where the file is stored")
parser.add_argument("--header", action="append", default=[], help="NAME: VALUE for every request")
parser.add_argument("--chunks", type=int, help="stop after this many PATCHes")
parser.add_argument("--cut", type=int, help="then send this many bytes of the next PATCH and close")
parser.add_argument("--checksum", action="store_true", help="send Upload-Checksum (sha1)")
parser.add_argument("--pace", type=float, default=0.0, help="seconds per MiB of PATCH body")
parser.add_argument("--progress", help="a file to append the offset to after each PATCH")
args = parser.parse_args()

sent = 0
patches = []
report = {"url": None, "created": False, "start_offset": None, "acknowledged": None}


class PacedBody:
    """A PATCH body read out in 64 KiB pieces at --pace seconds a MiB, with
    its length known (so requests still sends Content-Length)."""

    PIECE = 64 * 1024

    def __init__(self, data):
        self.data = data
        self.at = 0

    def __len__(self):
        return len(self.data) - self.at

    def __iter__(self):
        while True:
            piece = self.read(self.PIECE)
            if not piece:
                return
            yield piece

    def read(self, size=-1):
        global sent
        size = self.PIECE if size is None or size < 0 else min(size, self.PIECE)
        piece = self.data[self.at : self.at + size]
        if piece:
            time.sleep(args.pace * len(piece) / (1 << 20))
        self.at += len(piece)
        sent += len(piece)
        return piece


real_patch = requests.patch


def counting_patch(url, data=None, **kwargs):
    """tuspy's PATCH, counting the body bytes that leave (paced or not)."""
    global sent
    if args.pace > 0:
        data = PacedBody(data)
    else:
        sent += len(data)
    return real_patch(url, data=data, **kwargs)


# tuspy's request module calls `requests.patch`; only its PATCHes go through this.
tus_request.requests = type("PacedRequests", (), {})()
tus_request.requests.patch = counting_patch
tus_request.requests.exceptions = requests.exceptions


def cut_patch(url, offset, body, keep, headers):
    """A PATCH of `body` at `offset` of which only `keep` bytes are sent
    before the connection is closed."""
    global sent
    parts = urlsplit(url)
    lines = [
        f"PATCH {parts.path} HTTP/1.1",
        f"Host: {parts.netloc}",
        "Tus-Resumable: 1.0.0",
        f"Upload-Offset: {offset}",
        "Content-Type: application/offset+octet-stream",
        f"Content-Length: {len(body)}",
    ] + [f"{name}: {value}" for name, value in headers.items()]
    with socket.create_connection((parts.hostname, parts.port or 80)) as connection:
        connection.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        connection.sendall(body[:keep])
        sent += keep
        # Let the server read what came before the connection goes.
        time.sleep(0.2)
        connection.shutdown(socket.SHUT_RDWR)


def main():
    headers = {}
    for header in args.header:
        name, _, value = header.partition(":")
        headers[name.strip()] = value.strip()
    client = tus_client.TusClient(args.endpoint, headers=headers)
    url = None
    if os.path.exists(args.url_file):
        with open(args.url_file) as stored:
            url = stored.read().strip() or None
    metadata = {"path": args.path} if args.path else {}
    uploader = client.uploader(
        file_path=args.file,
        url=url,
        chunk_size=args.chunk_size,
        metadata=metadata,
        upload_checksum=args.checksum,
    )
    if uploader.url is None:
        uploader.set_url(uploader.create_url())
        uploader.offset = 0
        report["created"] = True
        with open(args.url_file, "w") as stored:
            stored.write(uploader.url)
    report["url"] = uploader.url
    report["start_offset"] = uploader.offset
    report["acknowledged"] = uploader.offset
    size = uploader.get_file_size()
    done = 0
    while uploader.offset < size and (args.chunks is None or done < args.chunks):
        before = uploader.offset
        uploader.upload_chunk()
        done += 1
        patches.append([before, uploader.offset - before])
        report["acknowledged"] = uploader.offset
        if args.progress:
            with open(args.progress, "a") as progress:
                progress.write(f"{uploader.offset}\n")
    if args.cut is not None and uploader.offset < size:
        with open(args.file, "rb") as source:
            source.seek(uploader.offset)
            body = source.read(min(args.chunk_size, size - uploader.offset))
        cut_patch(uploader.url, uploader.offset, body, min(args.cut, len(body)), headers)


status = 0
try:
    main()
except Exception as error:  # what ended the run goes into the report
    report["error"] = f"{type(error).__name__}: {error}"
    status = 3
report["sent"] = sent
report["patches"] = patches
print(json.dumps(report))
sys.exit(status)
