"""Statistics, the Markdown table and the gnuplot plots of tools/bench/run."""

import json
import os
import shutil
import statistics
import subprocess


def summarize(samples):
    """Median and spread of a list of numbers (None when empty)."""
    if not samples:
        return None
    med = statistics.median(samples)
    lo, hi = min(samples), max(samples)
    return {
        "median": med,
        "min": lo,
        "max": hi,
        # Half the range relative to the median: "+-x%" in the table.
        "spread_pct": (hi - lo) / 2 / med * 100 if med else 0.0,
        "samples": samples,
    }


def fmt_number(v, unit):
    """One figure at the table's precision for its unit."""
    if unit == "Mpps":
        return f"{v:.2f}"
    if unit in ("us", "ns/pkt", "MiB"):
        return f"{v:.1f}"
    return f"{v:.3g}"


def fmt_value(s, unit):
    if s is None:
        return "-"
    text = fmt_number(s["median"], unit)
    if len(s["samples"]) > 1:
        text += f" ±{s['spread_pct']:.0f}%"
    return text


def runs_text(s, unit):
    """Every sample of a side, at the table's precision."""
    return " ".join(fmt_number(v, unit) for v in s["samples"])


def fewer_runs_text(result):
    """The scenarios whose rows have fewer runs than the repetitions the header states."""
    reps = result.get("repetitions")
    fewer = []
    for r in result["rows"]:
        counts = [len(r[side]["samples"]) for side in ("rawpipe", "peer") if r.get(side)]
        if counts and min(counts) < (reps or 0) and r["scenario"] not in fewer:
            fewer.append(r["scenario"])
    if not fewer:
        return ""
    names = ", ".join(str(x) for x in fewer)
    return f" (fewer in row{'s' if len(fewer) > 1 else ''} {names}: see each row's runs below the table)"


def list_section(out, heading, lines):
    """Appends a heading and its list, with the blank lines Markdown wants, when there are lines."""
    if lines:
        out.extend(["", heading, ""] + lines)


def note_line(r):
    """A row's note as one list item, or its reason when it was not run; None without either."""
    text = r.get("reason") if r["status"] == "not run" else r.get("note")
    # A peer's own output quoted in a reason may span lines; one list item keeps one line.
    text = " ".join(text.split()) if text else text
    if r["status"] == "not run":
        return f"- {r['id']}: not run: {text}"
    return f"- {r['id']}: {text}" if text else None


def ratio_text(row):
    r = row.get("ratio")
    return "-" if r is None else f"{r:.2f}"


def markdown(result):
    m = result["machine"]
    out = []
    cpu_id = f" ({m['cpu_id']})" if m.get("cpu_id") else ""
    out.append(f"Measured {result['finished_utc']} on {m['cpu_model']}{cpu_id}, {m['cpus']} CPUs online, "
               f"Linux {m['kernel']}, {m['memory_gib']:.0f} GiB RAM, virtualization {m.get('virtualization', 'unknown')}, "
               f"DPDK {m['dpdk_version']} on {m.get('dpdk_memory', 'unrecorded memory')}, "
               f"rawpipe {m['git_commit']}{' (quick mode)' if result['quick'] else ''}; "
               f"{result['repetitions']} repetition(s) per figure in A B A B order{fewer_runs_text(result)}, "
               f"{result['sample_seconds']} s per sample. Load average at start: {m['loadavg']}"
               f"{', at end: ' + m['loadavg_end'] if m.get('loadavg_end') else ''}.")
    out.append("")
    out.append("Figures are medians; ±x% is half the min-max range over the repetitions. "
               "ratio = rawpipe / peer (above 1 is better for rates, below 1 is better for latency, "
               "time per packet and memory).")
    out.append("")
    out.append("Each row names the work each side does per packet: compare ratios only where the work matches. "
               "busy CPUs = CPU time of every thread of the process (lcores, consumer, helpers) over the window; "
               "per-CPU ratio = (rawpipe figure / its busy CPUs) / (peer figure / its busy CPUs).")
    out.append("")
    out.append("| # | scenario | rawpipe | rawpipe work | peer | peer work | unit | rawpipe figure | peer figure "
               "| ratio | busy CPUs rawpipe / peer | per-CPU ratio |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for row in result["rows"]:
        def fig(side):
            if row[side] is not None:
                return fmt_value(row[side], row["unit"])
            if side == "peer" and not row.get("needs_peer", True):
                return "no peer"
            return "not measured"

        cpus = "-"
        if row.get("rawpipe_cpus") or row.get("peer_cpus"):
            cpus = " / ".join(f"{row[k]['median']:.2f}" if row.get(k) else "-" for k in ("rawpipe_cpus", "peer_cpus"))
        per_cpu = "-" if row.get("ratio_per_cpu") is None else f"{row['ratio_per_cpu']:.2f}"
        out.append(f"| {row['id']} | {row['title']} | {row['rawpipe_label']} | {row.get('rawpipe_work', '')} | "
                   f"{row['peer_label']} | {row.get('peer_work', '')} | {row['unit']} | {fig('rawpipe')} | "
                   f"{fig('peer')} | {ratio_text(row)} | {cpus} | {per_cpu} |")
    reps, secs = result.get("repetitions"), result.get("sample_seconds")
    list_section(out, "Each row's command, run from the source tree. `tools/bench/run --only N` regenerates every "
                      "row of scenario N, with the configs it writes and both sides interleaved; the command "
                      "beside it is what that run executes for the row (`build-bench` is what `tools/bench/run` "
                      "builds):",
                 [f"- {r['id']}: `tools/bench/run --only {r['scenario']} --reps {reps} --seconds {secs} "
                  f"--out DIR`; inside: `{r['reproduce']}`" for r in result["rows"] if r.get("reproduce")])
    list_section(out, "Every run's figure, in the order they ran (the table gives their medians):",
                 [f"- {r['id']}: " + "; ".join(f"{side} {runs_text(r[side], r['unit'])}"
                                               for side in ("rawpipe", "peer") if r.get(side))
                  for r in result["rows"] if r.get("rawpipe") or r.get("peer")])
    list_section(out, "Notes:", [line for r in result["rows"] if (line := note_line(r))])
    out.append("")
    return "\n".join(out)


def _gnuplot(script, cwd):
    if not shutil.which("gnuplot"):
        return False
    proc = subprocess.run(["gnuplot"], input=script, text=True, cwd=cwd, capture_output=True)
    return proc.returncode == 0


def plots(result, out_dir):
    """Writes PNGs for the rows that have data; returns the file names written."""
    written = []
    rows = [r for r in result["rows"] if r["status"] == "measured"]

    # Throughput: rawpipe next to its peer for every Mpps row.
    mpps = [r for r in rows if r["unit"] == "Mpps" and r["rawpipe"] and r["peer"]]
    if mpps:
        dat = os.path.join(out_dir, "throughput.dat")
        with open(dat, "w") as f:
            for r in mpps:
                f.write(f"\"{r['id']}\" {r['rawpipe']['median']:.4f} {r['rawpipe']['min']:.4f} "
                        f"{r['rawpipe']['max']:.4f} {r['peer']['median']:.4f} {r['peer']['min']:.4f} "
                        f"{r['peer']['max']:.4f}\n")
        script = f"""
set terminal pngcairo size 1100,520 noenhanced
set output 'throughput.png'
set title 'Throughput, rawpipe and its peer in the same run (median, min-max bars)'
set ylabel 'Mpps'
set style data histograms
set style histogram errorbars gap 2 lw 1
set style fill solid 0.8 border -1
set xtics rotate by -35
set key top right
set grid ytics
set yrange [0:*]
plot 'throughput.dat' using 2:3:4:xtic(1) title 'rawpipe', '' using 5:6:7 title 'peer'
"""
        if _gnuplot(script, out_dir):
            written.append("throughput.png")

    # Frame sizes (scenario 2): Mpps by size for each series.
    size_rows = [r for r in rows if r.get("series") and r.get("frame_size")]
    if size_rows:
        series = {}
        for r in size_rows:
            for side in ("rawpipe", "peer"):
                if r[side]:
                    name = f"{r[side + '_label']} ({r['series']})"
                    series.setdefault(name, []).append((r["frame_size"], r[side]["median"]))
        dat = os.path.join(out_dir, "sizes.dat")
        names = sorted(series)
        with open(dat, "w") as f:
            for name in names:
                f.write(f"# {name}\n")
                for size, v in sorted(series[name]):
                    f.write(f"{size} {v:.4f}\n")
                f.write("\n\n")
        plot_parts = [f"'sizes.dat' index {i} using 1:2 with linespoints title '{n}'" for i, n in enumerate(names)]
        script = f"""
set terminal pngcairo size 1000,520 noenhanced
set output 'sizes.png'
set title 'Frame size and lcores (scenario 2)'
set xlabel 'frame size (bytes)'
set ylabel 'Mpps'
set logscale x 2
set grid
set key below
set xrange [48:2048]
set yrange [0:*]
plot {', '.join(plot_parts)}
"""
        if _gnuplot(script, out_dir):
            written.append("sizes.png")

    # Latency percentiles, log scale (the tails are milliseconds when the medians are
    # microseconds): without load (scenario 5) and under the generator's load (scenario 9), one
    # plot each so that neither set of bars crowds out the other.
    for scenario, name, title in (
            (5, "latency", "Round-trip latency percentiles without load: rawpipe echo and the kernel peer, same client"),
            (9, "latency-load", "Round trips at 10/50/90% of the lower NDR of each pair, the same load from rawpipe gen on both sides")):
        lat = [r for r in rows if r.get("scenario") == scenario and r["unit"] == "us" and r["rawpipe"] and r["peer"]]
        if not lat:
            continue
        with open(os.path.join(out_dir, f"{name}.dat"), "w") as f:
            for r in lat:
                label = r["id"].split(".", 1)[1]
                if scenario == 9:
                    label = label.removeprefix("latency-")
                f.write(f"\"{label}\" {r['rawpipe']['median']:.3f} {r['peer']['median']:.3f}\n")
        script = f"""
set terminal pngcairo size 1400,640 noenhanced
set output '{name}.png'
set title '{title} (lower is better)'
set rmargin 10
set ylabel 'microseconds (log scale)'
set logscale y
set style data histograms
set style fill solid 0.8 border -1
set xtics rotate by -35
set grid ytics
plot '{name}.dat' using 2:xtic(1) title 'rawpipe', '' using 3 title 'peer'
"""
        if _gnuplot(script, out_dir):
            written.append(f"{name}.png")

    # Lcore scaling (scenario 2): rate against lcores for each frame size, rawpipe and testpmd.
    scaling = {}
    for r in rows:
        if r.get("scenario") == 2 and r.get("frame_size") and r.get("series") and not r["id"].endswith(".w"):
            cores = int(str(r["series"]).split()[0])
            for side in ("rawpipe", "peer"):
                if r[side]:
                    scaling.setdefault((side, r["frame_size"]), {})[cores] = r[side]["median"]
    if any(len(v) > 1 for v in scaling.values()):
        keys = sorted(k for k, v in scaling.items() if len(v) > 1)
        with open(os.path.join(out_dir, "lcores.dat"), "w") as f:
            for side, size in keys:
                f.write(f"# {side} {size}\n")
                for cores, v in sorted(scaling[(side, size)].items()):
                    f.write(f"{cores} {v:.4f}\n")
                f.write("\n\n")
        parts = [f"'lcores.dat' index {i} using 1:2 with linespoints title '{'rawpipe sink' if side == 'rawpipe' else 'testpmd rxonly'} {size} B'"
                 for i, (side, size) in enumerate(keys)]
        script = f"""
set terminal pngcairo size 900,520 noenhanced
set output 'lcores.png'
set title 'Lcore scaling (scenario 2): receive-only on 1 and 2 cores'
set xlabel 'lcores (forwarding cores)'
set ylabel 'Mpps'
set xtics 1
set xrange [0.8:*]
set yrange [0:*]
set grid
set key below
plot {', '.join(parts)}
"""
        if _gnuplot(script, out_dir):
            written.append("lcores.png")

    # NDR and PDR per port type (scenario 9).
    # The rates only: scenario 9 also has latency rows (us) under load.
    ndr = [r for r in rows if r.get("scenario") == 9 and r["unit"] == "Mpps" and r["rawpipe"] and r["peer"]]
    if ndr:
        with open(os.path.join(out_dir, "ndr.dat"), "w") as f:
            for r in ndr:
                f.write(f"\"{r['id'].replace('9.', '', 1)}\" {r['rawpipe']['median']:.4f} {r['peer']['median']:.4f}\n")
        script = """
set terminal pngcairo size 1000,520 noenhanced
set output 'ndr.png'
set title 'Zero-loss (NDR) and 0.5%-loss (PDR) rate across veth, same generator: rawpipe port and its peer'
set offset 0,0,graph 0.1,0
set ylabel 'Mpps offered'
set style data histograms
set style fill solid 0.8 border -1
set xtics rotate by -25
set grid ytics
set yrange [0:*]
plot 'ndr.dat' using 2:xtic(1) title 'rawpipe', '' using 3 title 'peer (testpmd / kernel socket)'
"""
        if _gnuplot(script, out_dir):
            written.append("ndr.png")
    return written


def write_json(result, path):
    with open(path, "w") as f:
        json.dump(result, f, indent=2, sort_keys=False)
        f.write("\n")
