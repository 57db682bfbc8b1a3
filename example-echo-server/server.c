/* SPDX-License-Identifier: MIT */
/* uvtw-echo-server: a line-based TCP echo server with heartbeats, idle
 * timeouts, line deadlines and request deadlines, all timed by one uvtw
 * wheel per loop (or, with --timers=uv, by one uv_timer_t each, for
 * comparison).  See README.md for the protocol and the flags.
 *
 * The files, by concern:
 *   server.c          start-up, the signal thread, the exit line
 *   server-options.c  the command line
 *   loop.c            loop threads, listening and accepting, drain and stop
 *   conn.c            connections: lines, replies, the connection's timer
 *   request.c         REQ: admission, work on the threadpool, deadline
 *   limits.c          the output cap, accept errors, admission for work
 *   stats.c           the STATS line, gathered across the loops
 *   backend.c         the timer and work backends (wheel, uv)
 *   common.c          helpers shared with echo-load
 */

#include "server.h"

#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

struct server_s srv;


/* Starts libuv's threadpool before the first client can send a request.
 * libuv creates the whole pool on the first uv_queue_work, and that call
 * waits until every thread has started: with 64 threads under TSan that is
 * hundreds of milliseconds, which the first requests would otherwise pay
 * inside their deadlines.  Both timer backends and all loops share the one
 * pool. */
static void warm_work(uv_work_t* req) {
  (void) req;
}


static void warm_done(uv_work_t* req, int status) {
  (void) req;
  (void) status;
}


/* On a loop of its own, before the loops exist. */
static int warm_threadpool(void) {
  uv_loop_t loop;
  uv_work_t req;
  int err;

  err = uv_loop_init(&loop);
  if (err != 0)
    return err;
  err = uv_queue_work(&loop, &req, warm_work, warm_done);
  if (err == 0)
    uv_run(&loop, UV_RUN_DEFAULT);
  uv_loop_close(&loop);
  return err;
}


/* The signal thread: this one, once the loops run.  SIGINT and SIGTERM are
 * blocked in every thread and taken here with sigtimedwait, so that no
 * loop is interrupted and each is reached the one way the library offers
 * across threads, uvtw_submit (loops_post_drain).  The first signal starts
 * the drain, the second skips it, a third kills (its default action comes
 * back after the second). */
static void wait_for_signals(const sigset_t* set) {
  struct timespec tick = {0, 100 * 1000 * 1000};
  int signals = 0;
  int sig;

  while (atomic_load(&srv.loops_running) > 0) {
    sig = sigtimedwait(set, NULL, &tick);
    if (sig < 0)
      continue; /* EAGAIN every tick: are the loops still running? */
    signals++;
    if (signals == 1) {
      logf_(
          "%s: shutting down: no new connections or requests, draining "
          "requests in flight for up to %" PRIu64 " ms",
          sig == SIGINT ? "SIGINT" : "SIGTERM", opt.drain_ms);
      loops_post_drain(0);
    } else if (signals == 2) {
      logf_("%s again: skipping the drain",
            sig == SIGINT ? "SIGINT" : "SIGTERM");
      loops_post_drain(1);
      pthread_sigmask(SIG_UNBLOCK, set, NULL);
    }
  }
}


/* Peak RSS in KiB: VmHWM, not getrusage's ru_maxrss, which Linux carries
 * over exec from the process that started this one (a test's Python
 * interpreter is bigger than this server). */
static long peak_rss_kb(void) {
  char line[256];
  long kb = -1;
  FILE* f = fopen("/proc/self/status", "r");

  if (f == NULL)
    return -1;
  while (fgets(line, sizeof(line), f) != NULL)
    if (sscanf(line, "VmHWM: %ld kB", &kb) == 1)
      break;
  fclose(f);
  return kb;
}


int main(int argc, char** argv) {
  char threads[16];
  char lateness[LATENESS_TEXT_MAX];
  uvtw_stats_t late;
  struct rusage ru;
  sigset_t set;
  int err;

  program_name = "uvtw-echo-server";
  parse_args(argc, argv);
  signal(SIGPIPE, SIG_IGN);
  raise_fd_limit();
  /* The threadpool reads this once, at its first use.  Sleeping work
   * holds a thread, so a bigger pool keeps REQ work from queueing behind
   * other REQ work, which would make deadlines about the queue. */
  snprintf(threads, sizeof(threads), "%u", opt.threads);
  setenv("UV_THREADPOOL_SIZE", threads, 1);
  if (uv_mutex_init(&work_mutex) != 0 || uv_cond_init(&work_cond) != 0)
    return 1;
  /* Before any thread exists, so that every thread inherits the mask. */
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, NULL);

  err = warm_threadpool();
  if (err != 0) {
    logf_("cannot start the threadpool: %s", uv_strerror(err));
    return 1;
  }
  if (loops_start() != 0)
    return 1;
  /* Tests read this line to learn the port; flush it at once. */
  printf("listening on %s:%d (timers=%s, loops=%u)\n", opt.host, srv.port,
         xbackend_name(opt.kind), srv.nloops);
  fflush(stdout);

  wait_for_signals(&set);
  err = loops_join();

  /* What the comparison between the backends reads.  Every loop has
   * joined, after publishing its lateness as it closed its backend. */
  stats_lateness(NULL, NULL, &late);
  stats_format_lateness(&late, lateness, sizeof(lateness));
  getrusage(RUSAGE_SELF, &ru);
  logf_(
      "exit: timers=%s loops=%u cpu user=%.3fs sys=%.3fs maxrss=%ldKB "
      "idle_closes=%" PRIu64 " %s req_ok=%" PRIu64 " req_timeout=%" PRIu64
      " req_busy=%" PRIu64 " accept_errors=%" PRIu64,
      xbackend_name(opt.kind), srv.nloops,
      (double) ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6,
      (double) ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6, peak_rss_kb(),
      stats_total(offsetof(loop_stats_t, idle_closes)), lateness,
      stats_total(offsetof(loop_stats_t, req_ok)),
      stats_total(offsetof(loop_stats_t, req_timeout)),
      stats_total(offsetof(loop_stats_t, req_busy)),
      stats_total(offsetof(loop_stats_t, accept_errors)));
  loops_free();
  uv_cond_destroy(&work_cond);
  uv_mutex_destroy(&work_mutex);
  return err == 0 ? 0 : 1;
}
