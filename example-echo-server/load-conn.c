/* SPDX-License-Identifier: MIT */
/* echo-load: connections, what they send and what they check. */

#include "load.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

uint64_t rnd(void) {
  /* xorshift64*: reproducible from --seed, good enough for jitter. */
  g.rng ^= g.rng >> 12;
  g.rng ^= g.rng << 25;
  g.rng ^= g.rng >> 27;
  return g.rng * 0x2545F4914F6CDD1DULL;
}


static uint64_t rnd_range(uint64_t lo, uint64_t hi) {
  return lo + (hi > lo ? rnd() % (hi - lo + 1) : 0);
}


/* ---------------------------------------------------------------------- */
/* Sending.                                                                 */

static void on_write(uv_write_t* req, int status) {
  (void) status; /* a failed write shows up as a read error */
  free(req);
}


static int conn_send(conn_t* c, const char* data, size_t len) {
  wreq_t* w = xrealloc(NULL, sizeof(*w) + len);
  uv_buf_t buf;

  memcpy(w->data, data, len);
  buf = uv_buf_init(w->data, (unsigned) len);
  if (uv_write(&w->req, (uv_stream_t*) &c->tcp, &buf, 1, on_write) != 0) {
    free(w);
    return -1;
  }
  return 0;
}


/* The echo line number seq of connection c: "e <conn> <seq> xxx...". */
static size_t echo_line(const conn_t* c, uint64_t seq, char* buf, size_t size) {
  int n = snprintf(buf, size, "e %d %" PRIu64 " ", c->index, seq);
  size_t len = (size_t) n;

  while ((int) len < g.line_size - 1 && len < size - 1)
    buf[len++] = 'x';
  buf[len++] = '\n';
  return len;
}


static int may_send(void) {
  return g.phase == PHASE_RUN && g.msgs < g.max_msgs;
}


/* The most a never-reading connection leaves queued in this process: past
 * it, its sends are skipped, so the load cannot grow without bound. */
#define NOREAD_QUEUE_MAX (1024 * 1024)
/* What a never-reading connection sends per tick, at most, in lines. */
#define NOREAD_BURST 65536
#define NOREAD_RCVBUF 16384

static void on_alloc(uv_handle_t* handle, size_t suggested, uv_buf_t* buf);
static void on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf);

static void on_send_timer(uv_timer_t* handle) {
  conn_t* c = handle->data;
  char buf[4200];
  size_t len;

  if (c->role == ROLE_SLOWLORIS) {
    /* One more byte of a line that never ends.  It goes on after the run
     * ends, until the server cuts the line: stopping would make the
     * connection idle, and BYE idle is not what is being tested. */
    if (c->state != SLOT_OPEN || c->cause != -1 || g.phase == PHASE_DONE)
      return;
    c->last_activity = uv_hrtime();
    if (c->line_started == 0)
      c->line_started = c->last_activity;
    c->pinged = 0;
    g.msgs++;
    conn_send(c, "x", 1);
    return;
  }
  if (c->state != SLOT_OPEN || !may_send())
    return;
  if (c->role == ROLE_NOREAD) {
    /* As much as a burst, in one write, as long as this side's own queue
     * is short. */
    static char burst[NOREAD_BURST + sizeof(buf)];
    size_t n = 0;
    if (c->tcp.write_queue_size > NOREAD_QUEUE_MAX) {
      g.skipped++;
      return;
    }
    while (n < NOREAD_BURST && may_send()) {
      if (g.noread_stats) {
        memcpy(burst + n, "STATS\n", 6);
        n += 6;
      } else {
        n += echo_line(c, c->seq_sent, burst + n, sizeof(buf));
      }
      c->seq_sent++;
      g.msgs++;
    }
    c->last_activity = uv_hrtime();
    if (n > 0)
      conn_send(c, burst, n);
    return;
  }
  if (c->seq_sent - c->seq_echoed >= RING) {
    g.skipped++;
    return;
  }
  len = echo_line(c, c->seq_sent, buf, sizeof(buf));
  c->sent_at[c->seq_sent % RING] = uv_hrtime();
  c->last_activity = c->sent_at[c->seq_sent % RING];
  c->pinged = 0;
  c->seq_sent++;
  g.msgs++;
  conn_send(c, buf, len);
}


static void rpc_send(conn_t* c) {
  char buf[128];
  rpc_t* r;
  int n;

  while (c->inflight < g.inflight && may_send()) {
    if (g.nrpcs == g.rpcs_cap) {
      g.rpcs_cap = g.rpcs_cap ? g.rpcs_cap * 2 : 1024;
      g.rpcs = xrealloc(g.rpcs, g.rpcs_cap * sizeof(*g.rpcs));
    }
    r = &g.rpcs[g.nrpcs++];
    r->conn = (uint32_t) c->index;
    r->work_ms = (uint32_t) rnd_range(g.work_min, g.work_max);
    r->deadline_ms = (uint32_t) rnd_range(g.deadline_min, g.deadline_max);
    r->state = 0;
    r->sent_at = uv_hrtime();
    c->last_activity = r->sent_at;
    c->pinged = 0;
    c->inflight++;
    g.msgs++;
    /* ids are 1-based indexes into g.rpcs; "timed": the answer says when
     * the work ended (handle_rpc_reply) */
    n = snprintf(buf, sizeof(buf), "REQ %zu %" PRIu32 " %" PRIu32 " timed\n",
                 g.nrpcs, r->work_ms, r->deadline_ms);
    conn_send(c, buf, (size_t) n);
  }
}


/* ---------------------------------------------------------------------- */
/* Receiving.                                                               */

/* How far the client's view of a request may disagree with the server's
 * report of it: the server counts from when it read the REQ on its loop's
 * clock (uv_now, which may be a coarse clock a tick behind), in whole
 * milliseconds, and the client from just before it sent the REQ. */
#define REPORT_SLACK_MS 5

/* Reads " ended=<ms>" or " ended=-" after a reply's id: 1 with *ended set,
 * 0 for "-" (the work had not ended when the server answered), -1 if it
 * is not there. */
static int parse_ended(const char* s, uint64_t* ended) {
  char* end;

  if (strncmp(s, " ended=", 7) != 0)
    return -1;
  s += 7;
  if (strcmp(s, "-") == 0)
    return 0;
  if (*s < '0' || *s > '9')
    return -1;
  errno = 0;
  *ended = strtoull(s, &end, 10);
  return errno == 0 && *end == '\0' ? 1 : -1;
}


/* kind: 1 OK, 0 TIMEOUT, 2 BUSY.
 *
 * OK and TIMEOUT are judged by when the work really ended, which the
 * server reports (" ended=", asked with "timed"): OK iff by the deadline.
 * work_ms against deadline_ms alone cannot judge a TIMEOUT: a pool thread
 * that the OS runs late (a loaded machine) ends a short work past its
 * deadline, and then TIMEOUT is right.  Such a TIMEOUT is counted
 * (late_work), not a violation.  The report itself is checked against
 * what the client can see: no work ends before its work_ms, nor after
 * the answer came; a TIMEOUT comes no earlier than the deadline; and an
 * OK for a work longer than its deadline (+ --margin-ms) is wrong
 * whatever the report says. */
static void handle_rpc_reply(conn_t* c, const char* line, int kind) {
  const char* idp = line + (kind == 1 ? 3 : kind == 2 ? 5 : 8);
  int ok = kind == 1;
  char* end;
  unsigned long long id;
  uint64_t ended = 0;
  int have_end = -1;
  int bad_id;
  rpc_t* r;
  double took;

  errno = 0;
  id = strtoull(idp, &end, 10);
  bad_id = errno != 0 || end == idp;
  if (kind != 2)
    have_end = parse_ended(end, &ended);
  if (bad_id || (kind == 2 ? *end != '\0' : have_end < 0) || id == 0 ||
      id > g.nrpcs || g.rpcs[id - 1].conn != (uint32_t) c->index) {
    violation(c, "reply for a request it never sent, or without ended=: '%s'",
              line);
    return;
  }
  r = &g.rpcs[id - 1];
  if (r->state != 0) {
    violation(c, "request %llu answered twice (again: '%s')", id, line);
    return;
  }
  r->state = 1;
  c->inflight--;
  took = ms_since(r->sent_at);
  sample(&g.rpc_latency, took);
  if (have_end == 1) {
    sample(&g.work_late, (double) ended - r->work_ms);
    if (ended + 1 < r->work_ms)
      violation(c, "'%s': the work of %u ms cannot have ended at %" PRIu64
                " ms", line, r->work_ms, ended);
    if ((double) ended > took + REPORT_SLACK_MS)
      violation(c, "'%s': the work ended at %" PRIu64 " ms, but the answer "
                "came after %.1f ms", line, ended, took);
  }
  if (kind == 2) {
    /* Turned away by admission: at once, before its deadline, which the
     * server must not even have started (--slack-ms for a busy machine). */
    g.req_busy++;
    if (took > (double) (r->deadline_ms + g.slack_ms))
      violation(c,
                "BUSY %llu after %.1f ms, later than its deadline %u ms + "
                "%" PRIu64,
                id, took, r->deadline_ms, g.slack_ms);
  } else if (ok) {
    g.req_ok++;
    if (r->work_ms > (uint64_t) r->deadline_ms + g.margin_ms)
      violation(c, "OK %llu, but work %u ms > deadline %u ms + %" PRIu64, id,
                r->work_ms, r->deadline_ms, g.margin_ms);
    if (have_end == 0 || ended > r->deadline_ms)
      violation(c, "'%s': OK, but the work ended after its deadline %u ms",
                line, r->deadline_ms);
  } else {
    g.req_timeout++;
    sample(&g.timeout_late, took - r->deadline_ms);
    if (have_end == 1 && ended <= r->deadline_ms)
      violation(c, "'%s': TIMEOUT, but the work ended by its deadline %u ms",
                line, r->deadline_ms);
    if (took < (double) r->deadline_ms - REPORT_SLACK_MS)
      violation(c, "TIMEOUT %llu after %.1f ms, before its deadline %u ms",
                id, took, r->deadline_ms);
    if ((uint64_t) r->work_ms + g.margin_ms <= r->deadline_ms)
      g.late_work++; /* the work was short enough, its thread was late */
  }
  rpc_send(c);
  maybe_done();
}


static void handle_line(conn_t* c, char* line, size_t len) {
  char expect[4200];
  size_t elen;
  double since = ms_since(c->last_activity);
  uint64_t seq;

  line[len] = '\0';
  if (strcmp(line, "PING") == 0) {
    g.pings++;
    /* A never-reading connection's last send may still sit in its own
     * queue, so its silence as the server sees it is unknown here. */
    if (g.heartbeat_ms > 0 && c->role != ROLE_NOREAD &&
        since < (double) g.heartbeat_ms - CLOCK_SLACK_MS)
      violation(c, "PING after %.1f ms of silence, heartbeat is %" PRIu64,
                since, g.heartbeat_ms);
    if (!c->pinged && c->role == ROLE_IDLE)
      sample(&g.first_ping, since);
    c->pinged = 1;
    if (c->role == ROLE_ACTIVE || c->role == ROLE_RPC) {
      /* Busy connections answer; a PONG is activity too.  A slowloris
       * one does not: its PONG would end its line. */
      g.pongs++;
      c->last_activity = uv_hrtime();
      c->pinged = 0;
      conn_send(c, "PONG\n", 5);
    }
    return;
  }
  if (strncmp(line, "BYE ", 4) == 0 || strncmp(line, "ERR ", 4) == 0) {
    if (c->cause != -1) {
      violation(c, "'%s' after the connection was already ending", line);
      return;
    }
    if (strcmp(line, "BYE idle") == 0)
      c->cause = CAUSE_IDLE;
    else if (strcmp(line, "ERR line timeout") == 0)
      c->cause = CAUSE_LINE_TIMEOUT;
    else if (strcmp(line, "BYE slow") == 0)
      c->cause = CAUSE_SLOW;
    else if (strcmp(line, "BYE busy") == 0)
      c->cause = CAUSE_BUSY;
    else if (strcmp(line, "BYE shutdown") == 0)
      c->cause = CAUSE_SHUTDOWN;
    else if (line[0] == 'E')
      c->cause = CAUSE_ERR;
    else
      violation(c, "unknown BYE: '%s'", line);
    if (c->cause == CAUSE_IDLE) {
      sample(&g.idle_late, since - (double) g.idle_ms);
      /* A never-reading connection is idle once it has stopped sending
       * (--max-msgs, or the end of the run). */
      if (c->role == ROLE_NOREAD)
        ; /* its silence as the server saw it is unknown here (PING) */
      else if (c->role != ROLE_IDLE)
        violation(c, "BYE idle on a connection that was not idle");
      else if (since < (double) g.idle_ms - CLOCK_SLACK_MS)
        violation(c,
                  "BYE idle after %.1f ms of silence: early, idle is %" PRIu64,
                  since, g.idle_ms);
      else if (since > (double) (g.idle_ms + g.slack_ms))
        violation(c,
                  "BYE idle after %.1f ms of silence: later than %" PRIu64
                  " + %" PRIu64,
                  since, g.idle_ms, g.slack_ms);
    } else if (c->cause == CAUSE_LINE_TIMEOUT) {
      double age = c->line_started ? ms_since(c->line_started) : -1;
      sample(&g.line_late, age - (double) g.line_timeout_ms);
      if (c->role != ROLE_SLOWLORIS)
        violation(c, "ERR line timeout, but its lines all ended");
      else if (age < (double) g.line_timeout_ms - CLOCK_SLACK_MS)
        violation(c,
                  "ERR line timeout %.1f ms into the line: early, the "
                  "limit is %" PRIu64,
                  age, g.line_timeout_ms);
      else if (age > (double) (g.line_timeout_ms + g.slack_ms))
        violation(c,
                  "ERR line timeout %.1f ms into the line: later than "
                  "%" PRIu64 " + %" PRIu64,
                  age, g.line_timeout_ms, g.slack_ms);
    } else if (c->cause == CAUSE_SLOW) {
      double age = ms_since(c->started);
      sample(&g.slow_after, age);
      /* The server pauses a connection at the earliest when it connects,
       * and says BYE slow after --idle-ms of pause. */
      if (c->role != ROLE_NOREAD)
        violation(c, "BYE slow on a connection that reads");
      else if (age < (double) g.idle_ms - CLOCK_SLACK_MS)
        violation(c,
                  "BYE slow %.1f ms after connecting: sooner than "
                  "idle %" PRIu64,
                  age, g.idle_ms);
    } else if (c->cause == CAUSE_ERR) {
      violation(c, "server said '%s'", line);
    }
    if (c->cause != -1)
      sample(&g.close_since[c->cause], since);
    return;
  }
  if (c->role == ROLE_RPC) {
    if (strncmp(line, "OK ", 3) == 0) {
      handle_rpc_reply(c, line, 1);
      return;
    }
    if (strncmp(line, "TIMEOUT ", 8) == 0) {
      handle_rpc_reply(c, line, 0);
      return;
    }
    if (strncmp(line, "BUSY ", 5) == 0) {
      handle_rpc_reply(c, line, 2);
      return;
    }
  }
  if (c->role == ROLE_NOREAD && c->seq_echoed < c->seq_sent) {
    seq = c->seq_echoed;
    elen = echo_line(c, seq, expect, sizeof(expect));
    if (g.noread_stats ? strncmp(line, "STATS ", 6) != 0
                       : elen - 1 != len || memcmp(expect, line, len) != 0)
      violation(c, "wrong echo for line %" PRIu64 ": '%.60s'", seq, line);
    else
      g.echoed++;
    c->seq_echoed++;
    maybe_done();
    return;
  }
  if (c->role == ROLE_SLOWLORIS && strcmp(line, "PING") != 0) {
    violation(c, "a line for a connection that never ended one: '%.60s'", line);
    return;
  }
  if (c->role == ROLE_ACTIVE && c->seq_echoed < c->seq_sent) {
    seq = c->seq_echoed;
    elen = echo_line(c, seq, expect, sizeof(expect));
    if (elen - 1 != len || memcmp(expect, line, len) != 0) {
      violation(c, "wrong echo for line %" PRIu64 ": '%.60s'", seq, line);
    } else {
      sample(&g.rtt, ms_since(c->sent_at[seq % RING]));
      g.echoed++;
    }
    c->seq_echoed++;
    maybe_done();
    return;
  }
  violation(c, "unexpected line '%.60s'", line);
}


static void on_alloc(uv_handle_t* handle, size_t suggested, uv_buf_t* buf) {
  static char slab[65536]; /* read_cb follows at once, on this thread */

  (void) handle;
  (void) suggested;
  *buf = uv_buf_init(slab, sizeof(slab));
}


static void conn_ended(conn_t* c, int cause) {
  double since = ms_since(c->last_activity);
  rpc_t* r;
  size_t i;
  int expected;
  int cut;

  if (c->cause == -1) {
    c->cause = cause;
    sample(&g.close_since[cause], since);
  }
  g.closes[c->cause]++;
  expected = c->role == ROLE_IDLE        ? CAUSE_IDLE
             : c->role == ROLE_SLOWLORIS ? CAUSE_LINE_TIMEOUT
             : c->role == ROLE_NOREAD    ? CAUSE_SLOW
                                         : -1;
  /* A connection that does not read cannot see its BYE slow: the server
   * closes it 2 s later all the same, and the BYE may still be behind
   * megabytes of replies when the close comes. */
  cut = c->role == ROLE_NOREAD &&
        (c->cause == CAUSE_EOF || c->cause == CAUSE_RESET);
  if (cut)
    g.noread_cut++;
  if (c->role == ROLE_NOREAD && c->cause == CAUSE_IDLE)
    expected = CAUSE_IDLE;
  if (c->cause == CAUSE_SHUTDOWN && g.allow_shutdown) {
    /* expected: the test is stopping the server */
  } else if (c->cause != expected && !cut) {
    violation(c, "closed by the server (%s)", cause_names[c->cause]);
  }
  if ((c->role == ROLE_ACTIVE || c->role == ROLE_NOREAD) &&
      c->seq_echoed < c->seq_sent) {
    /* A never-reading connection closed by the server (slow, or idle
     * once it stopped sending) never gets the rest. */
    if (!(c->cause == CAUSE_SHUTDOWN && g.allow_shutdown) &&
        c->role != ROLE_NOREAD)
      violation(c, "%" PRIu64 " lines never echoed",
                c->seq_sent - c->seq_echoed);
    c->seq_echoed = c->seq_sent;
  }
  if (c->role == ROLE_RPC && c->inflight > 0) {
    /* They can never be answered now: count them here, once. */
    for (i = 0; i < g.nrpcs; i++) {
      r = &g.rpcs[i];
      if (r->conn == (uint32_t) c->index && r->state == 0) {
        r->state = 2;
        if (!(c->cause == CAUSE_SHUTDOWN && g.allow_shutdown))
          violation(c, "request %zu never answered", i + 1);
      }
    }
    c->inflight = 0;
  }
  conn_close(c);
}


static void on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) {
  conn_t* c = stream->data;
  const char* p = buf->base;
  const char* end = p + (nread > 0 ? nread : 0);
  const char* nl;
  size_t n;

  if (nread < 0) {
    if (!c->closing_by_us)
      conn_ended(c, nread == UV_EOF ? CAUSE_EOF : CAUSE_RESET);
    return;
  }
  /* Lines split like the server's (conn.c), on purpose not through one
   * shared splitter: they share the memchr loop, not the policy.  This
   * client always copies into a growing buffer and reports a long line as
   * a violation; the server splits in place, buffers only a line that
   * spans reads, bounds it by --max-line and answers ERR line too long.
   * A splitter for both would need a callback per policy. */
  while (p < end && c->state == SLOT_OPEN) {
    nl = memchr(p, '\n', (size_t) (end - p));
    n = (size_t) ((nl ? nl : end) - p);
    if (c->line_len + n + 1 > LINE_MAX_IN) {
      violation(c, "a line longer than %d bytes", LINE_MAX_IN);
      conn_ended(c, CAUSE_RESET);
      return;
    }
    if (c->line_len + n + 1 > c->line_cap) {
      c->line_cap = c->line_len + n + 1 < 256 ? 256 : c->line_len + n + 1;
      c->line = xrealloc(c->line, c->line_cap);
    }
    memcpy(c->line + c->line_len, p, n);
    c->line_len += n;
    if (nl == NULL)
      break;
    handle_line(c, c->line, c->line_len);
    c->line_len = 0;
    p = nl + 1;
  }
}


/* A never-reading connection gets a small receive buffer of its own, set
 * before it connects (the window is agreed then): otherwise this side's
 * kernel, whose loopback buffers grow to tens of megabytes, would take in
 * what the server sends, and the server's own queue would never fill. */
static void noread_socket(conn_t* c) {
  int size = NOREAD_RCVBUF;
  int fd = socket(g.addr.ss_family, SOCK_STREAM, 0);

  if (fd < 0)
    return; /* uv_tcp_connect makes one of its own */
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
  if (uv_tcp_open(&c->tcp, fd) != 0)
    close(fd);
}


/* The run is over: never-reading connections read now, and check the
 * echoes of everything they sent, up to a BYE slow. */
void noread_start_reading(void) {
  int i;

  for (i = 0; i < g.nconns; i++) {
    conn_t* c = &g.conns[i];
    if (c->role == ROLE_NOREAD && c->state == SLOT_OPEN)
      uv_read_start((uv_stream_t*) &c->tcp, on_alloc, on_read);
  }
}


/* ---------------------------------------------------------------------- */
/* Connection slots.                                                        */

static void on_tcp_closed(uv_handle_t* handle) {
  conn_t* c = handle->data;
  int again = ((c->role == ROLE_IDLE && c->cause == CAUSE_IDLE) ||
               (c->role == ROLE_SLOWLORIS && c->cause == CAUSE_LINE_TIMEOUT)) &&
              !c->closing_by_us && !g.no_reconnect && g.phase == PHASE_RUN;

  c->state = SLOT_FREE;
  g.open_slots--;
  if (again) {
    /* An idle connection that was closed for idleness comes back, so the
     * server keeps seeing --conns connections and every idle close is
     * another sample. */
    conn_start(c);
  }
  maybe_done();
}


void conn_close(conn_t* c) {
  if (c->state == SLOT_FREE || c->state == SLOT_CLOSING)
    return;
  if (c->state == SLOT_QUEUED) {
    c->state = SLOT_FREE; /* it is skipped when its turn comes */
    g.open_slots--;
    return;
  }
  uv_timer_stop(&c->timer);
  c->state = SLOT_CLOSING;
  uv_close((uv_handle_t*) &c->tcp, on_tcp_closed);
}


static void on_connect(uv_connect_t* req, int status) {
  conn_t* c = req->data;

  g.connecting--;
  pump_connects();
  if (c->state != SLOT_CONNECTING)
    return; /* closed meanwhile: on_tcp_closed follows */
  if (status != 0) {
    g.connect_errors++;
    violation(c, "connect: %s", uv_strerror(status));
    c->closing_by_us = 1;
    conn_close(c);
    return;
  }
  g.connects++;
  c->state = SLOT_OPEN;
  uv_tcp_nodelay(&c->tcp, 1);
  if (c->role != ROLE_NOREAD)
    uv_read_start((uv_stream_t*) &c->tcp, on_alloc, on_read);
  if (c->role == ROLE_ACTIVE || c->role == ROLE_NOREAD ||
      c->role == ROLE_SLOWLORIS) {
    /* A random phase spreads the sends over the interval. */
    uv_timer_start(&c->timer, on_send_timer, rnd() % g.interval_ms + 1,
                   g.interval_ms);
  } else if (c->role == ROLE_RPC) {
    rpc_send(c);
  }
}


static void do_connect(conn_t* c) {
  int err;

  c->state = SLOT_CONNECTING;
  c->cause = -1;
  c->closing_by_us = 0;
  c->pinged = 0;
  c->line_len = 0;
  c->seq_sent = c->seq_echoed = 0;
  c->inflight = 0;
  c->line_started = 0;
  uv_tcp_init(g.loop, &c->tcp);
  c->tcp.data = c;
  if (c->role == ROLE_NOREAD)
    noread_socket(c);
  c->connect_req.data = c;
  /* Silence counts from before the SYN: the server cannot have seen the
   * connection any earlier, so a BYE idle can never look late because of
   * how long connecting took, nor early. */
  c->started = uv_hrtime();
  c->last_activity = c->started;
  err = uv_tcp_connect(&c->connect_req, &c->tcp,
                       (const struct sockaddr*) &g.addr, on_connect);
  if (err != 0) {
    g.connect_errors++;
    violation(c, "connect: %s", uv_strerror(err));
    c->closing_by_us = 1;
    conn_close(c);
    return;
  }
  g.connecting++;
}


void pump_connects(void) {
  conn_t* c;

  while (g.connecting < CONNECT_PARALLEL && g.queue_head != NULL) {
    c = g.queue_head;
    g.queue_head = c->next_queued;
    if (g.queue_head == NULL)
      g.queue_tail = NULL;
    if (c->state == SLOT_QUEUED)
      do_connect(c);
  }
}


void conn_start(conn_t* c) {
  c->state = SLOT_QUEUED;
  g.open_slots++;
  c->next_queued = NULL;
  if (g.queue_tail != NULL)
    g.queue_tail->next_queued = c;
  else
    g.queue_head = c;
  g.queue_tail = c;
  pump_connects();
}
