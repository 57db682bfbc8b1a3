/* SPDX-License-Identifier: MIT */
/* The wheel's two promises about moving timers (docs/wheel.md), counted
 * with stats.cascades, never timed:
 *   - no cascade: a timer due within level 0's span (2047 ticks) of the
 *     loop's time at its start expires from level 0 without being moved,
 *     however long the wheel sat idle before (its time is caught up to the
 *     loop's at the start); checked on the pure core at many phases and
 *     quiet spells, on a virtual wheel, and on a real loop;
 *   - no stall: a crowded slot is moved down in shares, so a pass at the
 *     wheel's wake-up re-files at most UVTW__STALL_MAX timers, however
 *     many the slot holds; checked on the core with passes where the
 *     driver would wake, and on a real loop with the bench's stall
 *     scenario (1,000,000 timers in one block, one due 400 ms before the
 *     rest). */

#include <string.h>

#include <uv.h>

#include "core.h"
#include "test-cases.h"
#include "timer-harness.h"

#define N 200000
#define STALL_N 1000000
/* What docs/wheel.md promises a pass re-files at most, while the loop
 * keeps up with the wheel's wake-ups: two pre-cascade chunks per level
 * that is moving a crowded slot down (a chunk a step, two where leeway
 * aligns the steps), at most two levels at once. */
#define UVTW__STALL_MAX (4 * UVTW__PRECASCADE_CHUNK)

static uvtw_timer_t timers[STALL_N];
static uint64_t rng = 0x75767477;


static uint64_t next_random(void) {
  return test_splitmix64(&rng);
}


/* The driver's loop on the pure core: a pass at each wake-up
 * (uvtw__core_tighten) until `n` timers fired; the most timers one pass
 * re-filed goes to *worst. */
static uint64_t core_drive(uvtw__core_t* core,
                           uint64_t now,
                           uint64_t n,
                           uint64_t* worst) {
  uint64_t fired;
  uint64_t before;
  uint64_t at;
  int passes;

  fired = 0;
  *worst = 0;
  for (passes = 1; fired < n; passes++) {
    at = uvtw__core_ms_of(core, uvtw__core_tighten(core));
    ASSERT(at != UINT64_MAX);
    if (at > now)
      now = at;
    before = core->cascades;
    uvtw__core_expire(core, now);
    while (uvtw__core_pop_due(core, &now) != NULL)
      fired++;
    if (core->cascades - before > *worst)
      *worst = core->cascades - before;
    if (passes % 64 == 0) /* the check is O(timers) */
      ASSERT_EQ(0, uvtw__core_check(core, stderr));
  }
  ASSERT_EQ(0, uvtw__core_check(core, stderr));
  return core->cascades;
}


/* On the core: a wheel made at start_ms (holding one timer due an hour
 * after the spell, so it is not empty, if `with_far`), a quiet spell of
 * quiet_ms with nothing due and no pass, then n timers started at now + U[lo,
 * lo + span); passes in random steps (the same steps whatever n) until all
 * fired.  Returns the cascades. */
static uint64_t core_burst(uint64_t start_ms,
                           uint64_t quiet_ms,
                           int with_far,
                           size_t n,
                           uint64_t lo,
                           uint64_t span) {
  static uvtw__core_t core;
  uvtw_timer_t far_timer;
  uint64_t steps;
  uint64_t fired;
  uint64_t now;
  uint64_t end;
  int passes;
  size_t i;

  memset(timers, 0, sizeof(timers[0]) * n);
  memset(&far_timer, 0, sizeof(far_timer));
  uvtw__core_init(&core, 1, start_ms);
  if (with_far)
    uvtw__core_start(&core, &far_timer, start_ms + quiet_ms + 3600000,
                     start_ms);
  now = start_ms + quiet_ms;
  for (i = 0; i < n; i++)
    uvtw__core_start(&core, &timers[i], now + lo + next_random() % span, now);
  ASSERT_EQ(0, uvtw__core_check(&core, stderr));
  fired = 0;
  steps = 0x5354455053; /* the passes' own random steps */
  for (passes = 1, end = now + lo + span; now < end; passes++) {
    now += 1 + test_splitmix64(&steps) % 37;
    uvtw__core_expire(&core, now);
    while (uvtw__core_pop_due(&core, &now) != NULL)
      fired++;
    if (passes % 16 == 0) /* the check is O(timers) */
      ASSERT_EQ(0, uvtw__core_check(&core, stderr));
  }
  ASSERT_UEQ(n, fired);
  ASSERT_EQ(0, uvtw__core_check(&core, stderr));
  return core.cascades;
}


/* The burst's own cascades: those of the run less those of the same run
 * without it (the far timer moves down as its block comes, by design). */
static uint64_t burst_cascades(uint64_t start_ms,
                               uint64_t quiet_ms,
                               int with_far,
                               size_t n,
                               uint64_t lo,
                               uint64_t span) {
  return core_burst(start_ms, quiet_ms, with_far, n, lo, span) -
         core_burst(start_ms, quiet_ms, with_far, 0, lo, span);
}


static void no_cascade_core(void) {
  static const uint64_t phases[] = {
      0,    1,    511,   1023,  1024,      1025,
      2047, 2048, 65535, 65536, 123456789, ((uint64_t) 1 << 40) - 3};
  static const uint64_t quiet[] = {
      0, 1, 500, 2047, 3000, 65536 * 3 + 17, (uint64_t) 1 << 33};
  size_t i;
  size_t j;

  for (i = 0; i < sizeof(phases) / sizeof(phases[0]); i++)
    for (j = 0; j < sizeof(quiet) / sizeof(quiet[0]); j++) {
      ASSERT_UEQ(0, burst_cascades(phases[i], quiet[j], 0, 20000, 1,
                                   UVTW__L0_SLOTS - 1));
      ASSERT_UEQ(0, burst_cascades(phases[i], quiet[j], 1, 20000, 1,
                                   UVTW__L0_SLOTS - 1));
    }
}


/* The server's burst: idle 3 s (and 500 ms), then 200,000 idle timeouts of
 * 1,500 to 1,599 ms. */
static void quiet_then_burst_core(void) {
  ASSERT_UEQ(0, core_burst(1, 3000, 0, N, 1500, 100));
  ASSERT_UEQ(0, burst_cascades(1, 3000, 1, N, 1500, 100));
  ASSERT_UEQ(0, burst_cascades(1, 500, 1, N, 1500, 100));
}


/* The bound is exact: one tick more than level 0 holds is filed above it
 * and moved down once, also after a quiet spell. */
static void bound_exact(void) {
  static uvtw__core_t core;
  uint64_t now;
  uint64_t end;

  memset(timers, 0, sizeof(timers[0]) * 2);
  uvtw__core_init(&core, 1, 0);
  now = 3000;
  uvtw__core_start(&core, &timers[0], now + UVTW__L0_SLOTS - 1, now);
  uvtw__core_start(&core, &timers[1], now + UVTW__L0_SLOTS, now);
  ASSERT_EQ(0, uvtw__core_check(&core, stderr));
  /* A pass every tick: the upper slot is re-filed when its block begins. */
  for (end = now + UVTW__L0_SLOTS - 1; now < end;) {
    now++;
    uvtw__core_expire(&core, now);
    ASSERT_PTR_EQ(now == end ? &timers[0] : NULL,
                  uvtw__core_pop_due(&core, &now));
  }
  now++;
  uvtw__core_expire(&core, now);
  ASSERT_PTR_EQ(&timers[1], uvtw__core_pop_due(&core, &now));
  ASSERT_UEQ(1, core.cascades);
}


/* A crowded slot beyond level 0 (n timers in one block, one due earlier),
 * on a wheel whose passes come at its wake-ups: the pre-cascade spreads
 * the slot, so no pass re-files more than UVTW__STALL_MAX timers, also
 * when the wheel slept until the block before the crowded one. */
static void no_stall_core(void) {
  static const struct {
    uint64_t early; /* the one timer due first */
    uint64_t lo;    /* the rest: U[lo, lo + span) */
    uint64_t span;
    uint64_t tick;
    unsigned g; /* every timer's leeway exponent: 2^g - 1 ticks */
  } cases[] = {
      {2700, 3100, 600, 1, 0},   /* level 1, the early one before it */
      {3000, 3001, 23, 1, 0},    /* level 1, one block, the early one in it */
      {1100, 1500, 624, 1, 0},   /* partly level 0, partly level 1 */
      {70000, 70400, 600, 1, 0}, /* level 2, moved down twice */
      {200000, 200400, 30000, 1, 0},
      {27000, 31000, 6000, 7, 0}, /* a 7 ms tick, level 1 */
      {2700, 3100, 600, 1, 5},    /* leeway: steps on a grid of 32 */
      {70000, 70400, 6000, 1, 9}, /* leeway: level 2, grid of 512 */
  };
  static uvtw__core_t core;
  uint64_t worst;
  uint64_t now;
  size_t n;
  size_t i;
  size_t k;

  n = N / 2;
  for (k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
    memset(timers, 0, sizeof(timers[0]) * n);
    now = 1;
    uvtw__core_init(&core, cases[k].tick, now);
    core.leeway_used = cases[k].g != 0; /* as uvtw_timer_set_leeway */
    for (i = 0; i < n; i++) {
      timers[i].order_ = UVTW__ORDER_USER | (uint64_t) cases[k].g
                                                << UVTW__ORDER_LEEWAY_SHIFT;
      uvtw__core_start(
          &core, &timers[i],
          now + (i == 0 ? cases[k].early
                        : cases[k].lo + next_random() % cases[k].span),
          now);
    }
    core_drive(&core, now, n, &worst);
    fprintf(stderr, "case %zu: %llu cascades, the worst pass re-filed %llu\n",
            k, (unsigned long long) core.cascades, (unsigned long long) worst);
    ASSERT_ULE(worst, UVTW__STALL_MAX);
  }
}


static uint64_t fired;
static uint64_t worst_refiled;
static uint64_t worst_fired;
static uint64_t last_cascades;
static uint64_t last_fired;
static uv_timer_t quiet_timer;
static size_t burst_n;
static uint64_t burst_lo;
static uint64_t burst_span;


static void fire_cb(uvtw_timer_t* timer) {
  (void) timer;
  fired++;
}


/* Per loop iteration: the timers the wheel re-filed and fired in it. */
static void count_iteration(void) {
  uvtw_stats_t stats;

  uvtw_wheel_stats(wheel, &stats);
  if (stats.cascades - last_cascades > worst_refiled) {
    worst_refiled = stats.cascades - last_cascades;
    worst_fired = fired - last_fired;
  }
  last_cascades = stats.cascades;
  last_fired = fired;
}


/* The quiet spell is over (a uv_timer_t of the loop fired): the burst. */
static void burst_cb(uv_timer_t* handle) {
  uvtw_stats_t stats;
  size_t i;

  (void) handle;
  uvtw_wheel_stats(wheel, &stats);
  last_cascades = stats.cascades;
  last_fired = fired;
  for (i = 0; i < burst_n; i++)
    ASSERT_EQ(
        0, uvtw_timer_start(
               &timers[i], fire_cb,
               burst_lo + (i == 0 ? 0 : 400) + next_random() % burst_span, 0));
}


/* Through libuv: the loop polls through a quiet spell of quiet_ms with the
 * wheel holding only a far, unreferenced timer; then n timers start at
 * U[lo, lo + span) ms (the first at lo, the rest from lo + 400); all fire.
 * Returns the cascades; the worst iteration goes to worst_refiled. */
static uint64_t loop_burst(uint64_t quiet_ms,
                           size_t n,
                           uint64_t lo,
                           uint64_t span) {
  uvtw_timer_t far_timer;
  uvtw_stats_t before;
  uvtw_stats_t after;
  size_t i;

  setup();
  ASSERT_EQ(0, uvtw_timer_init(wheel, &far_timer));
  ASSERT_EQ(0, uvtw_timer_start(&far_timer, never_cb, 3600000, 0));
  uvtw_timer_unref(&far_timer);
  for (i = 0; i < n; i++)
    ASSERT_EQ(0, uvtw_timer_init(wheel, &timers[i]));
  add_uv_timer(&quiet_timer);
  burst_n = n;
  burst_lo = lo;
  burst_span = span;
  fired = 0;
  worst_refiled = 0;
  worst_fired = 0;
  uvtw_wheel_stats(wheel, &before);
  on_check = count_iteration;
  ASSERT_EQ(0, uv_timer_start(&quiet_timer, burst_cb, quiet_ms, 0));
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  uvtw_wheel_stats(wheel, &after);
  ASSERT_UEQ(n, fired);
  ASSERT_EQ(0, uvtw_timer_stop(&far_timer));
  on_check = NULL;
  teardown();
  return after.cascades - before.cascades;
}


static void quiet_then_burst_loop(void) {
  ASSERT_UEQ(0, loop_burst(3000, N, 1500, 100));
  ASSERT_UEQ(0, loop_burst(500, N, 1500, 100));
}


/* The bench's stall-early scenario after a quiet spell: one timer at
 * 1.1 s, the rest U[1.5 s, 1.9 s]: no iteration re-files more than the
 * promise (here nothing: all are within level 0 of the loop's now). */
static void no_stall_loop(void) {
  ASSERT_UEQ(0, loop_burst(700, STALL_N, 1100, 400));
  fprintf(stderr, "worst iteration: %llu re-filed, %llu fired\n",
          (unsigned long long) worst_refiled, (unsigned long long) worst_fired);
  ASSERT_ULE(worst_refiled, UVTW__STALL_MAX);
}


static void fire_virtual_cb(uvtw_timer_t* timer) {
  (void) timer;
  fired++;
}


/* A virtual wheel: the clock moves 3 s with nothing due, then the burst;
 * advance to each next due time until idle. */
static void quiet_then_burst_virtual(void) {
  uvtw_options_t options;
  uvtw_stats_t stats;
  uint64_t due;
  size_t i;

  uvtw_options_init(&options);
  options.virtual_time = 1;
  setup_opts(&options);
  ASSERT_EQ(0, uvtw_wheel_advance(wheel, 3000));
  fired = 0;
  for (i = 0; i < N; i++) {
    ASSERT_EQ(0, uvtw_timer_init(wheel, &timers[i]));
    ASSERT_EQ(0, uvtw_timer_start(&timers[i], fire_virtual_cb,
                                  1500 + next_random() % 100, 0));
  }
  while ((due = uvtw_wheel_next_due(wheel)) != UINT64_MAX)
    ASSERT_EQ(0, uvtw_wheel_advance(wheel, due));
  ASSERT_UEQ(N, fired);
  uvtw_wheel_stats(wheel, &stats);
  ASSERT_UEQ(0, stats.cascades);
  teardown();
}


/* clang-format off */
static const test_case_t cases[] = {
  TEST_CASE(no_cascade_core),
  TEST_CASE(quiet_then_burst_core),
  TEST_CASE(bound_exact),
  TEST_CASE(no_stall_core),
  TEST_CASE(quiet_then_burst_loop),
  TEST_CASE(no_stall_loop),
  TEST_CASE(quiet_then_burst_virtual),
};
/* clang-format on */


int main(int argc, char** argv) {
  return run_cases(argc, argv, cases, TEST_CASE_COUNT(cases));
}
