/* SPDX-License-Identifier: MIT */
/* Referencing works as uv_ref/uv_unref on a uv_timer_t: timers start
 * referenced; an active referenced timer keeps uv_run(UV_RUN_DEFAULT)
 * running; an unreferenced one does not (uv_run returns without running it
 * when nothing else keeps the loop alive) but still fires while the loop
 * runs for other reasons.  An empty wheel never keeps the loop alive. */

#include <stdint.h>

#include <uv.h>

#include "test.h"
#include "uvtw.h"

static uv_loop_t loop;
static uvtw_wheel_t* wheel;
static uvtw_wheel_t* wheel2;
static int close_cb_called;
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


static void defaults(void) {
  uvtw_timer_t x;

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
}


/* An unreferenced timer does not run when nothing else keeps the loop
 * alive, even when it is long overdue; it stays active. */
static void unref_does_not_run(void) {
  reset();
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
}


/* Toggling on active timers changes uv_loop_alive at once. */
static void toggle_active(void) {
  reset();
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
}


/* Unreferenced timers fire while something else keeps the loop alive: a
 * referenced uv_timer_t at 200 ms keeps it running past the unreferenced
 * uvtw timers at 10 ms (one-shot) and 5 ms (repeating). */
static uv_timer_t keeper;
static int keeper_fired;

static void keeper_cb(uv_timer_t* handle) {
  (void) handle;
  keeper_fired++;
}


static void unref_fires_while_alive(void) {
  reset();
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
}


/* A repeating timer that unreferences itself in its callback lets
 * uv_run(UV_RUN_DEFAULT) return. */
static void unref_self_cb(uvtw_timer_t* timer) {
  fired[timer - t]++;
  if (fired[timer - t] == 3)
    uvtw_timer_unref(timer);
}


static void unref_in_callback(void) {
  reset();
  ASSERT_EQ(0, uvtw_timer_start(&t[3], unref_self_cb, 2, 2));
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_EQ(3, fired[3]);
  ASSERT_EQ(1, uvtw_timer_is_active(&t[3]));
  ASSERT_EQ(0, uvtw_timer_has_ref(&t[3]));
  reset();
}


static void wheel_close_cb(uvtw_wheel_t* w) {
  ASSERT(w == wheel || w == wheel2);
  close_cb_called++;
}


int main(void) {
  ASSERT_UV_OK(uv_loop_init(&loop));
  ASSERT_EQ(0, uvtw_wheel_new(&loop, NULL, &wheel));
  ASSERT_EQ(0, uvtw_wheel_new(&loop, NULL, &wheel2));
  ASSERT_UV_OK(uv_timer_init(&loop, &keeper));
  ASSERT_EQ(0, uvtw_timer_init(wheel, &t[0]));
  ASSERT_EQ(0, uvtw_timer_init(wheel, &t[1]));
  ASSERT_EQ(0, uvtw_timer_init(wheel2, &t[2]));
  ASSERT_EQ(0, uvtw_timer_init(wheel, &t[3]));

  defaults();
  unref_does_not_run();
  toggle_active();
  unref_fires_while_alive();
  unref_in_callback();

  uv_close((uv_handle_t*) &keeper, NULL);
  ASSERT_EQ(0, uvtw_wheel_close(wheel, wheel_close_cb));
  ASSERT_EQ(0, uvtw_wheel_close(wheel2, wheel_close_cb));
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_EQ(2, close_cb_called);
  ASSERT_EQ(0, uv_loop_close(&loop));
  return 0;
}
