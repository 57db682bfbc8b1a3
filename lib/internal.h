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

/* Starts the handles' closing once close has finished with the tasks. */
void uvtw__wheel_close_handles(uvtw_wheel_t* wheel);

#endif /* UVTW_INTERNAL_H */
