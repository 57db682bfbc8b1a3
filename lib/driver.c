/* SPDX-License-Identifier: MIT */
/* The driver: the one uv_timer_t that runs the core on a libuv loop.
 *
 * The driver is armed for uvtw__core_next_tick(), never on a fixed tick.
 * Starting a timer earlier than the armed tick re-arms it at once, and so
 * does stopping or moving the timer it is armed for, so uv_backend_timeout()
 * tells the next wake-up.  That wake-up is exact after starts; it may be
 * early (never late) when a slot's minimum went stale because a timer left
 * it, or when a lazily re-armed timer's old slot comes due: then the pass
 * just re-files (cascades) and re-arms.  A pass collects what is due, then
 * runs it; a callback may start, stop or restart any timer, or close the
 * wheel.  Work that the pass leaves due now runs in the next loop
 * iteration, on every libuv: how the driver gets there depends on the
 * libuv that runs (driver.h). */

#include "driver.h"


static void driver_cb(uv_timer_t* driver);
static void rearm_cb(uv_prepare_t* prepare);


static void arm(uvtw_wheel_t* wheel, uint64_t tick) {
  uint64_t due_ms;
  uint64_t now;

  due_ms = uvtw__core_ms_of(&wheel->core, tick);
  now = uvtw__loop_now(wheel->loop);
  /* Cannot fail: the driver is initialised and cb is not NULL. */
  uv_timer_start(&wheel->driver, driver_cb, due_ms > now ? due_ms - now : 0,
                 0);
  wheel->armed_tick = tick;
  wheel->defer_from_id = UVTW__NO_DEFER; /* libuv no longer holds the driver */
}


void uvtw__driver_disarm(uvtw_wheel_t* wheel) {
  if (wheel->armed_tick != UVTW__DRIVER_DISARMED) {
    uv_timer_stop(&wheel->driver);
    wheel->armed_tick = UVTW__DRIVER_DISARMED;
    wheel->defer_from_id = UVTW__NO_DEFER;
  }
}


/* Arms the driver for tick `next` (UVTW__NO_TICK: stops it). */
static void arm_for(uvtw_wheel_t* wheel, uint64_t next, int crowded) {
  wheel->armed_crowded = crowded;
  if (next == UVTW__NO_TICK)
    uvtw__driver_disarm(wheel);
  else if (next != wheel->armed_tick)
    arm(wheel, next);
  uvtw__driver_sync_ref(wheel);
}


void uvtw__driver_update(uvtw_wheel_t* wheel) {
  uint64_t next;
  int crowded;

  next = uvtw__core_tighten(&wheel->core, &crowded);
  arm_for(wheel, next, crowded);
}


static void rearm_cb(uv_prepare_t* prepare) {
  uvtw_wheel_t* wheel;

  wheel = prepare->data;
  uv_prepare_stop(prepare);
  uvtw__driver_update(wheel);
}


static void driver_cb(uv_timer_t* driver) {
  uvtw_wheel_t* wheel;
  uvtw_timer_t* timer;
  uint64_t next;
  int crowded;

  wheel = driver->data;
  /* A one-shot uv_timer_t: inactive now that it runs its callback. */
  wheel->armed_tick = UVTW__DRIVER_DISARMED;
  wheel->driver_wakeups++;
  uvtw__core_expire(&wheel->core, uvtw__loop_now(wheel->loop));
  if (wheel->defer_from_id != UVTW__NO_DEFER) {
    /* Started in this timers phase, before this callback: the next phase. */
    uvtw__core_defer(&wheel->core, wheel->defer_from_id);
    wheel->defer_from_id = UVTW__NO_DEFER;
  }
  wheel->in_pass = 1;
  while (!wheel->closing &&
         (timer = uvtw__core_pop_due(&wheel->core,
                                     uvtw__loop_now(wheel->loop)))) {
    wheel->timers_fired += !uvtw__task_owns(timer);
    timer->cb_(timer);
  }
  wheel->in_pass = 0;
  uvtw__tasks_flush(wheel); /* nodes of tasks that ended in the pass */
  uvtw__core_validate(&wheel->core);
  if (wheel->closing)
    return;
  next = uvtw__core_tighten(&wheel->core, &crowded);
  if (!wheel->rearm_in_cb && next <= wheel->core.now_tick) {
    /* Work is due already, and this libuv would run a driver re-armed with
     * 0 again in this same pass: the prepare handle arms it for the next
     * iteration, and holds the loop until then if the work is referenced. */
    uv_prepare_start(&wheel->rearm, rearm_cb);
    uvtw__driver_sync_ref(wheel);
  } else {
    /* From libuv 1.48 on, a re-arm with 0 runs in the next timers phase. */
    arm_for(wheel, next, crowded);
  }
}
