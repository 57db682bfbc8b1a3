#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The lingering close: a connection the server ends (ERR line too long,
ERR line timeout, BYE idle, ...) is read and its input thrown away until
the client closes or LINGER_MS passes, so that what the client still
sends does not turn the close into a reset, and the client reads the
last line and then the end of the stream.  A client that never stops
sending is closed all the same, LINGER_MS after the last line."""

import socket
import sys
import time

sys.dont_write_bytecode = True  # keep __pycache__ out of the source tree

from echotest import Server, check, finish, log, parse_args, slack

RUNS = 50
BIG = 4 << 20
LINGER_S = 2.0  # LINGER_MS in server.h
MAX_LINE = 4096


def read_to_end(sock, timeout=10):
    """Everything until EOF; raises on a reset or a timeout."""
    sock.settimeout(timeout)
    data = b""
    while True:
        d = sock.recv(65536)
        if not d:
            return data
        data += d


def one_run(port, payload_first, then=b""):
    """Sends payload_first, waits, sends `then`, then reads to the end.
    Returns None if it read the error line and then EOF, else what went
    wrong."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        s.sendall(payload_first)
        if then:
            time.sleep(0.3)  # past the line deadline: the ERR is on its way
            s.sendall(then)
        data = read_to_end(s)
    except OSError as e:  # EPIPE, ECONNRESET, a timeout
        return "%s" % (e.__class__.__name__)
    finally:
        s.close()
    return None if data.startswith(b"ERR ") and data.endswith(b"\n") \
        and data.count(b"\n") == 1 else "read %r" % data[:60]


def test_long_line(port):
    log("%d runs: %d MiB without a newline, then read" % (RUNS, BIG >> 20))
    bad = []
    t0 = time.monotonic()
    for i in range(RUNS):
        why = one_run(port, b"x" * BIG)
        if why is not None:
            bad.append((i, why))
    took = time.monotonic() - t0
    check(not bad, "ERR line too long, then EOF, no reset: %d of %d runs "
          "(bad: %s)" % (RUNS - len(bad), RUNS, bad[:5]))
    log("  %.1f ms a run" % (took * 1000 / RUNS))


def test_line_timeout(port):
    log("ERR line timeout to a client that goes on sending")
    bad = []
    for i in range(5):
        why = one_run(port, b"part of a line", then=b"y" * (1 << 20))
        if why is not None:
            bad.append((i, why))
    check(not bad, "ERR line timeout, then EOF, no reset: %d of 5 runs "
          "(bad: %s)" % (5 - len(bad), bad))


def test_bounded(port):
    log("a client that never stops sending is closed after LINGER_MS")
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.setblocking(False)
    t0 = time.monotonic()
    ended = None
    chunk = b"z" * 65536
    while time.monotonic() - t0 < LINGER_S + slack(8.0):
        try:
            s.send(chunk)
        except BlockingIOError:
            time.sleep(0.001)
        except OSError as e:  # the server closed: EPIPE or ECONNRESET
            ended = (time.monotonic() - t0, e.__class__.__name__)
            break
    s.close()
    # Not before LINGER_MS (the server's timer cannot fire early); later
    # only as much as a loaded machine holds the server up.
    check(ended is not None
          and LINGER_S - 0.1 <= ended[0] < LINGER_S + slack(8.0),
          "closed by the server %s (LINGER_MS %.0f s after its ERR)"
          % ("after %.1f s (%s)" % ended if ended else "never",
             LINGER_S))


def main():
    args = parse_args()
    srv = Server(args.server, args.timers, "--loops", args.loops,
                 "--max-line", MAX_LINE, "--line-timeout-ms", 200)
    test_long_line(srv.port)
    test_line_timeout(srv.port)
    test_bounded(srv.port)
    srv.stop_and_check()
    finish()


if __name__ == "__main__":
    main()
