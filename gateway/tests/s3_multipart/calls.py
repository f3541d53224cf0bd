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

The client, and the outcomes as JSON, are tests/s3_system/s3call.py's.
"""

import argparse
import json
import sys
import time
from pathlib import Path

import botocore

# The client and the outcomes as JSON, shared with s3_system.rs's one call a run.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "s3_system"))
from s3call import client_error, jsonable, make_client  # noqa: E402 - found through the line above


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

    client = make_client(args.endpoint, args.access_key, args.secret)
    if args.announce:

        def announce(**kwargs):
            emit({"sending": kwargs.get("event_name", "").rsplit(".", 1)[-1]})

        client.meta.events.register("before-send.s3", announce)

    for operation, params in json.loads(args.calls):
        started = time.monotonic()
        try:
            result = getattr(client, operation)(**body_of(params))
            emit({"ok": jsonable(result, head_size=0), "seconds": time.monotonic() - started})
        except botocore.exceptions.ClientError as error:
            emit({**client_error(error), "seconds": time.monotonic() - started})
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
