/* SPDX-License-Identifier: MIT */
/* Leeway (uvtw_timer_set_leeway, options.task_leeway_ms), checked against
 * the contract in include/uvtw.h and docs/timers.md ("Leeway"): the wheel
 * keeps 2^k - 1 ticks, the most that fit in the ms asked for, and runs the
 * timer at its deadline's tick rounded up to a multiple of 2^k ticks of the
 * wheel's clock; on a virtual wheel exactly there (docs/virtual-time.md).
 *
 *   set_get          get_leeway is 2^k - 1 ticks in ms (tick 1, 7, 10),
 *                    0 after init; UV_EBUSY on an active timer (also a
 *                    repeating one inside its callback) changes nothing;
 *                    UV_EINVAL on NULL; a leeway stays for later starts.
 *   virtual_bounds   400 timers, random timeouts (1 ms to 100 s) and
 *                    leeways (0 included), started, restarted and stopped
 *                    between random advances: each runs at the end of its
 *                    block, within
 *                    [deadline, deadline + leeway + tick], and the
 *                    callbacks of one advance in the order (clock,
 *                    deadline, start order); between advances get_due_in
 *                    counts to the end of the block.
 *   virtual_tick10   the same bounds and moments with 10 ms ticks.
 *   coalesce         1,000 timers over 10 s with leeway 1000 run at no more
 *                    than 10000 / 512 + 2 distinct clock values, and with
 *                    leeway 0 at more than 500.
 *   repeat_grid      repeating timers with leeway, 1,000 periods over
 *                    random advances: run k exactly at the end of the block
 *                    of first deadline + k * repeat, no drift.
 *   start_in_block   a timer with leeway, left by an advance between its
 *                    deadline and the end of its block, then another timer
 *                    started due before that end: next_due is the other's,
 *                    and it still runs at the end of its block.
 *   repeat_rule_real a real loop blocked past a repeating timer's deadline:
 *                    without leeway the next run is `repeat` after the loop
 *                    time at which it fired (libuv's rule); with leeway it
 *                    keeps to the grid of its first deadline.
 *   real_loop        300 timers with leeway 100 within 1 s on a real loop:
 *                    never early by uv_now, at most leeway + 1 s late, and
 *                    at most 20 driver wake-ups (the blocks of 64 ms); the
 *                    same set without leeway is printed beside it;
 *                    stats.lateness counts each run from its deadline.
 *   task_leeway      500 loop-thread tasks on a virtual wheel with
 *                    task_leeway_ms 1000: each runs at the end of its 512 ms
 *                    block, within [deadline, deadline + 511 + 1], at no
 *                    more than 5000 / 512 + 2 distinct clock values.
 *   task_repeat      a repeating task with task_leeway_ms runs again
 *                    repeat_ms after each dispatch, not on its first
 *                    deadline's grid as a timer does: with a 4-tick block,
 *                    deadline 10 and repeat 101, runs at 12, 116, 220,
 *                    where the grid would give 12, 112, 212. */

#include <string.h>

#include "test-cases.h"
#include "timer-harness.h"

/* The leeway the contract keeps: 2^k - 1 ticks, the most that fit in ms,
 * in ms. */
static uint64_t kept_leeway(uint64_t ms, uint64_t tick) {
  uint64_t t;
  uint64_t l;

  t = ms / tick;
  l = 0;
  while (l * 2 + 1 <= t && l * 2 + 1 > l)
    l = l * 2 + 1;
  return l * tick;
}


/* The clock at which a timer with deadline d and kept leeway lee (ms) runs
 * on a virtual wheel: d rounded up to a tick, then to a multiple of
 * lee / tick + 1 ticks. */
static uint64_t run_moment(uint64_t d, uint64_t lee, uint64_t tick) {
  uint64_t ticks;
  uint64_t block;

  ticks = (d + tick - 1) / tick;
  block = lee / tick + 1;
  return (ticks + block - 1) / block * block * tick;
}


static void setup_virtual(uint64_t tick_ms) {
  uvtw_options_t o;

  uvtw_options_init(&o);
  o.virtual_time = 1;
  o.tick_ms = tick_ms;
  setup_opts(&o);
}


/* ---- set_get ---------------------------------------------------------- */

static int sg_runs;

static void sg_repeat_cb(uvtw_timer_t* t) {
  sg_runs++;
  ASSERT(uvtw_timer_is_active(t));
  ASSERT_EQ(UV_EBUSY, uvtw_timer_set_leeway(t, 3));
  ASSERT_UEQ(7, uvtw_timer_get_leeway(t));
}


static void sg_oneshot_cb(uvtw_timer_t* t) {
  sg_runs++;
  ASSERT(!uvtw_timer_is_active(t));
  ASSERT_EQ(0, uvtw_timer_set_leeway(t, 3));
  ASSERT_UEQ(3, uvtw_timer_get_leeway(t));
}


static void sg_table(uint64_t tick, const uint64_t (*rows)[2], int n) {
  uvtw_wheel_t* w;
  uvtw_options_t o;
  uvtw_timer_t t;
  int i;

  uvtw_options_init(&o);
  o.tick_ms = tick;
  o.virtual_time = 1;
  w = add_wheel(&o);
  ASSERT_EQ(0, uvtw_timer_init(w, &t));
  for (i = 0; i < n; i++) {
    ASSERT_EQ(0, uvtw_timer_set_leeway(&t, rows[i][0]));
    if (uvtw_timer_get_leeway(&t) != rows[i][1])
      fprintf(stderr, "tick %" PRIu64 ": set_leeway(%" PRIu64 ")\n", tick,
              rows[i][0]);
    ASSERT_UEQ(rows[i][1], uvtw_timer_get_leeway(&t));
    ASSERT_UEQ(kept_leeway(rows[i][0], tick), rows[i][1]); /* the model */
  }
}


static void set_get(void) {
  static const uint64_t tick1[][2] = {
      {0, 0},
      {1, 1},
      {2, 1},
      {3, 3},
      {6, 3},
      {7, 7},
      {8, 7},
      {100, 63},
      {511, 511},
      {1000, 511},
      {1023, 1023},
      {1024, 1023},
      {65535, 65535},
      {100000, 65535},
      {(uint64_t) 1 << 31, ((uint64_t) 1 << 31) - 1},
      {UVTW_LEEWAY_MS_MAX, UVTW_LEEWAY_MS_MAX}, /* the cap: 2^32 - 1 */
  };
  static const uint64_t tick10[][2] = {
      {0, 0},   {9, 0},   {10, 10},    {29, 10},     {30, 30},
      {69, 30}, {70, 70}, {1000, 630}, {1270, 1270},
  };
  static const uint64_t tick7[][2] = {
      {6, 0}, {7, 7}, {20, 7}, {21, 21}, {100, 49}, {1000, 889},
  };
  uvtw_timer_t t;
  uvtw_timer_t r;
  uint64_t due;

  setup_virtual(1);
  ASSERT_EQ(UV_EINVAL, uvtw_timer_set_leeway(NULL, 5));
  memset(&t, 0xa5, sizeof(t)); /* init makes it, whatever was there */
  ASSERT_EQ(0, uvtw_timer_init(wheel, &t));
  ASSERT_UEQ(0, uvtw_timer_get_leeway(&t));
  sg_table(1, tick1, (int) (sizeof(tick1) / sizeof(tick1[0])));
  sg_table(10, tick10, (int) (sizeof(tick10) / sizeof(tick10[0])));
  sg_table(7, tick7, (int) (sizeof(tick7) / sizeof(tick7[0])));

  /* Active: UV_EBUSY, and neither the leeway nor the moment moves. */
  ASSERT_EQ(0, uvtw_timer_set_leeway(&t, 100));
  ASSERT_UEQ(63, uvtw_timer_get_leeway(&t));
  ASSERT_EQ(0, uvtw_timer_start(&t, never_cb, 1000, 0));
  due = uvtw_timer_get_due_in(&t);
  ASSERT_EQ(UV_EBUSY, uvtw_timer_set_leeway(&t, 1000));
  ASSERT_EQ(UV_EBUSY, uvtw_timer_set_leeway(&t, 0));
  ASSERT_UEQ(63, uvtw_timer_get_leeway(&t));
  ASSERT_UEQ(due, uvtw_timer_get_due_in(&t));
  ASSERT(uvtw_timer_is_active(&t));

  /* Stopped: settable again, and it stays across starts and runs. */
  ASSERT_EQ(0, uvtw_timer_stop(&t));
  ASSERT_EQ(0, uvtw_timer_set_leeway(&t, 1000));
  ASSERT_UEQ(511, uvtw_timer_get_leeway(&t));
  ASSERT_EQ(0, uvtw_timer_start(&t, sg_oneshot_cb, 10, 0));
  ASSERT_UEQ(511, uvtw_timer_get_leeway(&t));
  ASSERT_EQ(0, uvtw_timer_stop(&t));
  ASSERT_EQ(0, uvtw_timer_start(&t, sg_oneshot_cb, 10, 0));
  ASSERT_UEQ(511, uvtw_timer_get_leeway(&t));
  ASSERT_EQ(0, uvtw_timer_again(&t)); /* repeat 0: nothing */
  ASSERT_UEQ(511, uvtw_timer_get_leeway(&t));
  ASSERT_EQ(0, uvtw_wheel_advance(wheel, 1000));
  ASSERT_EQ(1, sg_runs); /* the one-shot set 3 in its callback */
  ASSERT_UEQ(3, uvtw_timer_get_leeway(&t));
  ASSERT_EQ(0, uvtw_timer_start(&t, never_cb, 10, 0));
  ASSERT_UEQ(3, uvtw_timer_get_leeway(&t));
  ASSERT_EQ(0, uvtw_timer_stop(&t));
  /* init makes it exact again. */
  ASSERT_EQ(0, uvtw_timer_init(wheel, &t));
  ASSERT_UEQ(0, uvtw_timer_get_leeway(&t));

  /* A repeating timer is active in its callback: UV_EBUSY there. */
  ASSERT_EQ(0, uvtw_timer_init(wheel, &r));
  ASSERT_EQ(0, uvtw_timer_set_leeway(&r, 7));
  ASSERT_EQ(0, uvtw_timer_start(&r, sg_repeat_cb, 5, 50));
  ASSERT_EQ(0, uvtw_wheel_advance(wheel, 200));
  ASSERT_EQ(5, sg_runs); /* about 4 runs of the repeat */
  ASSERT_EQ(0, uvtw_timer_stop(&r));
  ASSERT_EQ(0, uvtw_timer_set_leeway(&r, 0));
  ASSERT_UEQ(0, uvtw_timer_get_leeway(&r));
  teardown();
}


/* ---- virtual_bounds, virtual_tick10 ----------------------------------- */

#define VB_N 400

typedef struct {
  uvtw_timer_t t;
  int active;
  uint64_t deadline; /* the clock at the start plus the timeout */
  uint64_t lee;      /* kept leeway, ms */
  uint64_t at;       /* the end of its block: when it must run */
  uint64_t seq;      /* start order */
  uint64_t ran_at;   /* the clock at its last run */
} vb_item_t;

static vb_item_t vb[VB_N];
static uint64_t vb_tick;
static uint64_t vb_seq;
static int vb_check_order;
static vb_item_t* vb_last; /* the previous callback of this advance */
static uint64_t vb_last_now;
static uint64_t vb_begin; /* where this advance starts */
static uint64_t vb_end;   /* and ends */
static uint64_t vb_runs;
static uint64_t vb_early;
static uint64_t vb_moments[4096]; /* every moment a start filed */
static int vb_nmoments;


/* Whether the wheel may pass at `now` anyway: the advance starts there, or
 * another start filed a timer for now (a stopped or restarted timer's old
 * moment included: the wheel may wake there, docs/timers.md). */
static int vb_pass_at(const vb_item_t* it, uint64_t now) {
  int i;

  if (now == vb_begin)
    return 1;
  for (i = 0; i < vb_nmoments; i++)
    if (vb_moments[i] == now && now != it->at)
      return 1;
  return 0;
}


/* docs/virtual-time.md runs a timer with leeway at the end of its block,
 * exactly: vb_early counts runs at another moment (vb_pass_at tells how),
 * and the case asserts there are none. */
static void vb_cb(uvtw_timer_t* t) {
  vb_item_t* it;
  uint64_t now;

  it = (vb_item_t*) t;
  now = uvtw_wheel_now(wheel);
  ASSERT(it->active);
  ASSERT_ULE(now, vb_end);
  if (now != it->at) {
    ASSERT(vb_pass_at(it, now));
    vb_early++;
  }
  /* The bounds of docs/timers.md, "Leeway". */
  ASSERT_UGE(now, (it->deadline + vb_tick - 1) / vb_tick * vb_tick);
  ASSERT_ULE(now, it->deadline + it->lee + vb_tick);
  ASSERT_ULE(now, it->at);
  ASSERT_UEQ(it->lee, uvtw_timer_get_leeway(t));
  /* Real time's order; one pass by deadline, ties in start order. */
  if (vb_last != NULL && vb_check_order) {
    ASSERT_UGE(now, vb_last_now);
    if (now == vb_last_now && it->deadline == vb_last->deadline)
      ASSERT_ULT(vb_last->seq, it->seq);
    else if (now == vb_last_now)
      ASSERT_ULT(vb_last->deadline, it->deadline);
  }
  vb_last = it;
  vb_last_now = now;
  it->active = 0;
  it->ran_at = now;
  vb_runs++;
}


static uint64_t vb_pick_leeway(uint64_t* rng) {
  static const uint64_t some[] = {0, 0, 0, 1, 2, 5, 10, 64, 100, 1000, 5000};
  uint64_t r;

  r = test_xorshift64(rng) % 14;
  if (r < sizeof(some) / sizeof(some[0]))
    return some[r];
  return test_xorshift64(rng) % 100001;
}


static uint64_t vb_pick_timeout(uint64_t* rng) {
  switch (test_xorshift64(rng) % 4) {
  case 0:
    return 1 + test_xorshift64(rng) % 100;
  case 1:
    return 1 + test_xorshift64(rng) % 3000;
  default:
    return 1 + test_xorshift64(rng) % 100000;
  }
}


static void vb_start(vb_item_t* it, uint64_t now, uint64_t* rng) {
  uint64_t timeout;

  if (!uvtw_timer_is_active(&it->t)) {
    ASSERT_EQ(0, uvtw_timer_set_leeway(&it->t, vb_pick_leeway(rng)));
    it->lee = uvtw_timer_get_leeway(&it->t);
  }
  timeout = vb_pick_timeout(rng);
  ASSERT_EQ(0, uvtw_timer_start(&it->t, vb_cb, timeout, 0));
  it->active = 1;
  it->ran_at = UINT64_MAX;
  it->deadline = now + timeout;
  it->at = run_moment(it->deadline, it->lee, vb_tick);
  it->seq = vb_seq++;
  ASSERT_LT(vb_nmoments, 4096);
  vb_moments[vb_nmoments++] = it->at;
  /* get_due_in counts to the end of its block. */
  ASSERT_UEQ(it->at - now, uvtw_timer_get_due_in(&it->t));
}


static void vb_advance(uint64_t step) {
  int must[VB_N];
  uint64_t now;
  int i;

  now = uvtw_wheel_now(wheel);
  vb_begin = now;
  vb_end = now + step;
  vb_last = NULL;
  for (i = 0; i < VB_N; i++)
    must[i] = vb[i].active && vb[i].at <= vb_end;
  ASSERT_EQ(0, uvtw_wheel_advance(wheel, step));
  ASSERT_UEQ(vb_end, uvtw_wheel_now(wheel));
  for (i = 0; i < VB_N; i++) {
    if (must[i])
      ASSERT(!vb[i].active); /* it ran */
    ASSERT_EQ(vb[i].active, uvtw_timer_is_active(&vb[i].t));
    if (vb[i].active)
      ASSERT_UEQ(vb[i].at - vb_end, uvtw_timer_get_due_in(&vb[i].t));
  }
}


static void vb_run(uint64_t tick, uint64_t seed) {
  uint64_t rng;
  uint64_t now;
  int round;
  int i;
  int k;

  rng = seed;
  vb_tick = tick;
  vb_seq = 0;
  vb_runs = 0;
  vb_early = 0;
  vb_nmoments = 0;
  setup_virtual(tick);
  /* The same phase of 2^20 ms in every run, then a clock off the tick and
   * off every block. */
  now = uvtw_wheel_now(wheel);
  ASSERT_EQ(0, uvtw_wheel_advance(wheel, (1u << 20) - now % (1u << 20)));
  ASSERT_EQ(0, uvtw_wheel_advance(wheel, 1 + test_xorshift64(&rng) % 997));
  now = uvtw_wheel_now(wheel);
  for (i = 0; i < VB_N; i++) {
    ASSERT_EQ(0, uvtw_timer_init(wheel, &vb[i].t));
    vb[i].active = 0;
    vb_start(&vb[i], now, &rng);
  }
  for (round = 0; round < 300; round++) {
    now = uvtw_wheel_now(wheel);
    /* A few restarts, stops and new starts between advances. */
    for (k = 0; k < 8; k++) {
      i = (int) (test_xorshift64(&rng) % VB_N);
      if (vb[i].active && test_xorshift64(&rng) % 4 == 0) {
        ASSERT_EQ(0, uvtw_timer_stop(&vb[i].t));
        vb[i].active = 0;
      } else if (round < 250) {
        vb_start(&vb[i], now, &rng);
      }
    }
    switch (test_xorshift64(&rng) % 3) {
    case 0:
      vb_advance(test_xorshift64(&rng) % 20);
      break;
    case 1:
      vb_advance(test_xorshift64(&rng) % 1000);
      break;
    default:
      vb_advance(test_xorshift64(&rng) % 5000);
      break;
    }
  }
  vb_advance(200000);
  for (i = 0; i < VB_N; i++)
    ASSERT(!vb[i].active);
  ASSERT_EQ(0, uvtw_wheel_pending(wheel));
  fprintf(stderr,
          "tick %" PRIu64 ": %" PRIu64 " runs, %" PRIu64
          " of them before the end of their block\n",
          tick, vb_runs, vb_early);
  ASSERT_UGE(vb_runs, 1000);
  ASSERT_UEQ(vb_early, 0);
  teardown();
}


static void virtual_bounds(void) {
  vb_check_order = 1;
  vb_run(1, 0x1234567887654321ull);
  vb_run(1, 0xdeadbeefcafef00dull);
}


/* With ticks of 10 ms, deadlines within one tick tie; the contract does not
 * say whether such ties go by the raw deadline, so only the moments and the
 * bounds are checked, not the order within a pass. */
static void virtual_tick10(void) {
  vb_check_order = 0;
  vb_run(10, 0x0f0f0f0f12345678ull);
}


/* ---- coalesce --------------------------------------------------------- */

#define CO_N 1000
#define CO_SPAN 10000

static uvtw_timer_t co_t[CO_N];
static uint64_t co_last;
static int co_distinct;
static int co_runs;


static void co_cb(uvtw_timer_t* t) {
  uint64_t now;

  (void) t;
  now = uvtw_wheel_now(wheel);
  ASSERT_UGE(now, co_last);
  if (co_runs == 0 || now != co_last)
    co_distinct++;
  co_last = now;
  co_runs++;
}


static int lateness_bucket(uint64_t late) {
  int i;

  if (late == 0)
    return 0;
  for (i = 1; i < UVTW_LATENESS_BUCKETS - 1; i++)
    if (late < ((uint64_t) 1 << i))
      return i;
  return UVTW_LATENESS_BUCKETS - 1;
}


static int co_run(uint64_t leeway, uint64_t seed) {
  uvtw_stats_t st;
  uint64_t rng;
  uint64_t now;
  uint64_t d;
  int i;

  rng = seed;
  setup_virtual(1);
  co_runs = 0;
  co_distinct = 0;
  co_last = 0;
  now = uvtw_wheel_now(wheel);
  for (i = 0; i < CO_N; i++) {
    d = 1 + test_xorshift64(&rng) % CO_SPAN;
    ASSERT_EQ(0, uvtw_timer_init(wheel, &co_t[i]));
    ASSERT_EQ(0, uvtw_timer_set_leeway(&co_t[i], leeway));
    ASSERT_EQ(0, uvtw_timer_start(&co_t[i], co_cb, d, 0));
  }
  /* Random steps, as a test would take them. */
  while (co_runs < CO_N && uvtw_wheel_now(wheel) < now + 2 * CO_SPAN)
    ASSERT_EQ(0, uvtw_wheel_advance(wheel, 1 + test_xorshift64(&rng) % 300));
  ASSERT_EQ(CO_N, co_runs);
  /* docs/virtual-time.md ("Lateness"): on a virtual wheel every callback
   * counts as on time, leeway or not (real_loop checks a real wheel's
   * buckets, where leeway counts). */
  uvtw_wheel_stats(wheel, &st);
  ASSERT_UEQ(st.lateness[0], (uint64_t) CO_N);
  teardown();
  fprintf(stderr, "leeway %" PRIu64 ": %d timers at %d clock values\n", leeway,
          CO_N, co_distinct);
  return co_distinct;
}


static void coalesce(void) {
  ASSERT_LE(co_run(1000, 0x5555aaaa5555aaaaull), CO_SPAN / 512 + 2);
  ASSERT_GT(co_run(0, 0x5555aaaa5555aaaaull), 500);
}


/* ---- repeat_grid ------------------------------------------------------ */

#define RG_N 3
#define RG_PERIODS 1000

static uvtw_timer_t rg_t[RG_N];
static uint64_t rg_first[RG_N];
static uint64_t rg_repeat[RG_N];
static uint64_t rg_lee[RG_N];
static int rg_runs[RG_N];


static void rg_cb(uvtw_timer_t* t) {
  uint64_t grid;
  uint64_t now;
  int i;

  i = (int) (t - rg_t);
  now = uvtw_wheel_now(wheel);
  grid = rg_first[i] + (uint64_t) rg_runs[i] * rg_repeat[i];
  ASSERT_UGE(now, grid);
  ASSERT_ULE(now, grid + rg_lee[i] + 1);
  ASSERT_UEQ(run_moment(grid, rg_lee[i], 1), now);
  if (++rg_runs[i] == RG_PERIODS)
    ASSERT_EQ(0, uvtw_timer_stop(t));
}


static void repeat_grid(void) {
  static const uint64_t repeat[RG_N] = {250, 700, 1000};
  static const uint64_t leeway[RG_N] = {100, 1000, 1};
  static const uint64_t timeout[RG_N] = {13, 700, 999};
  uint64_t rng;
  uint64_t now;
  int i;

  rng = 0x0123456789abcdefull;
  setup_virtual(1);
  ASSERT_EQ(0, uvtw_wheel_advance(wheel, 37)); /* off every block */
  now = uvtw_wheel_now(wheel);
  for (i = 0; i < RG_N; i++) {
    ASSERT_EQ(0, uvtw_timer_init(wheel, &rg_t[i]));
    ASSERT_EQ(0, uvtw_timer_set_leeway(&rg_t[i], leeway[i]));
    rg_lee[i] = uvtw_timer_get_leeway(&rg_t[i]);
    ASSERT_ULT(rg_lee[i], repeat[i]); /* one run per block */
    rg_first[i] = now + timeout[i];
    rg_repeat[i] = repeat[i];
    rg_runs[i] = 0;
    ASSERT_EQ(0, uvtw_timer_start(&rg_t[i], rg_cb, timeout[i], repeat[i]));
  }
  while (uvtw_wheel_pending(wheel) != 0)
    ASSERT_EQ(0, uvtw_wheel_advance(wheel, 1 + test_xorshift64(&rng) % 3000));
  for (i = 0; i < RG_N; i++)
    ASSERT_EQ(RG_PERIODS, rg_runs[i]);
  teardown();
}


/* ---- start_in_block --------------------------------------------------- */

static uvtw_timer_t ib_a;
static uvtw_timer_t ib_b;
static uint64_t ib_a_now;
static uint64_t ib_b_now;


static void ib_cb(uvtw_timer_t* t) {
  if (t == &ib_a)
    ib_a_now = uvtw_wheel_now(wheel);
  else
    ib_b_now = uvtw_wheel_now(wheel);
}


static void start_in_block(void) {
  uint64_t base;
  uint64_t d;
  uint64_t at;
  uint64_t nd;

  setup_virtual(1);
  base = uvtw_wheel_now(wheel);
  ASSERT_EQ(0, uvtw_wheel_advance(wheel, (1u << 20) - base % (1u << 20) + 100));
  base = uvtw_wheel_now(wheel);
  ib_a_now = ib_b_now = 0;
  /* A: leeway 511, filed above level 0 (4.3 s): its deadline 4,300 ms from
   * base, the end of its block 208 ms later.  The clock is left 50 ms after
   * the deadline, inside the block. */
  ASSERT_EQ(0, uvtw_timer_init(wheel, &ib_a));
  ASSERT_EQ(0, uvtw_timer_init(wheel, &ib_b));
  ASSERT_EQ(0, uvtw_timer_set_leeway(&ib_a, 1000));
  ASSERT_EQ(0, uvtw_timer_start(&ib_a, ib_cb, 4300, 0));
  d = base + 4300;
  at = run_moment(d, 511, 1);
  ASSERT_UEQ(at - base, uvtw_timer_get_due_in(&ib_a));
  ASSERT_EQ(0, uvtw_wheel_advance(wheel, 4350));
  ASSERT_EQ(0, ib_a_now);
  ASSERT_UEQ(at - (base + 4350), uvtw_timer_get_due_in(&ib_a));
  ASSERT_UEQ(at - (base + 4350), uvtw_wheel_next_due(wheel));
  /* B, due before the end of A's block. */
  ASSERT_EQ(0, uvtw_timer_start(&ib_b, ib_cb, 10, 0));
  nd = uvtw_wheel_next_due(wheel);
  ASSERT_UEQ(nd, 10);
  ASSERT_EQ(0, uvtw_wheel_advance(wheel, at - (base + 4350)));
  ASSERT_UEQ(base + 4360, ib_b_now);
  /* A at the end of its block, not at B's pass. */
  ASSERT_UEQ(ib_a_now, at);
  teardown();
}


/* ---- repeat_rule_real ------------------------------------------------- */

#define RR_TIMEOUT 100
#define RR_REPEAT 300

static uv_timer_t rr_blocker;
static uvtw_timer_t rr_t;
static uint64_t rr_start;    /* uv_now at the start */
static uint64_t rr_fired[2]; /* uv_now at runs 0 and 1 */
static uint64_t rr_due_after0;
static int rr_runs;
static uint64_t rr_lee;


static void rr_block_cb(uv_timer_t* h) {
  uint64_t until;

  (void) h;
  /* Blocks the loop past the wheel timer's first deadline (start + 100),
   * to start + 130 at least: the timer runs 30 ms late or more. */
  until = uv_hrtime() + (uint64_t) 80 * 1000 * 1000;
  while (uv_hrtime() < until) {
  }
}


static void rr_cb(uvtw_timer_t* t) {
  ASSERT(uvtw_timer_is_active(t));
  rr_fired[rr_runs] = uv_now(&loop);
  if (rr_runs == 0)
    rr_due_after0 = uvtw_timer_get_due_in(t);
  if (++rr_runs == 2)
    ASSERT_EQ(0, uvtw_timer_stop(t));
}


static void rr_run(uint64_t leeway) {
  uint64_t first;
  uint64_t next;

  setup();
  add_uv_timer(&rr_blocker);
  rr_runs = 0;
  ASSERT_EQ(0, uvtw_timer_init(wheel, &rr_t));
  ASSERT_EQ(0, uvtw_timer_set_leeway(&rr_t, leeway));
  rr_lee = uvtw_timer_get_leeway(&rr_t);
  uv_update_time(&loop);
  rr_start = uv_now(&loop);
  ASSERT_UV_OK(uv_timer_start(&rr_blocker, rr_block_cb, 50, 0));
  ASSERT_EQ(0, uvtw_timer_start(&rr_t, rr_cb, RR_TIMEOUT, RR_REPEAT));
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_EQ(2, rr_runs);
  first = rr_start + RR_TIMEOUT;
  fprintf(stderr,
          "leeway %" PRIu64 ": first deadline +%" PRIu64 ", runs at +%" PRIu64
          " and +%" PRIu64 ", due_in after run 0: %" PRIu64 "\n",
          rr_lee, first - rr_start, rr_fired[0] - rr_start,
          rr_fired[1] - rr_start, rr_due_after0);
  ASSERT_UGE(rr_fired[0], first + 30); /* the blocker made it late */
  if (rr_lee == 0) {
    /* libuv's rule: the loop time at which it fired plus repeat. */
    ASSERT_UEQ(RR_REPEAT, rr_due_after0);
    ASSERT_UGE(rr_fired[1], rr_fired[0] + RR_REPEAT);
  } else if (rr_fired[0] < first + RR_REPEAT - rr_lee - 1) {
    /* The grid: run 1 at the end of the block of first + repeat. */
    next = run_moment(first + RR_REPEAT, rr_lee, 1);
    ASSERT_UEQ(next - rr_fired[0], rr_due_after0);
    ASSERT_UGE(rr_fired[1], first + RR_REPEAT);
  } else {
    fprintf(stderr, "the loop was too late to check the grid\n");
  }
  teardown();
}


static void repeat_rule_real(void) {
  rr_run(0);
  rr_run(16); /* 15 ms: blocks of 16 */
}


/* ---- real_loop -------------------------------------------------------- */

#define RL_N 300

static uvtw_timer_t rl_t[RL_N];
static uint64_t rl_deadline[RL_N];
static uint64_t rl_lee;
static uint64_t rl_max_late;
static uint64_t rl_late[UVTW_LATENESS_BUCKETS];
static int rl_runs;


static void rl_cb(uvtw_timer_t* t) {
  uint64_t now;
  int i;

  i = (int) (t - rl_t);
  now = uv_now(&loop);
  ASSERT_UGE(now, rl_deadline[i]);
  ASSERT_ULE(now, rl_deadline[i] + rl_lee + 1 + 1000);
  if (now - rl_deadline[i] > rl_max_late)
    rl_max_late = now - rl_deadline[i];
  rl_late[lateness_bucket(now - rl_deadline[i])]++;
  rl_runs++;
}


static uint64_t rl_run(uint64_t leeway) {
  uvtw_stats_t st;
  uint64_t rng;
  uint64_t now;
  uint64_t timeout;
  int i;

  rng = 0x2545f4914f6cdd1dull;
  setup();
  rl_runs = 0;
  rl_max_late = 0;
  memset(rl_late, 0, sizeof(rl_late));
  rl_lee = kept_leeway(leeway, 1);
  uv_update_time(&loop);
  now = uv_now(&loop);
  for (i = 0; i < RL_N; i++) {
    timeout = 1 + test_xorshift64(&rng) % 1000;
    ASSERT_EQ(0, uvtw_timer_init(wheel, &rl_t[i]));
    ASSERT_EQ(0, uvtw_timer_set_leeway(&rl_t[i], leeway));
    ASSERT_UEQ(rl_lee, uvtw_timer_get_leeway(&rl_t[i]));
    ASSERT_EQ(0, uvtw_timer_start(&rl_t[i], rl_cb, timeout, 0));
    rl_deadline[i] = now + timeout;
  }
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_EQ(RL_N, rl_runs);
  uvtw_wheel_stats(wheel, &st);
  ASSERT_UEQ(RL_N, st.fired);
  /* Lateness counts from the deadline: uv_now in the callback minus it. */
  for (i = 0; i < UVTW_LATENESS_BUCKETS; i++)
    ASSERT_UEQ(rl_late[i], st.lateness[i]);
  fprintf(stderr,
          "leeway %" PRIu64 ": %d timers, %" PRIu64
          " driver wake-ups, at most %" PRIu64 " ms late\n",
          rl_lee, RL_N, st.driver_wakeups, rl_max_late);
  teardown();
  return st.driver_wakeups;
}


static void real_loop(void) {
  uint64_t with;

  with = rl_run(100);
  /* Every timer runs at a multiple of 64 ms of the clock within 1064 ms of
   * the start: 18 such moments at most, and the driver arms for the next
   * one only.  A loaded machine only merges wake-ups. */
  ASSERT_ULE(with, 20);
  (void) rl_run(0); /* printed, not asserted: it depends on the load */
}


/* ---- task_leeway ------------------------------------------------------ */

#define TL_N 500
#define TL_SPAN 5000

static uint64_t tl_deadline[TL_N];
static uint64_t tl_lee;
static uint64_t tl_last;
static int tl_distinct;
static int tl_runs;


static void tl_cb(void* arg, int status) {
  uint64_t d;
  uint64_t now;

  ASSERT_EQ(0, status);
  d = *(uint64_t*) arg;
  now = uvtw_wheel_now(wheel);
  ASSERT_UGE(now, d);
  ASSERT_ULE(now, d + tl_lee + 1);
  ASSERT_UEQ(run_moment(d, tl_lee, 1), now);
  ASSERT_UGE(now, tl_last);
  if (tl_runs == 0 || now != tl_last)
    tl_distinct++;
  tl_last = now;
  tl_runs++;
}


static void task_leeway(void) {
  uvtw_options_t o;
  uint64_t rng;
  uint64_t now;
  uint64_t delay;
  int r;
  int i;

  uvtw_options_init(&o);
  ASSERT_UEQ(0, o.task_leeway_ms);
  o.virtual_time = 1;
  o.task_leeway_ms = 1000;
  setup_opts(&o);
  tl_lee = 511;
  tl_runs = 0;
  tl_distinct = 0;
  tl_last = 0;
  rng = 0x9e3779b97f4a7c15ull;
  ASSERT_EQ(0, uvtw_wheel_advance(wheel, 77)); /* off every block */
  now = uvtw_wheel_now(wheel);
  for (i = 0; i < TL_N; i++) {
    delay = 1 + test_xorshift64(&rng) % TL_SPAN;
    tl_deadline[i] = now + delay;
    r = uvtw_submit(wheel, delay, 0, 0, tl_cb, &tl_deadline[i], NULL);
    if (r == UV_ENOSYS) {
      fprintf(stderr, "tasks are not built: skipped\n");
      teardown();
      return;
    }
    ASSERT_EQ(0, r);
  }
  while (tl_runs < TL_N && uvtw_wheel_now(wheel) < now + 2 * TL_SPAN)
    ASSERT_EQ(0, uvtw_wheel_advance(wheel, 1 + test_xorshift64(&rng) % 300));
  ASSERT_EQ(TL_N, tl_runs);
  fprintf(stderr, "%d tasks at %d clock values\n", TL_N, tl_distinct);
  ASSERT_LE(tl_distinct, TL_SPAN / 512 + 2);
  teardown();
}


/* ---- task_repeat ------------------------------------------------------ */

#define TR_RUNS 3

static uint64_t tr_at[TR_RUNS];
static int tr_runs;


static void tr_cb(void* arg, int status) {
  (void) arg;
  if (status == UV_ECANCELED)
    return; /* its final call, when teardown closes the wheel */
  ASSERT_EQ(0, status);
  if (tr_runs < TR_RUNS)
    tr_at[tr_runs] = uvtw_wheel_now(wheel);
  tr_runs++;
}


static void task_repeat(void) {
  uvtw_options_t o;
  uint64_t start;
  int r;
  int k;

  uvtw_options_init(&o);
  o.virtual_time = 1;
  o.task_leeway_ms = 3; /* kept: 3 ticks, blocks of 4 */
  setup_opts(&o);
  /* To a multiple of 4, the start of a block. */
  ASSERT_EQ(0, uvtw_wheel_advance(wheel, 4 - uvtw_wheel_now(wheel) % 4));
  start = uvtw_wheel_now(wheel);
  ASSERT_UEQ(0, start % 4);
  tr_runs = 0;
  r = uvtw_submit(wheel, 10, 101, 0, tr_cb, NULL, NULL);
  if (r == UV_ENOSYS) {
    fprintf(stderr, "tasks are not built: skipped\n");
    teardown();
    return;
  }
  ASSERT_EQ(0, r);
  while (tr_runs < TR_RUNS)
    ASSERT_EQ(0, uvtw_wheel_advance(wheel, 1));
  /* Each run at the end of the block of the previous dispatch + 101. */
  ASSERT_UEQ(start + 12, tr_at[0]);
  for (k = 1; k < TR_RUNS; k++)
    ASSERT_UEQ(run_moment(tr_at[k - 1] + 101, 3, 1), tr_at[k]);
  ASSERT_UEQ(start + 116, tr_at[1]);
  ASSERT_UEQ(start + 220, tr_at[2]);
  teardown();
}


/* clang-format off */
static const test_case_t cases[] = {
  TEST_CASE(set_get),
  TEST_CASE(virtual_bounds),
  TEST_CASE(virtual_tick10),
  TEST_CASE(coalesce),
  TEST_CASE(repeat_grid),
  TEST_CASE(start_in_block),
  TEST_CASE(repeat_rule_real),
  TEST_CASE(real_loop),
  TEST_CASE(task_leeway),
  TEST_CASE(task_repeat),
};
/* clang-format on */


int main(int argc, char** argv) {
  return run_cases(argc, argv, cases, TEST_CASE_COUNT(cases));
}
