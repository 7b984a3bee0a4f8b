#!/usr/bin/env python3
"""CI check of the benchmark harness: runs `tools/bench/run --quick` against an existing build and
checks what it wrote. It asserts no speed: only that every scenario 1..10 produced rows, that every
row was measured, with a rawpipe figure and its peer's figure (a row with no peer by design says
so), that each row names the work of both sides, that every Google Benchmark filter a row's
reproduce command gives selects at least one benchmark of the program it runs (a filter that selects
none makes the program say so and exit 0, measuring nothing), that the ring row quotes the plain
hand-over of tools/bench/ring_bound and the net_pcap row the same work on DPDK's own mbufs
(tools/bench/plain-pcap-loop), that the veth receive rows give, for both sides, the generator's
offered rate over each receiver's window and veth's drops, and rawpipe's counted losses, and that
the JSON, the Markdown table and the plots it lists exist. A row that was not measured fails the
check with the row's reason.

Needs root (scenarios 4 and 5 build network namespaces): without it the check is skipped (exit 77)."""

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def filters_selecting_nothing(rows):
    """'ROW: PROGRAM --benchmark_filter=REGEX ...' for each reproduce command whose filter selects no
    benchmark of that program (paths in reproduce commands are relative to the source tree), and how
    many filters were looked at."""
    bad, checked = [], 0
    for r in rows:
        for m in re.finditer(r"(\S+) --benchmark_filter='([^']*)'", r.get("reproduce", "")):
            exe, regex = m.group(1), m.group(2)
            checked += 1
            path = exe if os.path.isabs(exe) else os.path.join(ROOT, exe)
            if not os.access(path, os.X_OK):
                bad.append(f"{r.get('id')}: {exe} is not an executable")
                continue
            listed = subprocess.run([path, "--benchmark_list_tests", f"--benchmark_filter={regex}"],
                                    capture_output=True, text=True, timeout=120)
            if listed.returncode != 0 or not listed.stdout.strip():
                bad.append(f"{r.get('id')}: {exe} --benchmark_filter='{regex}' selects no benchmark "
                           f"({(listed.stderr or listed.stdout).strip()[-200:]})")
    return bad, checked


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
        # Two target rows quote what their work reaches without rawpipe: a plain ring between the
        # same CPUs (tools/bench/ring_bound), the net_pcap work on DPDK's own mbufs (dpdk_parse_loop).
        for rid, phrase in (("10.ring-vs-sink", "a plain hand-over on these CPUs"),
                            ("10.pcap-vs-testpmd", "the same work on DPDK's own mbufs")):
            note = next((r.get("note", "") for r in rows if r.get("id") == rid), "")
            if phrase not in note:
                fail(f"row {rid}'s note lacks \"{phrase}\": " + (note[-400:] or "(no note)"))
        # The veth receive rows quote, for both sides, what the generator offered during each run's
        # timed window, what veth dropped in it and what the receiver lost; rawpipe's own ports
        # always count their losses.
        for r in rows:
            if r.get("scenario") != 4 or r.get("status") != "measured":
                continue
            note = r.get("note", "")
            sides = note.split(" received/offered Mpps per run over the receiver's timed window ")
            if len(sides) != 3 or any("dropped by the veth" not in side for side in sides[1:]):
                fail(f"row {r.get('id')}'s note lacks the offered rate or veth's drops of both sides: {note[-400:]}")
            rawpipe_side = sides[1]
            if "lost per run (" not in rawpipe_side or re.search(r"not counted|unreadable", rawpipe_side):
                fail(f"row {r.get('id')}'s note lacks rawpipe's counted losses: {rawpipe_side[:400]}")
        bad_filters, filters_checked = filters_selecting_nothing(rows)
        if bad_filters:
            fail("reproduce commands that would measure nothing:\n  " + "\n  ".join(bad_filters))
        if proc.returncode != 0:
            fail(f"tools/bench/run exited {proc.returncode} with every row measured: {proc.stderr[-2000:]}")
        for p in result.get("plots", []):
            if not os.path.getsize(os.path.join(out, p)):
                fail(f"plot {p} is empty")
        measured = sum(1 for r in rows if r["status"] == "measured")
        print(f"OK: {len(rows)} rows, {measured} measured, {len(rows) - measured} not run with reasons; "
              f"{filters_checked} benchmark filters of reproduce commands select benchmarks")


if __name__ == "__main__":
    main()
