/* SPDX-License-Identifier: MIT */
/* echo-load: samples, violations and the summary. */

#include "load.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

const char* const cause_names[CAUSE_COUNT] = {"idle", "busy", "shutdown",
                                                     "err",  "eof",  "error"};


void sample(samples_t* s, double v) {
  if (s->n == s->cap) {
    s->cap = s->cap ? s->cap * 2 : 256;
    s->v = xrealloc(s->v, s->cap * sizeof(*s->v));
  }
  s->v[s->n++] = v;
}


int cmp_double(const void* a, const void* b) {
  double x = *(const double*) a;
  double y = *(const double*) b;
  return (x > y) - (x < y);
}


/* Nearest-rank percentile of sorted samples. */
double pct(const samples_t* s, double p) {
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


void print_samples(const char* label, samples_t* s) {
  if (s->n == 0) {
    printf("  %-28s n=0\n", label);
    return;
  }
  qsort(s->v, s->n, sizeof(*s->v), cmp_double);
  printf("  %-28s n=%zu min=%.1f p50=%.1f p99=%.1f max=%.1f ms\n", label, s->n,
         s->v[0], pct(s, 0.50), pct(s, 0.99), s->v[s->n - 1]);
}


void violation(const conn_t* c, const char* fmt, ...) {
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


double ms_since(uint64_t then) {
  return (double) (uv_hrtime() - then) / 1e6;
}



void summary(double secs) {
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
