#!/usr/bin/env python3
"""The shipped Prometheus alert rules and Grafana dashboard (contrib/):

- `promtool check rules` and `promtool test rules` on contrib/prometheus;
- every Grafana panel query is valid PromQL (checked by promtool as a recording rule, with the
  dashboard's variables replaced by what Grafana would put there);
- every rawpipe_* metric the rules or the dashboard name is one the exporter writes
  (pipeline/ops/prometheus.cc), so a renamed metric cannot leave a silent panel or a dead alert.

Usage: monitoring_test.py SOURCE_ROOT. Exit 77 (skipped) when promtool is not installed.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def run(args, cwd=None):
    r = subprocess.run(args, capture_output=True, text=True, cwd=cwd)
    if r.returncode != 0:
        fail(f"{' '.join(args)} exited {r.returncode}:\n{r.stdout}{r.stderr}")
    return r.stdout


def main():
    root = sys.argv[1]
    promtool = shutil.which("promtool")
    if not promtool:
        print("SKIP: promtool is not installed (Debian package prometheus)")
        return 77
    prom_dir = os.path.join(root, "contrib", "prometheus")
    rules = os.path.join(prom_dir, "rawpipe-alerts.yml")
    run([promtool, "check", "rules", rules])
    run([promtool, "test", "rules", "rawpipe-alerts.test.yml"], cwd=prom_dir)

    with open(os.path.join(root, "contrib", "grafana", "rawpipe-dashboard.json")) as f:
        dash = json.load(f)
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    if len(exprs) < 10:
        fail(f"the dashboard has only {len(exprs)} queries")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "dashboard-queries.yml")
        with open(path, "w") as f:
            f.write("groups:\n  - name: dashboard\n    rules:\n")
            for i, e in enumerate(exprs):
                e = e.replace("$__rate_interval", "1m").replace("$instance", ".*")
                f.write(f"      - record: dashboard_query_{i}\n        expr: {json.dumps(e)}\n")
        run([promtool, "check", "rules", path])

    with open(os.path.join(root, "pipeline", "ops", "prometheus.cc")) as f:
        exported = set(re.findall(r'"(rawpipe_[a-z0-9_]+)"', f.read()))
    summaries = {n for n in exported if n.endswith("_seconds")}
    exported |= {n + s for n in summaries for s in ("_sum", "_count")}
    with open(rules) as f:
        named = set(re.findall(r"\b(rawpipe_[a-z0-9_]+)\b", f.read()))
    for e in exprs:
        named |= set(re.findall(r"\b(rawpipe_[a-z0-9_]+)\b", e))
    unknown = sorted(named - exported)
    if unknown:
        fail(f"rules or dashboard use metrics the exporter does not write: {unknown}")
    print(f"monitoring: rules checked and tested, {len(exprs)} dashboard queries valid, "
          f"{len(named)} metric names all exported")
    return 0


if __name__ == "__main__":
    sys.exit(main())
