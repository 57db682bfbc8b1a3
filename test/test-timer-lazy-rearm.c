/* SPDX-License-Identifier: MIT */
/* When a restart to a later deadline only rewrites the timer (the lazy
 * re-arm), also for the timer the driver waits for, and that the driver's
 * wake-up stays exact where docs/timers.md ("Wake-ups") says it does:
 *   crowded_slot    the driver was armed for a slot of more than 8 timers
 *                   (too many to tighten): the timer it waits for is re-armed
 *                   lazily, its list links untouched; the wake-up stays at
 *                   the slot's old minimum, early, never late;
 *   alone_at_tick   a slot of 2 with nobody else at the armed tick: the
 *                   timer is re-filed and the wake-up moves exactly to the
 *                   next deadline;
 *   shared_tick     a neighbour is due at the armed tick: lazy, and the
 *                   wake-up stays right.
 * Outside the loop uv_now does not move, so every value is exact. */

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


static void never_cb(uvtw_timer_t* timer) {
  (void) timer;
  ASSERT(0 && "must not run");
}


static void stop_all(void) {
  int i;

  for (i = 0; i < NTIMERS; i++)
    ASSERT_EQ(0, uvtw_timer_stop(&timers[i]));
}


static void crowded_slot(void) {
  struct uvtw__link link;
  uvtw_stats_t before;
  uvtw_stats_t after;
  int i;

  /* timers[0] alone at `base`, the others one tick each after it: one
   * level-1 slot of 10, with nobody sharing timers[0]'s tick. */
  for (i = 0; i < NTIMERS; i++)
    ASSERT_EQ(0, uvtw_timer_start(&timers[i], never_cb, base + i, 0));
  /* An earlier timer stopped again: the driver re-arms with a tighten,
   * which gives up on the slot of 10. */
  ASSERT_EQ(0, uvtw_timer_start(&helper, never_cb, 100, 0));
  ASSERT_EQ(100, uv_backend_timeout(&loop));
  ASSERT_EQ(0, uvtw_timer_stop(&helper));
  ASSERT_EQ((int64_t) base, uv_backend_timeout(&loop));
  ASSERT_EQ(1, wheel->core.crowded);

  uvtw_wheel_stats(wheel, &before);
  link = timers[0].link_;
  ASSERT_EQ(0, uvtw_timer_start(&timers[0], never_cb, base + 4000, 0));
  /* Lazy: the timer did not move, nothing was re-filed. */
  ASSERT_PTR_EQ(link.next, timers[0].link_.next);
  ASSERT_PTR_EQ(link.prev, timers[0].link_.prev);
  uvtw_wheel_stats(wheel, &after);
  ASSERT_UEQ(before.cascades, after.cascades);
  ASSERT_UEQ(base + 4000, uvtw_timer_get_due_in(&timers[0]));
  /* Early (timers[1] is due at base + 1), never late. */
  ASSERT_EQ((int64_t) base, uv_backend_timeout(&loop));
  stop_all();
}


static void alone_at_tick(void) {
  ASSERT_EQ(0, uvtw_timer_start(&timers[0], never_cb, base, 0));
  ASSERT_EQ(0, uvtw_timer_start(&timers[1], never_cb, base + 3, 0));
  ASSERT_EQ((int64_t) base, uv_backend_timeout(&loop));
  ASSERT_EQ(0, wheel->core.crowded);
  ASSERT_EQ(0, uvtw_timer_start(&timers[0], never_cb, base + 4000, 0));
  ASSERT_EQ((int64_t) base + 3, uv_backend_timeout(&loop));
  stop_all();
}


static void shared_tick(void) {
  struct uvtw__link link;

  ASSERT_EQ(0, uvtw_timer_start(&timers[0], never_cb, base, 0));
  ASSERT_EQ(0, uvtw_timer_start(&timers[1], never_cb, base, 0));
  ASSERT_EQ(0, uvtw_timer_start(&timers[2], never_cb, base + 3, 0));
  ASSERT_EQ((int64_t) base, uv_backend_timeout(&loop));
  link = timers[0].link_;
  ASSERT_EQ(0, uvtw_timer_start(&timers[0], never_cb, base + 4000, 0));
  ASSERT_PTR_EQ(link.next, timers[0].link_.next);
  ASSERT_PTR_EQ(link.prev, timers[0].link_.prev);
  ASSERT_EQ((int64_t) base, uv_backend_timeout(&loop));
  /* The neighbour leaves: now the driver must move, exactly. */
  ASSERT_EQ(0, uvtw_timer_stop(&timers[1]));
  ASSERT_EQ((int64_t) base + 3, uv_backend_timeout(&loop));
  stop_all();
}


int main(void) {
  uint64_t now;
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

  now = uv_now(&loop);
  base = 4096 + (1024 - (now + 4096) % 1024) % 1024;
  crowded_slot();
  alone_at_tick();
  shared_tick();

  ASSERT_EQ(0, uvtw_wheel_close(wheel, NULL));
  ASSERT_EQ(0, uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_EQ(0, uv_loop_close(&loop));
  return 0;
}
