#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Draws uvtw-bench's output as an SVG chart, with Debian's gnuplot.

    bench/plot.py BENCH_OUTPUT [--date D] [--machine M] [--commit C] > out.svg

BENCH_OUTPUT ("-" for stdin) holds uvtw-bench's stdout: one key=value line
per scenario and size (bench/README.md).  Lines "# key: value" before them
(as bench/chart.sh writes) give the caption's date, machine, commit and
load; the options override them, and without either the caption says what
this machine and checkout are now.  Six panels, both axes log scale: ns
per operation against the number of timers for insert, churn and rpc (one
y range for the three), CPU ns per expiry for expire-seq and expire-rand
(one y range for the two), uvtw beside uv_timer_t, each baseline point
labelled with the ratio (baseline / uvtw); and the speed-up (the ratio)
against the number of timers, one line per scenario, with a line at 1x:
above it uvtw is faster.  Points are medians, whiskers the runs' min and
max (the *_min and *_max keys; without them, no whisker).  A white
background, so that the chart reads on a dark page too.  Exit 1 if a
scenario is missing or a line cannot be read, 2 on a usage error.
"""

import argparse
import datetime
import math
import os
import re
import shutil
import subprocess
import sys

# (scenario, panel title, y axis label, group), one panel each.  Every
# panel has the series "uvtw" and "uv_timer_t", in this order; the test
# (bench/test-plot.py) checks them by these names.  Panels of one group
# share their y range, so that they compare at a glance.
PANELS = [
    ("insert", "insert: start N timers", "ns per start", "ns"),
    ("churn", "churn: re-arm a random timer", "ns per re-arm", "ns"),
    ("rpc", "rpc: stop a deadline, start one", "ns per stop + start", "ns"),
    ("expire-seq", "expire-seq: N expire, in order", "CPU ns per expiry",
     "cpu"),
    ("expire-rand", "expire-rand: N expire, scattered", "CPU ns per expiry",
     "cpu"),
]
SERIES = ["uvtw", "uv_timer_t"]
# The last panel: the ratio of every scenario against N.
SPEEDUP_TITLE = "speed-up: uv_timer_t time / uvtw time"
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"]


def parse(lines):
    """Returns (meta, cells): meta from the "# key: value" lines, cells as
    {scenario: {n: cell}}, a cell a dict with uvtw, base, ratio (medians),
    their _min and _max, and runs."""
    meta = {}
    cells = {}
    for number, line in enumerate(lines, 1):
        line = line.strip()
        if not line:
            continue
        m = re.match(r"#\s*([^:]+):\s*(.*)$", line)
        if m:
            meta[m.group(1).strip()] = m.group(2).strip()
            continue
        if line.startswith("#"):
            continue
        kv = dict(f.split("=", 1) for f in line.split() if "=" in f)
        if "scenario" not in kv or "n" not in kv:
            raise ValueError("line %d: not a uvtw-bench line" % number)
        uvtw_keys = [k for k in kv if k.startswith("uvtw_")]
        if not uvtw_keys:
            raise ValueError("line %d: no uvtw_<unit> key" % number)
        unit = uvtw_keys[0][len("uvtw_"):]
        cell = {
            "uvtw": float(kv["uvtw_" + unit]),
            "base": float(kv["base_" + unit]),
            "ratio": float(kv["ratio"]),
            "runs": int(kv.get("runs", 0)),
        }
        for side, key in (("uvtw", "uvtw_" + unit), ("base", "base_" + unit),
                          ("ratio", "ratio")):
            for end in ("min", "max"):
                cell[side + "_" + end] = float(
                    kv.get(key + "_" + end, cell[side]))
        cells.setdefault(kv["scenario"], {})[int(kv["n"])] = cell
    return meta, cells


def decades(values):
    """The smallest range of whole decades that holds every value."""
    lo = min(v for v in values if v > 0)
    hi = max(values)
    return (10 ** math.floor(math.log10(lo)),
            10 ** math.ceil(math.log10(hi) - 1e-9))


def machine_now():
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return "%d CPUs, %s" % (os.cpu_count() or 0, cpu)


def commit_now():
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        out = subprocess.run(["git", "-C", here, "describe", "--always",
                              "--dirty"], capture_output=True, text=True)
        return out.stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def quote(s):
    """A gnuplot string literal (double quotes, noenhanced text)."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def fmt_n(n):
    if n >= 1000000 and n % 1000000 == 0:
        return "%dM" % (n // 1000000)
    if n >= 1000 and n % 1000 == 0:
        return "%dk" % (n // 1000)
    return str(n)


def block(name):
    return "$" + re.sub(r"[^a-z0-9]", "_", name)


def script(meta, cells):
    sizes = sorted({n for c in cells.values() for n in c})
    runs = sorted({c["runs"] for cs in cells.values() for c in cs.values()})
    lines = [
        "set terminal svg size 1200,820 fixed font 'sans,12' noenhanced "
        "background rgb 'white'",
        "set encoding utf8",
    ]
    # Data blocks, one per scenario.  Columns: 1 n, 2 uvtw, 3 base,
    # 4 ratio, 5-6 uvtw min max, 7-8 base min max, 9-10 ratio min max.
    for name in sorted(cells):
        lines.append(block(name) + " << EOD")
        for n in sorted(cells[name]):
            c = cells[name][n]
            lines.append("%d %g %g %g %g %g %g %g %g %g" % (
                n, c["uvtw"], c["base"], c["ratio"], c["uvtw_min"],
                c["uvtw_max"], c["base_min"], c["base_max"], c["ratio_min"],
                c["ratio_max"]))
        lines.append("EOD")
    ranges = {}
    for name, _, _, group in PANELS:
        for c in cells[name].values():
            ranges.setdefault(group, []).extend(
                [c["uvtw_min"], c["uvtw_max"], c["base_min"], c["base_max"]])
    ranges = {g: decades(v) for g, v in ranges.items()}
    ratios = [1.0]
    for name, _, _, _ in PANELS:
        for c in cells[name].values():
            ratios += [c["ratio_min"], c["ratio_max"]]
    ratio_range = decades(ratios)

    caption = [
        "Points: medians of %s runs per side and cell; whiskers: the runs' "
        "min and max. uvtw and uv_timer_t alternate in one process, on one "
        "loop. Labels and the last panel: uv_timer_t / uvtw (above 1x, uvtw "
        "is faster)." % "/".join(str(r) for r in runs),
    ]
    commit, _, rest = meta.get("commit", "?").partition(" (")
    second = [meta.get("date", "?"), meta.get("machine", "?"),
              "commit " + commit]
    if rest:
        second.append(rest.rstrip(")"))
    if "load average at the start" in meta:
        second.append("load average %s (start), %s (end)" % (
            meta["load average at the start"].split()[0],
            meta.get("load average at the end", "?").split()[0]))
    caption.append(" | ".join(second))

    lines += [
        "set multiplot layout 2,3 title %s font 'sans,15' "
        "margins 0.07,0.98,0.15,0.91 spacing 0.075,0.15"
        % quote("What a timer costs: uvtw's wheel against libuv's heap "
                "(log scales: time lower is better, speed-up higher)"),
        "set logscale xy 10",
        "set xrange [%g:%g]" % (sizes[0] / 1.8, sizes[-1] * 1.8),
        "set xtics (%s)" % ", ".join(
            "%s %d" % (quote(fmt_n(n)), n) for n in sizes),
        "set xlabel 'timers (N)' offset 0,0.5",
        "set ylabel offset 0.5,0",
        "set format y '%.0s%c'",
        "set grid xtics ytics mytics lc rgb '#e4e4e4'",
        "set key top left horizontal samplen 2 font 'sans,11' opaque "
        "box lc rgb '#cccccc'",
        "set errorbars small",
        "set style line 1 lc rgb '#1f77b4' lw 2 pt 7 ps 0.8",
        "set style line 2 lc rgb '#d62728' lw 2 pt 5 ps 0.8",
    ]
    for name, title, ylabel, group in PANELS:
        lo, hi = ranges[group]
        lines.append("set yrange [%g:%g]" % (lo, hi))
        lines.append("set title %s" % quote(title))
        lines.append("set ylabel %s" % quote(ylabel))
        lines.append(
            "plot %s using 1:2:5:6 with yerrorlines ls 1 title %s, \\\n"
            "     %s using 1:3:7:8 with yerrorlines ls 2 title %s, \\\n"
            "     %s using 1:3:(sprintf('%%.1fx', $4)) with labels "
            "offset 0,-1 font 'sans,9' notitle"
            % (block(name), quote(SERIES[0]), block(name), quote(SERIES[1]),
               block(name)))
    # The sixth panel: one line per scenario, spread a little along x so
    # that the whiskers do not hide each other.
    lines += [
        "set yrange [%g:%g]" % ratio_range,
        "set format y '%gx'",
        "set title %s" % quote(SPEEDUP_TITLE),
        "set ylabel 'times faster'",
        "set key bottom right horizontal maxcols 3 samplen 1.5 "
        "font 'sans,10'",
    ]
    for i, text in enumerate(caption):
        lines.append("set label %d %s at screen 0.5,%g center "
                     "font 'sans,11'" % (100 + i, quote(text),
                                         0.045 - 0.03 * i))
    clauses = []
    for i, (name, _, _, _) in enumerate(PANELS):
        shift = 1.12 ** (i - (len(PANELS) - 1) / 2.0)
        clauses.append(
            "%s using ($1*%g):4:9:10 with yerrorlines lc rgb '%s' lw 2 "
            "pt %d ps 0.7 title %s"
            % (block(name), shift, COLORS[i % len(COLORS)], 7 + 2 * (i % 4),
               quote(name)))
    clauses.append("1 with lines lc rgb '#000000' dt 2 lw 1.5 title '1x'")
    lines.append("plot " + ", \\\n     ".join(clauses))
    lines.append("unset multiplot")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(
        description="uvtw-bench output to an SVG chart (stdout)")
    ap.add_argument("input", help="uvtw-bench's stdout, or - for stdin")
    ap.add_argument("--date")
    ap.add_argument("--machine")
    ap.add_argument("--commit")
    args = ap.parse_args()

    try:
        if args.input == "-":
            text = sys.stdin.read()
        else:
            with open(args.input) as f:
                text = f.read()
        meta, cells = parse(text.splitlines())
    except (OSError, ValueError, KeyError) as e:
        print("plot.py: %s: %s" % (args.input, e), file=sys.stderr)
        return 1
    missing = [s for s, _, _, _ in PANELS if s not in cells]
    if missing:
        print("plot.py: %s: no %s lines" % (args.input, ", ".join(missing)),
              file=sys.stderr)
        return 1
    meta.setdefault("date", datetime.datetime.now(datetime.timezone.utc)
                    .strftime("%Y-%m-%d %H:%M UTC"))
    meta.setdefault("machine", machine_now())
    meta.setdefault("commit", commit_now())
    for key in ("date", "machine", "commit"):
        if getattr(args, key) is not None:
            meta[key] = getattr(args, key)

    gnuplot = shutil.which("gnuplot")
    if gnuplot is None:
        print("plot.py: no gnuplot (Debian: apt-get install gnuplot-nox)",
              file=sys.stderr)
        return 1
    out = subprocess.run([gnuplot], input=script(meta, cells),
                         capture_output=True, text=True)
    if out.returncode != 0 or "<svg" not in out.stdout:
        sys.stderr.write(out.stderr)
        print("plot.py: gnuplot failed (exit %d)" % out.returncode,
              file=sys.stderr)
        return 1
    sys.stdout.write(out.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
