/* SPDX-License-Identifier: MIT */
/* The driver's rule: when the one uv_timer_t of a wheel is re-armed, and
 * when it is referenced.  Inline, because every timer start and stop asks
 * it.  driver.c arms it; the pass it runs is wheel.c's. */

#ifndef UVTW_DRIVER_H
#define UVTW_DRIVER_H

#include "internal.h"

/* What a timer re-armed with 0 inside its own callback does depends on the
 * libuv that runs, not on the one uvtw was compiled against:
 *   - libuv 1.44 to 1.47 run it again in the same pass of uv__run_timers
 *     (and spin if it keeps doing so), and 1.45 to 1.47 check whether the
 *     loop is alive right after that phase;
 *   - libuv 1.48.0 and later (libuv pull request 4250) collect the due
 *     timers before running any, so it runs in the next timers phase: the
 *     next loop iteration, as any uv_timer_t started with 0 from a timer
 *     callback does.
 * So from 1.48 on, a pass that leaves work due now re-arms the driver with
 * 0 from its own callback: the driver stays active and referenced, and the
 * work runs in the same iteration as a uv_timer_t's would.  Before 1.48 it
 * hands the re-arm to the rearm prepare handle, referenced meanwhile: the
 * work runs in the next iteration (uvtw never spins), where a uv_timer_t
 * would run in the same pass.  uv_version() of 1.48.0: */
#define UVTW__LIBUV_COLLECTS_DUE_TIMERS 0x013000

/* uv_now(loop) without a call into the shared library: uv_now returns
 * loop->time, and libuv keeps uv_loop_t's layout stable within 1.x. */
static inline uint64_t uvtw__loop_now(const uv_loop_t* loop) {
  return loop->time;
}

/* Non-zero if the libuv that runs lets the driver re-arm itself with 0. */
static inline int uvtw__driver_can_rearm_in_cb(void) {
  return uv_version() >= UVTW__LIBUV_COLLECTS_DUE_TIMERS;
}

/* Loop thread, in uvtw_wheel_new: the driver's handles (unreferenced) and
 * state; `pass_cb` is the pass the driver's timer runs. */
void uvtw__driver_init(uvtw_wheel_t* wheel, uv_timer_cb pass_cb);

/* The start of a pass, in the driver's callback: the one-shot uv_timer_t
 * is inactive now; the core collects what is due, less the starts held
 * for the next pass (uvtw__driver_due_start). */
static inline void uvtw__driver_pass_begin(uvtw_wheel_t* wheel) {
  wheel->driver.armed_tick = UVTW__DRIVER_DISARMED;
  wheel->driver.armed_first_ms = UINT64_MAX;
  wheel->driver.rearm_below = 0;
  wheel->driver.wakeups++;
  uvtw__core_expire(&wheel->core, uvtw__loop_now(wheel->loop));
  if (wheel->driver.defer_from_id != UVTW__NO_DEFER) {
    /* Started in this timers phase, before this callback: the next phase. */
    uvtw__core_defer(&wheel->core, wheel->driver.defer_from_id);
    wheel->driver.defer_from_id = UVTW__NO_DEFER;
  }
}

/* The pass's callbacks are over (the wheel may be closing). */
static inline void uvtw__driver_pass_over(uvtw_wheel_t* wheel) {
  wheel->driver.rearm_below = wheel->driver.armed_tick;
}

/* Non-zero inside a pass (the driver's callback, or a virtual wheel's
 * pass): rearm_below is 0 there and nowhere else. */
static inline int uvtw__driver_in_pass(const uvtw_wheel_t* wheel) {
  return wheel->driver.rearm_below == 0;
}

/* The end of a pass that left the wheel open: re-arms the driver for what
 * is left. */
void uvtw__driver_pass_end(uvtw_wheel_t* wheel);

/* Arms the driver for the core's next wake-up (loop thread, outside a pass),
 * and brings its ref state up to date. */
void uvtw__driver_update(uvtw_wheel_t* wheel);

/* Stops the driver (the wheel is closing). */
void uvtw__driver_disarm(uvtw_wheel_t* wheel);

/* After the core's next wake-up may have moved earlier, to tick e.  Not
 * inside a pass (rearm_below is 0 there): the end of the pass re-arms. */
static inline void uvtw__driver_earlier(uvtw_wheel_t* wheel, uint64_t e) {
  if (e < wheel->driver.rearm_below)
    uvtw__driver_update(wheel);
}

/* A timer of the wheel is about to be (re)started with its deadline reached
 * (timeout 0), outside a pass.  From libuv 1.48 on, uv__run_timers stops
 * every due timer, the driver among them, before it runs any: an armed but
 * inactive driver is held for the timers phase now running, and a
 * uv_timer_t started now would wait for the next phase.  So do this timer
 * and every timer started after it: the driver's coming pass leaves them
 * for the next one.  (Before 1.48 the driver is never seen in that state.)
 * Loop thread. */
static inline void uvtw__driver_due_start(uvtw_wheel_t* wheel) {
  if (wheel->driver.defer_from_id == UVTW__NO_DEFER &&
      wheel->driver.armed_tick != UVTW__DRIVER_DISARMED &&
      !uvtw__driver_in_pass(wheel) &&
      !uv_is_active((const uv_handle_t*) &wheel->driver.timer))
    wheel->driver.defer_from_id = wheel->core.next_order;
}

/* Non-zero if the driver is armed for expiry tick e of an active timer,
 * so that stopping or moving the timer may move the next wake-up later.
 * Never inside a pass: the pass disarms the driver first
 * (uvtw__driver_pass_begin), and nothing arms it until the pass is over
 * (uvtw__driver_earlier), whose end re-arms anyway.  The DISARMED test
 * comes last: a tick equal to it (a saturated deadline) is rare. */
static inline int uvtw__driver_waits_for(const uvtw_wheel_t* wheel,
                                         uint64_t e) {
  return e == wheel->driver.armed_tick && e != UVTW__DRIVER_DISARMED;
}

/* Non-zero if a timer of deadline d may be the one the driver is armed
 * for: every timer due at the armed tick, and also (while disarmed, with
 * armed_first_ms UINT64_MAX) a saturated deadline or one below tick_ms,
 * which the caller's slow path tells apart (uvtw__driver_waits_for).  A
 * test for the hot paths: no rounding to a tick. */
static inline int uvtw__driver_may_wait_for(const uvtw_wheel_t* wheel,
                                            uint64_t d) {
  return d - wheel->driver.armed_first_ms < wheel->core.tick_ms;
}

/* Brings the driver's ref state up to date: referenced iff an active
 * referenced timer or a drained live task exists.  The rearm handle
 * follows, so that it holds the loop while it stands in for the driver;
 * either handle counts for liveness only while it is active. */
static inline void uvtw__driver_sync_ref(uvtw_wheel_t* wheel) {
  int want;

  want = wheel->core.active_ref != 0;
  if (want == wheel->driver.ref)
    return;
  wheel->driver.ref = want;
  if (want) {
    uv_ref((uv_handle_t*) &wheel->driver.timer);
    uv_ref((uv_handle_t*) &wheel->driver.rearm);
  } else {
    uv_unref((uv_handle_t*) &wheel->driver.timer);
    uv_unref((uv_handle_t*) &wheel->driver.rearm);
  }
}

/* A timer left a slot by the timer API (a stop, or a re-file): if that
 * was the crowded slot the driver is armed for, it may hold few enough
 * timers to tighten now, and a lazy re-arm at the armed tick must not
 * leave the wake-up early.  The flag is forgotten; the next re-arm of the
 * driver (tighten) sets it again if it still holds. */
static inline void uvtw__driver_slot_left(uvtw_wheel_t* wheel) {
  wheel->driver.armed_crowded = 0;
}

#endif /* UVTW_DRIVER_H */
