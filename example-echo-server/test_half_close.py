#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A client that half-closes (shutdown(SHUT_WR), as nc -N does) still gets
everything the server owes it: the answer to each REQ it sent, and every
echo line, even those held back by backpressure; then EOF, not a reset.
One that half-closes and never reads is closed within --idle-ms of the
end of its answers."""

import os
import socket
import sys
import threading
import time

sys.dont_write_bytecode = True  # keep __pycache__ out of the source tree

from echotest import (Conn, Server, check, finish, log, parse_args, slack,
                      stats)

# Whether any output is still queued in the server when it reads the EOF
# depends on how the kernel sizes its buffers, so there are several sizes;
# without the half-close handling each loses lines most of the time.
BULK_MIB = (4, 8, 16)
SMALL_RCVBUF = 4096
IDLE_MS = 1000


def read_to_eof(sock, timeout):
    """Everything the socket gives until EOF: (bytes, how it ended), the
    end being "eof", "reset" or "timeout"."""
    data = []
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return b"".join(data), "timeout"
        sock.settimeout(left)
        try:
            d = sock.recv(65536)
        except socket.timeout:
            continue
        except ConnectionResetError:
            return b"".join(data), "reset"
        if not d:
            return b"".join(data), "eof"
        data.append(d)


def test_req(port):
    """One REQ, then the half-close: its one answer, then EOF."""
    for line, want in (("REQ a 50 2000", "OK a"),
                       ("REQ b 3000 100", "TIMEOUT b")):
        log("%s, then shutdown(SHUT_WR)" % line)
        c = Conn(port)
        c.send(line + "\n")
        c.sock.shutdown(socket.SHUT_WR)
        data, end = read_to_eof(c.sock, slack(10.0))
        c.close()
        check(data.decode(errors="replace") == want + "\n" and end == "eof",
              "  exactly one answer, %r, then EOF (got %r, then %s)"
              % (want, data[:200], end))


def connect_small_rcvbuf(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SMALL_RCVBUF)
    s.settimeout(10)
    s.connect(("127.0.0.1", port))
    return s


def bulk_lines(nbytes):
    lines = []
    total = 0
    i = 0
    while total < nbytes:
        line = b"line %08d %s\n" % (i, b"x" * 48)
        lines.append(line)
        total += len(line)
        i += 1
    return lines


def send_then_shut(s, payload, done):
    try:
        s.sendall(payload)
        s.shutdown(socket.SHUT_WR)
    except OSError as e:
        done.append(e)
        return
    done.append(None)


def test_bulk(port, mib):
    """Several MiB of echo lines from a client with a small receive
    buffer, which then half-closes and reads: the server has output
    queued at the EOF, and must still send every line, in order."""
    lines = bulk_lines(mib * 1024 * 1024)
    payload = b"".join(lines)
    log("%d bytes (%d echo lines) with SO_RCVBUF %d, shutdown(SHUT_WR), "
        "then read to EOF" % (len(payload), len(lines), SMALL_RCVBUF))
    s = connect_small_rcvbuf(port)
    done = []
    t = threading.Thread(target=send_then_shut, args=(s, payload, done),
                         daemon=True)
    t.start()
    # Reading only once the half-close is sent leaves the most output
    # queued at the EOF; if the kernel's buffers cannot take the whole
    # send, reading starts after 1 s anyway, rather than deadlock.
    t.join(1)
    t0 = time.monotonic()
    data, end = read_to_eof(s, slack(60.0))
    t.join(10)
    s.close()
    got = data.split(b"\n")
    tail = got.pop()  # after the last \n: b"" if the stream ends a line
    want = [ln[:-1] for ln in lines]
    first_bad = next((i for i, (a, b) in enumerate(zip(got, want))
                      if a != b), None)
    check(done == [None], "  the client sent it all and half-closed (%s)"
          % done)
    check(end == "eof" and got == want and tail == b"",
          "  every line back, in order, then EOF: %d of %d lines, first "
          "difference at %s, ended by %s (read in %.2f s)"
          % (len(got), len(want), first_bad, end, time.monotonic() - t0))


def open_sockets(pid):
    """The server's sockets (libuv opens /dev/null with its first stream,
    so other descriptors are not counted)."""
    n = 0
    for f in os.listdir("/proc/%d/fd" % pid):
        try:
            n += os.readlink("/proc/%d/fd/%s" % (pid, f)).startswith("socket:")
        except FileNotFoundError:
            pass
    return n


def test_never_reads(srv, nbytes):
    """A client that sends more than the kernel's buffers hold, half-closes
    and never reads: its echoes stay queued, the server is paused for its
    output, and closes it --idle-ms after that (BYE slow) plus the linger
    (2 s), within 10 s (times --time-scale) on a loaded machine; not
    never."""
    log("a client that sends %d bytes, half-closes and never reads "
        "(--idle-ms %d)" % (nbytes, IDLE_MS))
    base = open_sockets(srv.proc.pid)
    s = connect_small_rcvbuf(srv.port)
    done = []
    payload = b"".join(bulk_lines(nbytes))
    t = threading.Thread(target=send_then_shut, args=(s, payload, done),
                         daemon=True)
    t.start()
    t.join(20)
    check(done == [None], "  the client sent it all and half-closed (%s)"
          % done)
    t0 = time.monotonic()
    n = open_sockets(srv.proc.pid)
    while n > base and time.monotonic() - t0 < slack(10.0):
        time.sleep(0.05)
        n = open_sockets(srv.proc.pid)
    check(n <= base, "  the server closed it: %d sockets, %d before it "
          "came (waited %.1f s)" % (n, base, time.monotonic() - t0))
    s.close()
    st = stats(srv.port)
    check(st.get("conns") == 1, "  STATS counts only itself: conns=%s"
          % st.get("conns"))


def main():
    args = parse_args()
    srv = Server(args.server, args.timers, "--loops", args.loops)
    test_req(srv.port)
    for mib in BULK_MIB:
        test_bulk(srv.port, mib)
    srv.stop_and_check()
    srv = Server(args.server, args.timers, "--loops", args.loops,
                 "--heartbeat-ms", 500, "--idle-ms", IDLE_MS)
    test_never_reads(srv, 16 * 1024 * 1024)
    srv.stop_and_check()
    finish()


if __name__ == "__main__":
    main()
