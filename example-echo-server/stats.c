/* SPDX-License-Identifier: MIT */
/* The STATS line, and the lateness quantiles it shares with the exit line.
 *
 * STATS on any connection reports the whole server.  It is gathered
 * without a lock: every counter in loop_t.stat has one writer, its own
 * loop, which updates it with a relaxed load and store (no read-modify-
 * write, so no cache line bouncing between loops on the hot path); STATS
 * sums the loops' counters with relaxed loads, so they are current when
 * the line is made.  The timer counts (timers, tasks, wakeups, lateness)
 * of a loop are its backend's, which only its own thread may read: the
 * line's own loop reads its backend directly, and each other loop
 * publishes its counts each time it is about to wait for events (loop.c),
 * and once more as it closes its backend, for the exit line.  So a loop
 * that is waiting shows exactly what it holds; one that is busy shows
 * what it held before its current iteration, which ends as soon as the
 * events it woke for are handled.  The sum is not one atomic snapshot,
 * which a monitoring line does not need.
 *
 * Lateness is the backend's histogram (backend.h, xstats_t), in the
 * buckets of uvtw_stats_t.lateness.  The loops' buckets are added before
 * a quantile is taken: a quantile of the sum, not a sum of quantiles,
 * which would mean nothing.
 */

#include "server.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>


/* The sum over the loops of the counter at offset in loop_stats_t. */
uint64_t stats_total(size_t offset) {
  uint64_t sum = 0;
  unsigned i;

  for (i = 0; i < srv.nloops; i++)
    sum += counter_get((counter_t*) ((char*) &srv.loops[i]->stat + offset));
  return sum;
}


#define TOTAL(field) stats_total(offsetof(loop_stats_t, field))

/* Called on lp's thread: so that STATS made on other loops, and the exit
 * line, can read what only this thread may read. */
void stats_publish(loop_t* lp) {
  xstats_t s;
  unsigned i;

  xbackend_stats(&lp->backend, &s);
  atomic_store_explicit(&lp->stat.timers, s.timers_active,
                        memory_order_relaxed);
  atomic_store_explicit(&lp->stat.tasks, s.tasks_live, memory_order_relaxed);
  atomic_store_explicit(&lp->stat.wakeups, s.wakeups, memory_order_relaxed);
  for (i = 0; i < UVTW_LATENESS_BUCKETS; i++)
    atomic_store_explicit(&lp->stat.lateness[i], s.lateness[i],
                          memory_order_relaxed);
}


/* The lateness buckets summed over the loops into out->lateness (the
 * rest of *out is zero): lp's from own, what its thread has just read from
 * its backend, the other loops' as they published them.  lp and own are
 * NULL once every loop has published its last counts. */
void stats_lateness(loop_t* lp, const xstats_t* own, uvtw_stats_t* out) {
  unsigned i;
  unsigned j;
  loop_t* l;

  memset(out, 0, sizeof(*out));
  for (i = 0; i < srv.nloops; i++) {
    l = srv.loops[i];
    for (j = 0; j < UVTW_LATENESS_BUCKETS; j++)
      out->lateness[j] +=
          l == lp ? own->lateness[j] : counter_get(&l->stat.lateness[j]);
  }
}


/* One quantile: the top of its bucket, "<=N" ms, or ">=16384" for the
 * open last bucket, whose top uvtw_lateness_quantile gives as UINT64_MAX.
 * The bound is what the histogram knows; a bare number would read as an
 * exact value. */
static void format_quantile(const uvtw_stats_t* st,
                            double q,
                            char* buf,
                            size_t size) {
  uint64_t v = uvtw_lateness_quantile(st, q);

  if (v == UINT64_MAX)
    snprintf(buf, size, ">=%" PRIu64 "ms",
             (uint64_t) 1 << (UVTW_LATENESS_BUCKETS - 2));
  else
    snprintf(buf, size, "<=%" PRIu64 "ms", v);
}


/* "lateness_n=… lateness_p50=… lateness_p99=… lateness_max=…", the same
 * in STATS and in the exit line.  n is the sum of the buckets, which
 * tells "nothing counted" from "all on time" (both give <=0ms). */
void stats_format_lateness(const uvtw_stats_t* st, char* buf, size_t size) {
  char p50[32];
  char p99[32];
  char max[32];
  uint64_t n = 0;
  unsigned i;

  for (i = 0; i < UVTW_LATENESS_BUCKETS; i++)
    n += st->lateness[i];
  format_quantile(st, 0.50, p50, sizeof(p50));
  format_quantile(st, 0.99, p99, sizeof(p99));
  format_quantile(st, 1.0, max, sizeof(max));
  snprintf(buf, size,
           "lateness_n=%" PRIu64
           " lateness_p50=%s lateness_p99=%s"
           " lateness_max=%s",
           n, p50, p99, max);
}


void stats_format(loop_t* lp, char* buf, size_t size) {
  xstats_t own;
  uint64_t timers = 0;
  uint64_t tasks = 0;
  uint64_t wakeups = 0;
  uvtw_stats_t late;
  char lateness[LATENESS_TEXT_MAX];
  char per_loop[8 * MAX_LOOPS];
  size_t n = 0;
  unsigned i;
  loop_t* l;

  per_loop[0] = '\0';
  for (i = 0; i < srv.nloops; i++) {
    l = srv.loops[i];
    if (l == lp) {
      xbackend_stats(&lp->backend, &own);
      timers += own.timers_active;
      tasks += own.tasks_live;
      wakeups += own.wakeups;
    } else {
      timers += counter_get(&l->stat.timers);
      tasks += counter_get(&l->stat.tasks);
      wakeups += counter_get(&l->stat.wakeups);
    }
    n += (size_t) snprintf(per_loop + n, sizeof(per_loop) - n, "%s%" PRIu64,
                           i ? "," : "", counter_get(&l->stat.conns));
    if (n >= sizeof(per_loop))
      n = sizeof(per_loop) - 1;
  }
  stats_lateness(lp, &own, &late);
  stats_format_lateness(&late, lateness, sizeof(lateness));
  snprintf(
      buf, size,
      "STATS conns=%" PRIu64 " timers=%" PRIu64 " tasks=%" PRIu64
      " wakeups=%" PRIu64 " %s idle_closes=%" PRIu64 " req_ok=%" PRIu64
      " req_timeout=%" PRIu64 " busy=%" PRIu64 " req_busy=%" PRIu64
      " req_cancelled=%" PRIu64 " work_abandoned=%" PRIu64
      " work_inflight=%" PRIu64 " accept_errors=%" PRIu64
      " line_timeouts=%" PRIu64 " slow_closes=%" PRIu64 " output_bytes=%" PRIu64
      " loops=%u loop_conns=%s timers_backend=%s",
      TOTAL(conns), timers, tasks, wakeups, lateness, TOTAL(idle_closes),
      TOTAL(req_ok), TOTAL(req_timeout), TOTAL(busy_closes), TOTAL(req_busy),
      TOTAL(req_cancelled), TOTAL(work_abandoned),
      (uint64_t) atomic_load_explicit(&srv.work_inflight, memory_order_relaxed),
      TOTAL(accept_errors), TOTAL(line_timeouts), TOTAL(slow_closes),
      TOTAL(output_bytes), srv.nloops, per_loop, xbackend_name(opt.kind));
}


void on_stats_timer(uv_timer_t* handle) {
  char buf[STATS_LINE_MAX];

  stats_format(handle->data, buf, sizeof(buf));
  logf_("%s", buf);
}
