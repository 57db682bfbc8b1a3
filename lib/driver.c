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
#include "uvtw-assert.h"


static void rearm_cb(uv_prepare_t* prepare);


static void arm(uvtw_wheel_t* wheel, uint64_t tick) {
  uint64_t due_ms;
  uint64_t now;

  due_ms = uvtw__core_ms_of(&wheel->core, tick);
  now = uvtw__loop_now(wheel->loop);
  /* Cannot fail: the driver is initialised and cb is not NULL. */
  uv_timer_start(&wheel->driver.timer, wheel->driver.pass_cb,
                 due_ms > now ? due_ms - now : 0, 0);
  wheel->driver.armed_tick = tick;
  /* No overflow: a timer's tick is at most UINT64_MAX / tick_ms + 1. */
  wheel->driver.armed_first_ms = (tick - 1) * wheel->core.tick_ms + 1;
  wheel->driver.rearm_below = tick; /* never inside a pass */
  /* libuv no longer holds the driver. */
  wheel->driver.defer_from_id = UVTW__NO_DEFER;
}


void uvtw__driver_disarm(uvtw_wheel_t* wheel) {
  if (wheel->driver.armed_tick != UVTW__DRIVER_DISARMED) {
    uv_timer_stop(&wheel->driver.timer);
    wheel->driver.armed_tick = UVTW__DRIVER_DISARMED;
    wheel->driver.armed_first_ms = UINT64_MAX;
    if (!uvtw__driver_in_pass(wheel))
      wheel->driver.rearm_below = UVTW__DRIVER_DISARMED;
    wheel->driver.defer_from_id = UVTW__NO_DEFER;
  }
}


/* Arms the driver for tick `next` (UVTW__NO_TICK: stops it). */
static void arm_for(uvtw_wheel_t* wheel, uint64_t next, int crowded) {
  wheel->driver.armed_crowded = crowded;
  if (next == UVTW__NO_TICK)
    uvtw__driver_disarm(wheel);
  else if (next != wheel->driver.armed_tick)
    arm(wheel, next);
  uvtw__driver_sync_ref(wheel);
}


void uvtw__driver_update(uvtw_wheel_t* wheel) {
  uint64_t next;
  int crowded;

  /* A virtual wheel's time moves only in uvtw_wheel_advance: its driver is
   * never armed (so its timers neither wake nor hold the loop), and
   * armed_tick stays DISARMED, so no pass is ever deferred for it. */
  if (wheel->virtual_time)
    return;
  next = uvtw__core_tighten(&wheel->core, &crowded);
  arm_for(wheel, next, crowded);
}


static void rearm_cb(uv_prepare_t* prepare) {
  uvtw_wheel_t* wheel;

  wheel = prepare->data;
  uv_prepare_stop(prepare);
  uvtw__driver_update(wheel);
}


void uvtw__driver_pass_end(uvtw_wheel_t* wheel) {
  uint64_t next;
  int crowded;

  next = uvtw__core_tighten(&wheel->core, &crowded);
  if (!wheel->driver.rearm_in_cb && next <= wheel->core.now_tick) {
    /* Work is due already, and this libuv would run a driver re-armed with
     * 0 again in this same pass: the prepare handle arms it for the next
     * iteration, and holds the loop until then if the work is referenced. */
    uv_prepare_start(&wheel->driver.rearm, rearm_cb);
    uvtw__driver_sync_ref(wheel);
  } else {
    /* From libuv 1.48 on, a re-arm with 0 runs in the next timers phase. */
    arm_for(wheel, next, crowded);
  }
}


void uvtw__driver_init(uvtw_wheel_t* wheel, uv_timer_cb pass_cb) {
  uvtw__driver_t* driver;
  int err;

  driver = &wheel->driver;
  driver->armed_tick = UVTW__DRIVER_DISARMED;
  driver->armed_first_ms = UINT64_MAX;
  driver->rearm_below = UVTW__DRIVER_DISARMED;
  driver->armed_crowded = 0;
  driver->rearm_in_cb = uvtw__driver_can_rearm_in_cb();
  driver->defer_from_id = UVTW__NO_DEFER;
  driver->wakeups = 0;
  driver->pass_cb = pass_cb;
  /* Neither can fail on unix. */
  err = uv_timer_init(wheel->loop, &driver->timer);
  UVTW__ASSERT(err == 0);
  err = uv_prepare_init(wheel->loop, &driver->rearm);
  UVTW__ASSERT(err == 0);
  driver->timer.data = wheel;
  driver->rearm.data = wheel;
  uv_unref((uv_handle_t*) &driver->timer); /* referenced only while needed */
  uv_unref((uv_handle_t*) &driver->rearm);
  driver->ref = 0;
}
