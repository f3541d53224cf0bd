#!/usr/bin/env python3
"""boto3 calls in sequence for gateway/tests/s3_multipart.rs, each outcome
a JSON line as it ends.

    calls.py --endpoint URL --access-key ID --secret=S [--announce] 'JSON'

JSON is a list of [OPERATION, PARAMS]: a boto3 client method
(create_multipart_upload, upload_part, ...) and its keyword arguments. A
"Body" of {"file": PATH, "offset": N, "length": N} is sent as those bytes
of the file. Each call prints one line once it ends:
{"ok": RESULT, "seconds": S} (a streaming Body read whole, as
{"len", "sha256"}), {"error": CODE, "status": N, "message", "seconds"}, or,
when no answer came (the connection cut), {"error": "transport", "status":
0, "message", "seconds"}. With --announce, {"sending": OPERATION} is printed
(and flushed) as each request is about to leave. No call is tried again.
Exit status 0 whatever the calls answered; 2 on a usage failure.
"""

import argparse
import datetime
import hashlib
import json
import sys
import time

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
        length = 0
        while True:
            chunk = value.read(1 << 20)
            if not chunk:
                break
            digest.update(chunk)
            length += len(chunk)
        return {"len": length, "sha256": digest.hexdigest()}
    return value


def emit(line):
    print(json.dumps(line), flush=True)


def body_of(params):
    body = params.get("Body")
    if isinstance(body, dict):
        with open(body["file"], "rb") as file:
            file.seek(body.get("offset", 0))
            params["Body"] = file.read(body["length"]) if "length" in body else file.read()
    return params


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--access-key", required=True)
    parser.add_argument("--secret", required=True)
    parser.add_argument("--announce", action="store_true")
    parser.add_argument("calls")
    args = parser.parse_args()

    client = boto3.client(
        "s3",
        endpoint_url=args.endpoint,
        aws_access_key_id=args.access_key,
        aws_secret_access_key=args.secret,
        config=Config(
            region_name="us-east-1",
            # `max_attempts` counts retries (botocore makes it total + 1):
            # one attempt in all.
            retries={"total_max_attempts": 1, "mode": "standard"},
            s3={"addressing_style": "path"},
            connect_timeout=10,
            read_timeout=120,
        ),
    )
    if args.announce:

        def announce(**kwargs):
            emit({"sending": kwargs.get("event_name", "").rsplit(".", 1)[-1]})

        client.meta.events.register("before-send.s3", announce)

    for operation, params in json.loads(args.calls):
        started = time.monotonic()
        try:
            result = getattr(client, operation)(**body_of(params))
            emit({"ok": jsonable(result), "seconds": time.monotonic() - started})
        except botocore.exceptions.ClientError as error:
            response = error.response
            emit(
                {
                    "error": response.get("Error", {}).get("Code", ""),
                    "message": response.get("Error", {}).get("Message", ""),
                    "status": response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0),
                    "seconds": time.monotonic() - started,
                }
            )
        except Exception as error:  # the connection cut, a body that never ended
            emit(
                {
                    "error": "transport",
                    "status": 0,
                    "message": f"{type(error).__name__}: {error}",
                    "seconds": time.monotonic() - started,
                }
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
