/* SPDX-License-Identifier: MIT */
/* A restart to a later deadline only rewrites the timer (the lazy re-arm),
 * also for the timer the driver waits for, and the driver's wake-up is
 * exact again by the loop's next poll where docs/internals.md ("Wake-ups")
 * says it is:
 *   awaited_alone   nobody else at the armed tick: lazy, and after the
 *                   prepare phase the wake-up is the next timer's;
 *   crowded_slot    the armed slot holds more than 8 timers (too many to
 *                   tighten): lazy, and the wake-up stays at the slot's old
 *                   minimum, early, never late;
 *   shared_tick     a neighbour is due at the armed tick: lazy, and the
 *                   wake-up stays right; once the neighbour stops, it is
 *                   the next timer's.
 * Right after such a call the driver may still be early (never late). */

#include <stdint.h>

#include <uv.h>

#include "internal.h"
#include "test.h"

#define NTIMERS 10 /* more than UVTW__TIGHTEN_MAX */

static uv_loop_t loop;
static uvtw_wheel_t* wheel;
static uvtw_timer_t timers[NTIMERS];
static uvtw_timer_t helper;
static uint64_t base; /* a timeout >= 4096 whose tick begins a level-1 block */
static uint64_t t0;   /* uv_now when base was chosen */


static void never_cb(uvtw_timer_t* timer) {
  (void) timer;
  ASSERT(0 && "must not run");
}


static void stop_all(void) {
  int i;

  for (i = 0; i < NTIMERS; i++)
    ASSERT_EQ(0, uvtw_timer_stop(&timers[i]));
}


/* Starts timers[i] for t0 + base + offset (ms). */
static void start_at(int i, uint64_t offset) {
  ASSERT_EQ(0, uvtw_timer_start(&timers[i], never_cb,
                                t0 + base + offset - uv_now(&loop), 0));
}


/* Restarts timers[i] for t0 + base + offset, and checks that it stayed
 * where it was filed. */
static void restart_lazily(int i, uint64_t offset) {
  struct uvtw__link link;

  link = timers[i].link_;
  start_at(i, offset);
  ASSERT_PTR_EQ(link.next, timers[i].link_.next);
  ASSERT_PTR_EQ(link.prev, timers[i].link_.prev);
}


/* The driver is armed for t0 + base + offset. */
static void assert_armed_at(uint64_t offset) {
  ASSERT_EQ((int64_t) (t0 + base + offset - uv_now(&loop)),
            uv_backend_timeout(&loop));
}


/* The loop's prepare phase re-arms the driver: after one run that does
 * not block, the wake-up is t0 + base + offset. */
static void assert_wakes_at(uint64_t offset) {
  ASSERT_EQ(1, uv_run(&loop, UV_RUN_NOWAIT));
  assert_armed_at(offset);
}


static void awaited_alone(void) {
  start_at(0, 0);
  start_at(1, 3);
  assert_armed_at(0);
  restart_lazily(0, 4000);
  /* Early until the prepare phase, never late. */
  assert_armed_at(0);
  assert_wakes_at(3);
  stop_all();
}


static void crowded_slot(void) {
  int i;

  /* timers[0] alone at `base`, the others one tick each after it: one
   * level-1 slot of 10, with nobody sharing timers[0]'s tick. */
  for (i = 0; i < NTIMERS; i++)
    start_at(i, (uint64_t) i);
  assert_armed_at(0);
  restart_lazily(0, 4000);
  /* The re-arm gives up on the slot of 10: early (timers[1] is due at
   * base + 1), never late. */
  assert_wakes_at(0);
  stop_all();
}


static void shared_tick(void) {
  start_at(0, 0);
  start_at(1, 0);
  start_at(2, 3);
  assert_armed_at(0);
  restart_lazily(0, 4000);
  assert_wakes_at(0);
  /* The neighbour leaves: now the driver must move, exactly. */
  ASSERT_EQ(0, uvtw_timer_stop(&timers[1]));
  assert_wakes_at(3);
  stop_all();
}


int main(void) {
  int i;

  ASSERT_UV_OK(uv_loop_init(&loop));
  ASSERT_EQ(0, uvtw_wheel_new(&loop, NULL, &wheel));
  for (i = 0; i < NTIMERS; i++)
    ASSERT_EQ(0, uvtw_timer_init(wheel, &timers[i]));
  ASSERT_EQ(0, uvtw_timer_init(wheel, &helper));
  /* uv_backend_timeout is 0 until the loop has run once. */
  ASSERT_EQ(0, uvtw_timer_start(&helper, never_cb, 60000, 0));
  ASSERT_EQ(1, uv_run(&loop, UV_RUN_NOWAIT));
  ASSERT_EQ(0, uvtw_timer_stop(&helper));

  t0 = uv_now(&loop);
  base = 4096 + (1024 - (t0 + 4096) % 1024) % 1024;
  awaited_alone();
  crowded_slot();
  shared_tick();

  ASSERT_EQ(0, uvtw_wheel_close(wheel, NULL));
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_EQ(0, uv_loop_close(&loop));
  return 0;
}
