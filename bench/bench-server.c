/* SPDX-License-Identifier: MIT */
/* uvtw-bench: idle-server, the quiet server that per-timer leeway is for.
 *
 * A real loop (no fake clock steps, no fake poll), one wheel, tick 1 ms,
 * N connections, each an uvtw timer with a deadline U[25 s, 35 s] from its
 * (re)start.  Activity is a uv_timer_t every 10 ms, not on the wheel, so
 * that it does not count in the driver's wake-ups: it re-arms N / 10,000
 * connections per elapsed ms (100 per 10 ms at N = 100,000), picked
 * uniformly with replacement, each to a new U[25 s, 35 s] deadline.  So
 * each connection is re-armed about once per 10 s, at moments of a
 * Poisson process, and about 5% of the gaps exceed the deadline: that
 * connection expires, its callback checks the bound and restarts it (a new
 * connection), and the population stays N.  About 550 expiries a second.
 *
 * One cell per leeway (0, 100 and 1,000 ms, set before the first start),
 * each on a fresh loop and wheel: a warm-up of 35 s, then a measured
 * window of 30 s.  The first deadlines are drawn from the population's
 * stationary state (a connection's age since its last restart is Exp(10
 * s), given that it is below its deadline), so expiries run at their
 * steady rate from the start; the wheel's slots do not: lazily re-armed
 * timers pile up in the near slots only as the first deadlines pass (at
 * 1 s of leeway, 6.8 driver wake-ups a second in the 5 s to 15 s after the
 * start, 17 after 35 s), hence the warm-up of the longest deadline.
 * --quick divides every time by 10 (deadlines U[2.5 s, 3.5 s], a re-arm
 * per connection per second, leeways 0, 10 and 100 ms) and N by 10, with
 * a warm-up of 0.5 s and a window of 1.5 s: 6 s in all.
 *
 * uvtw side only: a uv_timer_t per connection has no leeway to compare. */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "bench.h"

#define SERVER_N 100000
#define SERVER_TO_LO 25000      /* ms */
#define SERVER_TO_HI 35000      /* ms */
#define SERVER_MEAN_REARM 10000 /* ms between re-arms of one connection */
#define SERVER_ACTIVITY_MS 10
#define SERVER_WARMUP 35000 /* ms */
#define SERVER_WINDOW 30000 /* ms */
#define SERVER_QUICK_DIV 10
/* Lateness beyond leeway + 1 tick that a loaded 2-core machine may add. */
#define SERVER_SLACK_MS 50
/* Lateness histogram, 1 ms buckets; the last one holds everything later. */
#define SERVER_HIST 65536

typedef struct conn_s {
  uvtw_timer_t timer;
  uint64_t deadline; /* uv_now at the (re)start + timeout, ms */
} conn_t;

/* Counters read at the two ends of the window. */
typedef struct snap_s {
  uvtw_stats_t stats;
  uint64_t wall_ns;
  uint64_t cpu_ns;
  uint64_t iterations;
  uint64_t wake_fire;
  uint64_t wake_cascade;
  uint64_t wake_empty;
} snap_t;

typedef struct server_s {
  uv_loop_t loop;
  uvtw_wheel_t* wheel;
  conn_t* conns;
  size_t n;
  uint64_t leeway;     /* asked for, ms */
  uint64_t leeway_eff; /* what the wheel uses, ms */
  uint64_t to_lo;
  uint64_t to_hi;
  uint64_t mean_rearm;
  uint64_t warmup;
  uint64_t window;
  bench_rng_t rng;
  uv_timer_t activity;
  uint64_t activity_ms; /* the clock the activity has caught up with */
  uint64_t owed;        /* re-arms owed, times mean_rearm */
  uv_timer_t phase;
  int measuring;
  int failed;
  uv_prepare_t prepare;
  uvtw_stats_t last; /* the counters at the previous prepare callback */
  uint64_t iterations;
  /* Driver wake-ups by what their pass did: fired a timer; only re-filed
   * (cascaded) timers; neither. */
  uint64_t wake_fire;
  uint64_t wake_cascade;
  uint64_t wake_empty;
  /* Over the whole run: */
  uint64_t early;
  /* Over the window: */
  uint64_t expiries;
  uint64_t distinct_ms;
  uint64_t last_expiry_ms;
  uint64_t over_bound;
  uint64_t max_late;
  uint64_t* hist;
  /* The longest time between two loop iterations: the activity wakes the
   * loop every 10 ms, so a longer gap is a stall (the process not
   * scheduled, or the loop blocked), which adds to every lateness. */
  uint64_t iter_ns;
  uint64_t max_gap_ns;
  snap_t s0;
  snap_t s1;
} server_t;


static uint64_t rusage_ns(void) {
  struct rusage ru;

  getrusage(RUSAGE_SELF, &ru);
  return ((uint64_t) ru.ru_utime.tv_sec + (uint64_t) ru.ru_stime.tv_sec) *
             1000000000u +
         ((uint64_t) ru.ru_utime.tv_usec + (uint64_t) ru.ru_stime.tv_usec) *
             1000u;
}


static void snap(server_t* s, snap_t* out) {
  uvtw_wheel_stats(s->wheel, &out->stats);
  out->wall_ns = uv_hrtime();
  out->cpu_ns = rusage_ns();
  out->iterations = s->iterations;
  out->wake_fire = s->wake_fire;
  out->wake_cascade = s->wake_cascade;
  out->wake_empty = s->wake_empty;
}


static void conn_cb(uvtw_timer_t* timer);


static void conn_start(server_t* s, conn_t* c, uint64_t timeout) {
  /* A restart of an active timer, or a start of the one that just fired. */
  if (uvtw_timer_start(&c->timer, conn_cb, timeout, 0) != 0)
    s->failed = 1;
  c->deadline = uv_now(&s->loop) + timeout;
}


static void conn_cb(uvtw_timer_t* timer) {
  server_t* s;
  conn_t* c;
  uint64_t now;
  uint64_t late;

  s = timer->data;
  c = (conn_t*) timer;
  now = uv_now(&s->loop);
  if (now < c->deadline || uv_hrtime() < c->deadline * 1000000u) {
    s->early++;
  } else if (s->measuring) {
    late = now - c->deadline;
    s->expiries++;
    if (now != s->last_expiry_ms)
      s->distinct_ms++;
    s->last_expiry_ms = now;
    s->hist[late < SERVER_HIST ? late : SERVER_HIST - 1]++;
    if (late > s->max_late)
      s->max_late = late;
    if (late > s->leeway_eff + 1 + SERVER_SLACK_MS)
      s->over_bound++;
  }
  /* The connection closed; a new one takes its place. */
  conn_start(s, c, bench_rng_range(&s->rng, s->to_lo, s->to_hi));
}


/* Re-arms n / mean_rearm connections per elapsed ms, so the rate holds
 * whatever the activity timer's own lateness. */
static void activity_cb(uv_timer_t* handle) {
  server_t* s;
  uint64_t now;
  conn_t* c;

  s = handle->data;
  now = uv_now(&s->loop);
  s->owed += (now - s->activity_ms) * s->n;
  s->activity_ms = now;
  for (; s->owed >= s->mean_rearm; s->owed -= s->mean_rearm) {
    c = &s->conns[bench_rng_range(&s->rng, 0, s->n - 1)];
    conn_start(s, c, bench_rng_range(&s->rng, s->to_lo, s->to_hi));
  }
}


/* Counts loop iterations, and sorts the driver's wake-ups since the last
 * iteration by what their pass did (one at most per iteration). */
static void prepare_cb(uv_prepare_t* handle) {
  uvtw_stats_t st;
  server_t* s;
  uint64_t now;

  s = handle->data;
  s->iterations++;
  now = uv_hrtime();
  if (s->measuring && now - s->iter_ns > s->max_gap_ns)
    s->max_gap_ns = now - s->iter_ns;
  s->iter_ns = now;
  uvtw_wheel_stats(s->wheel, &st);
  if (st.driver_wakeups != s->last.driver_wakeups) {
    if (st.fired != s->last.fired)
      s->wake_fire += st.driver_wakeups - s->last.driver_wakeups;
    else if (st.cascades != s->last.cascades)
      s->wake_cascade += st.driver_wakeups - s->last.driver_wakeups;
    else
      s->wake_empty += st.driver_wakeups - s->last.driver_wakeups;
  }
  s->last = st;
}


static void phase_cb(uv_timer_t* handle) {
  server_t* s;

  s = handle->data;
  if (!s->measuring) {
    snap(s, &s->s0);
    s->measuring = 1;
    s->last_expiry_ms = UINT64_MAX;
    uv_timer_start(&s->phase, phase_cb, s->window, 0);
  } else {
    snap(s, &s->s1);
    s->measuring = 0;
    uv_stop(&s->loop);
  }
}


/* An Exp(mean) sample, ms. */
static double rng_exp(bench_rng_t* rng, double mean) {
  double u;

  u = ((double) (bench_rng_next(rng) >> 11) + 1) * 0x1p-53; /* (0, 1] */
  return -mean * log(u);
}


static int server_run(server_t* s) {
  uvtw_options_t opts;
  double d;
  double a;
  uint64_t timeout;
  size_t i;
  int r;

  uvtw_options_init(&opts);
  r = uv_loop_init(&s->loop);
  if (r == 0)
    r = uvtw_wheel_new(&s->loop, &opts, &s->wheel);
  if (r != 0) {
    bench_log("idle-server: loop/wheel setup failed: %s\n", uv_strerror(r));
    return -1;
  }
  for (i = 0; i < s->n; i++) {
    r |= uvtw_timer_init(s->wheel, &s->conns[i].timer);
    r |= uvtw_timer_set_leeway(&s->conns[i].timer, s->leeway);
    s->conns[i].timer.data = s;
  }
  s->leeway_eff = uvtw_timer_get_leeway(&s->conns[0].timer);
  uv_timer_init(&s->loop, &s->activity);
  uv_timer_init(&s->loop, &s->phase);
  uv_prepare_init(&s->loop, &s->prepare);
  s->activity.data = s->phase.data = s->prepare.data = s;
  uv_update_time(&s->loop);
  /* The stationary state: age a ~ Exp(mean_rearm) given a < d, the
   * deadline d ~ U[to_lo, to_hi]; the time left is d - a. */
  for (i = 0; i < s->n; i++) {
    do {
      d = (double) bench_rng_range(&s->rng, s->to_lo, s->to_hi);
      a = rng_exp(&s->rng, (double) s->mean_rearm);
    } while (a >= d);
    timeout = (uint64_t) ceil(d - a);
    conn_start(s, &s->conns[i], timeout > 0 ? timeout : 1);
  }
  s->activity_ms = uv_now(&s->loop);
  uv_timer_start(&s->activity, activity_cb, SERVER_ACTIVITY_MS,
                 SERVER_ACTIVITY_MS);
  uv_timer_start(&s->phase, phase_cb, s->warmup, 0);
  uvtw_wheel_stats(s->wheel, &s->last);
  uv_prepare_start(&s->prepare, prepare_cb);
  uv_run(&s->loop, UV_RUN_DEFAULT);
  r |= s->failed;
  if (s->s1.wall_ns == 0) {
    bench_log("idle-server: the loop ended before the window did\n");
    r = -1;
  }
  for (i = 0; i < s->n; i++)
    uvtw_timer_stop(&s->conns[i].timer);
  uv_close((uv_handle_t*) &s->activity, NULL);
  uv_close((uv_handle_t*) &s->phase, NULL);
  uv_close((uv_handle_t*) &s->prepare, NULL);
  uvtw_wheel_close(s->wheel, NULL);
  uv_run(&s->loop, UV_RUN_DEFAULT);
  if (uv_loop_close(&s->loop) != 0) {
    bench_log("idle-server: uv_loop_close failed\n");
    r = -1;
  }
  return r != 0 ? -1 : 0;
}


/* The cell's parameters, shared by its runs. */
typedef struct cell_ctx_s {
  const bench_cfg_t* cfg;
  size_t n;
  uint64_t leeway;
  conn_t* conns;
  uint64_t* hist;
} cell_ctx_t;


static int run_server(void* arg, int side, bench_sample_t* out) {
  cell_ctx_t* cc;
  server_t* s;
  uint64_t div;
  uint64_t rank;
  uint64_t seen;
  uint64_t p99;
  double wall;
  int r;

  (void) side; /* uvtw only */
  cc = arg;
  div = cc->cfg->quick ? SERVER_QUICK_DIV : 1;
  s = calloc(1, sizeof(*s));
  if (s == NULL)
    return -1;
  s->n = cc->n;
  s->conns = cc->conns;
  s->hist = cc->hist;
  memset(s->conns, 0, s->n * sizeof(*s->conns));
  memset(s->hist, 0, SERVER_HIST * sizeof(*s->hist));
  s->leeway = cc->leeway;
  s->to_lo = SERVER_TO_LO / div;
  s->to_hi = SERVER_TO_HI / div;
  s->mean_rearm = SERVER_MEAN_REARM / div;
  s->warmup = cc->cfg->quick ? 500 : SERVER_WARMUP;
  s->window = cc->cfg->quick ? 1500 : SERVER_WINDOW;
  bench_rng_seed(&s->rng, BENCH_SEED);
  r = server_run(s);
  if (r == 0) {
    wall = (double) (s->s1.wall_ns - s->s0.wall_ns) / 1e9;
    rank = (s->expiries * 99 + 99) / 100; /* ceil(0.99 * expiries) */
    seen = 0;
    for (p99 = 0; p99 < SERVER_HIST - 1; p99++)
      if ((seen += s->hist[p99]) >= rank)
        break;
    out->v[0] =
        (double) (s->s1.stats.driver_wakeups - s->s0.stats.driver_wakeups) /
        wall;
    out->v[1] = (double) (s->s1.iterations - s->s0.iterations) / wall;
    out->v[2] = (double) (s->s1.cpu_ns - s->s0.cpu_ns) / 1e6 / wall;
    out->v[3] = (double) s->expiries / wall;
    out->v[4] = (double) s->distinct_ms / wall;
    out->v[5] = (double) (s->s1.stats.cascades - s->s0.stats.cascades) / wall;
    out->v[6] = (double) s->early;
    out->v[7] = (double) s->over_bound;
    out->v[8] = (double) s->max_late;
    out->v[9] = (double) p99;
    out->v[10] = (double) (s->s1.wake_fire - s->s0.wake_fire) / wall;
    out->v[11] = (double) (s->s1.wake_cascade - s->s0.wake_cascade) / wall;
    out->v[12] = (double) (s->s1.wake_empty - s->s0.wake_empty) / wall;
    out->v[13] = (double) s->leeway_eff;
    out->v[14] = (double) s->max_gap_ns / 1e6;
    bench_log(
        "  idle-server leeway %llu ms (%llu in effect): %.1f s "
        "window, %llu expiries, %llu early, %llu over the bound, the "
        "longest loop gap %.1f ms\n",
        (unsigned long long) s->leeway, (unsigned long long) s->leeway_eff,
        wall, (unsigned long long) s->expiries, (unsigned long long) s->early,
        (unsigned long long) s->over_bound, (double) s->max_gap_ns / 1e6);
    if (s->early != 0) {
      bench_log("idle-server: %llu early expiries at leeway %llu ms\n",
                (unsigned long long) s->early, (unsigned long long) s->leeway);
      bench_fail_soft();
    }
  }
  free(s);
  return r;
}


int bench_server_main(const bench_cfg_t* cfg) {
  static const uint64_t leeways[] = {0, 100, 1000};
  char label[64];
  bench_cell_t cell;
  cell_ctx_t cc;
  uint64_t div;
  int failed;
  int i;

  if (!bench_selected(cfg, "idle-server"))
    return 0;
  div = cfg->quick ? SERVER_QUICK_DIV : 1;
  memset(&cc, 0, sizeof(cc));
  cc.cfg = cfg;
  cc.n = cfg->n ? cfg->n : SERVER_N / div;
  cc.conns = bench_alloc(cc.n * sizeof(*cc.conns));
  cc.hist = bench_alloc(SERVER_HIST * sizeof(*cc.hist));
  failed = 0;
  for (i = 0; i < 3; i++) {
    /* 0, 100 and 1,000 ms; 0, 10 and 100 with --quick. */
    cc.leeway = leeways[i] / div;
    snprintf(label, sizeof(label), "leeway_ms=%llu",
             (unsigned long long) cc.leeway);
    memset(&cell, 0, sizeof(cell));
    cell.scenario = "idle-server";
    cell.n = cc.n;
    cell.label = label;
    cell.ops = cfg->quick ? 1500 : SERVER_WINDOW;
    cell.base_name = "none";
    cell.direction = BENCH_LOWER_IS_BETTER;
    cell.uvtw_only = 1;
    cell.runs = bench_runs(cfg, 1); /* a run is 65 s */
    cell.run = run_server;
    cell.ctx = &cc;
    cell.nmetrics = 15;
    cell.metric[0] = "wakeups_per_s";
    cell.metric[1] = "iterations_per_s";
    cell.metric[2] = "cpu_ms_per_s";
    cell.metric[3] = "expiries_per_s";
    cell.metric[4] = "distinct_ms_per_s";
    cell.metric[5] = "cascades_per_s";
    cell.metric[6] = "early";
    cell.metric[7] = "over_bound";
    cell.metric[8] = "max_late_ms";
    cell.metric[9] = "p99_late_ms";
    cell.metric[10] = "wake_fire_per_s";
    cell.metric[11] = "wake_cascade_per_s";
    cell.metric[12] = "wake_empty_per_s";
    cell.metric[13] = "leeway_eff_ms";
    cell.metric[14] = "max_gap_ms";
    cell.is_int[6] = cell.is_int[7] = cell.is_int[8] = cell.is_int[9] = 1;
    cell.is_int[13] = 1;
    failed += bench_cell_run(&cell) != 0;
  }
  bench_free(cc.conns, cc.n * sizeof(*cc.conns));
  bench_free(cc.hist, SERVER_HIST * sizeof(*cc.hist));
  return failed;
}
