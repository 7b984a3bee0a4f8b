"""Interleaved runs for the tools/bench scripts that compare two programs (pcap-vs-testpmd,
ring-vs-sink): start a program, measure a window of its per-second lines once its forwarding
thread runs, and the CPU share that thread had in the window."""
import json
import os
import re
import shlex
import shutil
import signal
import sys
import statistics
import subprocess
import tempfile
import threading
import time
import tomllib

TICKS = os.sysconf("SC_CLK_TCK")


class RunFailed(Exception):
    """A run that gave no figure, with what the program printed."""


def thread_id(pid, prefix):
    """The id of the first thread of pid whose name starts with prefix; None when there is none."""
    base = f"/proc/{pid}/task"
    try:
        tids = os.listdir(base)
    except OSError:
        return None
    for tid in tids:
        try:
            with open(f"{base}/{tid}/comm") as f:
                if f.read().strip().startswith(prefix):
                    return tid
        except OSError:
            continue
    return None


def thread_file(pid, prefix, name):
    """The text of /proc/PID/task/TID/<name> for the first thread of pid whose name starts with
    prefix; None when there is no such thread (or it went away)."""
    tid = thread_id(pid, prefix)
    if tid is None:
        return None
    try:
        with open(f"/proc/{pid}/task/{tid}/{name}") as f:
            return f.read()
    except OSError:
        return None


def profile_thread(pid, prefix, seconds, path):
    """Samples the thread of pid whose name starts with prefix for `seconds` with perf (timer
    samples: a virtual machine may have no hardware counters) into `path`; returns what perf said
    when it failed, None when it did not. Takes `seconds` either way, so that a failed profile
    leaves the measured window as it would have been."""
    start = time.monotonic()
    tid = thread_id(pid, prefix)
    error = None
    if tid is None:
        error = f"no thread named {prefix}* to profile"
    else:
        # perf itself runs on the CPUs the sampled thread may not use, where there are any, so that
        # only the sampling interrupts land on the measured CPU.
        try:
            others = set(os.sched_getaffinity(0)) - set(os.sched_getaffinity(int(tid)))
        except OSError:
            others = set()
        done = subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-F", "999", "-t", tid, "-o", path, "--",
                               "sleep", str(seconds)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              preexec_fn=(lambda: os.sched_setaffinity(0, others)) if others else None)
        if done.returncode != 0:
            error = f"perf record failed (exit {done.returncode}): {done.stdout[-500:]}"
    time.sleep(max(0.0, seconds - (time.monotonic() - start)))
    return error


def profile_shares(path, sort):
    """{key: share of the samples} from a perf.data file, `sort` being perf report's key (dso, sym)."""
    out = subprocess.run(["perf", "report", "-i", path, "--no-children", "--stdio", "-q", "--sort", sort],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
    shares = {}
    for line in out.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+(.*\S)", line)
        if m:
            shares[m.group(2)] = shares.get(m.group(2), 0.0) + float(m.group(1)) / 100
    return shares


def time_group(dso):
    """Where a sample's library puts it in a profile's split by library."""
    if dso.startswith("librte_net_pcap"):
        return "net_pcap"
    if dso.startswith("librte_"):
        return "DPDK, other libraries"
    if dso.startswith("dpdk-testpmd"):
        return "testpmd"
    if dso.startswith("librawpipe") or dso == "rawpipe":
        return "rawpipe"
    if dso.startswith("libc.") or dso.startswith("ld-linux"):
        return "libc, loader"
    if dso.startswith("[kernel"):
        return "kernel"
    return "other"


def split_per_packet(profile, mpps):
    """ns per packet by time_group, and by rawpipe function, of one run profiled through run_window
    (each share of the samples times the run's time per packet); None, and a line saying why, when
    perf gave nothing."""
    if profile.get("error"):
        print(f"  profile: {profile['error']}", flush=True)
        return None
    if mpps <= 0:
        return None  # nothing received: the caller's medians say so
    ns = 1e3 / mpps
    groups = {}
    functions = {}
    # One report by library and symbol gives both splits: a library's share is its symbols' sum.
    for key, share in profile_shares(profile["path"], "dso,sym").items():
        parts = key.split(None, 2)  # dso, [.], symbol
        group = time_group(parts[0])
        groups[group] = groups.get(group, 0.0) + share * ns
        if len(parts) == 3 and group == "rawpipe":
            functions[parts[2]] = functions.get(parts[2], 0.0) + share * ns
    if not groups:
        print("  profile: perf recorded no samples", flush=True)
        return None
    return {"ns_per_packet": ns, "groups": groups, "rawpipe_functions": functions}


def require_perf(tool):
    """Exits naming the package when perf, which --profile needs, is not installed."""
    if not shutil.which("perf"):
        sys.exit(f"{tool}: --profile needs perf; install Debian's linux-perf package (tools/packages.txt)")


def listed(values, n=None, sign=""):
    """'key value, ...' of a {key: ns per packet} split, largest first, the first n (all for None),
    leaving out values that round to zero; sign="+" prints differences."""
    ordered = sorted(values.items(), key=lambda kv: -kv[1])[:n]
    return ", ".join(f"{k} {v:{sign}.2f}" for k, v in ordered if abs(v) >= 0.01)


def median_split(splits, field):
    """{key: median over the splits} of one field of split_per_packet's results (a key missing
    from a run counts as 0 there)."""
    keys = {k for s in splits for k in s[field]}
    return {k: statistics.median(s[field].get(k, 0.0) for s in splits) for k in keys}


def stat_ticks(stat):
    """utime + stime (clock ticks) from the text of a /proc stat file; None for None."""
    if stat is None:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def thread_ticks(pid, prefix):
    """utime + stime (clock ticks) of the first thread of pid whose name starts with prefix."""
    return stat_ticks(thread_file(pid, prefix, "stat"))


def process_ticks(pid):
    """utime + stime (clock ticks) of every thread of pid, live ones and those that ended."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return stat_ticks(f.read())
    except OSError:
        return None


def thread_waited_ns(pid, prefix):
    """Nanoseconds the first thread of pid whose name starts with prefix spent runnable but not
    running (the second field of /proc/PID/task/TID/schedstat): the time other tasks on its CPU
    took from it. Time the hypervisor takes is not in it."""
    schedstat = thread_file(pid, prefix, "schedstat")
    try:
        return int(schedstat.split()[1]) if schedstat is not None else None
    except (IndexError, ValueError):
        return None


def run_window(cmd, thread, warm, seconds, others=(), waited=None, process=None, profile=None):
    """Starts cmd, waits until `thread` has begun to run, lets it run warm + seconds, stops it with
    SIGINT. Returns (the output lines that arrived inside the window, all output, exit code, CPU
    share of the thread over the window, {name: CPU share} of the `others` threads). A dict passed
    as `waited` receives, per `others` thread, its milliseconds per second runnable but not
    running over the window (thread_waited_ns); one passed as `process` receives "busy_cpus", the
    CPU time of every thread of the process over the window in CPUs. A dict passed as `profile`,
    holding "path", has `thread` sampled by perf over the window into that file, and receives
    "error" when that failed."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    lines = []  # (arrival time, line): each per-second rate line is judged by when it came

    def reader():
        for line in proc.stdout:
            lines.append((time.monotonic(), line))

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    # Setup (EAL, pools, reading the pcap) can take long on a loaded machine: the window starts
    # once the forwarding thread has used CPU time, plus the warm-up.
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None and not thread_ticks(proc.pid, thread):
        time.sleep(0.02)
    time.sleep(warm)
    t1, c1 = time.monotonic(), thread_ticks(proc.pid, thread)
    p1 = process_ticks(proc.pid)
    o1 = {name: thread_ticks(proc.pid, name) for name in others}
    w1 = {name: thread_waited_ns(proc.pid, name) for name in others}
    if profile is not None:
        profile["error"] = profile_thread(proc.pid, thread, seconds, profile["path"])
    else:
        time.sleep(seconds)
    t2, c2 = time.monotonic(), thread_ticks(proc.pid, thread)
    p2 = process_ticks(proc.pid)
    o2 = {name: thread_ticks(proc.pid, name) for name in others}
    w2 = {name: thread_waited_ns(proc.pid, name) for name in others}
    if process is not None:
        process["busy_cpus"] = (p2 - p1) / TICKS / (t2 - t1) if p1 is not None and p2 is not None else None
    if waited is not None:
        for name in others:
            waited[name] = ((w2[name] - w1[name]) / 1e6 / (t2 - t1)
                            if w1[name] is not None and w2[name] is not None else None)
    # The line that covers the window's last second arrives up to a second later.
    time.sleep(1.0)
    t3 = time.monotonic()
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    t.join(timeout=10)
    share = (c2 - c1) / TICKS / (t2 - t1) if c1 is not None and c2 is not None else None
    other_shares = {name: (o2[name] - o1[name]) / TICKS / (t2 - t1)
                    if o1[name] is not None and o2[name] is not None else None for name in others}
    # A line arriving in (t1 + 1, t3] reports a second that lies inside [t1, t2 + 1].
    inside = [line for when, line in lines if t1 + 1.0 < when <= min(t3, t2 + 1.0)]
    return inside, "".join(line for _, line in lines), proc.returncode, share, other_shares


def rawpipe_run(exe, config, warm, seconds, threads=(), waited=None, process=None, profile=None):
    """Runs `rawpipe run config` for a window; returns (the pipeline's mean receive rate in Mpps over
    the window, lcore0's CPU share, the command,
    the JSON summary, {thread: CPU share} for `threads`). `waited`, `process` and `profile` (of
    lcore0) as in run_window."""
    with tempfile.TemporaryDirectory() as tmp:
        out_json = os.path.join(tmp, "summary.json")
        cmd = [exe, "run", config, "--json", out_json]
        inside, out, rc, share, other_shares = run_window(cmd, "rawpipe-lc0", warm, seconds, threads, waited,
                                                          process, profile)
        if rc != 0 or not os.path.exists(out_json):
            raise RunFailed(f"rawpipe failed (exit {rc}):\n{out[-3000:]}")
        with open(out_json) as f:
            summary = json.load(f)
    # Live lines "[    3.0s] pps rx 12.41M  delivered ...", one per second (apps/rawpipe/live_line.hh).
    samples = []
    for line in inside:
        m = re.search(r"\] pps rx ([\d.]+)([kMG]?)\s", line)
        if m:
            samples.append(float(m.group(1)) * {"G": 1e3, "M": 1.0, "k": 1e-3, "": 1e-6}[m.group(2)])
    if not samples:
        raise RunFailed(f"no rx rate lines from rawpipe in the window:\n{out[-2000:]}")
    return statistics.mean(samples), share, shlex.join(cmd) + "  (stopped with SIGINT)", summary, other_shares


def median_or_none(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def sink_variant(text, tool):
    """The config with every ring endpoint turned into a sink (ring_size only applies to rings)."""
    out, n = re.subn(r'(?m)^(\s*action\s*=\s*)"ring"', r'\1"sink"', text)
    if n == 0:
        sys.exit(f"{tool}: the config has no endpoint with action = \"ring\"")
    return re.sub(r"(?m)^\s*ring_size\s*=.*$", "", out)


def cpu_pair(text):
    """A config's first lcore CPU and its consumer CPU; None when either is not pinned."""
    conf = tomllib.loads(text)
    lcores = conf.get("lcores") or []
    consumer = (conf.get("run") or {}).get("consumer_cpu")
    lcore = lcores[0].get("cpu") if lcores else None
    if not isinstance(lcore, int) or not isinstance(consumer, int) or lcore < 0 or consumer < 0:
        return None
    return (lcore, consumer)


def probe(exe, pair):
    """The pair's cache-line round trip in ns (tools/bench/cpu_pingpong, about 20 ms)."""
    proc = subprocess.run([exe, "--cpus", f"{pair[0]},{pair[1]}", "--rounds", "3", "--trips", "50000"],
                          capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        sys.exit(f"{os.path.basename(sys.argv[0])}: {exe} failed: {proc.stderr.strip()}")
    return json.loads(proc.stdout)["median_ns"]


def near_limit(round_trips):
    """(limit, far) when the [before, after] probes of the runs fall in two placements: runs whose
    probes are all <= limit ns stayed near, `far` is the lowest far probe. (None, None) when they
    do not. Two placements show as two groups with a gap between them: the split is at the widest
    step of the sorted probes when it at least triples the distance (the benchmark VM's pair also
    reads 43-50 ns at times, against 100-120 for most near runs; that is not the far placement)."""
    probes = sorted(v for p in round_trips for v in p)
    step = max(range(len(probes) - 1), key=lambda i: probes[i + 1] / probes[i], default=None)
    if step is None or probes[step + 1] < 3 * probes[step]:
        return None, None
    return probes[step], probes[step + 1]
