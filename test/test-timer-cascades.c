/* SPDX-License-Identifier: MIT */
/* Short timeouts never cascade: a timer due within UVTW__L0_SLOTS ticks of
 * the wheel's now expires from level 0 without being moved, whatever the
 * phase of the clock, also when the wheel's now lags the loop's after an
 * idle period by less than level 0 less the timeout (and moves down once
 * when it lags more).  Checked on the pure core at many phases (with the full
 * check after each pass), then through libuv with stats.cascades: 100,000
 * timers at U[1, 1000] ms, 0 cascades, started at several phases, also
 * after the loop slept. */

#include <string.h>

#include <uv.h>

#include "core.h"
#include "test-cases.h"
#include "timer-harness.h"

#define N 100000

static uvtw_timer_t timers[N];
static uint64_t rng = 0x75767477;


static uint64_t next_random(void) {
  return test_splitmix64(&rng);
}


/* On the core: start N timers at now + U[1, max] (ms, tick 1), run passes
 * in random steps until all fired; returns the cascades. */
static uint64_t core_run(uint64_t start_ms, uint64_t lag_ms, uint64_t max) {
  static uvtw__core_t core;
  uint64_t now;
  uint64_t fired;
  int passes;
  int i;

  memset(timers, 0, sizeof(timers));
  uvtw__core_init(&core, 1, start_ms);
  /* The loop's clock ran ahead while the wheel had no pass. */
  now = start_ms + lag_ms;
  for (i = 0; i < N; i++)
    uvtw__core_start(&core, &timers[i], now + 1 + next_random() % max);
  ASSERT_EQ(0, uvtw__core_check(&core, stderr));
  fired = 0;
  for (passes = 1; fired < N; passes++) {
    now += 1 + next_random() % 37;
    uvtw__core_expire(&core, now);
    while (uvtw__core_pop_due(&core, &now) != NULL)
      fired++;
    if (passes % 8 == 0) /* the check is O(N) */
      ASSERT_EQ(0, uvtw__core_check(&core, stderr));
  }
  ASSERT_EQ(0, uvtw__core_check(&core, stderr));
  return core.cascades;
}


static void on_core(void) {
  static const uint64_t phases[] = {
      0,    1,    511,   1023,  1024,      1025,
      2047, 2048, 65535, 65536, 123456789, ((uint64_t) 1 << 40) - 3};
  size_t i;

  for (i = 0; i < sizeof(phases) / sizeof(phases[0]); i++) {
    ASSERT_UEQ(0, core_run(phases[i], 0, 1000));
    ASSERT_UEQ(0, core_run(phases[i], 1000, 1000));
    /* Level 0 ends 2047 ticks after the wheel's now: a timer started
     * later than that moves down once, no more. */
    ASSERT_ULE(core_run(phases[i], 5000, 1000), N);
    ASSERT_UEQ(0, core_run(phases[i], 7, UVTW__L0_SLOTS - 1 - 7));
  }
  /* The bound is exact: one tick more than level 0 holds is filed above
   * it, and moved down (here by the pre-cascade of a pass in the block
   * before its own: a slot of 2 is crowded with the chunk lowered to 1). */
  memset(timers, 0, sizeof(timers));
  {
    static uvtw__core_t core;

    uvtw__core_init(&core, 1, 0);
    core.precascade_chunk = 1;
    uvtw__core_start(&core, &timers[0], UVTW__L0_SLOTS - 1);
    uvtw__core_start(&core, &timers[1], UVTW__L0_SLOTS);
    uvtw__core_start(&core, &timers[2], UVTW__L0_SLOTS + 1);
    uvtw__core_expire(&core, UVTW__L0_SLOTS - 100);
    ASSERT_UEQ(2, core.cascades);
    ASSERT_EQ(0, uvtw__core_check(&core, stderr));
    uvtw__core_expire(&core, UVTW__L0_SLOTS);
    ASSERT_PTR_EQ(&timers[0],
                  uvtw__core_pop_due(&core, &(uint64_t){UVTW__L0_SLOTS}));
    ASSERT_PTR_EQ(&timers[1],
                  uvtw__core_pop_due(&core, &(uint64_t){UVTW__L0_SLOTS}));
    ASSERT_UEQ(2, core.cascades);
  }
}


static uint64_t fired;


static void fire_cb(uvtw_timer_t* timer) {
  (void) timer;
  fired++;
}


/* Through libuv: after sleeping sleep_ms with the loop idle (the wheel's
 * now then lags the loop's), N timers at U[1, 1000] ms: each fires; none
 * is moved down if every one is due within level 0 of the wheel's now
 * (the sleep may overrun on a loaded machine: by the lag measured), and
 * none more than once otherwise. */
static void on_loop(int sleep_ms) {
  uvtw_stats_t before;
  uvtw_stats_t after;
  uint64_t cascades;
  uint64_t created;
  int i;

  setup();
  created = uv_now(&loop); /* the wheel's now */
  for (i = 0; i < N; i++)
    ASSERT_EQ(0, uvtw_timer_init(wheel, &timers[i]));
  uv_sleep(sleep_ms);
  uv_update_time(&loop);
  cascades = uv_now(&loop) - created + 1000 < UVTW__L0_SLOTS ? 0 : N;
  uvtw_wheel_stats(wheel, &before);
  fired = 0;
  for (i = 0; i < N; i++)
    ASSERT_EQ(
        0, uvtw_timer_start(&timers[i], fire_cb, 1 + next_random() % 1000, 0));
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  uvtw_wheel_stats(wheel, &after);
  ASSERT_UEQ(N, fired);
  ASSERT_ULE(after.cascades - before.cascades, cascades);
  teardown();
}


static void on_loop_now(void) {
  on_loop(0);
}


/* After the loop slept 333 ms: every timer is still due within level 0
 * of the wheel's now (unless the sleep overran by 700 ms). */
static void on_loop_after_333(void) {
  on_loop(333);
}


static void on_loop_after_1500(void) {
  /* Those due beyond level 0 of the wheel's now move down once. */
  on_loop(1500);
}


/* clang-format off */
static const test_case_t cases[] = {
  TEST_CASE(on_core),
  TEST_CASE(on_loop_now),
  TEST_CASE(on_loop_after_333),
  TEST_CASE(on_loop_after_1500),
};
/* clang-format on */


int main(int argc, char** argv) {
  return run_cases(argc, argv, cases, TEST_CASE_COUNT(cases));
}
