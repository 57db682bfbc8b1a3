#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Request deadlines: work on the threadpool against a deadline on the
loop.  Exactly one reply per request: OK when the work wins, TIMEOUT when
the deadline does, never both.

Which one wins is judged by when the work really ended, which the server
reports when asked ("REQ ... timed" -> "OK <id> ended=<ms>"): a pool
thread that the OS runs late (a loaded machine) ends a short work after
its deadline, and TIMEOUT is then the right answer.  No check here
depends on how late the OS runs a thread."""

import os
import signal
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # keep __pycache__ out of the source tree

from echotest import (Conn, Server, check, finish, log, parse_args,
                      run_load, slack, spawn, stats)


def right_answer(kind, ended, work, deadline):
    """None if a reply "<kind> <id> ended=<ended>" is right for a REQ of
    work and deadline ms, else why not."""
    if ended != "-" and not ended.isdigit():
        return "no ended= in the reply"
    if ended != "-" and int(ended) + 1 < work:
        return "the work cannot end at %s ms" % ended
    in_time = ended != "-" and int(ended) <= deadline
    if kind == "OK" and not in_time:
        return "OK, but the work ended at %s, after its deadline" % ended
    if kind == "TIMEOUT" and in_time:
        return "TIMEOUT, but the work ended at %s, by its deadline" % ended
    if kind not in ("OK", "TIMEOUT"):
        return "not OK or TIMEOUT"
    return None


def test_by_hand(port):
    log("one connection, many requests in flight")
    c = Conn(port)
    # (id, work_ms, deadline_ms, expected when the work's thread is not
    # held up): a "d" request's work is longer than its deadline, so it is
    # TIMEOUT whatever happens; a "w" one is OK unless its thread ended it
    # late, which the server's report shows.
    cases = [("w1", 20, 400, "OK"), ("d1", 500, 100, "TIMEOUT"),
             ("w2", 100, 600, "OK"), ("d2", 700, 50, "TIMEOUT"),
             ("w3", 0, 300, "OK"), ("d3", 400, 0, "TIMEOUT"),
             ("w4", 250, 1000, "OK"), ("d4", 900, 300, "TIMEOUT")]
    c.send("".join("REQ %s %d %d timed\n" % (i, w, d)
                   for i, w, d, _ in cases))
    t0 = c.t_last
    got = {}
    # Every request is over after 900 ms; wait 1.5 s more (scaled) for a
    # second reply that must not come.
    end = t0 + 0.9 + slack(1.5)
    while time.monotonic() < end:
        try:
            line = c.text(timeout=max(0.01, end - time.monotonic()))
        except TimeoutError:
            break
        kind, rid, ended = (line.split(" ") + ["", ""])[:3]
        got.setdefault(rid, []).append(
            (kind, ended.partition("=")[2], (time.monotonic() - t0) * 1e3))
    for rid, w, d, want in cases:
        replies = got.get(rid, [])
        why = ("%d replies" % len(replies) if len(replies) != 1
               else right_answer(replies[0][0], replies[0][1], w, d))
        if why is None and replies[0][0] != want:
            log("  note: REQ %s got %s ended=%s: right, its thread ended "
                "the work late" % (rid, replies[0][0], replies[0][1]))
        check(why is None,
              "REQ %s work=%d deadline=%d -> %s (got %s)%s"
              % (rid, w, d, want,
                 ", ".join("%s ended=%s @%.0fms" % r for r in replies)
                 or "nothing", "" if why is None else ": " + why))
        if replies and replies[0][0] == "TIMEOUT":
            check(replies[0][2] >= d - 5, "  not before its deadline")
    c.send("after\n")
    check(c.text() == "after", "the connection still echoes")
    c.close()


def test_held_up(args, port, server_pid):
    """The OS holding the server's threads up, made certain: the server is
    stopped (SIGSTOP) for 800 ms, three times, while echo-load keeps
    requests in flight whose work (10-100 ms) is far shorter than their
    deadline (400-600 ms).  A work whose end falls in a stop ends late, past
    its deadline when that falls in the stop too, and TIMEOUT is then the
    right answer: echo-load must not call it a violation."""
    log("echo-load rpc while the server is stopped 3 x 800 ms")
    argv = [args.load, "--port", str(port), "--mode", "rpc", "--conns", "4",
            "--inflight", "4", "--work-ms", "10-100", "--deadline-ms",
            "400-600", "--margin-ms", "200", "--duration-ms", "4000"]
    log("running: " + " ".join(argv))
    p = spawn(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        for _ in range(3):
            time.sleep(0.4)
            os.kill(server_pid, signal.SIGSTOP)
            time.sleep(0.8)
            os.kill(server_pid, signal.SIGCONT)
    finally:
        os.kill(server_pid, signal.SIGCONT)
    out = p.communicate(timeout=slack(120))[0].decode(errors="replace")
    result = {}
    for line in out.splitlines():
        log("  | " + line)
        if line.startswith("RESULT "):
            result = dict(kv.partition("=")[::2] for kv in line.split()[1:])
    check(p.returncode == 0, "echo-load rpc: no violation")
    late = int(result.get("late_work", "0"))
    check(late >= 1, "the stops made short work end late: %d TIMEOUTs "
          "for it (late_work)" % late)


def main():
    args = parse_args()
    srv = Server(args.server, args.timers, "--threads", "64")
    test_by_hand(srv.port)

    # Random work and deadlines from the same range: about half of each
    # kind.  8 x 4 requests in flight stay below the 64 threads (and the
    # 16 per connection), so work starts at once.  echo-load judges each
    # answer by when the server says the work ended; --margin-ms is only
    # for OK to work longer than its deadline, which no report excuses.
    rc, _, r = run_load(args.load, srv.port, "--mode", "rpc", "--conns", 8,
                        "--inflight", 4, "--work-ms", "10-800",
                        "--deadline-ms", "10-800", "--margin-ms", 200,
                        "--duration-ms", 4000)
    check(rc == 0, "echo-load rpc: no violation")
    check(r.get("ok", 0) >= 50 and r.get("timeout", 0) >= 50,
          "both answers happen: ok=%d timeout=%d"
          % (r.get("ok", 0), r.get("timeout", 0)))

    s = {}
    for _ in range(slack(50)):
        s = stats(srv.port)
        if s.get("tasks") == 0:
            break
        time.sleep(0.1)
    check(s.get("tasks") == 0 and s.get("timers") == 1,
          "nothing left in flight: %s" % s)
    check(s.get("req_ok", 0) + s.get("req_timeout", 0)
          == r.get("ok", 0) + r.get("timeout", 0) + 8,
          "STATS counts every reply once")
    test_held_up(args, srv.port, srv.proc.pid)
    srv.stop_and_check()
    finish()


if __name__ == "__main__":
    main()
