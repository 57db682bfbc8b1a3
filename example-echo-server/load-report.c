/* SPDX-License-Identifier: MIT */
/* echo-load: samples, violations and the summary. */

#include "load.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

static const char* const role_names[] = {"active", "idle", "rpc", "slowloris",
                                         "noread"};

const char* const cause_names[CAUSE_COUNT] = {
    "idle", "busy", "shutdown", "err", "eof", "error", "line_timeout", "slow"};


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
    fprintf(stderr, " conn %d (%s)", c->index, role_names[c->role]);
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
  static const char* const mode_names[] = {"active", "idle",      "mixed",
                                           "rpc",    "slowloris", "noread"};
  char loops[16] = "0";
  char loop_conns[512] = "-";
  const char* p;
  int i;

  if (!g.quiet) {
    printf(
        "echo-load: mode=%s conns=%d (active %d, idle %d, rpc %d, "
        "slowloris %d, noread %d) ran %.1f s\n",
        mode_names[g.mode], g.nconns, g.n_active, g.n_idle, g.n_rpc,
        g.n_slowloris, g.n_noread, secs);
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
    if (g.n_slowloris > 0)
      print_samples("ERR line timeout lateness", &g.line_late);
    if (g.n_noread > 0) {
      print_samples("BYE slow, since connect", &g.slow_after);
      printf("  noread closed by the server before they read it all: %" PRIu64
             "\n",
             g.noread_cut);
    }
    if (g.mode == MODE_RPC) {
      printf("  requests sent=%zu ok=%" PRIu64 " timeout=%" PRIu64
             " busy=%" PRIu64 "\n",
             g.nrpcs, g.req_ok, g.req_timeout, g.req_busy);
      print_samples("request reply time", &g.rpc_latency);
      print_samples("TIMEOUT lateness", &g.timeout_late);
      print_samples("work end - work_ms (server)", &g.work_late);
      printf("  TIMEOUT for work well within its deadline, whose thread "
             "ended it late: %" PRIu64 "\n",
             g.late_work);
    }
    if (g.server_stats[0] != '\0')
      printf("  server, as the run ended: %s\n", g.server_stats);
    printf("  violations=%" PRIu64 "\n", g.violations);
  } else {
    /* print_samples sorts; the RESULT line needs sorted samples too */
    if (g.idle_late.n > 0)
      qsort(g.idle_late.v, g.idle_late.n, sizeof(double), cmp_double);
    if (g.rtt.n > 0)
      qsort(g.rtt.v, g.rtt.n, sizeof(double), cmp_double);
  }
  /* The server's loops and how the connections spread over them. */
  if ((p = strstr(g.server_stats, " loops=")) != NULL)
    sscanf(p, " loops=%15s", loops);
  if ((p = strstr(g.server_stats, " loop_conns=")) != NULL)
    sscanf(p, " loop_conns=%511s", loop_conns);
  /* One line for scripts. */
  printf("RESULT violations=%" PRIu64 " sent=%" PRIu64 " echoed=%" PRIu64
         " rtt_p50=%.1f rtt_p99=%.1f rtt_max=%.1f pings=%" PRIu64
         " idle_closes=%" PRIu64
         " late_p50=%.1f late_p99=%.1f"
         " late_max=%.1f ok=%" PRIu64 " timeout=%" PRIu64
         " shutdown_closes=%" PRIu64 " other_closes=%" PRIu64 " busy=%" PRIu64
         " line_timeouts=%" PRIu64 " slow_closes=%" PRIu64
         " noread_cut=%" PRIu64 " late_work=%" PRIu64
         " server_loops=%s server_loop_conns=%s\n",
         g.violations, g.msgs, g.echoed, pct(&g.rtt, 0.5), pct(&g.rtt, 0.99),
         pct(&g.rtt, 1.0), g.pings, g.closes[CAUSE_IDLE],
         pct(&g.idle_late, 0.5), pct(&g.idle_late, 0.99),
         pct(&g.idle_late, 1.0), g.req_ok, g.req_timeout,
         g.closes[CAUSE_SHUTDOWN],
         g.closes[CAUSE_BUSY] + g.closes[CAUSE_ERR] + g.closes[CAUSE_EOF] +
             g.closes[CAUSE_RESET],
         g.req_busy, g.closes[CAUSE_LINE_TIMEOUT], g.closes[CAUSE_SLOW],
         g.noread_cut, g.late_work, loops, loop_conns);
  fflush(stdout);
}


/* Asks the server for its STATS line on a connection of its own, as the
 * run ends and before the load's connections close: which loops the
 * connections went to.  Blocking, once, with a 2 s limit: the summary can
 * wait that long; a server that does not answer leaves the line empty. */
void server_stats_query(void) {
  struct timeval tv = {2, 0};
  char buf[sizeof(g.server_stats)];
  size_t len = 0;
  ssize_t n;
  char* nl;
  int fd;

  g.server_stats[0] = '\0';
  fd = socket(g.addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return;
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  if (connect(fd, (struct sockaddr*) &g.addr,
              g.addr.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                           : sizeof(struct sockaddr_in)) == 0 &&
      write(fd, "STATS\n", 6) == 6) {
    while (len < sizeof(buf) - 1 &&
           (n = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0) {
      len += (size_t) n;
      buf[len] = '\0';
      nl = strchr(buf, '\n');
      if (nl != NULL) {
        *nl = '\0';
        if (strncmp(buf, "STATS ", 6) == 0)
          snprintf(g.server_stats, sizeof(g.server_stats), "%s", buf);
        break;
      }
    }
  }
  close(fd);
}
