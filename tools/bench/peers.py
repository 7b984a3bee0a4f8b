"""The programs rawpipe is compared with, and rawpipe's own programs, driven one sample at a time.

Every function here returns one measured figure or raises NotRun with a reason a reader can act on.
"""

import json
import os
import re
import shutil
import subprocess
import tempfile
import time


class NotRun(Exception):
    """A figure that could not be measured, with the reason."""


# Every DPDK process in the harness: no hugepages needed, no shared files, no telemetry socket,
# no PCI scan, so it runs on any Linux box and never collides with another DPDK process.
TESTPMD_EAL = ["--no-huge", "-m", "256", "--no-shconf", "--no-telemetry", "--no-pci", "--log-level=*:error"]


def testpmd_lcores(cores, fwd_cpus=None):
    """EAL lcore map: forwarding lcores on the CPUs rawpipe's lcores get (by default the last
    CPUs), the main lcore (idle in the command line) on a CPU without a forwarding lcore if any."""
    ncpu = os.cpu_count() or 1
    fwd = list(fwd_cpus) if fwd_cpus else [(ncpu - 1 - i) % ncpu for i in range(cores)]
    free = [c for c in range(ncpu) if c not in fwd]
    main = free[0] if free else 0
    parts = [f"0@{main}"] + [f"{i + 1}@{cpu}" for i, cpu in enumerate(fwd)]
    return ",".join(parts)


class Testpmd:
    """One dpdk-testpmd process in interactive mode. Forwarding runs only while measure() runs, so
    the process can stay up between the A and B samples without taking a core from the other side."""

    def __init__(self, vdev, cores=1, mbufs=8192, burst=32, fwd_cpus=None):
        exe = shutil.which("dpdk-testpmd")
        if not exe:
            raise NotRun("dpdk-testpmd is not installed (Debian package dpdk)")
        # testpmd prints with stdio; line buffering makes its answers arrive while it runs.
        prefix = ["stdbuf", "-oL"] if shutil.which("stdbuf") else []
        self.cmdline = prefix + [exe] + TESTPMD_EAL + ["--lcores", testpmd_lcores(cores, fwd_cpus), "--vdev", vdev, "--",
                                              "-i", f"--nb-cores={cores}", f"--rxq={cores}", f"--txq={cores}",
                                              f"--total-num-mbufs={mbufs}", f"--burst={burst}",
                                              "--forward-mode=rxonly"]
        self.log = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(self.cmdline, stdin=subprocess.PIPE, stdout=self.log,
                                     stderr=subprocess.STDOUT, text=True)
        self._wait_for("testpmd>", 30)

    def command_line(self):
        return " ".join(self.cmdline)

    def _output(self):
        self.log.seek(0)
        return self.log.read()

    def _wait_for(self, text, timeout, start=0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            out = self._output()
            if text in out[start:]:
                return out
            if self.proc.poll() is not None:
                raise NotRun(f"dpdk-testpmd exited: {out[-600:].strip()}")
            time.sleep(0.05)
        raise NotRun(f"dpdk-testpmd did not answer within {timeout}s: {self._output()[-600:].strip()}")

    def _send(self, cmd):
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()

    def measure(self, mode, seconds, warmup=0.3):
        """Forwards in `mode` (rxonly, 5tswap, ...) for warmup + seconds; returns received Mpps over
        the measured interval as testpmd computes it (TSC-timed, between two 'show port stats')."""
        self._send(f"set fwd {mode}")
        self._send("start")
        time.sleep(warmup)
        mark = len(self._output())
        self._send("show port stats all")
        self._wait_for("Rx-pps", 10, mark)
        time.sleep(seconds)
        mark = len(self._output())
        self._send("show port stats all")
        out = self._wait_for("Tx-bps", 10, mark)
        self._send("stop")
        self._wait_for("Done.", 10, mark)
        values = [int(v) for v in re.findall(r"Rx-pps:\s+(\d+)", out[mark:])]
        if not values:
            raise NotRun("could not read Rx-pps from dpdk-testpmd")
        return sum(values) / 1e6  # one line per port

    def rss_mib(self):
        return rss_mib(self.proc.pid)

    def close(self):
        if self.proc.poll() is None:
            try:
                self._send("quit")
                self.proc.wait(timeout=15)
            except Exception:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def rss_mib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def find_number(obj, keys):
    """The first numeric value under one of `keys`, searching nested dicts breadth first."""
    queue = [obj]
    while queue:
        cur = queue.pop(0)
        if isinstance(cur, dict):
            for k in keys:
                v = cur.get(k)
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    return float(v)
            queue.extend(v for v in cur.values() if isinstance(v, (dict, list)))
        elif isinstance(cur, list):
            queue.extend(v for v in cur if isinstance(v, (dict, list)))
    return None


class Rawpipe:
    """`rawpipe run CONFIG --duration S --json FILE` (the app of issue 2)."""

    def __init__(self, exe):
        if not exe:
            raise NotRun("apps/rawpipe/rawpipe is not built yet (the rawpipe app, issue 2, has not landed)")
        self.exe = exe

    def command_line(self, config, seconds):
        return f"{self.exe} run {config} --duration {seconds} --json OUT.json"

    def run(self, config, seconds, sample_rss=False):
        """Returns (Mpps, json, rss samples) of one run."""
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "run.json")
            cmd = [self.exe, "run", config, "--duration", str(seconds), "--json", out]
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            rss = []
            if sample_rss:
                t0 = time.monotonic()
                while proc.poll() is None:
                    v = rss_mib(proc.pid)
                    if v is not None:
                        rss.append((time.monotonic() - t0, v))
                    time.sleep(0.1)
            text, _ = proc.communicate(timeout=seconds + 120)
            if proc.returncode != 0:
                raise NotRun(f"rawpipe run {os.path.basename(config)} failed (exit {proc.returncode}): "
                             f"{text.strip()[-500:]}")
            try:
                with open(out) as f:
                    data = json.load(f)
            except (OSError, ValueError) as e:
                raise NotRun(f"rawpipe run wrote no readable JSON ({e})")
        mpps = find_number(data, ["rx_mpps", "mpps", "Mpps", "delivered_mpps"])
        if mpps is None:
            pps = find_number(data, ["rx_pps", "pps"])
            mpps = pps / 1e6 if pps is not None else None
        if mpps is None:
            raise NotRun("rawpipe's JSON has no rx_mpps/mpps/rx_pps figure")
        return mpps, data, rss


class GoogleBenchmark:
    """A Google Benchmark program, one filter per sample."""

    def __init__(self, exe, what):
        if not exe or not os.path.exists(exe):
            raise NotRun(f"{what} is not built")
        self.exe = exe

    def run(self, name_regex, seconds, cpu=None):
        cmd = [self.exe, f"--benchmark_filter={name_regex}", f"--benchmark_min_time={seconds}",
               "--benchmark_format=json"]
        if cpu is not None and shutil.which("taskset"):
            cmd = ["taskset", "-c", str(cpu)] + cmd
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            raise NotRun(f"{os.path.basename(self.exe)} failed: {proc.stderr.strip()[-400:]}")
        try:
            data = json.loads(proc.stdout)
        except ValueError:
            raise NotRun(f"{os.path.basename(self.exe)} printed no JSON")
        return data.get("benchmarks", [])

    def items_mpps(self, name, seconds, cpu=None):
        # UseRealTime() adds "/real_time" to the registered name.
        for b in self.run("^" + re.escape(name) + "(/real_time)?$", seconds, cpu):
            if b.get("error_occurred"):
                raise NotRun(f"{name}: {b.get('error_message')}")
            if "items_per_second" in b:
                return b["items_per_second"] / 1e6
        raise NotRun(f"{name}: no items_per_second in the output")
