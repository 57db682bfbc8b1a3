/* SPDX-License-Identifier: MIT */
/* The wheel object: the pure core plus the libuv handles that drive it. */

#ifndef UVTW_INTERNAL_H
#define UVTW_INTERNAL_H

#include "task.h"
#include "uvtw.h"
#include "core.h"

struct uvtw_wheel_s {
  uvtw__core_t core;
  uv_loop_t* loop;
  /* The driver is armed for the core's next wake-up, or stopped when the
   * wheel is empty; never on a fixed tick. */
  uv_timer_t driver;
  /* Re-arms the driver outside its own callback.  libuv 1.44 runs a timer
   * re-armed with 0 inside its own callback again in the same pass, which
   * would break the pass snapshot, so a pass that leaves work due now hands
   * over to this prepare handle.  Always unreferenced. */
  uv_prepare_t rearm;
  uv_async_t async; /* cross-thread wake-up; always unreferenced */
  uint64_t armed_tick; /* the driver's wake-up tick; UINT64_MAX if stopped */
  int driver_ref;      /* uv_ref state of the driver */
  int in_pass;         /* inside the driver callback */
  int closing;
  int open_handles;    /* handles not yet closed, during close */
  uvtw_close_cb close_cb;
  uint64_t driver_wakeups;
  uint64_t fired;
  uvtw__tasks_t tasks;
};

/* Arms the driver for the core's next wake-up (loop thread, outside a pass),
 * and brings its ref state up to date. */
void uvtw__driver_update(uvtw_wheel_t* wheel);

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

/* Starts the handles' closing once close has finished with the tasks. */
void uvtw__wheel_close_handles(uvtw_wheel_t* wheel);

#endif /* UVTW_INTERNAL_H */
