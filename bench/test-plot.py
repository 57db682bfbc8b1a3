#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The chart command still draws a well-formed chart from a bench run.

    test-plot.py UVTW_BENCH PLOT_PY

Runs UVTW_BENCH --quick --runs 1 for the five scenarios of the chart
(about 2 s), draws them with PLOT_PY into a temporary directory, parses
the SVG as XML and checks it: one panel per scenario, titled in order,
each with a "uvtw" and a "uv_timer_t" series with one marker per size of
the run, and one ratio label per size that matches the input; the caption
says the date, machine and commit it was given.  Then checks that an input
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
    """The gnuplot_plot_* groups, in document order, as (texts, markers)."""
    out = []
    for g in root.iter(SVG + "g"):
        if g.get("id", "").startswith("gnuplot_plot_"):
            texts = [t.text for t in g.iter(SVG + "text")]
            markers = len(list(g.iter(SVG + "use")))
            out.append((texts, markers))
    return out


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
            if want not in texts:
                fail("the caption lacks %r" % want)

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

        # An input without one of the scenarios is refused.
        partial = os.path.join(tmp, "partial.txt")
        with open(partial, "w") as f:
            f.write("\n".join(l for l in lines if "scenario=rpc " not in l))
        out = subprocess.run([sys.executable, plot, partial],
                             capture_output=True, text=True)
        if out.returncode != 1 or "rpc" not in out.stderr:
            fail("an input without rpc: exit %d, %r (expected 1, naming "
                 "rpc)" % (out.returncode, out.stderr))
    print("test-plot: ok (%d panels, %d sizes each)" % (len(SCENARIOS),
                                                        sizes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
