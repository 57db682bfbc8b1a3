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


#include "server.h"

#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>

struct server_s g;


/* ---------------------------------------------------------------------- */
/* Shutdown.                                                                */

static void on_backend_closed(xbackend_t* backend) {
  (void) backend;
  /* Nothing is left on the loop now; uv_run returns. */
}


void maybe_finish_shutdown(void) {
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


static int listen_on(void) {
  struct sockaddr_storage addr;
  struct sockaddr_storage bound;
  int len = sizeof(bound);
  int port;
  int err;

  if (parse_address(g.host, g.port, &addr) != 0) {
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

  program_name = "uvtw-echo-server";
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
