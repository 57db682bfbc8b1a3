#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The global output cap: clients that send STATS lines (each reply ~60
times its line) and never read.  The server's queued replies stay within
--max-output-bytes plus one piece of replies (OUT_CHUNK) per connection
(STATS output_bytes, sampled), its peak RSS stays near that
(not measured in sanitizer builds), a client that reads is served all
along, and never-readers held over their share for --idle-ms get BYE
slow."""

import socket
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # keep __pycache__ out of the source tree

from echotest import (Conn, Server, check, finish, log, parse_args,
                      slack, spawn, stats)

CAP = 2 << 20
NOREAD = 40
OUT_CHUNK = 65536  # replies sent at once (OUT_CHUNK in server.h)
REPLY_MAX = 4096   # the largest reply: an echo of --max-line
FLOOD_IDLE_MS = 30000


def slow(args):
    """One client sends far more than it reads, so its queue stays over
    the per-connection limit: BYE slow after --idle-ms, then the close."""
    log("a client that never reads, until BYE slow")
    srv = Server(args.server, args.timers, "--loops", args.loops,
                 "--idle-ms", 1500, "--heartbeat-ms", 500)
    # A small receive buffer, set before connecting: this side's kernel
    # must not take in tens of megabytes of echoes for it.
    c = Conn.__new__(Conn)
    c.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
    c.sock.connect(("127.0.0.1", srv.port))
    c.buf, c.eof, c.t_last = b"", False, time.monotonic()
    c.sock.setblocking(False)
    sent = 0
    chunk = b"z" * 1023 + b"\n"
    t0 = time.monotonic()
    blocked = None
    # Until the server stops taking input (it stopped reading) for 1 s.
    while time.monotonic() - t0 < 10 and sent < 96 << 20:
        try:
            sent += c.sock.send(chunk)
            blocked = None
        except BlockingIOError:
            blocked = blocked or time.monotonic()
            if time.monotonic() - blocked > 1.0:
                break
            time.sleep(0.01)
        except (BrokenPipeError, ConnectionResetError):
            break
    log("  sent %d KB" % (sent >> 10))
    s = {}
    until = time.monotonic() + slack(15)
    while time.monotonic() < until:
        s = stats(srv.port)
        if s.get("slow_closes", 0) >= 1:
            break
        time.sleep(0.2)
    took = time.monotonic() - t0
    check(s.get("slow_closes") == 1,
          "STATS slow_closes=1 after %.1f s: %s" % (took, s.get("slow_closes")))
    check(took >= 1.5, "not before --idle-ms")
    c.sock.setblocking(True)
    eof, _ = c.expect_eof(timeout=slack(20.0))  # the echoes, then BYE slow
    check(eof, "and the server closed it")
    c.close()
    srv.stop_and_check()


def main():
    args = parse_args()
    slow(args)
    # A long --idle-ms: a STATS flood keeps a sanitizer build's loop busy
    # for seconds, and the reading client must not be closed as idle.
    srv = Server(args.server, args.timers, "--loops", args.loops,
                 "--max-output-bytes", CAP, "--idle-ms", FLOOD_IDLE_MS,
                 "--heartbeat-ms", 5000)
    time.sleep(0.3)
    base_kb = srv.peak_rss_kb()
    reader = Conn(srv.port)
    argv = [args.load, "--port", str(srv.port), "--mode", "noread",
            "--conns", str(NOREAD), "--interval-ms", "5", "--line-size",
            "4096", "--duration-ms", "8000", "--idle-ms",
            str(FLOOD_IDLE_MS), "--heartbeat-ms", "5000", "--noread-stats",
            "--max-msgs",
            "100000000"]
    log("running: " + " ".join(argv))
    load = spawn(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    # Round trips while the flood lasts (up to 20): each must come back,
    # however long a sanitizer build takes to format the flood's STATS.
    most = 0
    tries = echoes = 0
    while load.poll() is None and tries < 20:
        tries += 1
        try:
            reader.send("still served\n")
            if reader.text(timeout=slack(10.0)) == "still served":
                echoes += 1
            reader.send("STATS\n")
            line = reader.text(timeout=slack(10.0)) or ""
        except TimeoutError as e:
            log("  the reader waited in vain: %s" % e)
            break
        for kv in line.split():
            if kv.startswith("output_bytes="):
                most = max(most, int(kv.split("=")[1]))
        time.sleep(0.2)
    peak_kb = srv.peak_rss_kb()
    out = load.communicate(timeout=slack(120))[0].decode(errors="replace")
    for line in out.splitlines():
        log("  | " + line)
    check(load.returncode == 0, "echo-load noread: no violation")
    check(tries >= 2 and echoes == tries,
          "a client that reads is served all along (%d of %d round trips)"
          % (echoes, tries))
    bound = CAP + NOREAD * (OUT_CHUNK + REPLY_MAX)
    check(most <= bound,
          "queued replies, at most %d bytes, within the cap + one piece "
          "per connection (%d)" % (most, bound))
    check(most > 0, "and the never-readers did queue replies")
    grown = peak_kb - base_kb
    log("  peak RSS %d KiB, %d KiB over the %d KiB at start"
        % (peak_kb, grown, base_kb))
    if args.sanitized:
        log("  (sanitizer build: RSS not checked)")
    else:
        # Beyond the queued replies: each connection's line buffer
        # (--max-line) and struct, libuv's, and the allocator's slack.
        # (pending input: at most one read, 64 KiB, each).
        allowed = (bound + NOREAD * (65536 + 8192)) // 1024 + 32 * 1024
        check(grown <= allowed, "peak RSS grew %d KiB, within %d KiB"
              % (grown, allowed))
    reader.close()
    srv.stop_and_check()
    finish()


if __name__ == "__main__":
    main()
