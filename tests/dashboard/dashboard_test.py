#!/usr/bin/env python3
"""The live dashboard in a real browser: headless Chromium loads the page a running pipeline
serves, and every figure the page shows must equal the Prometheus series of the very snapshot
the page drew (GET /metrics?snapshot=N). Also: the chart library loaded and drew, the page made
no request but to the pipeline, and a screenshot is kept in the build directory.

Usage: dashboard_test.py RAWPIPE OUTDIR. Exit 77 (skipped) when chromium is not installed.
"""
import html.parser
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

CONFIG = """
[run]
duration = 150
[metrics]
listen = "127.0.0.1:0"
latency_sample = 8
stats_segment = false
[[pools]]
name = "rx"
count = 4096
[[ports]]
name = "gen"
pmd = "synth"
rate_pps = 20000
dst_port = 9000
dst_ports = 4
[[endpoints]]
name = "app"
action = "ring"
match = ["udp dst *:9000", "udp dst *:9001"]
[[endpoints]]
name = "count"
action = "sink"
match = ["udp dst *:9002"]
[[lcores]]
rx = ["gen:0"]
[[filters]]
path = "rawpipe_prefix_drop"
endpoint = "count"
config = { prefix_hex = "2a2b" }
"""

# No request may leave the host: names resolve to nothing, background services are off.
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
    "--no-default-browser-check", "--disable-background-networking", "--disable-component-update",
    "--disable-domain-reliability", "--disable-sync", "--disable-default-apps", "--no-pings",
    "--disable-breakpad", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
    "--disable-features=MediaRouter,OptimizationHints,Translate,DialMediaRouteProvider",
]


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


class Figures(html.parser.HTMLParser):
    """Collects the elements carrying data-metric/data-labels, #snapshot, #notice and canvases."""

    def __init__(self):
        super().__init__()
        self.figures = []  # (metric, labels, text)
        self.open = []  # stack of [tag, figure-or-None, id, text]
        self.snapshot = None
        self.notice = ""
        self.canvases = {}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "canvas":
            self.canvases[a.get("id")] = a
        fig = (a["data-metric"], json.loads(a["data-labels"])) if "data-metric" in a else None
        if tag not in ("br", "img", "meta", "input", "canvas"):
            self.open.append([tag, fig, a.get("id"), ""])

    def handle_endtag(self, tag):
        while self.open:
            t, fig, ident, text = self.open.pop()
            if self.open:
                self.open[-1][3] += text
            if fig:
                self.figures.append((fig[0], fig[1], text.strip()))
            if ident == "snapshot":
                self.snapshot = int(text)
            if ident == "notice":
                self.notice = text.strip()
            if t == tag:
                break

    def handle_data(self, data):
        if self.open:
            self.open[-1][3] += data


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_prometheus(text):
    series = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        if not m:
            fail(f"unparsable sample line {line!r}")
        labels = {k: re.sub(r'\\(.)', lambda c: "\n" if c.group(1) == "n" else c.group(1), v)
                  for k, v in LABEL.findall(m.group(2) or "")}
        series[(m.group(1), frozenset(labels.items()))] = m.group(3)
    return series


def get(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode()


def main():
    rawpipe, outdir = sys.argv[1], sys.argv[2]
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        print("SKIP: chromium is not installed (Debian package chromium)")
        return 77
    work = tempfile.mkdtemp(prefix="rawpipe-dashboard-")
    proc = None
    try:
        config = os.path.join(work, "dashboard.toml")
        with open(config, "w") as f:
            f.write(CONFIG)
        proc = subprocess.Popen([rawpipe, "run", config], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        out, base = [], None
        deadline = time.monotonic() + 20
        while base is None and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            out.append(line)
            # After the log line's timestamp (apps/rawpipe/log.hh).
            m = re.search(r"\bmetrics: (http://[0-9.]+:[0-9]+)/metrics", line)
            if m:
                base = m.group(1)
        if base is None:
            fail("rawpipe did not announce its metrics address:\n" + "".join(out))
        # Keep draining rawpipe's output so its live lines never block it.
        import threading
        threading.Thread(target=lambda: out.extend(proc.stdout), daemon=True).start()

        # One browser run: let the page poll a few times in virtual time, then dump and shoot.
        os.makedirs(outdir, exist_ok=True)
        shot = os.path.join(outdir, "dashboard.png")
        if os.path.exists(shot):
            os.remove(shot)
        env = dict(os.environ, HOME=work, XDG_CONFIG_HOME=work, XDG_CACHE_HOME=work)
        dom, browser_err = "", ""
        # Headless Chromium now and then never exits after its work on a loaded machine: such a
        # run (no DOM at all) is killed with all its processes and tried once more. A DOM that
        # disagrees with /metrics is never retried.
        for attempt in (1, 2):
            browser = subprocess.Popen(
                [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={work}/profile{attempt}", "--window-size=1400,1800",
                 "--virtual-time-budget=3500", f"--screenshot={shot}", "--dump-dom", base + "/"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
            try:
                dom, browser_err = browser.communicate(timeout=45)
                break
            except subprocess.TimeoutExpired:
                os.killpg(browser.pid, signal.SIGKILL)
                browser.communicate()
                print(f"chromium did not finish within 45 s (attempt {attempt})", file=sys.stderr)
        else:
            fail("chromium did not finish twice")
        with open(os.path.join(outdir, "dashboard.html"), "w") as f:
            f.write(dom)
        if not dom.strip():
            fail(f"chromium returned no DOM (exit {browser.returncode}):\n{browser_err[-2000:]}")

        page = Figures()
        page.feed(dom)
        if page.snapshot is None:
            fail("the page shows no snapshot number: it never rendered /metrics.json")
        if page.snapshot < 2:
            fail(f"the page polled only once (snapshot {page.snapshot}); rates need two")
        if page.notice:
            fail(f"the page says: {page.notice}")
        for chart in ("c_ports", "c_lcores", "c_endpoints", "c_pools", "c_stages", "c_filters"):
            if "width" not in page.canvases.get(chart, {}):
                fail(f"chart {chart} was not drawn (no canvas size set by Chart.js)")

        text = get(f"{base}/metrics?snapshot={page.snapshot}")
        series = parse_prometheus(text)
        checked, metrics = 0, set()
        for metric, labels, shown in page.figures:
            key = (metric, frozenset(labels.items()))
            if key not in series:
                fail(f"the page shows {metric}{labels} = {shown}, which /metrics?snapshot={page.snapshot} lacks")
            if float(shown) != float(series[key]):
                fail(f"{metric}{labels}: the page shows {shown}, /metrics?snapshot={page.snapshot} says {series[key]}")
            checked += 1
            metrics.add(metric)
        needed = {"rawpipe_lcore_rx_packets_total", "rawpipe_lcore_delivered_packets_total",
                  "rawpipe_endpoint_delivered_packets_total", "rawpipe_port_rx_packets_total",
                  "rawpipe_lcore_dropped_packets_total", "rawpipe_pool_buffers_outstanding",
                  "rawpipe_filter_packets_total", "rawpipe_filter_verdicts_total"}
        if needed - metrics:
            fail(f"the page shows no figure of {sorted(needed - metrics)}")
        rx = float(series[("rawpipe_lcore_rx_packets_total", frozenset({("lcore", "0")}))])
        if rx <= 0:
            fail("no packet received: the figures compared are all zero")
        # A fresh scrape has moved on: the equality above is of one moment, not of a stopped run.
        fresh = parse_prometheus(get(f"{base}/metrics"))
        if float(fresh[("rawpipe_lcore_rx_packets_total", frozenset({("lcore", "0")}))]) <= rx:
            fail("the counters did not move after the page's snapshot; the test would not see a stale page")

        if not os.path.exists(shot) or os.path.getsize(shot) < 20000:
            fail(f"no screenshot at {shot} (chromium: {browser_err[-1000:]})")
        with open(shot, "rb") as f:
            if f.read(8) != b"\x89PNG\r\n\x1a\n":
                fail(f"{shot} is not a PNG")
        print(f"dashboard: {checked} figures of {len(metrics)} metrics equal /metrics?snapshot={page.snapshot}; "
              f"screenshot {shot}")

        proc.send_signal(signal.SIGINT)
        rc = proc.wait(timeout=20)
        if rc != 0:
            fail(f"rawpipe exited {rc}:\n" + "".join(out[-30:]))
        proc = None
        return 0
    finally:
        if proc is not None:
            proc.kill()
            proc.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
