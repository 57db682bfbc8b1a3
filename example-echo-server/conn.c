/* SPDX-License-Identifier: MIT */
/* Connections: reading lines, writing replies, the heartbeat and idle
 * timer, and closing. */

#include "server.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void on_alloc(uv_handle_t* handle, size_t suggested, uv_buf_t* buf);
static void on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf);


/* ---------------------------------------------------------------------- */
/* Output.                                                                  */

static void on_write(uv_write_t* req, int status) {
  wreq_t* w = (wreq_t*) req;
  conn_t* c = req->handle->data;

  (void) status; /* a failed write shows up as a read error or EOF */
  free(w);
  if (c->paused && c->state == CONN_OPEN &&
      c->tcp.write_queue_size < WRITE_QUEUE_LOW) {
    c->paused = 0;
    uv_read_start((uv_stream_t*) &c->tcp, on_alloc, on_read);
  }
}


/* Queues bytes to the client; returns 0 or a UV_E* error. */
int conn_send(conn_t* c, const char* data, size_t len) {
  wreq_t* w;
  uv_buf_t buf;
  int err;

  w = xmalloc(sizeof(*w) + len);
  w->len = len;
  memcpy(w->data, data, len);
  buf = uv_buf_init(w->data, (unsigned) len);
  err = uv_write(&w->req, (uv_stream_t*) &c->tcp, &buf, 1, on_write);
  if (err != 0) {
    free(w);
    return err;
  }
  if (c->state == CONN_OPEN && !c->paused &&
      c->tcp.write_queue_size > WRITE_QUEUE_HIGH) {
    c->paused = 1;
    uv_read_stop((uv_stream_t*) &c->tcp);
  }
  return 0;
}


/* Sends a reply now (from a timer or a work's done call). */
void conn_reply(conn_t* c, const char* line) {
  char buf[256];
  int n;

  n = snprintf(buf, sizeof(buf), "%s\n", line);
  if (conn_send(c, buf, (size_t) n) != 0)
    conn_close(c);
}


void out_append(const char* data, size_t len) {
  if (g.out_len + len > g.out_cap) {
    size_t cap = g.out_cap ? g.out_cap : 65536;
    while (cap < g.out_len + len)
      cap *= 2;
    g.out = realloc(g.out, cap);
    if (g.out == NULL) {
      logf_("out of memory");
      abort();
    }
    g.out_cap = cap;
  }
  memcpy(g.out + g.out_len, data, len);
  g.out_len += len;
}


void out_flush(conn_t* c) {
  size_t len = g.out_len;

  g.out_len = 0;
  if (len > 0 && conn_send(c, g.out, len) != 0)
    conn_close(c);
}


/* ---------------------------------------------------------------------- */
/* Connections.                                                             */

static void conn_unref(conn_t* c) {
  if (--c->refs > 0)
    return;
  free(c->line);
  free(c);
  g.live--;
  maybe_finish_shutdown();
}


static void on_tcp_closed(uv_handle_t* handle) {
  conn_unref(handle->data);
}


static void on_timer_closed(xtimer_t* t) {
  conn_unref(t->data);
}


/* Leaves CONN_OPEN: out of the list and the counts, requests abandoned
 * (their work still ends later, on its own, see req_work_done). */
static void conn_leave_open(conn_t* c) {
  req_t* r;

  if (c->counted) {
    c->prev->next = c->next;
    c->next->prev = c->prev;
    g.nconns--;
  }
  while (c->reqs.next != &c->reqs) {
    r = c->reqs.next;
    req_detach(r);
    xwork_cancel(&r->work);
    xtimer_close(&r->deadline, req_deadline_closed);
  }
}


/* Closes now, dropping whatever is not sent yet.  Idempotent. */
void conn_close(conn_t* c) {
  if (c->state == CONN_CLOSED)
    return;
  if (c->state == CONN_OPEN)
    conn_leave_open(c);
  c->state = CONN_CLOSED;
  uv_close((uv_handle_t*) &c->tcp, on_tcp_closed);
  xtimer_close(&c->timer, on_timer_closed); /* last: may free c */
}


static void on_shutdown(uv_shutdown_t* req, int status) {
  (void) status;
  conn_close(req->data);
}


static void conn_timer(xtimer_t* t);

/* Sends a last line, then closes once it is sent (or after LINGER_MS). */
void conn_bye(conn_t* c, const char* msg) {
  if (c->state != CONN_OPEN)
    return;
  conn_leave_open(c);
  c->state = CONN_CLOSING;
  uv_read_stop((uv_stream_t*) &c->tcp);
  c->shutdown_req.data = c;
  /* uv_shutdown waits for the queued writes, BYE included, then sends FIN:
   * the client reads BYE and then EOF. */
  if (conn_send(c, msg, strlen(msg)) != 0 ||
      uv_shutdown(&c->shutdown_req, (uv_stream_t*) &c->tcp, on_shutdown) != 0 ||
      xtimer_start(&c->timer, conn_timer, LINGER_MS) != 0) {
    conn_close(c);
  }
}


/* After activity: the wait until the first PING, or BYE if that is
 * sooner. */
static uint64_t first_wait(void) {
  return g.heartbeat_ms < g.idle_ms ? g.heartbeat_ms : g.idle_ms;
}


/* The connection's one timer: PING, BYE idle, or the end of a linger. */
static void conn_timer(xtimer_t* t) {
  conn_t* c = t->data;
  uint64_t silent;
  uint64_t next;

  if (c->state != CONN_OPEN) {
    conn_close(c); /* the BYE did not drain in LINGER_MS */
    return;
  }
  silent = uv_now(g.loop) - c->last_activity;
  if (silent >= g.idle_ms) {
    g.idle_closes++;
    g.idle_late[silent - g.idle_ms < LATE_BUCKETS ? silent - g.idle_ms
                                                  : LATE_BUCKETS - 1]++;
    conn_bye(c, "BYE idle\n");
    return;
  }
  if (silent >= g.heartbeat_ms)
    conn_reply(c, "PING");
  /* The next PING is due at the next multiple of heartbeat_ms of silence,
   * unless the BYE comes first.  A late wake-up skips PINGs, never BYE. */
  next = (silent / g.heartbeat_ms + 1) * g.heartbeat_ms;
  if (next > g.idle_ms)
    next = g.idle_ms;
  if (c->state == CONN_OPEN &&
      xtimer_start(&c->timer, conn_timer, next - silent) != 0)
    conn_close(c);
}


static void handle_line(conn_t* c, const char* line, size_t len) {
  size_t n = len;
  char buf[512];

  if (n > 0 && line[n - 1] == '\r')
    n--; /* accept CRLF; the echo keeps the line as it came */
  if (n > g.max_line) {
    out_flush(c);
    conn_bye(c, "ERR line too long\n");
    return;
  }
  if (n == 4 && memcmp(line, "PONG", 4) == 0)
    return; /* an answer to PING: activity, and nothing to say */
  if (n == 5 && memcmp(line, "STATS", 5) == 0) {
    stats_format(buf, sizeof(buf));
    out_append(buf, strlen(buf));
    out_append("\n", 1);
    return;
  }
  if (n >= 3 && memcmp(line, "REQ", 3) == 0 &&
      (n == 3 || line[3] == ' ' || line[3] == '\t')) {
    handle_req(c, line, n);
    return;
  }
  out_append(line, len);
  out_append("\n", 1);
}


static void on_alloc(uv_handle_t* handle, size_t suggested, uv_buf_t* buf) {
  /* libuv calls on_read right after on_alloc, on this one thread, so one
   * buffer serves every connection; a partial line is copied out. */
  static char slab[65536];

  (void) handle;
  (void) suggested;
  *buf = uv_buf_init(slab, sizeof(slab));
}


static void on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) {
  conn_t* c = stream->data;
  const char* p = buf->base;
  const char* end;
  const char* nl;
  size_t n;

  if (nread < 0) {
    conn_close(c); /* EOF or error: nobody is left to answer */
    return;
  }
  if (nread == 0)
    return;
  end = p + nread;

  /* Activity: once per read, not per line, is enough. */
  c->last_activity = uv_now(g.loop);
  if (xtimer_start(&c->timer, conn_timer, first_wait()) != 0) {
    conn_close(c);
    return;
  }

  g.out_len = 0;
  while (p < end && c->state == CONN_OPEN) {
    nl = memchr(p, '\n', (size_t) (end - p));
    n = (size_t) ((nl != NULL ? nl : end) - p);
    if (c->line_len > 0 || nl == NULL) {
      /* Part of a line is kept, up to max_line + 1 bytes (room for a \r);
       * one byte more is enough to know that it is too long. */
      if (c->line_len + n > g.max_line + 1) {
        out_flush(c);
        conn_bye(c, "ERR line too long\n");
        break;
      }
      if (c->line == NULL)
        c->line = xmalloc(g.max_line + 1);
      memcpy(c->line + c->line_len, p, n);
      c->line_len += n;
      if (nl == NULL)
        break;
      handle_line(c, c->line, c->line_len);
      c->line_len = 0;
    } else {
      handle_line(c, p, n);
    }
    p = nl + 1;
  }
  if (c->state == CONN_OPEN)
    out_flush(c);
  g.out_len = 0;
}


void on_connection(uv_stream_t* server, int status) {
  conn_t* c;
  int err;

  if (status < 0) {
    logf_("accept: %s", uv_strerror(status));
    return;
  }
  c = xmalloc(sizeof(*c));
  memset(c, 0, sizeof(*c));
  uv_tcp_init(g.loop, &c->tcp);
  c->tcp.data = c;
  err = uv_accept(server, (uv_stream_t*) &c->tcp);
  if (err != 0) {
    logf_("accept: %s", uv_strerror(err));
    c->refs = 1;
    g.live++;
    c->state = CONN_CLOSED;
    uv_close((uv_handle_t*) &c->tcp, on_tcp_closed);
    return;
  }
  uv_tcp_nodelay(&c->tcp, 1); /* small request/reply lines: no Nagle */
  c->reqs.next = c->reqs.prev = &c->reqs;
  c->state = CONN_OPEN;
  c->refs = 2;
  g.live++;
  xtimer_init(&g.backend, &c->timer);
  c->timer.data = c;

  if (g.nconns >= g.max_conns) {
    g.busy_closes++;
    conn_bye(c, "BYE busy\n");
    return;
  }
  c->counted = 1;
  c->next = g.conns.next;
  c->prev = &g.conns;
  c->next->prev = c;
  g.conns.next = c;
  g.nconns++;

  /* The loop's time was read before this iteration's accepts began, and
   * accepting a burst of connections takes a while: without a fresh
   * reading, silence would count from before the client even connected,
   * and PING and BYE idle would come early by that much. */
  uv_update_time(g.loop);
  c->last_activity = uv_now(g.loop);
  if (xtimer_start(&c->timer, conn_timer, first_wait()) != 0 ||
      uv_read_start((uv_stream_t*) &c->tcp, on_alloc, on_read) != 0) {
    conn_close(c);
  }
}
