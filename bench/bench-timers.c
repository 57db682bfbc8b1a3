/* SPDX-License-Identifier: MIT */
/* uvtw-bench: loop-thread timer scenarios.
 *
 * Both sides share one loop per cell, so uv_now() is literally the same
 * clock for both.  Each side has its own array of user structs with the
 * timer embedded, from bench_alloc() (anonymous mmap, pre-faulted).  Every
 * timer of both arrays is initialised once per cell, outside any timed
 * loop.  A run leaves every timer it started stopped again, untimed, so
 * the other side never runs next to live timers of this one.
 *
 * Clock: where a scenario freezes the clock it simply does not run the
 * loop inside the timed part: uv_now() only moves on uv_update_time() or
 * uv_run().  Before each run (on both sides) the loop is run once with
 * UV_RUN_NOWAIT, which updates the time and lets the wheel catch up.  The
 * idle scenario advances time by the fake clock (see bench.h). */

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

/* The user structs.  They hold only the timer, so that the memory
 * scenario shows the timer's own cost; a callback finds its index by
 * pointer arithmetic from timer->data, which points at the set. */
typedef struct tw_item_s {
  uvtw_timer_t timer;
} tw_item_t;

typedef struct uv_item_s {
  uv_timer_t timer;
} uv_item_t;

typedef struct tset_s {
  uv_loop_t loop;
  uvtw_wheel_t* wheel;
  size_t cap;
  tw_item_t* tw;
  uv_item_t* uv;
  uint64_t fired;
  /* lateness only */
  uint64_t* fire_ns;
  uint64_t* fire_ms;
  /* a safety net for runs to completion: unreferenced, stops the loop */
  uv_timer_t guard;
  int guard_hit;
  /* calls only: a second wheel on the loop, with options.precise, and its
   * own timers (cap of them) */
  uvtw_wheel_t* pwheel;
  tw_item_t* ptw;
} tset_t;

/* What a cell's runs share: the timer set and the precomputed randoms. */
typedef struct tctx_s {
  tset_t* t;
  size_t n;        /* timers in play (live, or to expire) */
  uint64_t ops;    /* timed operations per run */
  uint32_t* to0;   /* per timer: its first timeout, ms */
  uint32_t* idx;   /* per op: which timer */
  uint32_t* to;    /* per op: the timeout, ms */
  size_t to_count; /* entries in `to`: ops, plus the window for rpc */
  size_t window;   /* rpc: requests in flight */
  uint64_t span;   /* real-time scenarios: their length, ms */
  uint64_t* lat;   /* lateness: scratch */
  uv_prepare_t prepare;
  uv_timer_t stopper;
  uint64_t iterations;
  uint64_t idle_timeout; /* idle*: the timeout every re-arm sets, ms */
  int spread;            /* idle-spread: starts spread over 1 s */
  int stall_case;        /* stall-*: which case */
  uint64_t* iter_ns;     /* stall-*: per iteration, time in uv_run */
  uint64_t* iter_fired;  /* stall-*: per iteration, timers fired */
  double* scratch;       /* stall-*: per iteration */
} tctx_t;

#define RPC_WINDOW 1024
#define IDLE_TIMEOUT 30000
#define IDLE_SAME_TIMEOUT 15000
#define EXPIRE_LONG_SPAN 10000
#define STALL_SPREAD_SPAN 60000
#define STALL_SAME_TIMEOUT 70000
#define STALL_EARLY_FIRST 1100
#define STALL_EARLY_LO 1500
#define STALL_EARLY_HI 1900
#define STALL_ITERATIONS_MAX 80000
#define STALL_REPEATS 3

enum { STALL_SPREAD, STALL_SAME, STALL_EARLY };
#define WAKEUP_TIMEOUT 3600000


/* ---------------------------------------------------------------------- */
/* The timer set.                                                           */

static void tw_count_cb(uvtw_timer_t* timer) {
  ((tset_t*) timer->data)->fired++;
}


static void uv_count_cb(uv_timer_t* timer) {
  ((tset_t*) timer->data)->fired++;
}


static void guard_cb(uv_timer_t* timer) {
  tset_t* t;

  t = timer->data;
  t->guard_hit = 1;
  uv_stop(&t->loop);
}


static int tset_open(tset_t* t, size_t cap) {
  size_t i;
  int r;

  memset(t, 0, sizeof(*t));
  r = uv_loop_init(&t->loop);
  if (r == 0)
    r = uvtw_wheel_new(&t->loop, NULL, &t->wheel);
  if (r != 0) {
    bench_log("loop/wheel setup failed: %s\n", uv_strerror(r));
    return -1;
  }
  uv_timer_init(&t->loop, &t->guard);
  t->guard.data = t;
  uv_unref((uv_handle_t*) &t->guard);
  t->cap = cap;
  t->tw = bench_alloc(cap * sizeof(*t->tw));
  t->uv = bench_alloc(cap * sizeof(*t->uv));
  for (i = 0; i < cap; i++) {
    r = uvtw_timer_init(t->wheel, &t->tw[i].timer);
    r |= uv_timer_init(&t->loop, &t->uv[i].timer);
    if (r != 0) {
      bench_log("timer init failed\n");
      return -1;
    }
    t->tw[i].timer.data = t;
    t->uv[i].timer.data = t;
  }
  return 0;
}


/* The calls scenario's precise wheel and its cap timers. */
static int tset_open_precise(tset_t* t) {
  uvtw_options_t opts;
  size_t i;
  int r;

  uvtw_options_init(&opts);
  opts.precise = 1;
  r = uvtw_wheel_new(&t->loop, &opts, &t->pwheel);
  if (r != 0) {
    bench_log("precise wheel setup failed: %s\n", uv_strerror(r));
    t->pwheel = NULL;
    return -1;
  }
  t->ptw = bench_alloc(t->cap * sizeof(*t->ptw));
  for (i = 0; i < t->cap; i++) {
    r |= uvtw_timer_init(t->pwheel, &t->ptw[i].timer);
    t->ptw[i].timer.data = t;
  }
  return r;
}


static void tset_stop_all(tset_t* t, int side, size_t n) {
  size_t i;

  if (side == BENCH_SIDE_UVTW)
    for (i = 0; i < n; i++)
      uvtw_timer_stop(&t->tw[i].timer);
  else
    for (i = 0; i < n; i++)
      uv_timer_stop(&t->uv[i].timer);
}


/* Starts timers [lo, hi) with timeouts to[0..], untimed. */
static int tset_start(
    tset_t* t, int side, size_t lo, size_t hi, const uint32_t* to) {
  size_t i;
  int r;

  r = 0;
  if (side == BENCH_SIDE_UVTW)
    for (i = lo; i < hi; i++)
      r |= uvtw_timer_start(&t->tw[i].timer, tw_count_cb, to[i - lo], 0);
  else
    for (i = lo; i < hi; i++)
      r |= uv_timer_start(&t->uv[i].timer, uv_count_cb, to[i - lo], 0);
  return r;
}


static int tset_close(tset_t* t) {
  size_t i;
  int r;

  tset_stop_all(t, BENCH_SIDE_UVTW, t->cap);
  tset_stop_all(t, BENCH_SIDE_BASE, t->cap);
  for (i = 0; i < t->cap; i++)
    uv_close((uv_handle_t*) &t->uv[i].timer, NULL);
  uv_close((uv_handle_t*) &t->guard, NULL);
  uvtw_wheel_close(t->wheel, NULL);
  if (t->pwheel != NULL) {
    for (i = 0; i < t->cap; i++)
      uvtw_timer_stop(&t->ptw[i].timer);
    uvtw_wheel_close(t->pwheel, NULL);
  }
  uv_run(&t->loop, UV_RUN_DEFAULT);
  r = uv_loop_close(&t->loop);
  if (r != 0)
    bench_log("uv_loop_close: %s\n", uv_strerror(r));
  bench_free(t->tw, t->cap * sizeof(*t->tw));
  bench_free(t->uv, t->cap * sizeof(*t->uv));
  if (t->ptw != NULL)
    bench_free(t->ptw, t->cap * sizeof(*t->ptw));
  return r == 0 ? 0 : -1;
}


/* Runs the loop until every started timer has fired; the guard stops a
 * loop that would otherwise hang and makes the run fail. */
static int tset_run_to_completion(tset_t* t, uint64_t span_ms) {
  t->guard_hit = 0;
  uv_timer_start(&t->guard, guard_cb, span_ms + 30000, 0);
  uv_run(&t->loop, UV_RUN_DEFAULT);
  uv_timer_stop(&t->guard);
  if (t->guard_hit)
    bench_log("loop still running %llu ms after the last deadline\n",
              (unsigned long long) span_ms + 30000);
  return t->guard_hit ? -1 : 0;
}


static uint32_t* random_u32(size_t count,
                            uint64_t seed,
                            uint64_t lo,
                            uint64_t hi) {
  bench_rng_t rng;
  uint32_t* v;
  size_t i;

  v = bench_alloc(count * sizeof(*v));
  bench_rng_seed(&rng, seed);
  for (i = 0; i < count; i++)
    v[i] = (uint32_t) bench_rng_range(&rng, lo, hi);
  return v;
}


static void tctx_free(tctx_t* c) {
  bench_free(c->to0, c->n * sizeof(*c->to0));
  bench_free(c->idx, c->ops * sizeof(*c->idx));
  bench_free(c->to, c->to_count * sizeof(*c->to));
  c->to0 = c->idx = c->to = NULL;
}


/* ---------------------------------------------------------------------- */
/* insert: start N timers, deadlines U[1 ms, 60 s].  A run repeats this    */
/* ops / N times (stopping them all, untimed, in between), so that small   */
/* N are timed over as many starts as large N.                              */

static int run_insert(void* arg, int side, bench_sample_t* out) {
  tctx_t* c;
  tset_t* t;
  uint64_t rounds;
  uint64_t total;
  uint64_t t0;
  uint64_t q;
  size_t i;
  int r;

  c = arg;
  t = c->t;
  rounds = c->ops / c->n;
  total = 0;
  r = 0;
  for (q = 0; q < rounds; q++) {
    uv_run(&t->loop, UV_RUN_NOWAIT);
    t0 = bench_now_ns();
    if (side == BENCH_SIDE_UVTW)
      for (i = 0; i < c->n; i++)
        r |= uvtw_timer_start(&t->tw[i].timer, tw_count_cb, c->to0[i], 0);
    else
      for (i = 0; i < c->n; i++)
        r |= uv_timer_start(&t->uv[i].timer, uv_count_cb, c->to0[i], 0);
    total += bench_now_ns() - t0;
    tset_stop_all(t, side, c->n);
  }
  out->v[0] = (double) total / (rounds * c->n);
  return r;
}


/* ---------------------------------------------------------------------- */
/* churn: N live; re-arm a random timer to now + U[1 ms, 60 s].            */

static int run_churn(void* arg, int side, bench_sample_t* out) {
  const uint32_t* idx;
  const uint32_t* to;
  tctx_t* c;
  tset_t* t;
  uint64_t t0;
  uint64_t t1;
  uint64_t k;
  int r;

  c = arg;
  t = c->t;
  idx = c->idx;
  to = c->to;
  uv_run(&t->loop, UV_RUN_NOWAIT);
  r = tset_start(t, side, 0, c->n, c->to0);
  t0 = bench_now_ns();
  if (side == BENCH_SIDE_UVTW)
    for (k = 0; k < c->ops; k++)
      r |= uvtw_timer_start(&t->tw[idx[k]].timer, tw_count_cb, to[k], 0);
  else
    for (k = 0; k < c->ops; k++)
      r |= uv_timer_start(&t->uv[idx[k]].timer, uv_count_cb, to[k], 0);
  t1 = bench_now_ns();
  tset_stop_all(t, side, c->n);
  out->v[0] = (double) (t1 - t0) / c->ops;
  return r;
}


/* ---------------------------------------------------------------------- */
/* idle: N live at now + 30 s; every N/1000 ops the clock advances 1 ms    */
/* and the loop runs once (UV_RUN_NOWAIT); each op re-arms a random timer  */
/* to now + 30 s.                                                           */

static int run_idle(void* arg, int side, bench_sample_t* out) {
  const uint32_t* idx;
  uvtw_stats_t s0;
  uvtw_stats_t s1;
  tctx_t* c;
  tset_t* t;
  uint64_t loop_ns;
  uint64_t timeout;
  uint64_t step;
  uint64_t end;
  uint64_t t0;
  uint64_t ta;
  uint64_t tb;
  uint64_t k;
  size_t i;
  int r;

  c = arg;
  t = c->t;
  idx = c->idx;
  timeout = c->idle_timeout;
  step = c->n / 1000;
  if (step == 0)
    step = 1;
  bench_clock_freeze();
  bench_poll_fake(1);
  uv_run(&t->loop, UV_RUN_NOWAIT);
  r = 0;
  for (i = 0; i < c->n; i++) {
    r |= side == BENCH_SIDE_UVTW
             ? uvtw_timer_start(&t->tw[i].timer, tw_count_cb, timeout, 0)
             : uv_timer_start(&t->uv[i].timer, uv_count_cb, timeout, 0);
    if (c->spread && (i + 1) % step == 0) {
      bench_clock_advance_ms(1); /* n starts over 1 s */
      uv_run(&t->loop, UV_RUN_NOWAIT);
    }
  }
  uvtw_wheel_stats(t->wheel, &s0);
  t->fired = 0;
  loop_ns = 0;
  t0 = bench_now_ns();
  for (k = 0; k < c->ops;) {
    end = k + step < c->ops ? k + step : c->ops;
    if (side == BENCH_SIDE_UVTW)
      for (; k < end; k++)
        r |= uvtw_timer_start(&t->tw[idx[k]].timer, tw_count_cb, timeout, 0);
    else
      for (; k < end; k++)
        r |= uv_timer_start(&t->uv[idx[k]].timer, uv_count_cb, timeout, 0);
    bench_clock_advance_ms(1);
    tb = bench_now_ns();
    uv_run(&t->loop, UV_RUN_NOWAIT);
    ta = bench_now_ns();
    loop_ns += ta - tb;
  }
  ta = bench_now_ns();
  uvtw_wheel_stats(t->wheel, &s1);
  tset_stop_all(t, side, c->n);
  bench_poll_fake(0);
  bench_clock_thaw();
  uv_run(&t->loop, UV_RUN_NOWAIT);
  out->v[0] = (double) (ta - t0) / c->ops;
  out->v[1] = (double) (ta - t0 - loop_ns) / c->ops;
  out->v[2] = (double) loop_ns / c->ops;
  out->v[3] = (double) t->fired;
  if (side == BENCH_SIDE_UVTW) {
    out->v[4] = (double) (s1.cascades - s0.cascades) / c->ops;
    out->v[5] = (double) (s1.driver_wakeups - s0.driver_wakeups);
  }
  return r;
}


/* ---------------------------------------------------------------------- */
/* rpc: N live background timers; RPC_WINDOW requests in flight.  Each op  */
/* stops the oldest request's deadline (its reply came) and starts a new   */
/* one, U[100 ms, 5 s].  No deadline ever fires: the clock stands still.   */

static int run_rpc(void* arg, int side, bench_sample_t* out) {
  const uint32_t* to;
  tctx_t* c;
  tset_t* t;
  tw_item_t* twr;
  uv_item_t* uvr;
  uint64_t t0;
  uint64_t t1;
  uint64_t k;
  size_t w;
  size_t j;
  int r;

  c = arg;
  t = c->t;
  to = c->to;
  w = c->window;
  twr = t->tw + c->n;
  uvr = t->uv + c->n;
  uv_run(&t->loop, UV_RUN_NOWAIT);
  r = tset_start(t, side, 0, c->n, c->to0);
  /* The first window of requests: the last w per-op timeouts. */
  r |= tset_start(t, side, c->n, c->n + w, to + c->ops);
  j = 0;
  t0 = bench_now_ns();
  if (side == BENCH_SIDE_UVTW) {
    for (k = 0; k < c->ops; k++) {
      uvtw_timer_stop(&twr[j].timer);
      r |= uvtw_timer_start(&twr[j].timer, tw_count_cb, to[k], 0);
      if (++j == w)
        j = 0;
    }
  } else {
    for (k = 0; k < c->ops; k++) {
      uv_timer_stop(&uvr[j].timer);
      r |= uv_timer_start(&uvr[j].timer, uv_count_cb, to[k], 0);
      if (++j == w)
        j = 0;
    }
  }
  t1 = bench_now_ns();
  tset_stop_all(t, side, c->n + w);
  out->v[0] = (double) (t1 - t0) / c->ops;
  return r;
}


/* ---------------------------------------------------------------------- */
/* expire-seq / expire-rand: N timers over 1..span ms, run to completion   */
/* on a real loop.  The metric is the loop thread's CPU time per expiry:   */
/* the wall time is the span for both sides.                               */

static int run_expire(void* arg, int side, bench_sample_t* out) {
  tctx_t* c;
  tset_t* t;
  uint64_t c0;
  uint64_t c1;
  uint64_t w0;
  uint64_t w1;
  int r;

  c = arg;
  t = c->t;
  uv_run(&t->loop, UV_RUN_NOWAIT);
  t->fired = 0;
  r = tset_start(t, side, 0, c->n, c->to0);
  w0 = bench_now_ns();
  c0 = bench_cpu_ns();
  r |= tset_run_to_completion(t, c->span);
  c1 = bench_cpu_ns();
  w1 = bench_now_ns();
  if (t->fired != c->n) {
    bench_log("expire: %llu of %zu timers fired\n",
              (unsigned long long) t->fired, c->n);
    r = -1;
  }
  tset_stop_all(t, side, c->n);
  out->v[0] = (double) (c1 - c0) / c->n;
  out->v[1] = (double) (w1 - w0) / 1e6;
  return r;
}


/* ---------------------------------------------------------------------- */
/* rpc-random: N live at U[100 ms, 10 s]; each op stops a random timer and */
/* starts it again at now + U[100 ms, 10 s].  The clock stands still.      */

static int run_rpc_random(void* arg, int side, bench_sample_t* out) {
  const uint32_t* idx;
  const uint32_t* to;
  tctx_t* c;
  tset_t* t;
  uint64_t t0;
  uint64_t t1;
  uint64_t k;
  int r;

  c = arg;
  t = c->t;
  idx = c->idx;
  to = c->to;
  uv_run(&t->loop, UV_RUN_NOWAIT);
  r = tset_start(t, side, 0, c->n, c->to0);
  t0 = bench_now_ns();
  if (side == BENCH_SIDE_UVTW) {
    for (k = 0; k < c->ops; k++) {
      uvtw_timer_stop(&t->tw[idx[k]].timer);
      r |= uvtw_timer_start(&t->tw[idx[k]].timer, tw_count_cb, to[k], 0);
    }
  } else {
    for (k = 0; k < c->ops; k++) {
      uv_timer_stop(&t->uv[idx[k]].timer);
      r |= uv_timer_start(&t->uv[idx[k]].timer, uv_count_cb, to[k], 0);
    }
  }
  t1 = bench_now_ns();
  tset_stop_all(t, side, c->n);
  out->v[0] = (double) (t1 - t0) / c->ops;
  return r;
}


/* ---------------------------------------------------------------------- */
/* expire-seq-10s / expire-rand-10s: as expire-*, deadlines over 10 s, run */
/* to completion on the frozen clock with the fake poll: every wait of the */
/* loop moves the clock instead of sleeping.  Real ns per expiry, loop     */
/* steps included (they cost the same on both sides).                       */

static int run_expire_virtual(void* arg, int side, bench_sample_t* out) {
  tctx_t* c;
  tset_t* t;
  uint64_t w0;
  uint64_t w1;
  int r;

  c = arg;
  t = c->t;
  bench_clock_freeze();
  bench_poll_fake(1);
  uv_run(&t->loop, UV_RUN_NOWAIT);
  t->fired = 0;
  r = tset_start(t, side, 0, c->n, c->to0);
  w0 = bench_now_ns();
  r |= tset_run_to_completion(t, c->span);
  w1 = bench_now_ns();
  bench_poll_fake(0);
  bench_clock_thaw();
  if (t->fired != c->n) {
    bench_log("expire: %llu of %zu timers fired\n",
              (unsigned long long) t->fired, c->n);
    r = -1;
  }
  tset_stop_all(t, side, c->n);
  out->v[0] = (double) (w1 - w0) / c->n;
  return r;
}


/* ---------------------------------------------------------------------- */
/* stall-spread / stall-same / stall-early: N timers; the frozen clock      */
/* moves 1 ms per loop iteration (UV_RUN_NOWAIT, fake poll) until all have  */
/* fired.  Per iteration, the thread's CPU time in uv_run (a preemption   */
/* on a shared machine is not counted) and the timers fired.  A run does   */
/* this STALL_REPEATS times from the same clock phase and keeps each       */
/* iteration's least time: noise seldom hits one iteration every time.     */
/*   spread: deadlines U[1 ms, 60 s];                                       */
/*   same:   all at 70 s;                                                   */
/*   early:  started 1 ms after a multiple of 1,024 ms of the loop clock,   */
/*           one due in 1.1 s, the rest U[1.5 s, 1.9 s].                    */
/* Primary metric: the worst iteration's ns per fired timer (iterations     */
/* that fire nothing left out).  Extras: the worst iteration's time; the    */
/* worst excess of an iteration over the empty loop step (the median step   */
/* that fires nothing) plus its fired timers at the run's mean cost per     */
/* fired timer: work done beyond the timers it fires; and that mean.        */

static int run_stall(void* arg, int side, bench_sample_t* out) {
  tctx_t* c;
  tset_t* t;
  uint64_t before;
  uint64_t t0;
  uint64_t it;
  uint64_t now;
  double mean;
  double worst_per_fired;
  double worst_excess;
  double x;
  uint64_t worst_ns;
  uint64_t worst_it;
  uint64_t iterations;
  uint64_t empty;
  uint64_t k;
  double step_ns;
  double busy_ns;
  int rep;
  int r;

  c = arg;
  t = c->t;
  r = 0;
  bench_clock_freeze();
  bench_poll_fake(1);
  for (rep = 0; rep < STALL_REPEATS; rep++) {
    /* Every repetition starts at the same phase of the loop clock, 1 ms
     * after a multiple of 65,536 ms (so also of 1,024 ms, as the early
     * case wants): iteration k does the same work in each. */
    uv_run(&t->loop, UV_RUN_NOWAIT);
    now = uv_now(&t->loop);
    bench_clock_advance_ms((65537 - now % 65536) % 65536);
    uv_run(&t->loop, UV_RUN_NOWAIT);
    t->fired = 0;
    r |= tset_start(t, side, 0, c->n, c->to0);
    for (it = 0; it < STALL_ITERATIONS_MAX && t->fired < c->n; it++) {
      bench_clock_advance_ms(1);
      before = t->fired;
      t0 = bench_cpu_ns();
      uv_run(&t->loop, UV_RUN_NOWAIT);
      t0 = bench_cpu_ns() - t0;
      if (rep == 0 || t0 < c->iter_ns[it])
        c->iter_ns[it] = t0;
      c->iter_fired[it] = t->fired - before;
    }
    if (t->fired != c->n)
      break;
  }
  bench_poll_fake(0);
  bench_clock_thaw();
  if (t->fired != c->n) {
    bench_log("stall: %llu of %zu timers fired\n",
              (unsigned long long) t->fired, c->n);
    r = -1;
  }
  tset_stop_all(t, side, c->n);
  iterations = it;
  /* What firing costs: the empty loop step (the median step that fires
   * nothing) plus a mean cost per fired timer over the steps that fire. */
  empty = 0;
  for (k = 0; k < it; k++)
    if (c->iter_fired[k] == 0)
      c->scratch[empty++] = (double) c->iter_ns[k];
  step_ns = empty == 0 ? 0 : bench_median(c->scratch, (int) empty);
  busy_ns = 0;
  for (k = 0; k < it; k++)
    if (c->iter_fired[k] != 0)
      busy_ns += (double) c->iter_ns[k] - step_ns;
  mean = busy_ns / (double) (t->fired ? t->fired : 1);
  worst_per_fired = 0;
  worst_excess = 0;
  worst_ns = 0;
  worst_it = 0;
  while (it-- > 0) {
    if (c->iter_ns[it] > worst_ns)
      worst_ns = c->iter_ns[it];
    if (c->iter_fired[it] != 0) {
      x = (double) c->iter_ns[it] / (double) c->iter_fired[it];
      if (x > worst_per_fired)
        worst_per_fired = x;
    }
    x = (double) c->iter_ns[it] - step_ns -
        mean * (double) c->iter_fired[it];
    if (x > worst_excess) {
      worst_excess = x;
      worst_it = it;
    }
  }
  bench_log("  %s: worst excess in iteration %llu of %llu: %llu ns, %llu "
            "fired\n",
            side == BENCH_SIDE_UVTW ? "uvtw" : "uv_timer",
            (unsigned long long) worst_it, (unsigned long long) iterations,
            (unsigned long long) c->iter_ns[worst_it],
            (unsigned long long) c->iter_fired[worst_it]);
  out->v[0] = worst_per_fired;
  out->v[1] = (double) worst_ns / 1e3;
  out->v[2] = worst_excess / 1e3;
  out->v[3] = mean;
  return r;
}


/* ---------------------------------------------------------------------- */
/* calls-*: one kind of call at a time, for instruction counts.  Each phase */
/* is its own function (noipa: never merged or inlined), so that callgrind */
/* gives its inclusive cost directly (see bench/README.md, "Instructions  */
/* per call"):                                                            */
/*   start:   N inactive timers started at U[1 ms, 60 s];                   */
/*   later:   each re-armed to 60 s more than its deadline (always later);  */
/*   earlier: each re-armed back to its first timeout (always earlier);     */
/*   stop:    each stopped;                                                  */
/*   pass:    N timers due 1, 2, ..., N ms ahead; the frozen clock moves    */
/*            1 ms per loop step (fake poll): one expiry per pass;          */
/*   start_precise (uvtw only): as start, on a second wheel of the same     */
/*            loop made with options.precise, so each start reads          */
/*            uv_hrtime(); last, with the clock running again (a frozen    */
/*            clock would answer the read without the real clock's cost);   */
/*   hrtime:  uv_hrtime() alone, the clock read start_precise adds.          */
/* ns per call, frozen clock but for start_precise and hrtime.               */

static int BENCH_NOIPA
calls_start(tctx_t* c, int side) {
  return tset_start(c->t, side, 0, c->n, c->to0);
}


static int BENCH_NOIPA
calls_later(tctx_t* c, int side) {
  tset_t* t;
  size_t i;
  int r;

  t = c->t;
  r = 0;
  if (side == BENCH_SIDE_UVTW)
    for (i = 0; i < c->n; i++)
      r |= uvtw_timer_start(&t->tw[i].timer, tw_count_cb, c->to0[i] + 60000,
                            0);
  else
    for (i = 0; i < c->n; i++)
      r |= uv_timer_start(&t->uv[i].timer, uv_count_cb, c->to0[i] + 60000, 0);
  return r;
}


static int BENCH_NOIPA
calls_earlier(tctx_t* c, int side) {
  return tset_start(c->t, side, 0, c->n, c->to0);
}


static void BENCH_NOIPA calls_stop(tctx_t* c, int side) {
  tset_stop_all(c->t, side, c->n);
}


static void BENCH_NOIPA calls_pass(tctx_t* c) {
  size_t i;

  for (i = 0; i < c->n; i++) {
    bench_clock_advance_ms(1);
    uv_run(&c->t->loop, UV_RUN_NOWAIT);
  }
}


static volatile uint64_t hrtime_sink;


static int BENCH_NOIPA
calls_start_precise(tctx_t* c) {
  tset_t* t;
  size_t i;
  int r;

  t = c->t;
  r = 0;
  for (i = 0; i < c->n; i++)
    r |= uvtw_timer_start(&t->ptw[i].timer, tw_count_cb, c->to0[i], 0);
  return r;
}


static int run_calls(void* arg, int side, bench_sample_t* out) {
  tctx_t* c;
  tset_t* t;
  uint64_t t0;
  uint64_t t1;
  uint64_t t2;
  uint64_t t3;
  uint64_t t4;
  uint64_t t5;
  uint64_t t6;
  size_t i;
  int r;

  c = arg;
  t = c->t;
  bench_clock_freeze();
  bench_poll_fake(1);
  uv_run(&t->loop, UV_RUN_NOWAIT);
  t0 = bench_now_ns();
  r = calls_start(c, side);
  t1 = bench_now_ns();
  r |= calls_later(c, side);
  t2 = bench_now_ns();
  r |= calls_earlier(c, side);
  t3 = bench_now_ns();
  calls_stop(c, side);
  t4 = bench_now_ns();
  t->fired = 0;
  for (i = 0; i < c->n; i++)
    r |= side == BENCH_SIDE_UVTW
             ? uvtw_timer_start(&t->tw[i].timer, tw_count_cb, i + 1, 0)
             : uv_timer_start(&t->uv[i].timer, uv_count_cb, i + 1, 0);
  t5 = bench_now_ns();
  calls_pass(c);
  t5 = bench_now_ns() - t5;
  bench_poll_fake(0);
  bench_clock_thaw();
  if (t->fired != c->n) {
    bench_log("calls: %llu of %zu timers fired\n",
              (unsigned long long) t->fired, c->n);
    r = -1;
  }
  tset_stop_all(t, side, c->n);
  if (side == BENCH_SIDE_UVTW) {
    uv_run(&t->loop, UV_RUN_NOWAIT);
    t6 = bench_now_ns();
    r |= calls_start_precise(c);
    t6 = bench_now_ns() - t6;
    for (i = 0; i < c->n; i++)
      uvtw_timer_stop(&t->ptw[i].timer);
    out->v[5] = (double) t6 / c->n;
    /* The clock read a precise start adds, alone, for comparison. */
    t6 = bench_now_ns();
    for (i = 0; i < c->n; i++)
      hrtime_sink += uv_hrtime();
    out->v[6] = (double) (bench_now_ns() - t6) / c->n;
  }
  out->v[0] = (double) (t1 - t0) / c->n;
  out->v[1] = (double) (t2 - t1) / c->n;
  out->v[2] = (double) (t3 - t2) / c->n;
  out->v[3] = (double) (t4 - t3) / c->n;
  out->v[4] = (double) t5 / c->n;
  return r;
}


/* ---------------------------------------------------------------------- */
/* memory: RSS growth per timer for allocating and initialising the array  */
/* and starting every timer.  The loop and the wheel exist before.         */

static int run_memory(void* arg, int side, bench_sample_t* out) {
  tctx_t* c;
  tset_t* t;
  tw_item_t* tw;
  uv_item_t* uv;
  uint64_t rss0;
  uint64_t rss1;
  size_t bytes;
  size_t i;
  int r;

  c = arg;
  t = c->t;
  uv_run(&t->loop, UV_RUN_NOWAIT);
  r = 0;
  if (side == BENCH_SIDE_UVTW) {
    bytes = c->n * sizeof(*tw);
    rss0 = bench_rss_bytes();
    tw = bench_alloc(bytes);
    for (i = 0; i < c->n; i++) {
      r |= uvtw_timer_init(t->wheel, &tw[i].timer);
      r |= uvtw_timer_start(&tw[i].timer, tw_count_cb, c->to0[i], 0);
    }
    rss1 = bench_rss_bytes();
    for (i = 0; i < c->n; i++)
      uvtw_timer_stop(&tw[i].timer);
    bench_free(tw, bytes);
    out->v[1] = sizeof(tw->timer);
  } else {
    bytes = c->n * sizeof(*uv);
    rss0 = bench_rss_bytes();
    uv = bench_alloc(bytes);
    for (i = 0; i < c->n; i++) {
      r |= uv_timer_init(&t->loop, &uv[i].timer);
      r |= uv_timer_start(&uv[i].timer, uv_count_cb, c->to0[i], 0);
    }
    rss1 = bench_rss_bytes();
    for (i = 0; i < c->n; i++)
      uv_close((uv_handle_t*) &uv[i].timer, NULL);
    uv_run(&t->loop, UV_RUN_DEFAULT);
    bench_free(uv, bytes);
    out->v[1] = sizeof(uv->timer);
  }
  out->v[0] = (double) (rss1 - rss0) / c->n;
  return r;
}


/* ---------------------------------------------------------------------- */
/* idle-wakeups: N timers due in 1 h; the loop runs for span ms (a          */
/* referenced uv_timer_t stops it); count loop iterations in a prepare     */
/* handle and the wheel's driver wake-ups.                                  */

static void count_iteration_cb(uv_prepare_t* handle) {
  ((tctx_t*) handle->data)->iterations++;
}


static void stopper_cb(uv_timer_t* handle) {
  uv_stop(handle->loop);
}


static int run_wakeups(void* arg, int side, bench_sample_t* out) {
  uvtw_stats_t s0;
  uvtw_stats_t s1;
  tctx_t* c;
  tset_t* t;
  size_t i;
  int r;

  c = arg;
  t = c->t;
  uv_run(&t->loop, UV_RUN_NOWAIT);
  r = 0;
  for (i = 0; i < c->n; i++)
    r |= side == BENCH_SIDE_UVTW
             ? uvtw_timer_start(&t->tw[i].timer, tw_count_cb, WAKEUP_TIMEOUT, 0)
             : uv_timer_start(&t->uv[i].timer, uv_count_cb, WAKEUP_TIMEOUT, 0);
  uvtw_wheel_stats(t->wheel, &s0);
  c->iterations = 0;
  t->fired = 0;
  uv_prepare_start(&c->prepare, count_iteration_cb);
  uv_timer_start(&c->stopper, stopper_cb, c->span, 0);
  uv_run(&t->loop, UV_RUN_DEFAULT);
  uv_prepare_stop(&c->prepare);
  uv_timer_stop(&c->stopper);
  uvtw_wheel_stats(t->wheel, &s1);
  tset_stop_all(t, side, c->n);
  if (t->fired != 0) {
    bench_log("idle-wakeups: %llu timers fired early\n",
              (unsigned long long) t->fired);
    r = -1;
  }
  out->v[0] = (double) c->iterations;
  if (side == BENCH_SIDE_UVTW)
    out->v[1] = (double) (s1.driver_wakeups - s0.driver_wakeups);
  return r;
}


/* ---------------------------------------------------------------------- */
/* lateness: N timers over 1..span ms on a real loop; per timer the fire   */
/* time (uv_hrtime) minus its deadline.  A timer whose deadline passed     */
/* while the timers were still being started is measured from the start   */
/* of uv_run instead, so a slower start does not count as lateness.       */

static void tw_late_cb(uvtw_timer_t* timer) {
  tset_t* t;
  size_t i;

  t = timer->data;
  i = (size_t) ((tw_item_t*) timer - t->tw);
  t->fire_ns[i] = uv_hrtime();
  t->fire_ms[i] = uv_now(&t->loop);
  t->fired++;
}


static void uv_late_cb(uv_timer_t* timer) {
  tset_t* t;
  size_t i;

  t = timer->data;
  i = (size_t) ((uv_item_t*) timer - t->uv);
  t->fire_ns[i] = uv_hrtime();
  t->fire_ms[i] = uv_now(&t->loop);
  t->fired++;
}


static int cmp_u64(const void* a, const void* b) {
  uint64_t x;
  uint64_t y;

  x = *(const uint64_t*) a;
  y = *(const uint64_t*) b;
  return (x > y) - (x < y);
}


static int run_lateness(void* arg, int side, bench_sample_t* out) {
  tctx_t* c;
  tset_t* t;
  uint64_t base_ms;
  uint64_t t_run;
  uint64_t dl_ms;
  uint64_t dl_ns;
  uint64_t ref;
  uint64_t early;
  size_t i;
  int r;

  c = arg;
  t = c->t;
  uv_run(&t->loop, UV_RUN_NOWAIT);
  base_ms = uv_now(&t->loop);
  t->fired = 0;
  r = 0;
  for (i = 0; i < c->n; i++)
    r |= side == BENCH_SIDE_UVTW
             ? uvtw_timer_start(&t->tw[i].timer, tw_late_cb, c->to0[i], 0)
             : uv_timer_start(&t->uv[i].timer, uv_late_cb, c->to0[i], 0);
  t_run = uv_hrtime();
  r |= tset_run_to_completion(t, c->span);
  if (t->fired != c->n) {
    bench_log("lateness: %llu of %zu timers fired\n",
              (unsigned long long) t->fired, c->n);
    r = -1;
  }
  tset_stop_all(t, side, c->n);
  if (r != 0)
    return r;
  early = 0;
  for (i = 0; i < c->n; i++) {
    dl_ms = base_ms + c->to0[i];
    dl_ns = dl_ms * 1000000u;
    if (t->fire_ns[i] < dl_ns || t->fire_ms[i] < dl_ms)
      early++;
    ref = dl_ns > t_run ? dl_ns : t_run;
    c->lat[i] = t->fire_ns[i] > ref ? t->fire_ns[i] - ref : 0;
  }
  qsort(c->lat, c->n, sizeof(*c->lat), cmp_u64);
  out->v[0] = (double) c->lat[c->n * 99 / 100];
  out->v[1] = (double) c->lat[c->n / 2];
  out->v[2] = (double) c->lat[c->n - 1];
  out->v[3] = (double) early;
  if (early != 0) {
    bench_log("lateness: %llu early firings on %s\n",
              (unsigned long long) early,
              side == BENCH_SIDE_UVTW ? "uvtw" : "uv_timer");
    bench_fail_soft();
  }
  return 0;
}


/* ---------------------------------------------------------------------- */
/* Cells.                                                                   */

typedef enum {
  S_INSERT,
  S_CHURN,
  S_IDLE,
  S_RPC,
  S_EXPIRE_SEQ,
  S_EXPIRE_RAND,
  S_MEMORY,
  S_WAKEUPS,
  S_LATENESS,
  S_IDLE_SAME,
  S_IDLE_SPREAD,
  S_RPC_RANDOM,
  S_EXPIRE_SEQ_10S,
  S_EXPIRE_RAND_10S,
  S_STALL_SPREAD,
  S_STALL_SAME,
  S_STALL_EARLY,
  S_CALLS
} scen_t;

static const char* const scen_names[] = {
    "insert",          "churn",        "idle",         "rpc",
    "expire-seq",      "expire-rand",  "memory",       "idle-wakeups",
    "lateness",        "idle-same",    "idle-spread",  "rpc-random",
    "expire-seq-10s",  "expire-rand-10s", "stall-spread", "stall-same",
    "stall-early",     "calls"};


static int run_cell(const bench_cfg_t* cfg, scen_t s, size_t n) {
  bench_cell_t cell;
  tset_t set;
  tctx_t c;
  size_t cap;
  size_t i;
  int failed;

  memset(&c, 0, sizeof(c));
  memset(&cell, 0, sizeof(cell));
  c.t = &set;
  c.n = n;
  cell.scenario = scen_names[s];
  cell.n = n;
  cell.base_name = "uv_timer";
  cell.direction = BENCH_LOWER_IS_BETTER;
  cell.nmetrics = 1;
  cell.metric[0] = "ns";
  cell.ctx = &c;
  cell.runs = bench_runs(cfg, n >= 1000000 ? 5 : 7);

  cap = n;
  if (s == S_RPC) {
    c.window = RPC_WINDOW;
    cap = n + c.window;
  }
  if (s == S_MEMORY)
    cap = 0;
  if (tset_open(&set, cap) != 0)
    return 1;
  failed = 0;

  switch (s) {
  case S_INSERT:
    c.to0 = random_u32(n, BENCH_SEED, 1, 60000);
    c.ops = n < 1000000 ? 1000000 / n * n : n;
    if (cfg->ops != 0)
      c.ops = cfg->ops < n ? n : cfg->ops / n * n;
    cell.ops = c.ops;
    cell.run = run_insert;
    break;
  case S_CHURN:
  case S_IDLE:
  case S_IDLE_SAME:
  case S_IDLE_SPREAD:
  case S_RPC:
  case S_RPC_RANDOM:
    c.ops = cfg->ops ? cfg->ops : cfg->quick ? 200000 : 5000000;
    c.to0 = random_u32(n, BENCH_SEED, 1, 60000);
    c.idx = random_u32(c.ops, BENCH_SEED + 1, 0, n - 1);
    if (s == S_CHURN) {
      c.to_count = c.ops;
      c.to = random_u32(c.to_count, BENCH_SEED + 2, 1, 60000);
    }
    if (s == S_RPC) { /* w more for the first window */
      c.to_count = c.ops + c.window;
      c.to = random_u32(c.to_count, BENCH_SEED + 2, 100, 5000);
    }
    if (s == S_RPC_RANDOM) {
      bench_free(c.to0, n * sizeof(*c.to0));
      c.to0 = random_u32(n, BENCH_SEED, 100, 10000);
      c.to_count = c.ops;
      c.to = random_u32(c.to_count, BENCH_SEED + 2, 100, 10000);
    }
    c.idle_timeout = s == S_IDLE ? IDLE_TIMEOUT : IDLE_SAME_TIMEOUT;
    c.spread = s == S_IDLE_SPREAD;
    cell.ops = c.ops;
    cell.run = s == S_CHURN        ? run_churn
               : s == S_RPC        ? run_rpc
               : s == S_RPC_RANDOM ? run_rpc_random
                                   : run_idle;
    if (s == S_IDLE || s == S_IDLE_SAME || s == S_IDLE_SPREAD) {
      cell.nmetrics = 6;
      cell.metric[1] = "arm_ns";
      cell.metric[2] = "loop_ns";
      cell.metric[3] = "fired";
      cell.is_int[3] = 1;
      cell.metric[4] = "cascades_per_op";
      cell.metric[5] = "driver_wakeups";
      cell.is_int[5] = 1;
    }
    break;
  case S_EXPIRE_SEQ:
  case S_EXPIRE_RAND:
    c.span = cfg->quick ? 100 : 1000;
    if (s == S_EXPIRE_SEQ) {
      /* benchmark-million-timers: timeouts rise with the memory order. */
      c.to0 = bench_alloc(n * sizeof(*c.to0));
      for (i = 0; i < n; i++)
        c.to0[i] = (uint32_t) (1 + i * c.span / n);
    } else {
      c.to0 = random_u32(n, BENCH_SEED, 1, c.span);
    }
    cell.ops = n;
    cell.run = run_expire;
    cell.metric[0] = "cpu_ns";
    cell.nmetrics = 2;
    cell.metric[1] = "wall_ms";
    cell.runs = bench_runs(cfg, 5);
    break;
  case S_EXPIRE_SEQ_10S:
  case S_EXPIRE_RAND_10S:
    c.span = EXPIRE_LONG_SPAN;
    if (s == S_EXPIRE_SEQ_10S) {
      c.to0 = bench_alloc(n * sizeof(*c.to0));
      for (i = 0; i < n; i++)
        c.to0[i] = (uint32_t) (1 + i * c.span / n);
    } else {
      c.to0 = random_u32(n, BENCH_SEED, 1, c.span);
    }
    cell.ops = n;
    cell.run = run_expire_virtual;
    cell.runs = bench_runs(cfg, n >= 1000000 ? 5 : 9);
    break;
  case S_STALL_SPREAD:
  case S_STALL_SAME:
  case S_STALL_EARLY:
    if (s == S_STALL_SPREAD) {
      c.stall_case = STALL_SPREAD;
      c.to0 = random_u32(n, BENCH_SEED, 1, STALL_SPREAD_SPAN);
    } else if (s == S_STALL_SAME) {
      c.stall_case = STALL_SAME;
      c.to0 = random_u32(n, BENCH_SEED, STALL_SAME_TIMEOUT,
                         STALL_SAME_TIMEOUT);
    } else {
      c.stall_case = STALL_EARLY;
      c.to0 = random_u32(n, BENCH_SEED, STALL_EARLY_LO, STALL_EARLY_HI);
      c.to0[0] = STALL_EARLY_FIRST;
    }
    c.iter_ns = bench_alloc(STALL_ITERATIONS_MAX * sizeof(*c.iter_ns));
    c.iter_fired = bench_alloc(STALL_ITERATIONS_MAX * sizeof(*c.iter_fired));
    c.scratch = bench_alloc(STALL_ITERATIONS_MAX * sizeof(*c.scratch));
    cell.ops = n;
    cell.run = run_stall;
    cell.metric[0] = "worst_ns_per_fired";
    cell.nmetrics = 4;
    cell.metric[1] = "worst_iter_us";
    cell.metric[2] = "worst_excess_us";
    cell.metric[3] = "mean_ns_per_fired";
    cell.runs = bench_runs(cfg, 3);
    break;
  case S_CALLS:
    c.to0 = random_u32(n, BENCH_SEED, 1, 60000);
    failed = tset_open_precise(&set) != 0;
    cell.ops = n;
    cell.run = run_calls;
    cell.metric[0] = "start_ns";
    cell.nmetrics = 7;
    cell.metric[5] = "start_precise_ns";
    cell.metric[6] = "hrtime_ns";
    cell.metric[1] = "later_ns";
    cell.metric[2] = "earlier_ns";
    cell.metric[3] = "stop_ns";
    cell.metric[4] = "pass_ns";
    break;
  case S_MEMORY:
    c.to0 = random_u32(n, BENCH_SEED, 1, 60000);
    cell.ops = n;
    cell.run = run_memory;
    cell.metric[0] = "bytes";
    cell.nmetrics = 2;
    cell.metric[1] = "sizeof";
    cell.is_int[1] = 1;
    cell.runs = bench_runs(cfg, 5);
    break;
  case S_WAKEUPS:
    c.span = cfg->quick ? 200 : 2000;
    uv_prepare_init(&set.loop, &c.prepare);
    c.prepare.data = &c;
    uv_timer_init(&set.loop, &c.stopper);
    cell.ops = 1;
    cell.run = run_wakeups;
    cell.metric[0] = "iterations";
    cell.is_int[0] = 1;
    cell.nmetrics = 2;
    cell.metric[1] = "driver_wakeups";
    cell.is_int[1] = 1;
    cell.runs = bench_runs(cfg, 5);
    break;
  case S_LATENESS:
    c.span = cfg->quick ? 200 : 2000;
    c.to0 = random_u32(n, BENCH_SEED, 1, c.span);
    set.fire_ns = bench_alloc(n * sizeof(*set.fire_ns));
    set.fire_ms = bench_alloc(n * sizeof(*set.fire_ms));
    c.lat = bench_alloc(n * sizeof(*c.lat));
    cell.ops = n;
    cell.run = run_lateness;
    cell.metric[0] = "p99_ns";
    cell.nmetrics = 4;
    cell.metric[1] = "p50_ns";
    cell.metric[2] = "max_ns";
    cell.metric[3] = "early";
    cell.is_int[0] = cell.is_int[1] = cell.is_int[2] = cell.is_int[3] = 1;
    cell.runs = bench_runs(cfg, 5);
    break;
  }

  if (!failed)
    failed = bench_cell_run(&cell) != 0;

  if (s == S_WAKEUPS) {
    uv_close((uv_handle_t*) &c.prepare, NULL);
    uv_close((uv_handle_t*) &c.stopper, NULL);
  }
  if (s == S_LATENESS) {
    bench_free(set.fire_ns, n * sizeof(*set.fire_ns));
    bench_free(set.fire_ms, n * sizeof(*set.fire_ms));
    bench_free(c.lat, n * sizeof(*c.lat));
  }
  if (c.iter_ns != NULL) {
    bench_free(c.iter_ns, STALL_ITERATIONS_MAX * sizeof(*c.iter_ns));
    bench_free(c.iter_fired, STALL_ITERATIONS_MAX * sizeof(*c.iter_fired));
    bench_free(c.scratch, STALL_ITERATIONS_MAX * sizeof(*c.scratch));
  }
  failed |= tset_close(&set) != 0;
  tctx_free(&c);
  return failed;
}


int bench_timers_main(const bench_cfg_t* cfg) {
  static const size_t full[] = {10000, 100000, 1000000, 0};
  static const size_t quick[] = {1000, 10000, 0};
  const size_t* sizes;
  size_t one[2];
  size_t fixed;
  uv_loop_t loop;
  int failed;
  int s;
  int i;

  failed = 0;
  sizes = cfg->quick ? quick : full;
  for (s = S_INSERT; s <= S_CALLS; s++) {
    if (!bench_selected(cfg, scen_names[s]))
      continue;
    if (s == S_IDLE || s >= S_IDLE_SAME) {
      /* These need the fake clock to reach libuv, some the fake poll. */
      uv_loop_init(&loop);
      if (bench_clock_selftest(&loop) != 0 ||
          bench_poll_selftest(&loop) != 0) {
        uv_loop_close(&loop);
        failed++;
        continue;
      }
      uv_loop_close(&loop);
    }
    fixed = 0;
    if (s == S_MEMORY)
      fixed = cfg->quick ? 100000 : 1000000;
    if (s == S_WAKEUPS || s == S_LATENESS)
      fixed = cfg->quick ? 10000 : 100000;
    if (s >= S_STALL_SPREAD && s <= S_STALL_EARLY)
      fixed = cfg->quick ? 100000 : 1000000;
    if (s == S_CALLS)
      fixed = 10000;
    if (cfg->n != 0) {
      one[0] = cfg->n;
      one[1] = 0;
      sizes = one;
    } else if (fixed != 0) {
      one[0] = fixed;
      one[1] = 0;
      sizes = one;
    } else {
      sizes = cfg->quick ? quick : full;
    }
    for (i = 0; sizes[i] != 0; i++)
      failed += run_cell(cfg, (scen_t) s, sizes[i]);
  }
  return failed;
}
