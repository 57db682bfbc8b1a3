#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs the chart's scenarios and draws the chart: one command.
#
#   bench/chart.sh BUILD_DIR OUT_PREFIX [uvtw-bench options...]
#
# runs BUILD_DIR/bench/uvtw-bench (a Release tree) under nice for insert,
# churn, rpc, expire-seq and expire-rand at 100, 1,000, 10,000, 100,000 and
# 1,000,000 timers (CHART_SIZES overrides the list), 3 runs per side and
# cell unless the options say otherwise, and writes OUT_PREFIX.txt (the
# bench's stdout, after "#" lines that say when, where and what: the
# caption) and OUT_PREFIX.svg (bench/plot.py).  The small sizes are where
# a heap of a few timers may beat the wheel.  About 5 minutes on this
# 2-core VM.
set -euo pipefail

if [ $# -lt 2 ]; then
  echo "usage: bench/chart.sh BUILD_DIR OUT_PREFIX [uvtw-bench options...]" >&2
  exit 2
fi
build=$1
out=$2
shift 2
bench=$build/bench/uvtw-bench
here=$(cd "$(dirname "$0")" && pwd)
[ -x "$bench" ] || { echo "chart.sh: no $bench" >&2; exit 2; }
if [ $# -eq 0 ]; then
  set -- --runs 3
fi
sizes=${CHART_SIZES:-100 1000 10000 100000 1000000}

build_type=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$build/CMakeCache.txt")
if [ "$build_type" != Release ]; then
  echo "chart.sh: $build is a '$build_type' tree, not Release" >&2
fi
commit=$(git -C "$here" describe --always --dirty 2>/dev/null || echo unknown)
cpuinfo() { sed -n "s/^$1[[:space:]]*: //p" /proc/cpuinfo | head -n 1; }
cpu="$(cpuinfo 'model name') (family $(cpuinfo 'cpu family') model"
cpu="$cpu $(cpuinfo model), $(cpuinfo 'cpu MHz' | cut -d . -f 1) MHz)"
load() { cut -d ' ' -f 1-3 /proc/loadavg; }

{
  echo "# date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "# machine: $(nproc) CPUs, $cpu"
  echo "# commit: $commit ($build_type build, libuv $(pkg-config --modversion libuv 2>/dev/null || echo '?'))"
  echo "# command: uvtw-bench --scenario S --n N $* (nice), S in insert churn rpc expire-seq expire-rand, N in $sizes"
  echo "# load average at the start: $(load)"
} >"$out.txt"
: >"$out.log"
for s in insert churn rpc expire-seq expire-rand; do
  for n in $sizes; do
    echo "chart.sh: $s n=$n" >&2
    nice "$bench" --scenario "$s" --n "$n" "$@" >>"$out.txt" 2>>"$out.log"
  done
done
echo "# load average at the end: $(load)" >>"$out.txt"
rm -f "$out.log"
python3 "$here/plot.py" "$out.txt" >"$out.svg"
echo "chart.sh: wrote $out.txt and $out.svg" >&2
