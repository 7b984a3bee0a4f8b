"""The programs rawpipe is compared with, and rawpipe's own programs, driven one sample at a time.

Every function here returns one measured figure or raises NotRun with a reason a reader can act on.
"""

import contextlib
import ctypes
import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time

CLONE_NEWNET = 0x40000000  # setns(2): the descriptor names a network namespace


class NotRun(Exception):
    """A figure that could not be measured, with the reason."""


class Sample(float):
    """One figure (a float) and the CPU its side burnt for it: `cpus` is the sum over every thread
    of the process (lcores, consumer, main, helpers) of its CPU time in the window divided by the
    window, i.e. how many CPUs the side kept busy; `threads` names each thread that was busy."""

    def __new__(cls, value, cpus=None, threads=None, extra=None):
        obj = super().__new__(cls, value)
        obj.cpus = cpus
        obj.threads = threads or {}
        obj.extra = extra or {}
        return obj


TICKS = os.sysconf("SC_CLK_TCK")
BUSY_SHARE = 0.05  # a thread under 5% of a CPU in the window is waiting, not working


def task_ticks(pid):
    """{tid: (name, utime + stime in clock ticks)} for every thread of `pid` (empty once it exited)."""
    out = {}
    base = f"/proc/{pid}/task"
    try:
        tids = os.listdir(base)
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"{base}/{tid}/stat") as f:
                text = f.read()
        except OSError:
            continue  # the thread ended between listdir and open
        name = text[text.index("(") + 1:text.rindex(")")]
        fields = text.rsplit(")", 1)[1].split()
        out[tid] = (name, int(fields[11]) + int(fields[12]))
    return out


def cpu_between(a, b, seconds):
    """(busy CPUs, {thread name: share of a CPU}) from two task_ticks() readings `seconds` apart.
    Every thread counts, so a side with a busy consumer thread beside its lcore shows two CPUs; a
    thread that ended in the window counts with its last reading."""
    if seconds <= 0:
        return None, {}
    shares = {}
    total = 0
    for tid, (name, ticks) in b.items():
        d = ticks - a.get(tid, (name, 0))[1]
        total += d
        share = d / TICKS / seconds
        if share >= BUSY_SHARE:
            key = name if name not in shares else f"{name}[{tid}]"
            shares[key] = round(share, 3)
    return total / TICKS / seconds, shares


class ChildLog:
    """A child's stdout and stderr in a file that the harness reads while the child writes. The child
    writes through its own open file description (O_APPEND): handing it the reader's would share one
    file offset, and every seek(0) before a read would put the child's next write over earlier
    output, tearing or burying the answer being waited for."""

    def __init__(self, path=None):
        self.owned = path is None
        if path is None:
            fd, path = tempfile.mkstemp(prefix="rawpipe-bench-", suffix=".log")
            os.close(fd)
        self.path = path
        self.writer = open(path, "a")

    def text(self):
        with open(self.path, errors="replace") as f:
            return f.read()

    def close(self):
        self.writer.close()
        if self.owned:
            try:
                os.unlink(self.path)
            except OSError:
                pass


# Huge pages for every DPDK process of one harness run, decided once (dpdk_memory()).
_huge = {"decided": False, "dir": None, "why": "", "pages": 0}
# What one run reserves when it may: testpmd's largest pool (1.2 M mbufs, about 3 GiB) and
# rawpipe's beside it, which takes huge pages too once they are reserved (huge_pages = "auto").
HUGE_RESERVE_PAGES = 4096


def _meminfo(key):
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _hugetlbfs_mount():
    try:
        with open("/proc/mounts") as f:
            for line in f:
                fields = line.split()
                if len(fields) > 3 and fields[2] == "hugetlbfs" and "pagesize=1G" not in fields[3]:
                    return fields[1]
    except OSError:
        pass
    return None


NR_HUGEPAGES = "/proc/sys/vm/nr_hugepages"


def _process_start(pid):
    """When a process started (field 22 of /proc/PID/stat), or None when there is no such process:
    with the pid it names one process even after the pid is used again."""
    try:
        with open(f"/proc/{int(pid)}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError, TypeError, ValueError):
        return None


def _ledger_path(pid):
    return os.path.join(tempfile.gettempdir(), f"rawpipe-bench-huge.{pid}.owner")


def _write_ledger(added, mount):
    """What this harness reserved and mounted, for the next one to give back if this one is
    killed before its exit handlers run (SIGKILL)."""
    with open(_ledger_path(os.getpid()), "w") as f:
        json.dump({"pid": os.getpid(), "start": _process_start(os.getpid()), "added": added, "mount": mount}, f)


def _reclaim_abandoned():
    """Gives back the pages and the hugetlbfs mount of every harness whose ledger outlived it."""
    import sys
    for ledger in glob.glob(_ledger_path("*")):
        try:
            with open(ledger) as f:
                left = json.load(f)
        except (OSError, ValueError):
            continue
        if left.get("start") is not None and _process_start(left.get("pid")) == left.get("start"):
            continue  # that harness is still running
        mount = left.get("mount")
        if mount and os.path.ismount(mount):
            subprocess.run(["umount", mount], capture_output=True)
        if mount and os.path.isdir(mount) and not os.path.ismount(mount):
            try:
                os.rmdir(mount)
            except OSError:
                pass
        added = int(left.get("added") or 0)
        if added:
            try:
                with open(NR_HUGEPAGES) as f:
                    now = int(f.read())
                with open(NR_HUGEPAGES, "w") as f:
                    f.write(str(max(0, now - added)))
            except (OSError, ValueError):
                pass
        os.unlink(ledger)
        print(f"tools/bench: gave back {added} huge pages" + (f" and the mount {mount}" if mount else "")
              + f" left by harness {left.get('pid')}, which ended without its exit handlers", file=sys.stderr)


def _decide_huge_pages():
    """Huge pages as a DPDK deployment has them: a hugetlbfs mount with free 2 MiB pages, reserved
    and mounted here (and given back at exit) when this process is root and finds too few."""
    _huge["decided"] = True
    if os.geteuid() == 0:
        _reclaim_abandoned()
    mount = _hugetlbfs_mount()
    if os.geteuid() != 0:
        if mount and _meminfo("HugePages_Free") > 0:
            _huge["dir"] = mount
            _huge["pages"] = _meminfo("HugePages_Total")
        else:
            _huge["why"] = "not root, and no hugetlbfs mount with free 2 MiB pages"
        return
    import atexit
    import signal
    import sys
    # The pages and the mount are given back by exit handlers, which a plain SIGTERM skips.
    if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    with open(NR_HUGEPAGES) as f:
        before = int(f.read())
    free = _meminfo("HugePages_Free")
    # Never more than a third of what the machine has free: the rest of it must go on working.
    want = min(HUGE_RESERVE_PAGES, _meminfo("MemAvailable") // 2048 // 3)
    added = 0
    # Registered first, so it runs last: the ledger goes once everything it names is given back.
    atexit.register(lambda: os.path.exists(_ledger_path(os.getpid())) and os.unlink(_ledger_path(os.getpid())))
    if free < want:
        try:
            with open(NR_HUGEPAGES, "w") as f:
                f.write(str(before + want - free))
        except OSError as e:
            _huge["why"] = f"could not reserve 2 MiB pages: {e}"
            return
        added = want - free
        _write_ledger(added, None)

        def give_back():
            with open(NR_HUGEPAGES, "w") as f:
                f.write(str(before))
        atexit.register(give_back)
    if _meminfo("HugePages_Free") == 0:
        _huge["why"] = "the kernel gave no 2 MiB pages"
        return
    if mount is None:
        mount = tempfile.mkdtemp(prefix="rawpipe-bench-huge.")
        _write_ledger(added, mount)
        done = subprocess.run(["mount", "-t", "hugetlbfs", "-o", "pagesize=2M", "nodev", mount],
                              capture_output=True, text=True)
        if done.returncode != 0:
            os.rmdir(mount)
            _huge["why"] = f"could not mount hugetlbfs: {done.stderr.strip()}"
            return

        def unmount():
            subprocess.run(["umount", mount], capture_output=True)
            os.rmdir(mount)
        # Registered after give_back, so it runs first: the pages return once nothing maps them.
        atexit.register(unmount)
    _huge["dir"] = mount
    _huge["pages"] = _meminfo("HugePages_Total")


def use_4k_pages(why):
    """Every DPDK process of this harness gets --no-huge, for the reason given, instead of huge
    pages; for a run under a tool that cannot map them (valgrind)."""
    _huge.update(decided=True, dir=None, why=why, pages=0)


def dpdk_memory(mib, mib_without_huge=None):
    """EAL memory options: `mib` MiB on huge pages whenever the machine has them or this process
    may reserve them; with --no-huge every mbuf sits in a 4 KiB page of its own, and testpmd rxonly
    ran 2-4x slower for it on a virtual machine (docs/BENCHMARKS.md), which made every ratio
    against it flatter rawpipe. Otherwise --no-huge with `mib_without_huge` (default `mib`) MiB,
    and huge_pages_note() says why."""
    if not _huge["decided"]:
        _decide_huge_pages()
    if _huge["dir"] and _meminfo("HugePages_Free") * 2048 >= mib * 1024:
        # In memory: no hugepage files, whose names two processes of one prefix would share
        # (testpmd stays up while a rawpipe with a dpdk port runs beside it).
        return ["--huge-dir", _huge["dir"], "--in-memory", "-m", str(mib)]
    return ["--no-huge", "-m", str(mib_without_huge or mib)]


def huge_pages_note():
    """How the DPDK processes of this run get their memory, for the record of the machine."""
    if not _huge["decided"]:
        _decide_huge_pages()
    if _huge["dir"]:
        return f"2 MiB huge pages ({_huge['dir']}; {_huge['pages']} reserved when the run began)"
    return f"4 KiB pages (--no-huge): {_huge['why']}"


# What every DPDK process of the harness runs with besides its memory: no shared files, no
# telemetry socket, no PCI scan (so it never collides with another DPDK process), errors only.
EAL_ISOLATED = ["--no-shconf", "--no-telemetry", "--no-pci", "--log-level=*:error"]


def toml_array(strings):
    """A TOML array of strings (a JSON string is a TOML basic string)."""
    return "[" + ", ".join(json.dumps(s) for s in strings) + "]"


def eal_toml(mib=256):
    """eal_args for a rawpipe dpdk port, as a TOML array, with the memory the peers get."""
    return toml_array(dpdk_memory(mib) + EAL_ISOLATED)


def testpmd_memory(mbufs=8192):
    """EAL memory of a peer: 256 MiB, or enough for `mbufs` mbufs when the peer is given a pool as
    large as rawpipe's; without huge pages the mempool keeps each object inside one 4 KiB page, so
    a 2176-byte default mbuf takes a whole page."""
    packed = max(256, (mbufs * 2560 >> 20) + 256)
    page_each = max(256, (mbufs * 4096 >> 20) + 128)
    return dpdk_memory(packed, page_each)


def testpmd_eal(mbufs=8192):
    """EAL options of every DPDK peer: testpmd_memory() and EAL_ISOLATED."""
    return testpmd_memory(mbufs) + EAL_ISOLATED


def testpmd_lcores(cores, fwd_cpus=None):
    """EAL lcore map: forwarding lcores on the CPUs rawpipe's lcores get (by default the last
    CPUs), the main lcore (idle in the command line) on a CPU without a forwarding lcore if any."""
    ncpu = os.cpu_count() or 1
    fwd = list(fwd_cpus) if fwd_cpus else [(ncpu - 1 - i) % ncpu for i in range(cores)]
    free = [c for c in range(ncpu) if c not in fwd]
    main = free[0] if free else 0
    parts = [f"0@{main}"] + [f"{i + 1}@{cpu}" for i, cpu in enumerate(fwd)]
    return ",".join(parts)


# testpmd's AF_XDP port on one veth queue, with preferred busy polling off as rawpipe's af_xdp port
# has it by default. net_af_xdp turns it on unless told (busy_budget=64: a recvfrom on every empty
# poll), and on this kernel's veth that only costs: the socket never learns a NAPI id, so the busy
# poll runs nothing (docs/BENCHMARKS.md, "The peers in rawpipe's port modes").
def af_xdp_vdev(iface):
    return f"net_af_xdp0,iface={iface},start_queue=0,queue_count=1,busy_budget=0"


AF_XDP_PEER_MODE = "busy polling off (busy_budget=0), as rawpipe's port"


# testpmd's AF_PACKET port with its transmit through the qdisc, as rawpipe's af_packet port sends
# by default; net_af_packet bypasses it unless told (qdisc_bypass=1), which changes what an echo
# pays per reply. Receive is the same either way.
def af_packet_vdev(iface):
    return f"net_af_packet0,iface={iface},qdisc_bypass=0"


AF_PACKET_PEER_MODE = "TPACKET_V2, transmit through the qdisc (qdisc_bypass=0), as rawpipe's port"

# What a DPDK 22.11 driver counts in RX-missed (imissed), read in its source. net_af_xdp adds the
# socket's rx_dropped (no fill-ring buffer) but not rx_ring_full, which the kernel reports apart in
# the xdp_statistics it reads. net_af_packet sets none (None): its RX-missed reads 0 whatever its
# ring dropped, and the installed library imports no getsockopt to read PACKET_STATISTICS with.
RX_MISSED_COUNTS = {
    "net_af_xdp": "rx_missed: the socket's rx_dropped, its rx_ring_full not counted",
    "net_af_packet": None,
}


def rx_missed_meaning(vdev):
    """What testpmd's RX-missed counts for this --vdev's driver, or None when the driver counts no
    receive loss (a 0 there would then be false)."""
    driver = re.sub(r"\d+$", "", vdev.split(",")[0])
    return RX_MISSED_COUNTS.get(driver, "rx_missed")


class Testpmd:
    """One dpdk-testpmd process in interactive mode. Forwarding runs only while measure() runs, so
    the process can stay up between the A and B samples without taking a core from the other side."""

    def __init__(self, vdev, cores=1, mbufs=8192, burst=32, fwd_cpus=None, extra=()):
        exe = shutil.which("dpdk-testpmd")
        if not exe:
            raise NotRun("dpdk-testpmd is not installed (Debian package dpdk)")
        # testpmd prints with stdio; line buffering makes its answers arrive while it runs.
        prefix = ["stdbuf", "-oL"] if shutil.which("stdbuf") else []
        self.vdev = vdev
        self.cmdline = prefix + [exe] + testpmd_eal(mbufs) + ["--lcores", testpmd_lcores(cores, fwd_cpus), "--vdev", vdev, "--",
                                              "-i", f"--nb-cores={cores}", f"--rxq={cores}", f"--txq={cores}",
                                              f"--total-num-mbufs={mbufs}", f"--burst={burst}",
                                              "--forward-mode=rxonly"] + list(extra)
        self.log = ChildLog()
        self.proc = subprocess.Popen(self.cmdline, stdin=subprocess.PIPE, stdout=self.log.writer,
                                     stderr=subprocess.STDOUT, text=True)
        self.ready = False
        try:
            self._wait_for("testpmd>", self.startup_seconds(mbufs))
            self.ready = True
        except BaseException:
            # A testpmd left starting would hold its huge pages through every later row and
            # answer nobody; its log would outlive the run.
            self.close()
            raise

    @staticmethod
    def startup_seconds(mbufs):
        """How long testpmd may take to reach its prompt. It fills every mbuf before the prompt:
        scenario 1's 1.2 million (as many as configs/bench-synth.toml's pool) took 11 s of CPU on an
        idle 2-CPU VM and went past a flat 30 s in a CI run, while 8192 take well under a second."""
        return 30 + 60 * mbufs / 1e6

    def command_line(self):
        return shlex.join(self.cmdline)

    def _output(self):
        return self.log.text()

    def _wait_for(self, text, timeout, start=0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            out = self._output()
            if text in out[start:]:
                return out
            if self.proc.poll() is not None:
                raise NotRun(f"dpdk-testpmd exited: {out[-600:].strip()}")
            time.sleep(0.05)
        raise NotRun(f"dpdk-testpmd did not answer within {timeout:.0f} s: {self._output()[-600:].strip()}")

    def _send(self, cmd):
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()

    def start(self, mode):
        """Forwards in `mode` until close(), for a peer measured from outside (a ping-pong client,
        a generator's count)."""
        self._send(f"set fwd {mode}")
        self._send("start")

    def measure(self, mode, seconds, warmup=0.3, counter="Rx-pps"):
        """Forwards in `mode` (rxonly, 5tswap, txonly, ...) for warmup + seconds; returns received
        (counter="Rx-pps") or transmitted ("Tx-pps") Mpps over the measured interval as testpmd
        computes it (TSC-timed, between two 'show port stats')."""
        # Answers may take seconds on a loaded 2-CPU host (testpmd's command line shares a CPU):
        # a generous wait, so that a slow answer is not mistaken for a missing figure.
        self.start(mode)
        time.sleep(warmup)
        asked1 = time.monotonic()
        first = self.port_stats()
        c1, t1 = task_ticks(self.proc.pid), time.monotonic()
        time.sleep(seconds)
        asked2 = time.monotonic()
        second = self.port_stats()
        c2, t2 = task_ticks(self.proc.pid), time.monotonic()
        mark = len(self._output())
        self._send("stop")
        self._wait_for("Done.", 30, mark)
        values = [int(v) for v in re.findall(counter + r":\s+(\d+)", second)]
        if not values:
            raise NotRun(f"could not read {counter} from dpdk-testpmd")
        cpus, threads = cpu_between(c1, c2, t2 - t1)
        # The frames the driver counted as missed (its kernel or NIC drops) between the two looks,
        # named by what the driver puts there; none from a driver that counts nothing there.
        meaning = rx_missed_meaning(self.vdev)
        missed = stat_total(second, "RX-missed") - stat_total(first, "RX-missed")
        extra = {"lost": {meaning: missed}} if meaning else {}
        # testpmd's rates run from one 'show port stats' to the next, each taken when its command
        # line reads the request: about when it was sent (its answer is seen up to one poll later).
        extra["window"] = (asked1, asked2)
        return Sample(sum(values) / 1e6, cpus, threads, extra)  # one line per port

    def port_stats(self, timeout=30):
        """What testpmd printed for one `show port stats all` (every port's block, up to the last
        throughput line of the first)."""
        mark = len(self._output())
        self._send("show port stats all")
        return self._wait_for("Tx-bps", timeout, mark)[mark:]

    def rss_mib(self):
        return rss_mib(self.proc.pid)

    def close(self):
        if self.proc.poll() is None:
            try:
                if not self.ready:  # still in its EAL set-up, reading no command
                    raise TimeoutError
                self._send("quit")
                self.proc.wait(timeout=15)
            except Exception:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


@contextlib.contextmanager
def in_netns(ns):
    """Runs the block inside the network namespace `ns` (as `ip netns exec` names it), so the
    programs it starts run there too; `ip netns exec` is avoided because it remounts /sys. A DPDK
    peer must start inside the namespace of its interface: its EAL threads are created in the
    namespace its process starts in. The process must be single-threaded."""
    libc = ctypes.CDLL(None, use_errno=True)
    home = os.open("/proc/self/ns/net", os.O_RDONLY)
    try:
        fd = os.open(f"/run/netns/{ns}", os.O_RDONLY)
        try:
            if libc.setns(fd, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), f"setns into network namespace {ns}")
        finally:
            os.close(fd)
        yield
    finally:
        libc.setns(home, CLONE_NEWNET)
        os.close(home)


def rss_mib(pid):
    """Memory the process holds: its resident set, and the huge pages it maps, which VmRSS leaves
    out; both sides keep their buffers on huge pages whenever the harness could reserve them."""
    kib = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("VmRSS", "HugetlbPages"):
                    kib[key] = int(value.split()[0])
    except OSError:
        pass
    if "VmRSS" not in kib:
        return None
    return (kib["VmRSS"] + kib.get("HugetlbPages", 0)) / 1024


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
    """`rawpipe run CONFIG --duration S --json FILE`."""

    def __init__(self, exe, expected=""):
        if not exe:
            raise NotRun(f"{expected or 'apps/rawpipe/rawpipe'} does not exist: build it "
                         f"(ninja -C BUILD apps/rawpipe/rawpipe) or drop --no-build")
        self.exe = exe

    def command_line(self, config, seconds):
        return f"{self.exe} run {config} --duration {seconds} --json OUT.json"

    def run(self, config, seconds, sample_rss=False):
        """Returns (Sample of received Mpps, json, rss samples) of one run. The rate is rawpipe's own:
        packets received in its measured window over that window (JSON "window"); the Sample also
        carries the delivered and dropped rates and the CPUs every thread of the process burnt while
        the lcores ran."""
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "run.json")
            cmd = [self.exe, "run", config, "--duration", str(seconds), "--json", out]
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            rss, ticks = [], []
            t0 = time.monotonic()
            # Output goes to a pipe nobody reads while it runs: the summary is short, it fits.
            while proc.poll() is None:
                now = time.monotonic()
                tt = task_ticks(proc.pid)
                if tt:
                    ticks.append((now, tt))
                if sample_rss:
                    v = rss_mib(proc.pid)
                    if v is not None:
                        rss.append((now - t0, v))
                time.sleep(0.05)
            text, _ = proc.communicate(timeout=seconds + 120)
            if proc.returncode != 0:
                raise NotRun(f"rawpipe run {os.path.basename(config)} failed (exit {proc.returncode}): "
                             f"{text.strip()[-500:]}")
            try:
                with open(out) as f:
                    data = json.load(f)
            except (OSError, ValueError) as e:
                raise NotRun(f"rawpipe run wrote no readable JSON ({e})")
        window = data.get("window")
        if not isinstance(window, dict) or not isinstance(window.get("rx_mpps"), (int, float)):
            raise NotRun("rawpipe's JSON has no window.rx_mpps (received packets over the measured window)")
        cpus, threads = lcore_window_cpu(ticks)
        extra = {k: window.get(k) for k in ("delivered_mpps", "dropped_mpps", "transmitted_mpps", "seconds")}
        extra["drops"] = {k: v for k, v in data.get("drops", {}).items() if v}
        return Sample(float(window["rx_mpps"]), cpus, threads, extra), data, rss


class RawpipeGen:
    """`rawpipe gen CONFIG --port PORT --duration S --json FILE`: the sent rate over gen's own
    window and the CPUs every thread of the process burnt while the sending thread ran."""

    def __init__(self, exe, expected=""):
        if not exe:
            raise NotRun(f"{expected or 'apps/rawpipe/rawpipe'} does not exist: build it "
                         f"(ninja -C BUILD apps/rawpipe/rawpipe) or drop --no-build")
        self.exe = exe

    def command_line(self, config, port, seconds, rate=0):
        return (f"{self.exe} gen {config} --port {port} --duration {seconds}"
                + (f" --rate {rate:.0f}" if rate else "") + " --json OUT.json")

    def run(self, config, port, seconds, rate=0, extra=(), prefix=()):
        """Returns (Sample of sent Mpps, gen's JSON)."""
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "gen.json")
            cmd = list(prefix) + [self.exe, "gen", config, "--port", port, "--duration", str(seconds),
                                  "--json", out] + (["--rate", str(rate)] if rate else []) + list(extra)
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            ticks = []
            while proc.poll() is None:
                # With a prefix (ip netns exec) the generator is a child: follow it.
                pid = proc.pid if not prefix else (child_pid(proc.pid) or proc.pid)
                tt = task_ticks(pid)
                if tt:
                    ticks.append((time.monotonic(), tt))
                time.sleep(0.05)
            text, _ = proc.communicate(timeout=seconds + 120)
            if proc.returncode != 0:
                raise NotRun(f"rawpipe gen {os.path.basename(config)} failed (exit {proc.returncode}): "
                             f"{text.strip()[-500:]}")
            try:
                with open(out) as f:
                    data = json.load(f)
            except (OSError, ValueError) as e:
                raise NotRun(f"rawpipe gen wrote no readable JSON ({e})")
        cpus, threads = thread_window_cpu(ticks, "rawpipe-gen")
        return Sample(float(data["sent_mpps"]), cpus, threads, {"refused": data.get("refused")}), data


def child_pid(pid):
    """The first child of pid (the program `ip netns exec` runs), or None."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            kids = f.read().split()
        return int(kids[0]) if kids else None
    except (OSError, ValueError):
        return None


def thread_window_cpu(ticks, prefix):
    """Busy CPUs of a process from its periodic task_ticks() readings, from the first reading in
    which a thread named prefix* exists to the last one, so setup and teardown do not dilute it."""
    live = [(t, tt) for t, tt in ticks if any(name.startswith(prefix) for name, _ in tt.values())]
    if len(live) < 3:
        return None, {}
    (ta, a), (tb, b) = live[1], live[-1]  # skip the reading that may straddle the thread's start
    return cpu_between(a, b, tb - ta)


def lcore_window_cpu(ticks):
    """Busy CPUs of a rawpipe process from its periodic task_ticks() readings: from the first
    reading where an lcore thread (rawpipe-lc*) exists to the last one in which it still runs, so
    setup and teardown do not dilute the figure."""
    def has_lcore(tt):
        return any(name.startswith("rawpipe-lc") for name, _ in tt.values())

    live = [(t, tt) for t, tt in ticks if has_lcore(tt)]
    if len(live) < 3:
        return None, {}
    (ta, a), (tb, b) = live[1], live[-1]  # skip the reading that may straddle the lcores' start
    return cpu_between(a, b, tb - ta)


def stat_total(text, name):
    """The sum over ports of one counter (RX-packets, RX-missed, ...) in `show port stats` text."""
    return sum(int(v) for v in re.findall(re.escape(name) + r":\s+(\d+)", text))


def receiver_extras(benchmark):
    """A Google Benchmark result's counters named lost_<reason> (frames lost before the receiver
    in its timed loop; -1 where the count could not be read) and its timed loop's bounds on
    CLOCK_MONOTONIC (window_start_s, window_end_s), as Sample extras: {"lost": {...}, "window":
    (start, end)}, each only when the benchmark reports it."""
    extra = {}
    lost = {k[len("lost_"):]: (None if v < 0 else int(v)) for k, v in benchmark.items()
            if k.startswith("lost_") and isinstance(v, (int, float))}
    if lost:
        extra["lost"] = lost
    if isinstance(benchmark.get("window_start_s"), (int, float)) and isinstance(benchmark.get("window_end_s"),
                                                                                 (int, float)):
        extra["window"] = (benchmark["window_start_s"], benchmark["window_end_s"])
    return extra


class GoogleBenchmark:
    """A Google Benchmark program, one filter per sample."""

    def __init__(self, exe, what, env=None):
        if not exe or not os.path.exists(exe):
            raise NotRun(f"{what} is not built")
        self.exe = exe
        self.env = dict(os.environ, **env) if env else None

    def command(self, name_regex, seconds, cpu=None):
        cmd = [self.exe, f"--benchmark_filter={name_regex}", f"--benchmark_min_time={seconds}",
               "--benchmark_format=json"]
        if cpu is not None and shutil.which("taskset"):
            cmd = ["taskset", "-c", str(cpu)] + cmd
        return cmd

    def run(self, name_regex, seconds, cpu=None):
        proc = subprocess.run(self.command(name_regex, seconds, cpu), capture_output=True, text=True, timeout=600,
                              env=self.env)
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
                # One thread: the share of a CPU it had is its CPU time over the wall time.
                cpus = b["cpu_time"] / b["real_time"] if b.get("real_time") and "cpu_time" in b else None
                return Sample(b["items_per_second"] / 1e6, cpus, {os.path.basename(self.exe): cpus} if cpus else {},
                              receiver_extras(b))
        raise NotRun(f"{name}: no items_per_second in the output")
