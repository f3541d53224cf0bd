#!/usr/bin/env python3
"""One boto3 S3 call for gateway/tests/s3_system.rs, its outcome as JSON.

    s3call.py --endpoint URL [--access-key ID --secret S | --anonymous] OPERATION 'JSON'

OPERATION is a boto3 client method (put_object, list_objects_v2, ...), JSON
its keyword arguments. A "Body" of {"hex": "..."} or {"file": PATH} is sent
as those bytes; {"file": PATH} as a part body of "Body" too. Printed: one
JSON line, {"ok": RESULT} (a streaming Body read whole, as "Body": {"len",
"sha256", "hex" (first 64 KiB)}) or {"error": CODE, "status": N, "message",
"retry_after"}.
Exit status 0 either way; 2 on a usage or transport failure.

tests/s3_multipart/calls.py imports make_client, jsonable and client_error
from here.
"""

import argparse
import datetime
import hashlib
import json
import sys

import boto3
import botocore
from botocore.config import Config


def jsonable(value, head_size=65536):
    """A boto3 result as JSON, without its ResponseMetadata: a streaming
    Body is read whole, as {"len", "sha256", "hex"} ("hex": its first
    head_size bytes; no "hex" with head_size 0)."""
    if isinstance(value, dict):
        return {k: jsonable(v, head_size) for k, v in value.items() if k != "ResponseMetadata"}
    if isinstance(value, list):
        return [jsonable(v, head_size) for v in value]
    if isinstance(value, (datetime.datetime, datetime.date)):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.hex()
    if hasattr(value, "read"):
        digest = hashlib.sha256()
        head = b""
        length = 0
        while True:
            chunk = value.read(1 << 20)
            if not chunk:
                break
            if len(head) < head_size:
                head += chunk[: head_size - len(head)]
            digest.update(chunk)
            length += len(chunk)
        body = {"len": length, "sha256": digest.hexdigest()}
        if head_size:
            body["hex"] = head.hex()
        return body
    return value


def make_client(endpoint, access_key=None, secret=None, anonymous=False):
    """A boto3 S3 client of endpoint: path-style, region us-east-1, one
    attempt in all, unsigned if anonymous."""
    options = dict(
        region_name="us-east-1",
        # One attempt in all (`max_attempts` counts retries, not attempts).
        retries={"total_max_attempts": 1, "mode": "standard"},
        s3={"addressing_style": "path"},
        connect_timeout=10,
        read_timeout=120,
    )
    if anonymous:
        options["signature_version"] = botocore.UNSIGNED
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=access_key or "unused",
        aws_secret_access_key=secret or "unused",
        config=Config(**options),
    )


def client_error(error):
    """A ClientError as {"error": CODE, "message", "status": N}."""
    response = error.response
    return {
        "error": response.get("Error", {}).get("Code", ""),
        "message": response.get("Error", {}).get("Message", ""),
        "status": response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0),
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--access-key")
    parser.add_argument("--secret")
    parser.add_argument("--anonymous", action="store_true")
    parser.add_argument("operation")
    parser.add_argument("params", nargs="?", default="{}")
    args = parser.parse_args()

    client = make_client(args.endpoint, args.access_key, args.secret, args.anonymous)
    params = json.loads(args.params)
    body = params.get("Body")
    opened = None
    if isinstance(body, dict):
        if "hex" in body:
            params["Body"] = bytes.fromhex(body["hex"])
        else:
            opened = open(body["file"], "rb")
            params["Body"] = opened
    try:
        result = getattr(client, args.operation)(**params)
        print(json.dumps({"ok": jsonable(result)}))
    except botocore.exceptions.ClientError as error:
        headers = error.response.get("ResponseMetadata", {}).get("HTTPHeaders", {})
        print(json.dumps({**client_error(error), "retry_after": headers.get("retry-after")}))
    finally:
        if opened:
            opened.close()


if __name__ == "__main__":
    sys.exit(main())
