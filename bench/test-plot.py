#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The chart command still draws a well-formed chart from a bench run.

    test-plot.py UVTW_BENCH PLOT_PY

Runs UVTW_BENCH --quick --runs 1 for the five scenarios of the chart
(about 2 s), draws them with PLOT_PY into a temporary directory, parses
the SVG as XML and checks it: one panel per scenario, titled in order,
each with a "uvtw" and a "uv_timer_t" series with one marker per size of
the run, and one ratio label per size that matches the input; a speed-up
panel with one series per scenario, one marker per size, and the 1x line;
an opaque background; the caption says the date, machine and commit it
was given.  Then checks that an input
without one of the scenarios is refused (exit 1).  Nothing is written
outside the temporary directory.  Asserts nothing about speed.
"""

import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

SVG = "{http://www.w3.org/2000/svg}"
SCENARIOS = ["insert", "churn", "rpc", "expire-seq", "expire-rand"]


def fail(msg):
    print("test-plot: FAIL: " + msg)
    sys.exit(1)


def plot_groups(root):
    """The gnuplot_plot_* groups, in document order, as (texts, markers).
    gnuplot draws an opaque key after the plots, in a second group of the
    same id: the two are one series."""
    out = {}
    for g in root.iter(SVG + "g"):
        gid = g.get("id", "")
        if gid.startswith("gnuplot_plot_"):
            texts, markers = out.setdefault(gid, ([], [0]))
            texts.extend(t.text for t in g.iter(SVG + "text"))
            markers[0] += len(list(g.iter(SVG + "use")))
    return [(texts, markers[0]) for texts, markers in out.values()]


def main():
    if len(sys.argv) != 3:
        print("usage: test-plot.py UVTW_BENCH PLOT_PY", file=sys.stderr)
        return 2
    bench, plot = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "bench.txt")
        with open(data, "w") as f:
            f.write("# date: 2000-01-02 03:04 UTC\n")
            f.write("# machine: test machine\n")
            for s in SCENARIOS:
                run = subprocess.run([bench, "--quick", "--runs", "1",
                                      "--scenario", s],
                                     capture_output=True, text=True)
                if run.returncode != 0:
                    sys.stderr.write(run.stderr[-4000:])
                    fail("uvtw-bench --scenario %s exit %d"
                         % (s, run.returncode))
                f.write(run.stdout)
        with open(data) as f:
            lines = f.read().splitlines()
        ratios = {}
        for line in lines:
            kv = dict(x.split("=", 1) for x in line.split() if "=" in x)
            if "scenario" in kv:
                ratios.setdefault(kv["scenario"], []).append(
                    "%.1fx" % float(kv["ratio"]))
        sizes = len(ratios["insert"])
        if sizes < 2:
            fail("the quick run has %d size(s), the chart wants 2+" % sizes)

        out = subprocess.run([sys.executable, plot, data, "--commit",
                              "abc1234"], capture_output=True, text=True)
        if out.returncode != 0:
            sys.stderr.write(out.stderr)
            fail("plot.py exit %d" % out.returncode)
        svg = os.path.join(tmp, "chart.svg")
        with open(svg, "w") as f:
            f.write(out.stdout)
        try:
            root = ET.parse(svg).getroot()
        except ET.ParseError as e:
            fail("the SVG is not well-formed XML: %s" % e)
        if root.tag != SVG + "svg":
            fail("the root element is %s, not svg" % root.tag)

        texts = [t.text or "" for t in root.iter(SVG + "text")]
        titles = [t for t in texts
                  if re.match(r"(%s): " % "|".join(SCENARIOS), t)]
        got = [t.split(":")[0] for t in titles]
        if got != SCENARIOS:
            fail("panel titles %s, expected %s" % (got, SCENARIOS))
        for want in ("2000-01-02 03:04 UTC", "test machine",
                     "commit abc1234"):
            if not any(want in t for t in texts):
                fail("the caption lacks %r" % want)
        # Opaque: the first thing drawn fills the whole canvas.
        first = next(iter(root.iter(SVG + "rect")), None)
        if (first is None or first.get("x") != "0" or first.get("y") != "0"
                or first.get("width") != root.get("width").rstrip("px")
                or first.get("fill") in (None, "none")):
            fail("no opaque background rectangle first")

        # Per panel: uvtw, uv_timer_t (each with its key sample), labels.
        groups = [g for g in plot_groups(root) if g[0] or g[1]]
        if len(groups) < 3 * len(SCENARIOS):
            fail("%d plot groups, expected %d"
                 % (len(groups), 3 * len(SCENARIOS)))
        for i, s in enumerate(SCENARIOS):
            uvtw, base, labels = groups[3 * i:3 * i + 3]
            for (names, markers), want in ((uvtw, "uvtw"),
                                           (base, "uv_timer_t")):
                if names != [want]:
                    fail("%s: series %s, expected [%r]" % (s, names, want))
                if markers != sizes + 1:
                    fail("%s: %s has %d markers, expected %d (%d sizes "
                         "and the key's)" % (s, want, markers, sizes + 1,
                                             sizes))
            if labels[0] != ratios[s]:
                fail("%s: ratio labels %s, expected %s"
                     % (s, labels[0], ratios[s]))

        # The speed-up panel: one series per scenario, then the 1x line.
        if not any(t.startswith("speed-up: ") for t in texts):
            fail("no speed-up panel")
        rest = groups[3 * len(SCENARIOS):]
        if len(rest) != len(SCENARIOS) + 1:
            fail("speed-up panel: %d plot groups, expected %d"
                 % (len(rest), len(SCENARIOS) + 1))
        for (names, markers), s in zip(rest, SCENARIOS):
            if names != [s]:
                fail("speed-up: series %s, expected [%r]" % (names, s))
            if markers != sizes + 1:
                fail("speed-up: %s has %d markers, expected %d"
                     % (s, markers, sizes + 1))
        if rest[-1][0] != ["1x"]:
            fail("speed-up: last series %s, expected ['1x']" % rest[-1][0])

        # An input without one of the scenarios is refused.
        partial = os.path.join(tmp, "partial.txt")
        with open(partial, "w") as f:
            f.write("\n".join(l for l in lines if "scenario=rpc " not in l))
        out = subprocess.run([sys.executable, plot, partial],
                             capture_output=True, text=True)
        if out.returncode != 1 or "rpc" not in out.stderr:
            fail("an input without rpc: exit %d, %r (expected 1, naming "
                 "rpc)" % (out.returncode, out.stderr))
    print("test-plot: ok (%d panels and the speed-up, %d sizes each)"
          % (len(SCENARIOS), sizes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
