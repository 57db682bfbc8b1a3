#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A five-second tour of uvtw-echo-server.
#
#   usage: example-echo-server/demo.sh BUILD_DIR
#
# Starts the server on a free port with small timings (PING after 500 ms of
# silence, BYE after 1500 ms), then, talking to it with bash's /dev/tcp:
# an echo, a connection left idle until PING and BYE idle, three requests
# of which one misses its deadline, the STATS line, and a graceful drain on
# SIGTERM: a request in flight gets its answer before BYE shutdown.  Exits
# non-zero if anything is not as described.

set -euo pipefail

build=${1:?usage: $0 BUILD_DIR}
server=$build/example-echo-server/uvtw-echo-server
[[ -x $server ]] || { echo "no $server: build first" >&2; exit 2; }

HEARTBEAT_MS=500
IDLE_MS=1500
tmp=$(mktemp -d)
server_pid=

cleanup() {
  if [[ -n $server_pid ]] && kill -0 "$server_pid" 2>/dev/null; then
    kill -KILL "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT

t0=${EPOCHREALTIME/./}
# Milliseconds since the demo started.
ms() { echo $(( (${EPOCHREALTIME/./} - t0) / 1000 )); }
say() { printf '\n== %s\n' "$*"; }
fail() { printf 'DEMO FAILED: %s\n' "$*" >&2; exit 1; }

# send FD LINE: writes one line and shows it.
send() {
  printf '%s\n' "$2" >&"$1"
  printf '  %6s ms  > %s\n' "$(ms)" "$2"
}

# recv FD [TIMEOUT_S]: reads one line into $line and shows it; returns 1 at
# EOF (the server closed the connection).
recv() {
  line=
  if ! IFS= read -r -t "${2:-5}" -u "$1" line; then
    if [[ -z $line ]]; then
      printf '  %6s ms  < (connection closed by the server)\n' "$(ms)"
      return 1
    fi
  fi
  printf '  %6s ms  < %s\n' "$(ms)" "$line"
}

say "Starting the server: port 0 picks a free port"
"$server" --port 0 --heartbeat-ms $HEARTBEAT_MS --idle-ms $IDLE_MS \
  >"$tmp/out" 2>"$tmp/err" &
server_pid=$!
for _ in $(seq 100); do
  grep -q '^listening on' "$tmp/out" && break
  sleep 0.05
done
grep -q '^listening on' "$tmp/out" || fail "the server did not start"
echo "  $server --port 0 --heartbeat-ms $HEARTBEAT_MS --idle-ms $IDLE_MS"
echo "  it printed: $(head -1 "$tmp/out")"
port=$(sed -n 's/^listening on [^ ]*:\([0-9]*\).*/\1/p' "$tmp/out")

say "1. Echo: a line that is not a command comes back unchanged"
exec {a}<>"/dev/tcp/127.0.0.1/$port"
send $a "hello, uvtw"
recv $a
[[ $line == "hello, uvtw" ]] || fail "no echo"
exec {a}>&-

say "2. Idle: this connection says nothing at all"
echo "  Every ${HEARTBEAT_MS} ms of silence the server sends PING; after" \
     "${IDLE_MS} ms it says BYE idle and closes. (One uvtw timer per" \
     "connection.)"
exec {b}<>"/dev/tcp/127.0.0.1/$port"
start=$(ms)
echo "  $(printf '%6s' "$start") ms    (connected)"
got=
while recv $b 5; do got+="$line;"; done
exec {b}>&-
[[ $got == "PING;PING;BYE idle;" ]] || fail "expected PING, PING, BYE idle"

say "3. Requests: REQ <id> <work_ms> <deadline_ms>"
echo "  The work (a sleep) runs on libuv's threadpool; the deadline is a"
echo "  uvtw timer. Whichever ends first decides the one reply: OK or TIMEOUT."
exec {c}<>"/dev/tcp/127.0.0.1/$port"
send $c "REQ fast 100 1000"
send $c "REQ slow 2000 400"
send $c "REQ medium 250 1000"
replies=
while [[ $replies != *";"*";"*";"* ]]; do
  recv $c || fail "the connection closed"
  if [[ $line == PING ]]; then
    send $c PONG # a busy machine was slow: PONG keeps us alive
  else
    replies+="$line;"
  fi
done
[[ $replies == "OK fast;OK medium;TIMEOUT slow;" ]] ||
  fail "expected OK fast, OK medium, TIMEOUT slow"
echo "  'slow' would have needed 2000 ms: it got TIMEOUT at its 400 ms"
echo "  deadline, and its work was told to stop: nobody waits for it, so it"
echo "  does not hold a thread for the rest of its 2000 ms."

say "4. STATS: the server's counters, on one line"
send $c "STATS"
recv $c
[[ $line == STATS* ]] || fail "no STATS line"
echo "  conns: open connections; timers: active uvtw timers (one per"
echo "  connection, one per request in flight); tasks: live uvtw tasks (none:"
echo "  the 'slow' work stopped at its deadline); wakeups: times the wheel's"
echo "  one uv_timer_t woke the loop; lateness: the wheel's callbacks by how"
echo "  late they ran (how many, then p50, p99 and max, each the top of its"
echo "  power-of-two bucket in ms); then closes for idleness and the"
echo "  requests answered OK and TIMEOUT; then the limits: requests turned"
echo "  away (BUSY), works cancelled or stopped early (work_abandoned), accept"
echo "  errors, lines cut by their deadline, slow readers closed, replies"
echo "  queued; and the loops with their connections."

say "5. SIGTERM: a graceful drain, then BYE to every client and exit 0"
echo "  A request is still running when SIGTERM comes. The server stops"
echo "  accepting and reading at once, lets the request finish (up to"
echo "  --drain-ms), then says BYE shutdown. The signal is taken on the main"
echo "  thread, which reaches the loop with uvtw_submit on its wheel."
send $c "REQ drain 1500 5000"
sleep 0.3
kill -TERM "$server_pid"
echo "  $(printf '%6s' "$(ms)") ms    (sent SIGTERM to the server)"
recv $c 10 || fail "the connection closed before the answer"
while [[ $line == PING ]]; do # sent before the signal: the drain sends none
  recv $c 10 || fail "the connection closed before the answer"
done
[[ $line == "OK drain" ]] || fail "expected OK drain during the drain"
recv $c 10 || true
[[ $line == "BYE shutdown" ]] || fail "expected BYE shutdown"
recv $c && fail "expected the server to close the connection"
exec {c}>&-
status=0
wait "$server_pid" || status=$?
server_pid=
echo "  The server's log (stderr):"
sed 's/^/    /' "$tmp/err"
[[ $status == 0 ]] || fail "the server exited with $status"
echo
echo "Done in $(ms) ms: the server exited with status 0."
