/* SPDX-License-Identifier: MIT */
/* The echo server's shared declarations: its types, its one global state
 * and the functions its files call across.  See server.c for the whole.
 */

#ifndef ECHO_SERVER_H
#define ECHO_SERVER_H

#include "backend.h"
#include "common.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

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

struct server_s {
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
};

extern struct server_s g;

/* Simulated work sleeps on this condition variable, so that shutdown can
 * wake it instead of waiting for the longest request to end. */
extern uv_mutex_t work_mutex;
extern uv_cond_t work_cond;
extern atomic_int work_stop;

/* conn.c */
int conn_send(conn_t* c, const char* data, size_t len);
void conn_reply(conn_t* c, const char* line);
void out_append(const char* data, size_t len);
void out_flush(conn_t* c);
void conn_close(conn_t* c);
void conn_bye(conn_t* c, const char* msg);
void on_connection(uv_stream_t* server, int status);

/* request.c */
void req_deadline_closed(xtimer_t* t);
void req_detach(req_t* r);
void handle_req(conn_t* c, const char* line, size_t len);

/* stats.c */
void stats_format(char* buf, size_t size);
void on_stats_timer(uv_timer_t* handle);
uint64_t late_percentile(uint64_t total, double p);

/* server-options.c */
void usage(FILE* f);
void parse_args(int argc, char** argv);

/* server.c */
void maybe_finish_shutdown(void);

#endif /* ECHO_SERVER_H */
