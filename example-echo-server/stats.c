/* SPDX-License-Identifier: MIT */
/* The STATS line and the idle-close lateness histogram. */

#include "server.h"

#include <inttypes.h>
#include <stdio.h>

/* ---------------------------------------------------------------------- */
/* Statistics.                                                              */

void stats_format(char* buf, size_t size) {
  xstats_t s;

  xbackend_stats(&g.backend, &s);
  snprintf(buf, size,
           "STATS conns=%" PRIu64 " timers=%" PRIu64 " tasks=%" PRIu64
           " wakeups=%" PRIu64 " idle_closes=%" PRIu64 " req_ok=%" PRIu64
           " req_timeout=%" PRIu64 " busy=%" PRIu64 " timers_backend=%s",
           g.nconns, s.timers_active, s.tasks_live, s.wakeups, g.idle_closes,
           g.req_ok, g.req_timeout, g.busy_closes, xbackend_name(g.kind));
}


void on_stats_timer(uv_timer_t* handle) {
  char buf[512];

  (void) handle;
  stats_format(buf, sizeof(buf));
  logf_("%s", buf);
}


uint64_t late_percentile(uint64_t total, double p) {
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
