/* SPDX-License-Identifier: MIT */
/* Referencing works as uv_ref/uv_unref on a uv_timer_t: timers start
 * referenced; an active referenced timer keeps uv_run(UV_RUN_DEFAULT)
 * running; an unreferenced one does not (uv_run returns without running it
 * when nothing else keeps the loop alive) but still fires while the loop
 * runs for other reasons.  An empty wheel never keeps the loop alive. */

#include "test-cases.h"
#include "timer-harness.h"

static uvtw_wheel_t* wheel2;
static int fired[4];
static uvtw_timer_t t[4];


static void count_cb(uvtw_timer_t* timer) {
  fired[timer - t]++;
}


static void reset(void) {
  int i;

  for (i = 0; i < 4; i++) {
    fired[i] = 0;
    ASSERT_EQ(0, uvtw_timer_stop(&t[i]));
    uvtw_timer_ref(&t[i]);
  }
}


/* Two wheels on one loop: t[0], t[1] and t[3] on the first, t[2] on the
 * second; and the keeper, a uv_timer_t. */
static uv_timer_t keeper;

static void start(void) {
  setup();
  wheel2 = add_wheel(NULL);
  add_uv_timer(&keeper);
  ASSERT_EQ(0, uvtw_timer_init(wheel, &t[0]));
  ASSERT_EQ(0, uvtw_timer_init(wheel, &t[1]));
  ASSERT_EQ(0, uvtw_timer_init(wheel2, &t[2]));
  ASSERT_EQ(0, uvtw_timer_init(wheel, &t[3]));
  reset();
}


static void defaults(void) {
  uvtw_timer_t x;

  start();
  ASSERT_EQ(0, uv_loop_alive(&loop)); /* two empty wheels */
  ASSERT_EQ(0, uvtw_timer_init(wheel, &x));
  ASSERT_NE(0, uvtw_timer_has_ref(&x));
  uvtw_timer_unref(&x);
  ASSERT_EQ(0, uvtw_timer_has_ref(&x));
  uvtw_timer_unref(&x); /* idempotent */
  ASSERT_EQ(0, uvtw_timer_has_ref(&x));
  uvtw_timer_ref(&x);
  ASSERT_NE(0, uvtw_timer_has_ref(&x));
  uvtw_timer_ref(&x);
  ASSERT_NE(0, uvtw_timer_has_ref(&x));
  ASSERT_EQ(0, uv_loop_alive(&loop)); /* inactive timers hold nothing */
  teardown();
}


/* An unreferenced timer does not run when nothing else keeps the loop
 * alive, even when it is long overdue; it stays active. */
static void unref_does_not_run(void) {
  start();
  uvtw_timer_unref(&t[0]);
  ASSERT_EQ(0, uvtw_timer_start(&t[0], count_cb, 10, 0));
  ASSERT_EQ(0, uvtw_timer_has_ref(&t[0]));
  ASSERT_EQ(0, uv_loop_alive(&loop));
  uv_sleep(30);
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_EQ(0, fired[0]);
  ASSERT_EQ(1, uvtw_timer_is_active(&t[0]));

  /* A repeating one neither. */
  ASSERT_EQ(0, uvtw_timer_start(&t[0], count_cb, 1, 1));
  uv_sleep(5);
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_EQ(0, fired[0]);

  /* ref makes it hold the loop: now it runs. */
  ASSERT_EQ(0, uvtw_timer_start(&t[0], count_cb, 10, 0));
  uvtw_timer_ref(&t[0]);
  ASSERT_NE(0, uvtw_timer_has_ref(&t[0]));
  ASSERT_EQ(1, uv_loop_alive(&loop));
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_EQ(1, fired[0]);
  ASSERT_EQ(0, uv_loop_alive(&loop));
  /* Still referenced after it fired. */
  ASSERT_NE(0, uvtw_timer_has_ref(&t[0]));
  teardown();
}


/* Toggling on active timers changes uv_loop_alive at once. */
static void toggle_active(void) {
  start();
  ASSERT_EQ(0, uvtw_timer_start(&t[0], count_cb, 100000, 0));
  ASSERT_EQ(0, uvtw_timer_start(&t[1], count_cb, 100000, 0));
  ASSERT_EQ(1, uv_loop_alive(&loop));
  uvtw_timer_unref(&t[0]);
  ASSERT_EQ(1, uv_loop_alive(&loop));
  uvtw_timer_unref(&t[1]);
  ASSERT_EQ(0, uv_loop_alive(&loop));
  uvtw_timer_ref(&t[1]);
  ASSERT_EQ(1, uv_loop_alive(&loop));
  ASSERT_EQ(0, uvtw_timer_stop(&t[1]));
  ASSERT_EQ(0, uv_loop_alive(&loop)); /* t[0] is active but unreferenced */
  ASSERT_EQ(0, uvtw_timer_start(&t[1], count_cb, 100000, 0));
  ASSERT_EQ(1, uv_loop_alive(&loop)); /* the ref survives stop/start */
  ASSERT_EQ(0, uvtw_timer_stop(&t[1]));
  uvtw_timer_ref(&t[0]);
  ASSERT_EQ(1, uv_loop_alive(&loop));
  ASSERT_EQ(0, uvtw_timer_stop(&t[0]));
  ASSERT_EQ(0, uv_loop_alive(&loop));

  /* A referenced timer on the second wheel, an unreferenced one on the
   * first: only the second holds the loop. */
  ASSERT_EQ(0, uvtw_timer_start(&t[2], count_cb, 100000, 0));
  uvtw_timer_unref(&t[0]);
  ASSERT_EQ(0, uvtw_timer_start(&t[0], count_cb, 100000, 0));
  ASSERT_EQ(1, uv_loop_alive(&loop));
  ASSERT_EQ(0, uvtw_timer_stop(&t[2]));
  ASSERT_EQ(0, uv_loop_alive(&loop));
  reset();
  teardown();
}


/* Unreferenced timers fire while something else keeps the loop alive: a
 * referenced uv_timer_t at 200 ms keeps it running past the unreferenced
 * uvtw timers at 10 ms (one-shot) and 5 ms (repeating). */
static int keeper_fired;

static void keeper_cb(uv_timer_t* handle) {
  (void) handle;
  keeper_fired++;
}


static void unref_fires_while_alive(void) {
  start();
  keeper_fired = 0;
  ASSERT_EQ(0, uvtw_timer_start(&t[0], count_cb, 10, 0));
  uvtw_timer_unref(&t[0]);
  uvtw_timer_unref(&t[1]);
  ASSERT_EQ(0, uvtw_timer_start(&t[1], count_cb, 5, 5));
  ASSERT_EQ(0, uvtw_timer_start(&t[2], count_cb, 10, 0)); /* 2nd wheel */
  uvtw_timer_unref(&t[2]);
  ASSERT_EQ(0, uv_loop_alive(&loop));
  ASSERT_UV_OK(uv_timer_start(&keeper, keeper_cb, 200, 0));
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_EQ(1, keeper_fired);
  ASSERT_EQ(1, fired[0]);
  ASSERT_EQ(1, fired[2]);
  ASSERT_GE(fired[1], 1);
  /* The repeating one is still active, and does not hold the loop. */
  ASSERT_EQ(1, uvtw_timer_is_active(&t[1]));
  ASSERT_EQ(0, uv_loop_alive(&loop));
  reset();
  teardown();
}


/* A repeating timer that unreferences itself in its callback lets
 * uv_run(UV_RUN_DEFAULT) return. */
static void unref_self_cb(uvtw_timer_t* timer) {
  fired[timer - t]++;
  if (fired[timer - t] == 3)
    uvtw_timer_unref(timer);
}


static void unref_in_callback(void) {
  start();
  ASSERT_EQ(0, uvtw_timer_start(&t[3], unref_self_cb, 2, 2));
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_EQ(3, fired[3]);
  ASSERT_EQ(1, uvtw_timer_is_active(&t[3]));
  ASSERT_EQ(0, uvtw_timer_has_ref(&t[3]));
  reset();
  teardown();
}


/* clang-format off */
static const test_case_t cases[] = {
  TEST_CASE(defaults),
  TEST_CASE(unref_does_not_run),
  TEST_CASE(toggle_active),
  TEST_CASE(unref_fires_while_alive),
  TEST_CASE(unref_in_callback),
};
/* clang-format on */


int main(int argc, char** argv) {
  return run_cases(argc, argv, cases, TEST_CASE_COUNT(cases));
}
