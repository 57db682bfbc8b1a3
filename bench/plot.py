#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Draws uvtw-bench's output as an SVG chart, with Debian's gnuplot.

    bench/plot.py BENCH_OUTPUT [--date D] [--machine M] [--commit C] > out.svg

BENCH_OUTPUT ("-" for stdin) holds uvtw-bench's stdout: one key=value line
per scenario and size (bench/README.md).  Lines "# key: value" before them
(as bench/chart.sh writes) give the caption's date, machine, commit and
load; the options override them, and without either the caption says what
this machine and checkout are now.  Five panels, both axes log scale: ns
per operation against the number of timers for insert, churn and rpc, and
CPU ns per expiry for expire-seq and expire-rand; uvtw beside uv_timer_t,
each baseline point labelled with the ratio (baseline / uvtw); the caption
in the sixth place.  Exit 1 if
a scenario is missing or a line cannot be read, 2 on a usage error.
"""

import argparse
import datetime
import os
import re
import shutil
import subprocess
import sys

# (scenario, panel title, y axis label), one panel each.  Every panel has
# the series "uvtw" and "uv_timer_t", in this order; the test
# (bench/test-plot.py) checks them by these names.
PANELS = [
    ("insert", "insert: start N timers", "ns per start"),
    ("churn", "churn: re-arm a random timer", "ns per re-arm"),
    ("rpc", "rpc: stop a deadline, start one", "ns per stop + start"),
    ("expire-seq", "expire-seq: N expire, in order", "CPU ns per expiry"),
    ("expire-rand", "expire-rand: N expire, scattered", "CPU ns per expiry"),
]
SERIES = ["uvtw", "uv_timer_t"]


def parse(lines):
    """Returns (meta, cells): meta from the "# key: value" lines, cells as
    {scenario: {n: (uvtw, base, ratio, runs)}}."""
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
        cells.setdefault(kv["scenario"], {})[int(kv["n"])] = (
            float(kv["uvtw_" + unit]), float(kv["base_" + unit]),
            float(kv["ratio"]), int(kv.get("runs", 0)))
    return meta, cells


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
    runs = sorted({r for c in cells.values() for (_, _, _, r) in c.values()})
    lines = [
        "set terminal svg size 1080,700 fixed font 'sans,12' noenhanced",
        "set encoding utf8",
    ]
    # Data blocks, one per scenario: n, uvtw, baseline, ratio.
    for name in sorted(cells):
        lines.append(block(name) + " << EOD")
        for n in sorted(cells[name]):
            u, b, r, _ = cells[name][n]
            lines.append("%d %g %g %g" % (n, u, b, r))
        lines.append("EOD")
    caption = [
        "Medians of %s runs per side and cell:"
        % "/".join(str(r) for r in runs),
        "uvtw and uv_timer_t in one process,",
        "on one loop, alternating runs.",
        "Labels: uv_timer_t / uvtw.",
        "",
        meta.get("date", "?"),
        meta.get("machine", "?"),
    ]
    # "3816805 (Release build, libuv 1.44.2)": the part in brackets on a
    # line of its own.
    commit, _, rest = meta.get("commit", "?").partition(" (")
    caption.append("commit " + commit)
    if rest:
        caption.append(rest.rstrip(")"))
    if "load average at the start" in meta:
        caption.append("load average %s (start), %s (end)" % (
            meta["load average at the start"].split()[0],
            meta.get("load average at the end", "?").split()[0]))
    lines += [
        "set multiplot layout 2,3 title %s font 'sans,15' "
        "margins 0.07,0.98,0.09,0.90 spacing 0.08,0.15"
        % quote("What a timer costs: uvtw's wheel against libuv's heap "
                "(log scales; lower is better)"),
        "set logscale xy 10",
        "set xrange [%g:%g]" % (sizes[0] / 1.8, sizes[-1] * 1.8),
        "set xtics (%s)" % ", ".join(
            "%s %d" % (quote(fmt_n(n)), n) for n in sizes),
        "set xlabel 'timers (N)' offset 0,0.5",
        "set ylabel offset 0.5,0",
        "set format y '%.0s%c'",
        "set grid xtics ytics lc rgb '#dddddd'",
        "set key top center horizontal samplen 2 font 'sans,11'",
        "set offsets 0, 0, graph 0.45, graph 0.1",
        "set style line 1 lc rgb '#1f77b4' lw 2 pt 7 ps 0.8",
        "set style line 2 lc rgb '#d62728' lw 2 pt 5 ps 0.8",
    ]
    for name, title, ylabel in PANELS:
        lines.append("set title %s" % quote(title))
        lines.append("set ylabel %s" % quote(ylabel))
        lines.append(
            "plot %s using 1:2 with linespoints ls 1 title %s, \\\n"
            "     %s using 1:3 with linespoints ls 2 title %s, \\\n"
            "     %s using 1:3:(sprintf('%%.1fx', $4)) with labels "
            "offset 0,0.9 font 'sans,10' notitle"
            % (block(name), quote(SERIES[0]), block(name), quote(SERIES[1]),
               block(name)))
    # The sixth cell holds the caption.
    lines.append("set multiplot next")
    for i, text in enumerate(caption):
        lines.append("set label %d %s at screen 0.685,%g left font 'sans,11'"
                     % (100 + i, quote(text), 0.40 - 0.032 * i))
    lines += ["unset border", "unset tics", "unset key", "unset title",
              "unset xlabel", "unset ylabel", "unset grid", "unset logscale",
              "set xrange [0:1]", "set yrange [0:1]",
              "plot NaN notitle", "unset multiplot"]
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
    missing = [s for s, _, _ in PANELS if s not in cells]
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
