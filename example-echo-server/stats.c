/* SPDX-License-Identifier: MIT */
/* The STATS line and the idle-close lateness histogram.
 *
 * STATS on any connection reports the whole server.  It is gathered
 * without a lock: every counter in loop_t.stat has one writer, its own
 * loop, which updates it with a relaxed load and store (no read-modify-
 * write, so no cache line bouncing between loops on the hot path); STATS
 * sums the loops' counters with relaxed loads, so they are current when
 * the line is made.  The timer counts (timers, tasks, wakeups) of a loop
 * are its backend's, which only its own thread may read: the line's own
 * loop reads its backend directly, and each other loop publishes its
 * counts each time it is about to wait for events (loop.c).  So a loop
 * that is waiting shows exactly what it holds; one that is busy shows
 * what it held before its current iteration, which ends as soon as the
 * events it woke for are handled.  The sum is not one atomic snapshot,
 * which a monitoring line does not need.
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

void stats_format(loop_t* lp, char* buf, size_t size) {
  xstats_t own;
  uint64_t timers = 0;
  uint64_t tasks = 0;
  uint64_t wakeups = 0;
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
  snprintf(
      buf, size,
      "STATS conns=%" PRIu64 " timers=%" PRIu64 " tasks=%" PRIu64
      " wakeups=%" PRIu64 " idle_closes=%" PRIu64 " req_ok=%" PRIu64
      " req_timeout=%" PRIu64 " busy=%" PRIu64 " req_busy=%" PRIu64
      " req_cancelled=%" PRIu64 " work_abandoned=%" PRIu64
      " work_inflight=%" PRIu64
      " accept_errors=%" PRIu64 " line_timeouts=%" PRIu64
      " slow_closes=%" PRIu64 " output_bytes=%" PRIu64
      " loops=%u loop_conns=%s timers_backend=%s",
      TOTAL(conns), timers, tasks, wakeups, TOTAL(idle_closes), TOTAL(req_ok),
      TOTAL(req_timeout), TOTAL(busy_closes), TOTAL(req_busy),
      TOTAL(req_cancelled), TOTAL(work_abandoned),
      (uint64_t) atomic_load_explicit(&srv.work_inflight, memory_order_relaxed),
      TOTAL(accept_errors), TOTAL(line_timeouts), TOTAL(slow_closes),
      TOTAL(output_bytes), srv.nloops, per_loop, xbackend_name(opt.kind));
}


void on_stats_timer(uv_timer_t* handle) {
  char buf[1024];

  stats_format(handle->data, buf, sizeof(buf));
  logf_("%s", buf);
}


/* The p-th percentile of the idle-close lateness, over all loops. */
uint64_t late_percentile(double p) {
  uint64_t total = TOTAL(idle_closes);
  uint64_t want = (uint64_t) (p * (double) total + 0.999999);
  uint64_t seen = 0;
  int i;

  if (total == 0)
    return 0;
  if (want == 0)
    want = 1;
  for (i = 0; i < LATE_BUCKETS; i++) {
    seen += TOTAL(idle_late[i]);
    if (seen >= want)
      return (uint64_t) i;
  }
  return LATE_BUCKETS - 1;
}
