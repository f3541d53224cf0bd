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
"""

import argparse
import datetime
import hashlib
import json
import sys

import boto3
import botocore
from botocore.config import Config


def jsonable(value):
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items() if k != "ResponseMetadata"}
    if isinstance(value, list):
        return [jsonable(v) for v in value]
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
            if len(head) < 65536:
                head += chunk[: 65536 - len(head)]
            digest.update(chunk)
            length += len(chunk)
        return {"len": length, "sha256": digest.hexdigest(), "hex": head.hex()}
    return value


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--access-key")
    parser.add_argument("--secret")
    parser.add_argument("--anonymous", action="store_true")
    parser.add_argument("operation")
    parser.add_argument("params", nargs="?", default="{}")
    args = parser.parse_args()

    options = dict(
        region_name="us-east-1",
        # One attempt in all (`max_attempts` counts retries, not attempts).
        retries={"total_max_attempts": 1, "mode": "standard"},
        s3={"addressing_style": "path"},
        connect_timeout=10,
        read_timeout=120,
    )
    if args.anonymous:
        options["signature_version"] = botocore.UNSIGNED
    client = boto3.client(
        "s3",
        endpoint_url=args.endpoint,
        aws_access_key_id=args.access_key or "unused",
        aws_secret_access_key=args.secret or "unused",
        config=Config(**options),
    )
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
        response = error.response
        print(
            json.dumps(
                {
                    "error": response.get("Error", {}).get("Code", ""),
                    "message": response.get("Error", {}).get("Message", ""),
                    "status": response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0),
                    "retry_after": response.get("ResponseMetadata", {})
                    .get("HTTPHeaders", {})
                    .get("retry-after"),
                }
            )
        )
    finally:
        if opened:
            opened.close()


if __name__ == "__main__":
    sys.exit(main())
