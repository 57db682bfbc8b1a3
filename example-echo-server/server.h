/* SPDX-License-Identifier: MIT */
/* The echo server's shared declarations: its options, its loops, its
 * connections and requests, and the functions its files call across.
 *
 * Threads.  The server runs --loops loop threads.  Each has its own
 * uv_loop_t, its own timer backend (one uvtw wheel, or uv_timer_t's), its
 * own listener on the shared port (SO_REUSEPORT) and its own connections;
 * nothing in a loop_t is touched by another thread, except the counters in
 * loop_t.stat (one writer, its loop; readers anywhere, relaxed atomics) and
 * the control tasks the signal thread submits to the loop's wheel.  The
 * main thread handles the signals.  The simulated work of REQ lines runs
 * on libuv's threadpool, which all loops share.
 */

#ifndef ECHO_SERVER_H
#define ECHO_SERVER_H

#include "backend.h"
#include "common.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#define REQ_ID_MAX 64
#define MAX_LOOPS 64
/* Writes queued to one client that does not read: above HIGH the server
 * stops reading from it, below LOW it reads again.  The loop-wide cap,
 * --max-output-bytes, is in limits.c. */
#define WRITE_QUEUE_HIGH (1024 * 1024)
#define WRITE_QUEUE_LOW (256 * 1024)
/* A slow connection is no longer slow once its queue is this short. */
#define OUTPUT_DRAINED (64 * 1024)
/* The lingering close (conn_bye): after its last line, a connection is
 * read and its input thrown away until the client closes or this long has
 * passed.  Long enough for a client to finish a send of a few MiB at
 * memory speed, and to read the line and close after a round trip or two
 * on a slow link; short enough that a client that never reads, or never
 * stops sending, holds its descriptor (no longer counted in --max-conns)
 * for 2 s at most. */
#define LINGER_MS 2000
/* Room for a STATS line: its fields, the lateness quantiles, and one
 * connection count per loop for up to MAX_LOOPS loops. */
#define STATS_LINE_MAX 2048
/* Room for stats_format_lateness's fields, at their widest. */
#define LATENESS_TEXT_MAX 192
/* One read: libuv reads into this much at a time (see on_alloc). */
#define READ_SIZE 65536
/* Replies to one read are sent in pieces of about this size, and a
 * connection paused by one stops handling its read there (conn_input). */
#define OUT_CHUNK 65536

typedef struct loop_s loop_t;
typedef struct conn_s conn_t;
typedef struct req_s req_t;

/* The command line; read-only once the loops start. */
struct options_s {
  const char* host;
  int port;
  uint64_t heartbeat_ms;
  uint64_t idle_ms;
  uint64_t line_timeout_ms;
  uint64_t stats_ms;
  uint64_t max_conns;
  uint64_t max_line;
  uint64_t max_reqs;
  uint64_t max_work_ms;
  uint64_t max_deadline_ms;
  uint64_t max_output_bytes;
  uint64_t max_work_inflight; /* 0 until parsed: then 2 * threads */
  uint64_t max_work_per_conn; /* 0 until parsed: then threads / 4, >= 1 */
  uint64_t drain_ms;
  unsigned threads;
  unsigned loops; /* 0 on the command line: one per core */
  xbackend_kind_t kind;
};

extern struct options_s opt;

typedef enum {
  CONN_OPEN,    /* reading, in the connection list */
  CONN_CLOSING, /* BYE or ERR sent: lingering until EOF or LINGER_MS */
  CONN_CLOSED   /* uv_close called, waiting for the close callbacks */
} conn_state_t;

struct req_s {
  xwork_t work;
  xtimer_t deadline;
  loop_t* lp;
  /* The connection waiting for the answer; NULL once answered or once the
   * connection is gone.  Whoever sets it to NULL closes the deadline. */
  conn_t* conn;
  /* The connection that asked, whose share of the threadpool the work
   * holds (owner->works) until its done call; a reference on it, so that
   * it outlives its close until then.  NULL if the work never started. */
  conn_t* owner;
  req_t* next; /* in conn->reqs while conn != NULL */
  req_t* prev;
  uint64_t work_ms; /* read by the threadpool: never changes after submit */
  /* Set by the loop once nobody waits for the answer (TIMEOUT sent, or the
   * connection gone), under work_mutex: the work stops at its next look.
   * cut_short is the work's own note that it did, read by its done call
   * (which the backend's hop orders after the work). */
  atomic_int abandoned;
  int cut_short;
  /* When the REQ was read (uv_now), and the deadline on the loop's clock
   * (read_at + deadline_ms),
   * and the moment the work finished on the same clock (uv_hrtime in ms;
   * 0 until then), written by the threadpool thread.  The answer is OK
   * iff finished_ms <= deadline_at, whichever of the deadline timer and
   * the work's done call the loop happens to reach first: a loop that was
   * held up (descheduled on a busy machine) reaches both in one
   * iteration. */
  uint64_t read_at;
  uint64_t deadline_at;
  _Atomic uint64_t finished_ms;
  /* Asked with "timed": the answer says when the work ended (req_answer),
   * so that a test can judge it against the work's real end. */
  int timed;
  /* 2 until both the work's done call and the deadline's close have run:
   * the threadpool may still be sleeping on a request long answered. */
  int refs;
  char id[REQ_ID_MAX + 1];
};

struct conn_s {
  uv_tcp_t tcp;
  uv_shutdown_t shutdown_req;
  /* One timer per connection does every job: heartbeat, idle close, line
   * deadline and the output cap's "slow" close.  It is always armed for
   * the first of "PING is due", "BYE is due" (both counted from
   * last_activity) and "the partial line is due" (counted from
   * line_started).  Activity re-arms it to now + heartbeat, which (except
   * right after a PING, or with a partial line) is later than where it
   * stands, so with the wheel it is the cheap lazy re-arm.  After BYE the
   * same timer bounds how long the BYE may take to drain. */
  xtimer_t timer;
  loop_t* lp;
  conn_t* next; /* in the loop's list while CONN_OPEN and counted */
  conn_t* prev;
  req_t reqs; /* list head: requests not answered yet */
  unsigned nreqs;
  unsigned works; /* works of its requests without a done call yet */
  uint64_t last_activity; /* uv_now at the last read */
  uint64_t line_started;  /* uv_now when the partial line began */
  uint64_t slow_since;    /* uv_now|1 when paused for output; 0: not slow */
  uint64_t queued;        /* bytes of replies written but not sent yet */
  char* line; /* the start of a line whose end has not arrived yet */
  size_t line_len;
  char* pending; /* input not handled yet because it was paused */
  size_t pending_len;
  conn_state_t state;
  int counted; /* counted in nconns; a "BYE busy" connection is not */
  int shut;    /* CONN_CLOSING: the last line is sent, and our FIN */
  int peer_eof; /* CONN_CLOSING: the client's EOF came first */
  int eof;      /* CONN_OPEN: the client half-closed; no more reading */
  int paused;  /* reading stopped: PAUSE_* bits */
  /* 2 until both the TCP handle and the timer are closed, plus one for
   * each work in c->works (req_s.owner). */
  int refs;
};

#define PAUSE_OWN 1   /* its own queue is over WRITE_QUEUE_HIGH */
#define PAUSE_CAP 2   /* the loop is over its output budget */
#define PAUSE_DRAIN 4 /* the server is draining: no new input */

/* A write request carries its own bytes. */
typedef struct {
  uv_write_t req;
  size_t len;
  char data[];
} wreq_t;

/* A counter with one writer (its loop) that any thread may read. */
typedef _Atomic uint64_t counter_t;

static inline void counter_add(counter_t* c, uint64_t n) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
                        memory_order_relaxed);
}


static inline uint64_t counter_get(counter_t* c) {
  return atomic_load_explicit(c, memory_order_relaxed);
}


/* What STATS sums over the loops. */
typedef struct {
  counter_t conns;
  counter_t timers; /* published before each wait for events, see loop.c */
  counter_t tasks;
  counter_t wakeups;
  counter_t idle_closes;
  counter_t busy_closes;
  counter_t slow_closes;
  counter_t line_timeouts;
  counter_t req_ok;
  counter_t req_timeout;
  counter_t req_busy;
  counter_t req_cancelled;
  counter_t work_abandoned;
  counter_t accept_errors;
  counter_t output_bytes;
  /* The backend's timer callbacks by lateness, published with timers. */
  counter_t lateness[UVTW_LATENESS_BUCKETS];
} loop_stats_t;

typedef enum {
  LOOP_RUN,   /* accepting and serving */
  LOOP_DRAIN, /* not accepting, not reading: answering requests in flight */
  LOOP_STOP   /* BYE shutdown sent to all, closing */
} loop_phase_t;

struct loop_s {
  int index;
  uv_loop_t loop;
  xbackend_t backend;
  /* The listener: our own socket, accepted from by hand (see loop.c). */
  int listen_fd;
  uv_poll_t listen_poll;
  xtimer_t accept_timer; /* backs off after an accept error */
  int accept_paused;
  uv_prepare_t publish; /* copies the backend's counters into stat */
  uv_timer_t stats_timer;
  xtimer_t drain_timer;
  conn_t conns;      /* list head */
  uint64_t nconns;   /* open connections (not counting "BYE busy" ones) */
  uint64_t live;     /* connection structs not freed yet */
  uint64_t inflight; /* requests waiting for an answer on this loop */
  loop_phase_t phase;
  int closing;          /* xbackend_close called */
  int loop_close_err;   /* what uv_loop_close said, for main */
  uv_mutex_t ctl_mutex; /* orders control tasks against the wheel's close */
  int ctl_closed;       /* under ctl_mutex: no more control tasks */
  /* Output: bytes of replies queued on this loop, and its share of
   * --max-output-bytes. */
  uint64_t output_bytes;
  uint64_t output_budget;
  int over_budget;
  /* replies made while handling one read, sent as one write */
  char* out;
  size_t out_len;
  size_t out_cap;
  char slab[READ_SIZE]; /* the read buffer, see on_alloc */
  loop_stats_t stat;
};

/* The whole server. */
struct server_s {
  loop_t* loops[MAX_LOOPS];
  uv_thread_t threads[MAX_LOOPS]; /* threads[i] runs loops[i] */
  /* Posted once per loop when every loop is set up: no loop serves before
   * all of loops[] is written, so a STATS that reads the other loops
   * happens after their creation. */
  uv_sem_t loops_go;
  unsigned nloops;
  int port;                           /* the port every loop listens on */
  atomic_uint_fast64_t nconns;        /* open connections on all loops */
  atomic_uint_fast64_t work_inflight; /* requests queued or running */
  atomic_uint_fast64_t
      accept_log_ms; /* when the last accept error was logged */
  atomic_uint_fast64_t accept_logged; /* accept errors logged so far */
  atomic_int loops_running;           /* threads that have not returned yet */
  atomic_int loops_draining;          /* loops that have not stopped yet */
};

extern struct server_s srv;

/* Simulated work sleeps on this condition variable, so that an abandoned
 * request, or shutdown, can wake it instead of waiting for it to end. */
extern uv_mutex_t work_mutex;
extern uv_cond_t work_cond;
extern atomic_int work_stop;

/* conn.c */
int conn_send(conn_t* c, const char* data, size_t len);
void conn_reply(conn_t* c, const char* line);
void out_append(loop_t* lp, const char* data, size_t len);
void out_flush(conn_t* c);
void conn_close(conn_t* c);
void conn_bye(conn_t* c, const char* msg);
void conn_answered(conn_t* c);
void conn_accepted(loop_t* lp, int fd);
void conn_pause(conn_t* c, int why);
void conn_resume(conn_t* c, int why);
void conn_unref(conn_t* c);

/* request.c */
void req_deadline_closed(xtimer_t* t);
void req_detach(req_t* r);
void req_abandon(req_t* r);
void handle_req(conn_t* c, const char* line, size_t len);
void work_wake_all(void);

/* limits.c */
void output_charge(conn_t* c, size_t len);
void output_release(conn_t* c, size_t len);
int output_over_share(const conn_t* c);
void accept_error(loop_t* lp, int err);
int work_admit(void);
void work_release(void);

/* stats.c */
void stats_format(loop_t* lp, char* buf, size_t size);
void on_stats_timer(uv_timer_t* handle);
uint64_t stats_total(size_t offset);
void stats_lateness(loop_t* lp, const xstats_t* own, uvtw_stats_t* out);
void stats_format_lateness(const uvtw_stats_t* st, char* buf, size_t size);
void stats_publish(loop_t* lp);

/* loop.c */
/* Sets up and starts the loops, each on its own thread; returns once every
 * loop listens, or an error. */
int loops_start(void);
void loops_post_drain(int now);
int loops_join(void);
void loops_free(void);
void loop_maybe_finish(loop_t* lp);

/* server-options.c */
void usage(FILE* f);
void parse_args(int argc, char** argv);

#endif /* ECHO_SERVER_H */
