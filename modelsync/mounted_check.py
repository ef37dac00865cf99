"""Predictor gate: wait until the mounted model prefix holds a complete, published revision.

Standard library only: it runs as an init container from the serving image (which has
python3), reading the prefix that Mountpoint mounts read-only. No AWS access needed.
Run as `python3 -c "$(cat mounted_check.py)" --dir /models --revision <sha> ...`.
"""

import argparse
import json
import os
import sys
import time

MANIFEST_NAME = "_MANIFEST.json"


def problems(model_dir, model_id, revision):
    """Why the directory is not yet a servable copy of model_id@revision; empty when it is."""
    path = os.path.join(model_dir, MANIFEST_NAME)
    try:
        with open(path, "rb") as handle:
            doc = json.load(handle)
    except FileNotFoundError:
        return [f"{path} does not exist yet (the model-sync Job has not published this revision)"]
    except (OSError, ValueError) as err:
        return [f"{path} is unreadable: {err}"]
    if not isinstance(doc, dict) or doc.get("schemaVersion") != 1 or not isinstance(doc.get("files"), list):
        return [f"{path} is not a schemaVersion 1 manifest"]
    if doc.get("revision") != revision:
        return [f"{path} is for revision {doc.get('revision')!r}, the predictor pins {revision!r}"]
    if model_id and doc.get("modelId") != model_id:
        return [f"{path} is for model {doc.get('modelId')!r}, the predictor pins {model_id!r}"]
    found = []
    for entry in doc["files"]:
        name, size = entry.get("path"), entry.get("size")
        file_path = os.path.join(model_dir, name) if isinstance(name, str) else None
        try:
            actual = os.stat(file_path).st_size if file_path else None
        except OSError:
            actual = None
        if actual is None:
            found.append(f"{name!r} is listed in the manifest but missing")
        elif actual != size:
            found.append(f"{name!r} has {actual} bytes, the manifest says {size}")
    return found


def main(argv=None):
    parser = argparse.ArgumentParser(prog="check-mounted", description=__doc__.splitlines()[0])
    parser.add_argument("--dir", required=True, help="the mounted model prefix")
    parser.add_argument("--revision", required=True, help="the 40-hex commit the predictor serves")
    parser.add_argument("--model-id", default="", help="the Hugging Face id the predictor serves")
    parser.add_argument("--timeout-seconds", type=float, default=0, help="keep waiting this long for the sync Job")
    parser.add_argument("--interval-seconds", type=float, default=10)
    args = parser.parse_args(argv)
    deadline = time.monotonic() + args.timeout_seconds
    while True:
        found = problems(args.dir, args.model_id, args.revision)
        if not found:
            print(f"model at {args.dir} is complete for revision {args.revision}", flush=True)
            return 0
        if time.monotonic() >= deadline:
            shown = "; ".join(found[:5]) + (f"; and {len(found) - 5} more" if len(found) > 5 else "")
            print(
                f"refusing to serve a partial model after {args.timeout_seconds:.0f}s: {shown}",
                file=sys.stderr,
                flush=True,
            )
            return 1
        print(f"waiting for the model at {args.dir}: {found[0]}", flush=True)
        time.sleep(min(args.interval_seconds, max(0.0, deadline - time.monotonic())))


if __name__ == "__main__":
    sys.exit(main())
