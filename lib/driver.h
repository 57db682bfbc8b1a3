/* SPDX-License-Identifier: MIT */
/* The driver's rule: when the one uv_timer_t of a wheel is re-armed, and
 * when it is referenced.  Inline, because every timer start and stop asks
 * it.  driver.c holds the driver's callback. */

#ifndef UVTW_DRIVER_H
#define UVTW_DRIVER_H

#include "internal.h"

/* Arms the driver for the core's next wake-up (loop thread, outside a pass),
 * and brings its ref state up to date. */
void uvtw__driver_update(uvtw_wheel_t* wheel);

/* Stops the driver (the wheel is closing). */
void uvtw__driver_disarm(uvtw_wheel_t* wheel);

/* After the core's next wake-up may have moved earlier, to tick e. */
static inline void uvtw__driver_earlier(uvtw_wheel_t* wheel, uint64_t e) {
  if (e < wheel->armed_tick && !wheel->in_pass)
    uvtw__driver_update(wheel);
}

/* Non-zero if the driver is armed for this active timer's expiry tick, so
 * that stopping or moving it may move the next wake-up later.  Never
 * inside a pass: the end of the pass re-arms anyway. */
static inline int uvtw__driver_waits_for(const uvtw_wheel_t* wheel,
                                         const uvtw_timer_t* timer) {
  return timer->link_.next != NULL && !wheel->in_pass &&
         wheel->armed_tick != UINT64_MAX &&
         uvtw__core_tick_of(&wheel->core, timer->deadline_) ==
             wheel->armed_tick;
}

/* Brings the driver's ref state up to date: referenced iff an active
 * referenced timer or a drained live task exists. */
static inline void uvtw__driver_sync_ref(uvtw_wheel_t* wheel) {
  int want;

  want = wheel->core.active_ref != 0;
  if (want == wheel->driver_ref)
    return;
  wheel->driver_ref = want;
  if (want)
    uv_ref((uv_handle_t*) &wheel->driver);
  else
    uv_unref((uv_handle_t*) &wheel->driver);
}

#endif /* UVTW_DRIVER_H */
