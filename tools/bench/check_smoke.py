#!/usr/bin/env python3
"""CI check of the benchmark harness: runs `tools/bench/run --quick` against an existing build and
checks what it wrote. It asserts no speed: only that every scenario 1..10 produced rows, that every
row was measured, with a rawpipe figure and its peer's figure (a row with no peer by design says
so), that each row names the work of both sides, and that the JSON, the Markdown table and the
plots it lists exist. A row that was not measured fails the check with the row's reason.

Needs root (scenarios 4 and 5 build network namespaces): without it the check is skipped (exit 77)."""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def main():
    if os.geteuid() != 0:
        print("SKIP: scenarios 4, 5 and 9 need root (network namespaces, veth); every row must be measured")
        sys.exit(77)
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", required=True)
    ap.add_argument("--build-dir", required=True)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as out:
        proc = subprocess.run([sys.executable, args.run, "--quick", "--no-build", "--build-dir", args.build_dir,
                               "--out", out], capture_output=True, text=True, timeout=900)
        print(proc.stdout[-6000:])
        # 1 is run's "some rows not measured": the checks below name each row and its reason.
        if proc.returncode not in (0, 1):
            fail(f"tools/bench/run exited {proc.returncode}: {proc.stderr[-2000:]}")
        json_path = os.path.join(out, "bench.json")
        md_path = os.path.join(out, "bench.md")
        if not os.path.exists(json_path) or not os.path.exists(md_path):
            fail("bench.json or bench.md missing")
        with open(json_path) as f:
            result = json.load(f)
        with open(md_path) as f:
            md = f.read()
        for key in ("cpu_model", "cpus", "kernel"):
            if not result.get("machine", {}).get(key):
                fail(f"machine.{key} not recorded")
        rows = result.get("rows", [])
        seen = {r.get("scenario") for r in rows}
        missing = [n for n in range(1, 11) if n not in seen]
        if missing:
            fail(f"scenarios without any row: {missing}")
        unmeasured = []
        for r in rows:
            rid = r.get("id")
            for key in ("rawpipe_work", "peer_work"):
                if not r.get(key) or r.get(key) == "-":
                    fail(f"row {rid} does not name {key.replace('_', ' ')}")
            if r.get("status") == "measured":
                if not r.get("rawpipe"):
                    fail(f"row {rid} says measured but has no rawpipe figure")
                if r.get("needs_peer", True) and not r.get("peer"):
                    fail(f"row {rid} says measured but has no peer figure")
                for s in (r.get("rawpipe"), r.get("peer")):
                    if s and not (isinstance(s.get("median"), (int, float)) and math.isfinite(s["median"])
                                  and s["median"] >= 0):
                        fail(f"row {rid} has a bad median {s.get('median')}")
            elif r.get("status") == "not run":
                if not r.get("reason"):
                    fail(f"row {rid} is not run and gives no reason")
                unmeasured.append(f"{rid}: {r['reason']}")
            else:
                fail(f"row {rid} has status {r.get('status')!r}")
            if f"| {rid} |" not in md:
                fail(f"row {rid} is missing from bench.md")
        if unmeasured:
            fail(f"{len(unmeasured)} of {len(rows)} rows not measured:\n  " + "\n  ".join(unmeasured))
        if proc.returncode != 0:
            fail(f"tools/bench/run exited {proc.returncode} with every row measured: {proc.stderr[-2000:]}")
        for p in result.get("plots", []):
            if not os.path.getsize(os.path.join(out, p)):
                fail(f"plot {p} is empty")
        measured = sum(1 for r in rows if r["status"] == "measured")
        print(f"OK: {len(rows)} rows, {measured} measured, {len(rows) - measured} not run with reasons")


if __name__ == "__main__":
    main()
