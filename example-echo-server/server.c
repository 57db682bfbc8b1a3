/* SPDX-License-Identifier: MIT */
/* uvtw-echo-server: a line-based TCP echo server with heartbeats, idle
 * timeouts and request deadlines, all timed by one uvtw wheel (or, with
 * --timers=uv, by one uv_timer_t each, for comparison).  See README.md for
 * the protocol and the flags.
 *
 * Everything runs on one loop thread except the simulated work of REQ
 * lines, which runs on libuv's threadpool.  The timers and the work are
 * reached only through backend.h, so this file is the same for both
 * backends.
 */

#include "backend.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#define REQ_ID_MAX 64
/* Writes queued to a client that does not read: above HIGH the server stops
 * reading from it (so it cannot make the server buffer without bound),
 * below LOW it reads again. */
#define WRITE_QUEUE_HIGH (1024 * 1024)
#define WRITE_QUEUE_LOW (256 * 1024)
/* How long a connection that was sent BYE may take to receive it before
 * it is closed anyway: a client that never reads must not hold it open. */
#define LINGER_MS 2000
/* Idle-close lateness histogram: 1 ms buckets, the last one is "more". */
#define LATE_BUCKETS 1001

typedef struct conn_s conn_t;
typedef struct req_s req_t;

typedef enum {
  CONN_OPEN,    /* reading, in the connection list */
  CONN_CLOSING, /* BYE or ERR sent, waiting for it to drain */
  CONN_CLOSED   /* uv_close called, waiting for the close callbacks */
} conn_state_t;

struct req_s {
  xwork_t work;
  xtimer_t deadline;
  /* The connection waiting for the answer; NULL once answered or once the
   * connection is gone.  Whoever sets it to NULL closes the deadline. */
  conn_t* conn;
  req_t* next; /* in conn->reqs while conn != NULL */
  req_t* prev;
  uint64_t work_ms; /* read by the threadpool: never changes after submit */
  /* 2 until both the work's done call and the deadline's close have run:
   * the threadpool may still be sleeping on a request long answered. */
  int refs;
  char id[REQ_ID_MAX + 1];
};

struct conn_s {
  uv_tcp_t tcp;
  uv_shutdown_t shutdown_req;
  /* One timer per connection does both jobs, heartbeat and idle close: it
   * is always armed for the next of "PING is due" and "BYE is due", both
   * counted from last_activity.  Activity re-arms it to now + heartbeat,
   * which (except right after a PING) is later than where it stands, so
   * with the wheel it is the cheap lazy re-arm.  Two timers would mean two
   * re-arms per read for the same information.  After BYE the same timer
   * bounds how long the BYE may take to drain. */
  xtimer_t timer;
  conn_t* next; /* in the server's list while CONN_OPEN and counted */
  conn_t* prev;
  req_t reqs; /* list head: requests not answered yet */
  unsigned nreqs;
  uint64_t last_activity; /* uv_now at the last read */
  char* line; /* the start of a line whose end has not arrived yet */
  size_t line_len;
  conn_state_t state;
  int counted; /* counted in g.nconns; a "BYE busy" connection is not */
  int paused;  /* reading stopped because the client does not read */
  int refs;    /* 2 until both the TCP handle and the timer are closed */
};

/* A write request carries its own bytes. */
typedef struct {
  uv_write_t req;
  size_t len;
  char data[];
} wreq_t;

static struct {
  /* options */
  const char* host;
  int port;
  uint64_t heartbeat_ms;
  uint64_t idle_ms;
  uint64_t stats_ms;
  uint64_t max_conns;
  uint64_t max_line;
  uint64_t max_reqs;
  uint64_t max_work_ms;
  uint64_t max_deadline_ms;
  unsigned threads;
  xbackend_kind_t kind;

  uv_loop_t* loop;
  xbackend_t backend;
  uv_tcp_t listener;
  uv_signal_t sigint;
  uv_signal_t sigterm;
  uv_timer_t stats_timer;
  conn_t conns;    /* list head */
  uint64_t nconns; /* open connections (not counting "BYE busy" ones) */
  uint64_t live;   /* connection structs not freed yet */
  int shutting_down;

  /* counters for STATS */
  uint64_t idle_closes;
  uint64_t busy_closes;
  uint64_t req_ok;
  uint64_t req_timeout;
  uint64_t idle_late[LATE_BUCKETS];

  /* replies made while handling one read, sent as one write */
  char* out;
  size_t out_len;
  size_t out_cap;
} g;

/* Simulated work sleeps on this condition variable, so that shutdown can
 * wake it instead of waiting for the longest request to end. */
static uv_mutex_t work_mutex;
static uv_cond_t work_cond;
static atomic_int work_stop;


static void conn_bye(conn_t* c, const char* msg);
static void conn_close(conn_t* c);
static void on_alloc(uv_handle_t* handle, size_t suggested, uv_buf_t* buf);
static void on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf);
static void maybe_finish_shutdown(void);


static void logf_(const char* fmt, ...) {
  va_list ap;

  fputs("uvtw-echo-server: ", stderr);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}


static void* xmalloc(size_t n) {
  void* p = malloc(n);

  if (p == NULL) {
    logf_("out of memory");
    abort();
  }
  return p;
}


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
static int conn_send(conn_t* c, const char* data, size_t len) {
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
static void conn_reply(conn_t* c, const char* line) {
  char buf[256];
  int n;

  n = snprintf(buf, sizeof(buf), "%s\n", line);
  if (conn_send(c, buf, (size_t) n) != 0)
    conn_close(c);
}


static void out_append(const char* data, size_t len) {
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


static void out_flush(conn_t* c) {
  size_t len = g.out_len;

  g.out_len = 0;
  if (len > 0 && conn_send(c, g.out, len) != 0)
    conn_close(c);
}


/* ---------------------------------------------------------------------- */
/* Statistics.                                                              */

static void stats_format(char* buf, size_t size) {
  xstats_t s;

  xbackend_stats(&g.backend, &s);
  snprintf(buf, size,
           "STATS conns=%" PRIu64 " timers=%" PRIu64 " tasks=%" PRIu64
           " wakeups=%" PRIu64 " idle_closes=%" PRIu64 " req_ok=%" PRIu64
           " req_timeout=%" PRIu64 " busy=%" PRIu64 " timers_backend=%s",
           g.nconns, s.timers_active, s.tasks_live, s.wakeups, g.idle_closes,
           g.req_ok, g.req_timeout, g.busy_closes, xbackend_name(g.kind));
}


static void on_stats_timer(uv_timer_t* handle) {
  char buf[512];

  (void) handle;
  stats_format(buf, sizeof(buf));
  logf_("%s", buf);
}


static uint64_t late_percentile(uint64_t total, double p) {
  uint64_t want = (uint64_t) (p * (double) total + 0.999999);
  uint64_t seen = 0;
  int i;

  if (want == 0)
    want = 1;
  for (i = 0; i < LATE_BUCKETS; i++) {
    seen += g.idle_late[i];
    if (seen >= want)
      return (uint64_t) i;
  }
  return LATE_BUCKETS - 1;
}


/* ---------------------------------------------------------------------- */
/* Requests.                                                                */

static void req_unref(req_t* r) {
  if (--r->refs == 0)
    free(r);
}


static void req_deadline_closed(xtimer_t* t) {
  req_unref(t->data);
}


/* The request leaves its connection: answered, or the connection is gone. */
static void req_detach(req_t* r) {
  r->prev->next = r->next;
  r->next->prev = r->prev;
  r->conn->nreqs--;
  r->conn = NULL;
}


/* Threadpool: sleeping stands for the work. */
static void req_work(xwork_t* w) {
  req_t* r = w->data;
  uint64_t end = uv_hrtime() + r->work_ms * 1000000;
  uint64_t now;

  uv_mutex_lock(&work_mutex);
  while (!atomic_load(&work_stop) && (now = uv_hrtime()) < end)
    uv_cond_timedwait(&work_cond, &work_mutex, end - now);
  uv_mutex_unlock(&work_mutex);
}


static void req_work_done(xwork_t* w, int status) {
  req_t* r = w->data;
  conn_t* c = r->conn;
  char buf[REQ_ID_MAX + 16];

  /* status != 0 means the work never ran; that happens only when the
   * request was already answered (TIMEOUT) or abandoned. */
  if (c != NULL && status == 0) {
    snprintf(buf, sizeof(buf), "OK %s", r->id);
    g.req_ok++;
    req_detach(r);
    conn_reply(c, buf);
    xtimer_close(&r->deadline, req_deadline_closed);
  }
  req_unref(r);
}


static void req_deadline(xtimer_t* t) {
  req_t* r = t->data;
  conn_t* c = r->conn;
  char buf[REQ_ID_MAX + 16];

  snprintf(buf, sizeof(buf), "TIMEOUT %s", r->id);
  g.req_timeout++;
  req_detach(r);
  /* The late result is dropped when it comes; if the work has not started
   * yet, it need not run at all. */
  xwork_cancel(&r->work);
  conn_reply(c, buf);
  xtimer_close(&r->deadline, req_deadline_closed);
}


/* Reads a decimal number of at most 10 digits: no sign, no spaces. */
static int parse_ms(const char* s, size_t len, uint64_t* out) {
  uint64_t v = 0;
  size_t i;

  if (len == 0 || len > 10)
    return -1;
  for (i = 0; i < len; i++) {
    if (s[i] < '0' || s[i] > '9')
      return -1;
    v = v * 10 + (uint64_t) (s[i] - '0');
  }
  *out = v;
  return 0;
}


/* Splits a line into space-separated fields; returns how many (at most
 * max + 1, so that "too many" shows). */
static int split(
    const char* s, size_t len, const char** f, size_t* flen, int max) {
  size_t i = 0;
  int n = 0;

  while (i < len) {
    while (i < len && (s[i] == ' ' || s[i] == '\t'))
      i++;
    if (i == len)
      break;
    if (n > max)
      return n;
    f[n] = s + i;
    while (i < len && s[i] != ' ' && s[i] != '\t')
      i++;
    flen[n] = (size_t) (s + i - f[n]);
    n++;
  }
  return n;
}


#define ERR_USAGE "ERR usage: REQ <id> <work_ms> <deadline_ms>\n"
#define ERR_ID "ERR id must be printable ASCII\n"

/* "REQ <id> <work_ms> <deadline_ms>".  Errors go to the output and leave
 * the connection open. */
static void handle_req(conn_t* c, const char* line, size_t len) {
  const char* f[5];
  size_t flen[5];
  uint64_t work_ms;
  uint64_t deadline_ms;
  char msg[128];
  req_t* r;
  size_t i;
  int n;
  int err;

  n = split(line, len, f, flen, 4);
  if (n != 4 || parse_ms(f[2], flen[2], &work_ms) != 0 ||
      parse_ms(f[3], flen[3], &deadline_ms) != 0) {
    out_append(ERR_USAGE, sizeof(ERR_USAGE) - 1);
    return;
  }
  if (flen[1] > REQ_ID_MAX) {
    n = snprintf(msg, sizeof(msg), "ERR id longer than %d bytes\n", REQ_ID_MAX);
    out_append(msg, (size_t) n);
    return;
  }
  for (i = 0; i < flen[1]; i++) {
    if ((unsigned char) f[1][i] < 0x21 || (unsigned char) f[1][i] > 0x7e) {
      out_append(ERR_ID, sizeof(ERR_ID) - 1);
      return;
    }
  }
  if (work_ms > g.max_work_ms || deadline_ms > g.max_deadline_ms) {
    n = snprintf(msg, sizeof(msg),
                 "ERR work_ms must be <= %" PRIu64
                 " and deadline_ms <= %" PRIu64 "\n",
                 g.max_work_ms, g.max_deadline_ms);
    out_append(msg, (size_t) n);
    return;
  }
  if (c->nreqs >= g.max_reqs) {
    n = snprintf(msg, sizeof(msg),
                 "ERR too many requests in flight (max %" PRIu64 ")\n",
                 g.max_reqs);
    out_append(msg, (size_t) n);
    return;
  }

  r = xmalloc(sizeof(*r));
  memset(r, 0, sizeof(*r));
  memcpy(r->id, f[1], flen[1]);
  r->id[flen[1]] = '\0';
  r->work_ms = work_ms;
  r->work.data = r;
  r->deadline.data = r;
  r->refs = 1; /* the deadline timer; the work adds one once submitted */
  xtimer_init(&g.backend, &r->deadline);
  /* The deadline first: once the work is submitted it may finish at any
   * moment, and its answer needs the deadline there to cancel. */
  err = xtimer_start(&r->deadline, req_deadline, deadline_ms);
  if (err == 0) {
    err = xwork_submit(&g.backend, &r->work, req_work, req_work_done);
    if (err == 0)
      r->refs++;
  }
  if (err != 0) {
    n = snprintf(msg, sizeof(msg), "ERR %s cannot start: %s\n", r->id,
                 uv_err_name(err));
    out_append(msg, (size_t) n);
    xtimer_close(&r->deadline, req_deadline_closed);
    return;
  }
  r->conn = c;
  r->next = c->reqs.next;
  r->prev = &c->reqs;
  r->next->prev = r;
  c->reqs.next = r;
  c->nreqs++;
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
static void conn_close(conn_t* c) {
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
static void conn_bye(conn_t* c, const char* msg) {
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


static void on_connection(uv_stream_t* server, int status) {
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


/* ---------------------------------------------------------------------- */
/* Shutdown.                                                                */

static void on_backend_closed(xbackend_t* backend) {
  (void) backend;
  /* Nothing is left on the loop now; uv_run returns. */
}


static void maybe_finish_shutdown(void) {
  static int done;

  if (!g.shutting_down || g.live > 0 || done)
    return;
  done = 1;
  xbackend_close(&g.backend, on_backend_closed);
}


static void on_signal(uv_signal_t* handle, int signum) {
  (void) handle;
  if (g.shutting_down)
    return;
  g.shutting_down = 1;
  logf_("%s: shutting down", signum == SIGINT ? "SIGINT" : "SIGTERM");
  /* Closing the signal handles gives the default action back: a second
   * Ctrl-C kills at once. */
  uv_close((uv_handle_t*) &g.sigint, NULL);
  uv_close((uv_handle_t*) &g.sigterm, NULL);
  uv_close((uv_handle_t*) &g.listener, NULL);
  uv_close((uv_handle_t*) &g.stats_timer, NULL);
  /* Requests still sleeping on the threadpool wake up now. */
  uv_mutex_lock(&work_mutex);
  atomic_store(&work_stop, 1);
  uv_cond_broadcast(&work_cond);
  uv_mutex_unlock(&work_mutex);
  while (g.conns.next != &g.conns)
    conn_bye(g.conns.next, "BYE shutdown\n");
  maybe_finish_shutdown();
}


/* ---------------------------------------------------------------------- */
/* Start-up.                                                                */

static void usage(FILE* f) {
  /* clang-format off */
  fprintf(f,
"usage: uvtw-echo-server [options]\n"
"  --host ADDR          address to listen on (default 127.0.0.1)\n"
"  --port N             port (default 7000; 0 picks a free one)\n"
"  --timers=wheel|uv    one uvtw wheel (default) or one uv_timer_t each\n"
"  --heartbeat-ms N     PING after N ms without input (default 5000)\n"
"  --idle-ms N          BYE idle after N ms without input (default 15000)\n"
"  --stats-ms N         log a STATS line to stderr every N ms (default 0: "
"off)\n"
"  --max-conns N        more connections get BYE busy (default 10000)\n"
"  --max-line N         longer lines get ERR and a close (default 4096)\n"
"  --max-reqs N         requests in flight per connection (default 1024)\n"
"  --max-work-ms N      largest work_ms a REQ may ask for (default 60000)\n"
"  --max-deadline-ms N  largest deadline_ms (default 3600000)\n"
"  --threads N          libuv threadpool size (default 32, max 1024)\n");
  /* clang-format on */
}


static uint64_t parse_opt(const char* name,
                          const char* arg,
                          uint64_t min,
                          uint64_t max) {
  char* end;
  unsigned long long v;

  errno = 0;
  v = strtoull(arg, &end, 10);
  if (errno != 0 || end == arg || *end != '\0' || arg[0] == '-' || v < min ||
      v > max) {
    fprintf(stderr,
            "uvtw-echo-server: --%s wants a number in %" PRIu64 "..%" PRIu64
            ", not '%s'\n",
            name, min, max, arg);
    exit(2);
  }
  return v;
}


static void parse_args(int argc, char** argv) {
  static const struct option opts[] = {
      {"host", required_argument, NULL, 'h'},
      {"port", required_argument, NULL, 'p'},
      {"timers", required_argument, NULL, 't'},
      {"heartbeat-ms", required_argument, NULL, 'H'},
      {"idle-ms", required_argument, NULL, 'I'},
      {"stats-ms", required_argument, NULL, 'S'},
      {"max-conns", required_argument, NULL, 'C'},
      {"max-line", required_argument, NULL, 'L'},
      {"max-reqs", required_argument, NULL, 'R'},
      {"max-work-ms", required_argument, NULL, 'W'},
      {"max-deadline-ms", required_argument, NULL, 'D'},
      {"threads", required_argument, NULL, 'T'},
      {"help", no_argument, NULL, 'x'},
      {NULL, 0, NULL, 0}};
  int ch;

  g.host = "127.0.0.1";
  g.port = 7000;
  g.heartbeat_ms = 5000;
  g.idle_ms = 15000;
  g.stats_ms = 0;
  g.max_conns = 10000;
  g.max_line = 4096;
  g.max_reqs = 1024;
  g.max_work_ms = 60000;
  g.max_deadline_ms = 3600000;
  g.threads = 32;
  g.kind = XBACKEND_WHEEL;

  while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    switch (ch) {
    case 'h':
      g.host = optarg;
      break;
    case 'p':
      g.port = (int) parse_opt("port", optarg, 0, 65535);
      break;
    case 't':
      if (strcmp(optarg, "wheel") == 0) {
        g.kind = XBACKEND_WHEEL;
      } else if (strcmp(optarg, "uv") == 0) {
        g.kind = XBACKEND_UV;
      } else {
        fprintf(stderr, "uvtw-echo-server: --timers is wheel or uv\n");
        exit(2);
      }
      break;
    case 'H':
      g.heartbeat_ms = parse_opt("heartbeat-ms", optarg, 1, 86400000);
      break;
    case 'I':
      g.idle_ms = parse_opt("idle-ms", optarg, 1, 86400000);
      break;
    case 'S':
      g.stats_ms = parse_opt("stats-ms", optarg, 0, 86400000);
      break;
    case 'C':
      g.max_conns = parse_opt("max-conns", optarg, 0, 1000000);
      break;
    case 'L':
      g.max_line = parse_opt("max-line", optarg, 1, 1 << 20);
      break;
    case 'R':
      g.max_reqs = parse_opt("max-reqs", optarg, 0, 1000000);
      break;
    case 'W':
      g.max_work_ms = parse_opt("max-work-ms", optarg, 0, 86400000);
      break;
    case 'D':
      g.max_deadline_ms = parse_opt("max-deadline-ms", optarg, 0, 86400000);
      break;
    case 'T':
      g.threads = (unsigned) parse_opt("threads", optarg, 1, 1024);
      break;
    case 'x':
      usage(stdout);
      exit(0);
    default:
      usage(stderr);
      exit(2);
    }
  }
  if (optind < argc) {
    usage(stderr);
    exit(2);
  }
}


/* Each connection is a file descriptor; the default soft limit (often
 * 1024) is the first thing a load test hits. */
static void raise_fd_limit(void) {
  struct rlimit rl;

  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}


static int listen_on(void) {
  struct sockaddr_storage addr;
  struct sockaddr_storage bound;
  int len = sizeof(bound);
  int port;
  int err;

  if (uv_ip4_addr(g.host, g.port, (struct sockaddr_in*) &addr) != 0 &&
      uv_ip6_addr(g.host, g.port, (struct sockaddr_in6*) &addr) != 0) {
    logf_("--host %s is not an IPv4 or IPv6 address", g.host);
    return UV_EINVAL;
  }
  uv_tcp_init(g.loop, &g.listener);
  err = uv_tcp_bind(&g.listener, (struct sockaddr*) &addr, 0);
  if (err == 0)
    /* A deep accept queue: when it overflows during a burst of connects,
     * the kernel drops the client's last ACK and the connection is only
     * accepted a second later, after a SYN-ACK retransmit, which a client
     * timing its silence from connect() sees as a late PING or BYE.  The
     * kernel caps this at net.core.somaxconn (4096 on Debian 12). */
    err = uv_listen((uv_stream_t*) &g.listener, 65535, on_connection);
  if (err == 0)
    err = uv_tcp_getsockname(&g.listener, (struct sockaddr*) &bound, &len);
  if (err != 0) {
    logf_("cannot listen on %s:%d: %s", g.host, g.port, uv_strerror(err));
    return err;
  }
  port = ntohs(bound.ss_family == AF_INET6
                   ? ((struct sockaddr_in6*) &bound)->sin6_port
                   : ((struct sockaddr_in*) &bound)->sin_port);
  /* Tests read this line to learn the port; flush it at once. */
  printf("listening on %s:%d (timers=%s)\n", g.host, port,
         xbackend_name(g.kind));
  fflush(stdout);
  return 0;
}


/* Starts libuv's threadpool before the first client can send a request.
 * libuv creates the whole pool on the first uv_queue_work, and that call
 * waits until every thread has started: with 64 threads under TSan that is
 * hundreds of milliseconds, which the first requests would otherwise pay
 * inside their deadlines.  Both timer backends share the one pool. */
static void warm_work(uv_work_t* req) {
  (void) req;
}


static void warm_done(uv_work_t* req, int status) {
  (void) req;
  (void) status;
}


static int warm_threadpool(void) {
  static uv_work_t req;

  return uv_queue_work(g.loop, &req, warm_work, warm_done);
}


int main(int argc, char** argv) {
  char threads[16];
  struct rusage ru;
  uint64_t late_total = 0;
  int err;
  int i;

  parse_args(argc, argv);
  signal(SIGPIPE, SIG_IGN);
  raise_fd_limit();
  /* The threadpool reads this once, at its first use.  Sleeping work
   * holds a thread, so a bigger pool keeps REQ work from queueing behind
   * other REQ work, which would make deadlines about the queue. */
  snprintf(threads, sizeof(threads), "%u", g.threads);
  setenv("UV_THREADPOOL_SIZE", threads, 1);
  if (uv_mutex_init(&work_mutex) != 0 || uv_cond_init(&work_cond) != 0)
    return 1;

  g.loop = uv_default_loop();
  g.conns.next = g.conns.prev = &g.conns;
  err = xbackend_init(&g.backend, g.kind, g.loop);
  if (err != 0) {
    logf_("cannot set up the %s timers: %s", xbackend_name(g.kind),
          uv_strerror(err));
    return 1;
  }
  err = warm_threadpool();
  if (err != 0) {
    logf_("cannot start the threadpool: %s", uv_strerror(err));
    return 1;
  }
  uv_signal_init(g.loop, &g.sigint);
  uv_signal_init(g.loop, &g.sigterm);
  uv_signal_start(&g.sigint, on_signal, SIGINT);
  uv_signal_start(&g.sigterm, on_signal, SIGTERM);
  uv_timer_init(g.loop, &g.stats_timer);
  if (g.stats_ms > 0)
    uv_timer_start(&g.stats_timer, on_stats_timer, g.stats_ms, g.stats_ms);

  if (listen_on() != 0) {
    /* Undo what is on the loop so that it closes cleanly. */
    g.shutting_down = 1;
    uv_close((uv_handle_t*) &g.sigint, NULL);
    uv_close((uv_handle_t*) &g.sigterm, NULL);
    uv_close((uv_handle_t*) &g.listener, NULL);
    uv_close((uv_handle_t*) &g.stats_timer, NULL);
    maybe_finish_shutdown();
    uv_run(g.loop, UV_RUN_DEFAULT);
    uv_loop_close(g.loop);
    return 1;
  }

  uv_run(g.loop, UV_RUN_DEFAULT);

  err = uv_loop_close(g.loop);
  if (err != 0)
    logf_("uv_loop_close: %s (a handle was left open)", uv_strerror(err));
  free(g.out);
  uv_cond_destroy(&work_cond);
  uv_mutex_destroy(&work_mutex);

  /* What the comparison between the backends reads. */
  getrusage(RUSAGE_SELF, &ru);
  for (i = 0; i < LATE_BUCKETS; i++)
    late_total += g.idle_late[i];
  logf_(
      "exit: timers=%s cpu user=%.3fs sys=%.3fs maxrss=%ldKB "
      "idle_closes=%" PRIu64 " lateness p50=%" PRIu64 "ms p99=%" PRIu64
      "ms max=%s%" PRIu64 "ms req_ok=%" PRIu64 " req_timeout=%" PRIu64,
      xbackend_name(g.kind),
      (double) ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6,
      (double) ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6, ru.ru_maxrss,
      g.idle_closes, late_total ? late_percentile(late_total, 0.50) : 0,
      late_total ? late_percentile(late_total, 0.99) : 0,
      late_total && g.idle_late[LATE_BUCKETS - 1] ? ">=" : "",
      late_total ? late_percentile(late_total, 1.0) : 0, g.req_ok,
      g.req_timeout);
  return err == 0 ? 0 : 1;
}
