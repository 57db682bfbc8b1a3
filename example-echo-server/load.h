/* SPDX-License-Identifier: MIT */
/* echo-load's shared declarations: its types, its one global state and the
 * functions its files call across.  See load.c for the whole.
 */

#ifndef ECHO_LOAD_H
#define ECHO_LOAD_H

#include <stdint.h>
#include <stdio.h>

#include <uv.h>

#include "common.h"

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

typedef enum {
  ROLE_ACTIVE,
  ROLE_IDLE,
  ROLE_RPC,
  ROLE_SLOWLORIS, /* sends a line one byte at a time and never ends it */
  ROLE_NOREAD     /* sends lines and reads nothing until the run ends */
} role_t;
typedef enum {
  MODE_ACTIVE,
  MODE_IDLE,
  MODE_MIXED,
  MODE_RPC,
  MODE_SLOWLORIS,
  MODE_NOREAD
} mode_t_;
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
  CAUSE_IDLE,         /* BYE idle */
  CAUSE_BUSY,         /* BYE busy */
  CAUSE_SHUTDOWN,     /* BYE shutdown */
  CAUSE_ERR,          /* ERR ... then a close (line too long) */
  CAUSE_EOF,          /* closed without a BYE */
  CAUSE_RESET,        /* a read error */
  CAUSE_LINE_TIMEOUT, /* ERR line timeout */
  CAUSE_SLOW,         /* BYE slow */
  CAUSE_COUNT
};
extern const char* const cause_names[CAUSE_COUNT];

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
  /* slowloris: uv_hrtime when its unfinished line began, 0 if none */
  uint64_t line_started;
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


struct load_s {
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
  uint64_t line_timeout_ms;
  int noread_stats; /* noread connections send STATS, not echo lines */
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
  int n_active, n_idle, n_rpc, n_slowloris, n_noread;

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
  samples_t work_late;    /* the server's report: work's end - work_ms */
  rpc_t* rpcs;
  size_t nrpcs;
  size_t rpcs_cap;
  uint64_t req_ok;
  uint64_t req_timeout;
  uint64_t req_busy;
  uint64_t late_work; /* TIMEOUT for work_ms + margin <= deadline_ms */
  uint64_t noread_cut;     /* noread: closed by the server before it read */
  samples_t line_late;     /* ERR line timeout: since the line began - limit */
  samples_t slow_after;    /* BYE slow: since the connect */
  char server_stats[1024]; /* the server's STATS line as the run ended */
  uint64_t violations;
  uint64_t rng;
};

extern struct load_s g;

/* load.c */
void maybe_done(void);
void finish(void);

/* load-conn.c */
uint64_t rnd(void);
void conn_start(conn_t* c);
void conn_close(conn_t* c);
void pump_connects(void);

/* load-conn.c, continued */
void noread_start_reading(void);

/* load-report.c */
void server_stats_query(void);
void sample(samples_t* s, double v);
int cmp_double(const void* a, const void* b);
double pct(const samples_t* s, double p);
void print_samples(const char* label, samples_t* s);
void violation(const conn_t* c, const char* fmt, ...);
double ms_since(uint64_t then);
void summary(double secs);

/* load-options.c */
void usage(FILE* f);
void parse_args(int argc, char** argv);
int resolve(void);

#endif /* ECHO_LOAD_H */
