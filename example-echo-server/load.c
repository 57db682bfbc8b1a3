/* SPDX-License-Identifier: MIT */
/* echo-load: a bounded load client for uvtw-echo-server that checks the
 * protocol as it goes.  See README.md.
 *
 * It opens --conns connections to a loopback address, gives each a role
 * (active: send a line every --interval-ms and check the echo; idle: stay
 * silent and time PING and BYE idle; rpc: keep --inflight REQ lines going),
 * runs for --duration-ms, waits for the answers still owed, closes
 * everything and prints a summary.  It exits 1 if it saw a protocol
 * violation, 2 on a usage or setup error, 0 otherwise.
 *
 * It measures the timing wheel, so it does not use it: its timers are
 * plain uv_timer_t, and its clock is uv_hrtime() (nanoseconds, read when
 * an event is handled, not the loop's cached millisecond time).
 */

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <uv.h>

#define MAX_CONNS 20000
#define MAX_DURATION_MS 600000
/* Echoes a connection may owe before it skips a send: a server that falls
 * this far behind shows up as "skipped", not as unbounded memory. */
#define RING 256
/* Connections being set up at once: a burst of 1,000 SYNs can overflow a
 * listen backlog, and then the kernel retries only after a second. */
#define CONNECT_PARALLEL 64
#define LINE_MAX_IN 65536
#define MAX_REPORTED 20
/* The server's clock is whole milliseconds (uv_now, possibly a coarse
 * clock), ours is nanoseconds: "early" allows for that rounding. */
#define CLOCK_SLACK_MS 2.0

typedef enum { ROLE_ACTIVE, ROLE_IDLE, ROLE_RPC } role_t;
typedef enum { MODE_ACTIVE, MODE_IDLE, MODE_MIXED, MODE_RPC } mode_t_;
typedef enum { PHASE_RUN, PHASE_DRAIN, PHASE_DONE } phase_t;
typedef enum {
  SLOT_FREE,   /* no TCP handle */
  SLOT_QUEUED, /* waiting for a connect slot */
  SLOT_CONNECTING,
  SLOT_OPEN,
  SLOT_CLOSING /* uv_close called */
} slot_state_t;

/* Why a connection ended, from our side of it. */
enum {
  CAUSE_IDLE,     /* BYE idle */
  CAUSE_BUSY,     /* BYE busy */
  CAUSE_SHUTDOWN, /* BYE shutdown */
  CAUSE_ERR,      /* ERR ... then a close (line too long) */
  CAUSE_EOF,      /* closed without a BYE */
  CAUSE_RESET,    /* a read error */
  CAUSE_COUNT
};
static const char* const cause_names[CAUSE_COUNT] = {"idle", "busy", "shutdown",
                                                     "err",  "eof",  "error"};

typedef struct {
  double* v;
  size_t n;
  size_t cap;
} samples_t;

typedef struct conn_s {
  uv_tcp_t tcp;
  uv_connect_t connect_req;
  uv_timer_t timer; /* active: the send interval */
  struct conn_s* next_queued;
  int index;
  role_t role;
  slot_state_t state;
  int cause;              /* -1 until a BYE or ERR says why it will close */
  int closing_by_us;      /* we closed it: not a server close */
  uint64_t started;       /* uv_hrtime when the connect was sent */
  uint64_t last_activity; /* uv_hrtime: connect sent, or our last send */
  int pinged;             /* a PING came since the last activity */
  /* active */
  uint64_t seq_sent;
  uint64_t seq_echoed;
  uint64_t sent_at[RING];
  /* rpc */
  unsigned inflight;
  /* input */
  char* line;
  size_t line_len;
  size_t line_cap;
} conn_t;

typedef struct {
  uint32_t conn;
  uint32_t work_ms;
  uint32_t deadline_ms;
  uint8_t state; /* 0 pending, 1 answered */
  uint64_t sent_at;
} rpc_t;

typedef struct {
  uv_write_t req;
  char data[];
} wreq_t;

static struct {
  /* options */
  const char* host;
  int port;
  int nconns;
  mode_t_ mode;
  double idle_share;
  uint64_t interval_ms;
  uint64_t duration_ms;
  uint64_t heartbeat_ms; /* 0: unknown, PING times are not checked */
  uint64_t idle_ms;
  uint64_t slack_ms;
  uint64_t margin_ms;
  uint64_t max_msgs;
  int line_size;
  uint64_t work_min, work_max;
  uint64_t deadline_min, deadline_max;
  unsigned inflight;
  int allow_shutdown;
  int no_reconnect;
  uint64_t seed;
  int quiet;

  uv_loop_t* loop;
  struct sockaddr_storage addr;
  conn_t* conns;
  phase_t phase;
  uv_timer_t phase_timer;
  uint64_t t0;
  conn_t* queue_head;
  conn_t* queue_tail;
  int connecting;
  int open_slots; /* slots not SLOT_FREE */
  int n_active, n_idle, n_rpc;

  /* results */
  uint64_t connects;
  uint64_t connect_errors;
  uint64_t msgs; /* lines sent: echo lines and REQ lines */
  uint64_t echoed;
  uint64_t skipped;
  uint64_t pings;
  uint64_t pongs;
  uint64_t closes[CAUSE_COUNT];
  samples_t close_since[CAUSE_COUNT];
  samples_t idle_late;  /* BYE idle: observed silence - idle_ms */
  samples_t first_ping; /* idle connections: silence at the first PING */
  samples_t rtt;
  samples_t rpc_latency;
  samples_t timeout_late; /* TIMEOUT: arrival - deadline */
  rpc_t* rpcs;
  size_t nrpcs;
  size_t rpcs_cap;
  uint64_t req_ok;
  uint64_t req_timeout;
  uint64_t violations;
  uint64_t rng;
} g;


static void conn_start(conn_t* c);
static void conn_close(conn_t* c);
static void pump_connects(void);
static void maybe_done(void);


static void* xrealloc(void* p, size_t n) {
  p = realloc(p, n);
  if (p == NULL) {
    fprintf(stderr, "echo-load: out of memory\n");
    exit(2);
  }
  return p;
}


static void sample(samples_t* s, double v) {
  if (s->n == s->cap) {
    s->cap = s->cap ? s->cap * 2 : 256;
    s->v = xrealloc(s->v, s->cap * sizeof(*s->v));
  }
  s->v[s->n++] = v;
}


static int cmp_double(const void* a, const void* b) {
  double x = *(const double*) a;
  double y = *(const double*) b;
  return (x > y) - (x < y);
}


/* Nearest-rank percentile of sorted samples. */
static double pct(const samples_t* s, double p) {
  size_t rank;

  if (s->n == 0)
    return 0;
  rank = (size_t) (p * (double) s->n + 0.999999);
  if (rank < 1)
    rank = 1;
  if (rank > s->n)
    rank = s->n;
  return s->v[rank - 1];
}


static void print_samples(const char* label, samples_t* s) {
  if (s->n == 0) {
    printf("  %-28s n=0\n", label);
    return;
  }
  qsort(s->v, s->n, sizeof(*s->v), cmp_double);
  printf("  %-28s n=%zu min=%.1f p50=%.1f p99=%.1f max=%.1f ms\n", label, s->n,
         s->v[0], pct(s, 0.50), pct(s, 0.99), s->v[s->n - 1]);
}


static void violation(const conn_t* c, const char* fmt, ...) {
  va_list ap;

  g.violations++;
  if (g.violations > MAX_REPORTED) {
    if (g.violations == MAX_REPORTED + 1)
      fprintf(stderr, "echo-load: VIOLATION ... (more not shown)\n");
    return;
  }
  fprintf(stderr, "echo-load: VIOLATION");
  if (c != NULL)
    fprintf(stderr, " conn %d (%s)", c->index,
            c->role == ROLE_ACTIVE ? "active"
            : c->role == ROLE_IDLE ? "idle"
                                   : "rpc");
  fprintf(stderr, " at %.1f ms: ", (uv_hrtime() - g.t0) / 1e6);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}


static double ms_since(uint64_t then) {
  return (double) (uv_hrtime() - then) / 1e6;
}


static uint64_t rnd(void) {
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


static void on_send_timer(uv_timer_t* handle) {
  conn_t* c = handle->data;
  char buf[4200];
  size_t len;

  if (c->state != SLOT_OPEN || !may_send())
    return;
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
    /* ids are 1-based indexes into g.rpcs */
    n = snprintf(buf, sizeof(buf), "REQ %zu %" PRIu32 " %" PRIu32 "\n", g.nrpcs,
                 r->work_ms, r->deadline_ms);
    conn_send(c, buf, (size_t) n);
  }
}


/* ---------------------------------------------------------------------- */
/* Receiving.                                                               */

static void handle_rpc_reply(conn_t* c, const char* line, int ok) {
  const char* idp = line + (ok ? 3 : 8);
  char* end;
  unsigned long long id;
  rpc_t* r;
  double took;

  errno = 0;
  id = strtoull(idp, &end, 10);
  if (errno != 0 || *end != '\0' || id == 0 || id > g.nrpcs ||
      g.rpcs[id - 1].conn != (uint32_t) c->index) {
    violation(c, "reply for a request it never sent: '%s'", line);
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
  if (ok) {
    g.req_ok++;
    if (r->work_ms > (uint64_t) r->deadline_ms + g.margin_ms)
      violation(c, "OK %llu, but work %u ms > deadline %u ms + %" PRIu64, id,
                r->work_ms, r->deadline_ms, g.margin_ms);
  } else {
    g.req_timeout++;
    sample(&g.timeout_late, took - r->deadline_ms);
    if ((uint64_t) r->work_ms + g.margin_ms <= r->deadline_ms)
      violation(c,
                "TIMEOUT %llu, but work %u ms + %" PRIu64 " <= deadline %u ms",
                id, r->work_ms, g.margin_ms, r->deadline_ms);
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
    if (g.heartbeat_ms > 0 && since < (double) g.heartbeat_ms - CLOCK_SLACK_MS)
      violation(c, "PING after %.1f ms of silence, heartbeat is %" PRIu64,
                since, g.heartbeat_ms);
    if (!c->pinged && c->role == ROLE_IDLE)
      sample(&g.first_ping, since);
    c->pinged = 1;
    if (c->role != ROLE_IDLE) {
      /* Busy connections answer; a PONG is activity too. */
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
      if (c->role != ROLE_IDLE)
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

  if (c->cause == -1) {
    c->cause = cause;
    sample(&g.close_since[cause], since);
  }
  g.closes[c->cause]++;
  if (c->cause == CAUSE_SHUTDOWN && g.allow_shutdown) {
    /* expected: the test is stopping the server */
  } else if (c->role != ROLE_IDLE) {
    violation(c, "%s connection closed by the server (%s)",
              c->role == ROLE_ACTIVE ? "an active" : "an rpc",
              cause_names[c->cause]);
  } else if (c->cause != CAUSE_IDLE) {
    violation(c, "idle connection closed without BYE idle (%s)",
              cause_names[c->cause]);
  }
  if (c->role == ROLE_ACTIVE && c->seq_echoed < c->seq_sent) {
    if (!(c->cause == CAUSE_SHUTDOWN && g.allow_shutdown))
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


/* ---------------------------------------------------------------------- */
/* Connection slots.                                                        */

static void on_tcp_closed(uv_handle_t* handle) {
  conn_t* c = handle->data;
  int again = c->role == ROLE_IDLE && c->cause == CAUSE_IDLE &&
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


static void conn_close(conn_t* c) {
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
  uv_read_start((uv_stream_t*) &c->tcp, on_alloc, on_read);
  if (c->role == ROLE_ACTIVE) {
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
  uv_tcp_init(g.loop, &c->tcp);
  c->tcp.data = c;
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


static void pump_connects(void) {
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


static void conn_start(conn_t* c) {
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


/* ---------------------------------------------------------------------- */
/* Phases.                                                                  */

static void finish(void);

static void on_phase_timer(uv_timer_t* handle) {
  (void) handle;
  if (g.phase == PHASE_RUN) {
    /* Stop sending; wait for what is owed: echoes, and answers that come
     * at the latest at their deadline plus slack. */
    g.phase = PHASE_DRAIN;
    uv_timer_start(&g.phase_timer, on_phase_timer,
                   g.deadline_max + 2 * g.slack_ms + 1000, 0);
    maybe_done();
  } else if (g.phase == PHASE_DRAIN) {
    finish();
  }
}


static int owed(void) {
  int i;

  for (i = 0; i < g.nconns; i++) {
    conn_t* c = &g.conns[i];
    if (c->state == SLOT_OPEN &&
        (c->seq_echoed < c->seq_sent || c->inflight > 0))
      return 1;
  }
  return 0;
}


static void maybe_done(void) {
  if (g.phase == PHASE_DRAIN && !owed())
    finish();
  else if (g.phase != PHASE_DONE && g.open_slots == 0)
    finish(); /* everything closed (say, after BYE shutdown) */
}


static void finish(void) {
  int i;

  if (g.phase == PHASE_DONE)
    return;
  g.phase = PHASE_DONE;
  uv_timer_stop(&g.phase_timer);
  for (i = 0; i < g.nconns; i++) {
    conn_t* c = &g.conns[i];
    if (c->state == SLOT_OPEN && c->role == ROLE_IDLE && c->cause == -1 &&
        ms_since(c->last_activity) > (double) (g.idle_ms + g.slack_ms))
      violation(c, "no BYE idle after %.1f ms of silence",
                ms_since(c->last_activity));
    if (c->state == SLOT_OPEN && c->seq_echoed < c->seq_sent)
      violation(c, "%" PRIu64 " lines never echoed",
                c->seq_sent - c->seq_echoed);
    if (c->state == SLOT_OPEN && c->inflight > 0)
      violation(c, "%u requests never answered", c->inflight);
    c->closing_by_us = 1;
    conn_close(c);
  }
}


/* ---------------------------------------------------------------------- */
/* Options and the summary.                                                 */

static void usage(FILE* f) {
  /* clang-format off */
  fprintf(f,
"usage: echo-load --port N [options]\n"
"  --host ADDR            loopback address of the server (default 127.0.0.1)\n"
"  --port N               the server's port (required)\n"
"  --mode M               active, idle, mixed or rpc (default active)\n"
"  --conns N              connections at once (default 10, max 20000)\n"
"  --idle-share F         mixed: share of idle connections (default 0.5)\n"
"  --duration-ms N        how long to send (default 5000, max 600000)\n"
"  --interval-ms N        active: one line per connection every N ms\n"
"                         (default 100)\n"
"  --line-size N          active: bytes per line, newline included\n"
"                         (default 32, max 4096)\n"
"  --max-msgs N           stop sending after N lines in all (default 1000000)\n"
"  --idle-ms N            the server's --idle-ms (default 15000)\n"
"  --heartbeat-ms N       the server's --heartbeat-ms; if given, an earlier\n"
"                         PING is a violation\n"
"  --slack-ms N           how late BYE idle may be (default 500)\n"
"  --work-ms A[-B]        rpc: work per request, uniform (default 10-200)\n"
"  --deadline-ms A[-B]    rpc: deadline per request, uniform (default 10-200)\n"
"  --inflight N           rpc: requests in flight per connection (default 1)\n"
"  --margin-ms N          rpc: how close work and deadline may be before the\n"
"                         answer is not checked (default 50)\n"
"  --allow-shutdown       BYE shutdown is expected: not a violation, and the\n"
"                         run ends when every connection is closed\n"
"  --no-reconnect         idle connections closed for idleness stay closed\n"
"  --seed N               random seed (default 1)\n"
"  --quiet                only the RESULT line\n");
  /* clang-format on */
}


static uint64_t num(const char* name,
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
            "echo-load: --%s wants a number in %" PRIu64 "..%" PRIu64
            ", not '%s'\n",
            name, min, max, arg);
    exit(2);
  }
  return v;
}


static void range(const char* name,
                  const char* arg,
                  uint64_t* lo,
                  uint64_t* hi) {
  char buf[64];
  char* dash;

  snprintf(buf, sizeof(buf), "%s", arg);
  dash = strchr(buf, '-');
  if (dash != NULL)
    *dash = '\0';
  *lo = num(name, buf, 0, 3600000);
  *hi = dash != NULL ? num(name, dash + 1, *lo, 3600000) : *lo;
}


static void parse_args(int argc, char** argv) {
  static const struct option opts[] = {
      {"host", required_argument, NULL, 'h'},
      {"port", required_argument, NULL, 'p'},
      {"mode", required_argument, NULL, 'm'},
      {"conns", required_argument, NULL, 'c'},
      {"idle-share", required_argument, NULL, 's'},
      {"duration-ms", required_argument, NULL, 'd'},
      {"interval-ms", required_argument, NULL, 'i'},
      {"line-size", required_argument, NULL, 'l'},
      {"max-msgs", required_argument, NULL, 'M'},
      {"idle-ms", required_argument, NULL, 'I'},
      {"heartbeat-ms", required_argument, NULL, 'H'},
      {"slack-ms", required_argument, NULL, 'S'},
      {"work-ms", required_argument, NULL, 'w'},
      {"deadline-ms", required_argument, NULL, 'D'},
      {"inflight", required_argument, NULL, 'n'},
      {"margin-ms", required_argument, NULL, 'g'},
      {"allow-shutdown", no_argument, NULL, 'A'},
      {"no-reconnect", no_argument, NULL, 'R'},
      {"seed", required_argument, NULL, 'e'},
      {"quiet", no_argument, NULL, 'q'},
      {"help", no_argument, NULL, 'x'},
      {NULL, 0, NULL, 0}};
  int port_set = 0;
  char* end;
  int ch;

  g.host = "127.0.0.1";
  g.nconns = 10;
  g.mode = MODE_ACTIVE;
  g.idle_share = 0.5;
  g.duration_ms = 5000;
  g.interval_ms = 100;
  g.line_size = 32;
  g.max_msgs = 1000000;
  g.idle_ms = 15000;
  g.slack_ms = 500;
  g.work_min = 10;
  g.work_max = 200;
  g.deadline_min = 10;
  g.deadline_max = 200;
  g.inflight = 1;
  g.margin_ms = 50;
  g.seed = 1;

  while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    switch (ch) {
    case 'h':
      g.host = optarg;
      break;
    case 'p':
      g.port = (int) num("port", optarg, 1, 65535);
      port_set = 1;
      break;
    case 'm':
      if (strcmp(optarg, "active") == 0)
        g.mode = MODE_ACTIVE;
      else if (strcmp(optarg, "idle") == 0)
        g.mode = MODE_IDLE;
      else if (strcmp(optarg, "mixed") == 0)
        g.mode = MODE_MIXED;
      else if (strcmp(optarg, "rpc") == 0)
        g.mode = MODE_RPC;
      else {
        fprintf(stderr, "echo-load: --mode is active, idle, mixed or rpc\n");
        exit(2);
      }
      break;
    case 'c':
      g.nconns = (int) num("conns", optarg, 1, MAX_CONNS);
      break;
    case 's':
      g.idle_share = strtod(optarg, &end);
      if (*end != '\0' || !(g.idle_share >= 0 && g.idle_share <= 1)) {
        fprintf(stderr, "echo-load: --idle-share is in 0..1\n");
        exit(2);
      }
      break;
    case 'd':
      g.duration_ms = num("duration-ms", optarg, 1, MAX_DURATION_MS);
      break;
    case 'i':
      g.interval_ms = num("interval-ms", optarg, 1, 3600000);
      break;
    case 'l':
      g.line_size = (int) num("line-size", optarg, 24, 4096);
      break;
    case 'M':
      g.max_msgs = num("max-msgs", optarg, 0, 100000000);
      break;
    case 'I':
      g.idle_ms = num("idle-ms", optarg, 1, 86400000);
      break;
    case 'H':
      g.heartbeat_ms = num("heartbeat-ms", optarg, 1, 86400000);
      break;
    case 'S':
      g.slack_ms = num("slack-ms", optarg, 0, 600000);
      break;
    case 'w':
      range("work-ms", optarg, &g.work_min, &g.work_max);
      break;
    case 'D':
      range("deadline-ms", optarg, &g.deadline_min, &g.deadline_max);
      break;
    case 'n':
      g.inflight = (unsigned) num("inflight", optarg, 1, 1000);
      break;
    case 'g':
      g.margin_ms = num("margin-ms", optarg, 0, 600000);
      break;
    case 'A':
      g.allow_shutdown = 1;
      break;
    case 'R':
      g.no_reconnect = 1;
      break;
    case 'e':
      g.seed = num("seed", optarg, 0, UINT64_MAX);
      break;
    case 'q':
      g.quiet = 1;
      break;
    case 'x':
      usage(stdout);
      exit(0);
    default:
      usage(stderr);
      exit(2);
    }
  }
  if (!port_set || optind < argc) {
    usage(stderr);
    exit(2);
  }
}


/* Load goes to this machine only: the address must be loopback. */
static int resolve(void) {
  struct sockaddr_in* in4 = (struct sockaddr_in*) &g.addr;
  struct sockaddr_in6* in6 = (struct sockaddr_in6*) &g.addr;

  if (uv_ip4_addr(g.host, g.port, in4) == 0)
    return (ntohl(in4->sin_addr.s_addr) >> 24) == 127 ? 0 : -1;
  if (uv_ip6_addr(g.host, g.port, in6) == 0)
    return IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr) ? 0 : -1;
  return -1;
}


static void summary(double secs) {
  static const char* const mode_names[] = {"active", "idle", "mixed", "rpc"};
  int i;

  if (!g.quiet) {
    printf(
        "echo-load: mode=%s conns=%d (active %d, idle %d, rpc %d) "
        "ran %.1f s\n",
        mode_names[g.mode], g.nconns, g.n_active, g.n_idle, g.n_rpc, secs);
    printf("  connects ok=%" PRIu64 " failed=%" PRIu64 "\n", g.connects,
           g.connect_errors);
    printf("  lines sent=%" PRIu64 " echoed=%" PRIu64 " skipped=%" PRIu64
           " pings=%" PRIu64 " pongs=%" PRIu64 "\n",
           g.msgs, g.echoed, g.skipped, g.pings, g.pongs);
    print_samples("echo round trip", &g.rtt);
    print_samples("first PING, silence", &g.first_ping);
    for (i = 0; i < CAUSE_COUNT; i++) {
      char label[64];
      if (g.closes[i] == 0)
        continue;
      snprintf(label, sizeof(label), "close %s (%" PRIu64 "), silence",
               cause_names[i], g.closes[i]);
      print_samples(label, &g.close_since[i]);
    }
    print_samples("BYE idle lateness", &g.idle_late);
    if (g.mode == MODE_RPC) {
      printf("  requests sent=%zu ok=%" PRIu64 " timeout=%" PRIu64 "\n",
             g.nrpcs, g.req_ok, g.req_timeout);
      print_samples("request reply time", &g.rpc_latency);
      print_samples("TIMEOUT lateness", &g.timeout_late);
    }
    printf("  violations=%" PRIu64 "\n", g.violations);
  } else {
    /* print_samples sorts; the RESULT line needs sorted samples too */
    if (g.idle_late.n > 0)
      qsort(g.idle_late.v, g.idle_late.n, sizeof(double), cmp_double);
    if (g.rtt.n > 0)
      qsort(g.rtt.v, g.rtt.n, sizeof(double), cmp_double);
  }
  /* One line for scripts. */
  printf("RESULT violations=%" PRIu64 " sent=%" PRIu64 " echoed=%" PRIu64
         " rtt_p50=%.1f rtt_p99=%.1f rtt_max=%.1f pings=%" PRIu64
         " idle_closes=%" PRIu64
         " late_p50=%.1f late_p99=%.1f"
         " late_max=%.1f ok=%" PRIu64 " timeout=%" PRIu64
         " shutdown_closes=%" PRIu64 " other_closes=%" PRIu64 "\n",
         g.violations, g.msgs, g.echoed, pct(&g.rtt, 0.5), pct(&g.rtt, 0.99),
         pct(&g.rtt, 1.0), g.pings, g.closes[CAUSE_IDLE],
         pct(&g.idle_late, 0.5), pct(&g.idle_late, 0.99),
         pct(&g.idle_late, 1.0), g.req_ok, g.req_timeout,
         g.closes[CAUSE_SHUTDOWN],
         g.closes[CAUSE_BUSY] + g.closes[CAUSE_ERR] + g.closes[CAUSE_EOF] +
             g.closes[CAUSE_RESET]);
  fflush(stdout);
}


int main(int argc, char** argv) {
  struct rlimit rl;
  int i;
  int err;

  parse_args(argc, argv);
  signal(SIGPIPE, SIG_IGN);
  if (resolve() != 0) {
    fprintf(stderr, "echo-load: --host must be a loopback address, not %s\n",
            g.host);
    return 2;
  }
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 &&
      rl.rlim_cur < (rlim_t) g.nconns + 64) {
    fprintf(stderr,
            "echo-load: %d connections need more file descriptors "
            "than the limit of %lu: raise ulimit -n\n",
            g.nconns, (unsigned long) rl.rlim_cur);
    return 2;
  }
  g.rng = g.seed * 2654435761u + 88172645463325252ull;
  g.loop = uv_default_loop();
  g.conns = calloc((size_t) g.nconns, sizeof(*g.conns));
  if (g.conns == NULL)
    return 2;
  g.t0 = uv_hrtime();
  uv_timer_init(g.loop, &g.phase_timer);
  uv_timer_start(&g.phase_timer, on_phase_timer, g.duration_ms, 0);
  for (i = 0; i < g.nconns; i++) {
    conn_t* c = &g.conns[i];
    c->index = i;
    switch (g.mode) {
    case MODE_ACTIVE:
      c->role = ROLE_ACTIVE;
      break;
    case MODE_IDLE:
      c->role = ROLE_IDLE;
      break;
    case MODE_RPC:
      c->role = ROLE_RPC;
      break;
    case MODE_MIXED:
      /* Spread the idle share evenly over the indexes. */
      c->role = (int) ((i + 1) * g.idle_share) > (int) (i * g.idle_share)
                    ? ROLE_IDLE
                    : ROLE_ACTIVE;
      break;
    }
    g.n_active += c->role == ROLE_ACTIVE;
    g.n_idle += c->role == ROLE_IDLE;
    g.n_rpc += c->role == ROLE_RPC;
    uv_timer_init(g.loop, &c->timer);
    c->timer.data = c;
    conn_start(c);
  }

  uv_run(g.loop, UV_RUN_DEFAULT);

  summary((uv_hrtime() - g.t0) / 1e9);
  for (i = 0; i < g.nconns; i++)
    uv_close((uv_handle_t*) &g.conns[i].timer, NULL);
  uv_close((uv_handle_t*) &g.phase_timer, NULL);
  uv_run(g.loop, UV_RUN_DEFAULT);
  err = uv_loop_close(g.loop);
  for (i = 0; i < g.nconns; i++)
    free(g.conns[i].line);
  free(g.conns);
  free(g.rpcs);
  for (i = 0; i < CAUSE_COUNT; i++)
    free(g.close_since[i].v);
  free(g.idle_late.v);
  free(g.first_ping.v);
  free(g.rtt.v);
  free(g.rpc_latency.v);
  free(g.timeout_late.v);
  if (err != 0) {
    fprintf(stderr, "echo-load: uv_loop_close: %s\n", uv_strerror(err));
    return 2;
  }
  return g.violations ? 1 : 0;
}
