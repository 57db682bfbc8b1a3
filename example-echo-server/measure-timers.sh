#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The echo server's instructions in timer code, wheel against uv, counted
# by callgrind: deterministic where CPU time on a shared machine is not.
#
#   example-echo-server/measure-timers.sh BUILD_DIR [CONNS...]
#
# For each CONNS (default 1000 10000 19000) and each backend (wheel, uv):
# starts BUILD_DIR/example-echo-server/uvtw-echo-server under
# valgrind --tool=callgrind on 127.0.0.1, drives it with echo-load in
# active mode (CONNS connections, LINES_PER_CONN lines each, default 20,
# offered at RATE lines a second in all, default 4000), stops it with
# SIGTERM, and counts its instructions with callgrind-timers.py.  The
# heartbeat (60 s) and the idle timeout (120 s) are longer than a run, so
# no timer fires: every read re-arms its connection's timer to a later
# deadline, which is what an active server's idle timers do.  BUILD_DIR
# must have debug information (RelWithDebInfo, the default): uvtw's
# functions are told apart by their source files.
#
# Prints a Markdown table: per backend and size, the lines echoed, the
# server's instructions per echoed line, the part of them in timer code,
# that part's share, and the arms per line (one per connection and one per
# read: lines that arrive together are one read).  Then, as callgrind
# counts user space only, it runs the same load without callgrind,
# NATIVE_RUNS times per backend (default 3; 0 skips it), alternating, at
# NATIVE_CONNS connections (default 10000) and NATIVE_RATE lines a second
# (default 20000), and prints the server's CPU time (user and system, from
# its exit line) per echoed line.  SKIP_CALLGRIND=1 runs only that part.
# The callgrind files and the programs' output are left in $OUT (default:
# a new directory under /tmp), for callgrind_annotate.
#
# The connections are bounded by the descriptor limit (ulimit -Hn, 20000
# here): the server and echo-load each hold one per connection, and
# echo-load wants 64 to spare.
set -euo pipefail

if [ $# -lt 1 ]; then
  echo "usage: measure-timers.sh BUILD_DIR [CONNS...]" >&2
  exit 2
fi
build=$1
shift
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(1000 10000 19000)
lines_per_conn=${LINES_PER_CONN:-20}
rate=${RATE:-4000}
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
server=$build/example-echo-server/uvtw-echo-server
load=$build/example-echo-server/echo-load
out=${OUT:-$(mktemp -d /tmp/measure-timers.XXXXXX)}
mkdir -p "$out"
for f in "$server" "$load"; do
  [ -x "$f" ] || { echo "measure-timers.sh: no $f" >&2; exit 2; }
done
command -v valgrind >/dev/null || {
  echo "measure-timers.sh: needs valgrind (callgrind)" >&2
  exit 2
}
ulimit -n "$(ulimit -Hn)"

pid=
cleanup() { [ -z "$pid" ] || kill -KILL "$pid" 2>/dev/null || true; }
trap cleanup EXIT

# One run: prints "echoed total_ir timer_ir xtimer_start".
run() { # BACKEND CONNS
  local backend=$1 conns=$2 tag=$1.$2 port interval duration result echoed
  interval=$((conns * 1000 / rate))
  [ "$interval" -ge 1 ] || interval=1
  # Connecting takes a while under callgrind: a second per 2,000.
  duration=$(((lines_per_conn + 1) * interval + conns / 2 + 2000))
  : >"$out/server.$tag.out"
  valgrind --tool=callgrind --callgrind-out-file="$out/callgrind.$tag" \
    "$server" --port 0 --timers="$backend" --heartbeat-ms 60000 \
    --idle-ms 120000 --max-conns $((conns + 100)) \
    >"$out/server.$tag.out" 2>"$out/server.$tag.err" &
  pid=$!
  for _ in $(seq 300); do
    grep -q '^listening' "$out/server.$tag.out" && break
    sleep 0.1
  done
  port=$(sed -n 's/^listening on [^ ]*:\([0-9]*\) .*/\1/p' \
           "$out/server.$tag.out")
  [ -n "$port" ] || { echo "measure-timers.sh: $tag: no port" >&2; exit 1; }
  result=$("$load" --port "$port" --mode active --conns "$conns" \
             --interval-ms "$interval" --duration-ms "$duration" \
             --max-msgs $((conns * lines_per_conn)) --idle-ms 120000 \
             --heartbeat-ms 60000 --slack-ms 60000 --quiet |
             grep '^RESULT' || true)
  kill -TERM "$pid"
  wait "$pid" || { echo "measure-timers.sh: $tag: server failed" >&2; exit 1; }
  pid=
  echo "$result" >"$out/load.$tag.out"
  echoed=$(sed -n 's/.* echoed=\([0-9]*\).*/\1/p' <<<"$result")
  [ -n "$echoed" ] && [ "$echoed" -gt 0 ] ||
    { echo "measure-timers.sh: $tag: no echoes: $result" >&2; exit 1; }
  python3 "$here/callgrind-timers.py" "$out/callgrind.$tag" "$root" |
    sed "s/^/echoed=$echoed /"
}

echo "measure-timers.sh: $(date -u '+%Y-%m-%d %H:%M UTC'), commit" \
     "$(git -C "$root" describe --always --dirty 2>/dev/null || echo '?')," \
     "$lines_per_conn lines per connection at $rate lines/s; files in $out" >&2
[ "${SKIP_CALLGRIND:-0}" != 1 ] || sizes=()
if [ ${#sizes[@]} -gt 0 ]; then
  echo "| connections | timers | lines echoed | instructions per line | of them in timer code | timer share | arms per line |"
  echo "| --- | --- | --- | --- | --- | --- | --- |"
fi
for conns in ${sizes[@]+"${sizes[@]}"}; do
  for backend in wheel uv; do
    echo "measure-timers.sh: $backend, $conns connections" >&2
    line=$(run "$backend" "$conns")
    echo "$line" >"$out/result.$backend.$conns"
    awk -v conns="$conns" -v backend="$backend" '{
      for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
      printf "| %d | %s | %d | %.0f | %.0f | %.1f %% | %.2f |\n", conns,
             backend, v["echoed"], v["total_ir"] / v["echoed"],
             v["timer_ir"] / v["echoed"], 100 * v["timer_ir"] / v["total_ir"],
             v["xtimer_start"] / v["echoed"]
    }' <<<"$line"
  done
done

# The same load without callgrind, alternating backends: the server's CPU
# time (user and system, from its exit line), for the share of the whole
# CPU that user space (and so timer code) has.  NATIVE_RUNS=0 skips it.
native_runs=${NATIVE_RUNS:-3}
native_conns=${NATIVE_CONNS:-10000}
native_rate=${NATIVE_RATE:-20000}
native() { # BACKEND RUN
  local backend=$1 tag=native.$1.$2 port interval duration cpu
  interval=$((native_conns * 1000 / native_rate))
  [ "$interval" -ge 1 ] || interval=1
  duration=$(((lines_per_conn + 1) * interval + native_conns + 2000))
  : >"$out/server.$tag.out"
  "$server" --port 0 --timers="$backend" --heartbeat-ms 60000 \
    --idle-ms 120000 --max-conns $((native_conns + 100)) \
    >"$out/server.$tag.out" 2>"$out/server.$tag.err" &
  pid=$!
  for _ in $(seq 100); do
    grep -q '^listening' "$out/server.$tag.out" && break
    sleep 0.05
  done
  port=$(sed -n 's/^listening on [^ ]*:\([0-9]*\) .*/\1/p' \
           "$out/server.$tag.out")
  "$load" --port "$port" --mode active --conns "$native_conns" \
    --interval-ms "$interval" --duration-ms "$duration" \
    --max-msgs $((native_conns * lines_per_conn)) --idle-ms 120000 \
    --heartbeat-ms 60000 --slack-ms 60000 --quiet >"$out/load.$tag.out" || true
  kill -TERM "$pid"
  wait "$pid" || { echo "measure-timers.sh: $tag: server failed" >&2; exit 1; }
  pid=
  cpu=$(sed -n 's/.* cpu user=\([0-9.]*\)s sys=\([0-9.]*\)s.*/\1 \2/p' \
          "$out/server.$tag.err")
  echoed=$(sed -n 's/.* echoed=\([0-9]*\).*/\1/p' "$out/load.$tag.out")
  awk -v b="$backend" -v r="$2" -v e="$echoed" -v c="$cpu" 'BEGIN {
    split(c, t, " ")
    printf "| %d | %s | %d | %.3f | %.3f | %.2f | %.2f |\n", r, b, e,
           t[1], t[2], 1e6 * t[1] / e, 1e6 * (t[1] + t[2]) / e
  }'
}
if [ "$native_runs" -gt 0 ]; then
  echo
  echo "Without callgrind, $native_conns connections, $native_rate lines/s:"
  echo
  echo "| run | timers | lines echoed | user s | sys s | user us per line | user + sys us per line |"
  echo "| --- | --- | --- | --- | --- | --- | --- |"
  for r in $(seq "$native_runs"); do
    for backend in wheel uv; do
      echo "measure-timers.sh: native run $r, $backend" >&2
      native "$backend" "$r"
    done
  done
fi
