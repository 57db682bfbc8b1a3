/* SPDX-License-Identifier: MIT */
/* The driver: the one uv_timer_t of a wheel, armed for the core's next
 * wake-up or stopped when the wheel is empty, never on a fixed tick; when
 * it is referenced; and the pass it runs.  Loop thread only.
 *
 * Only driver.c writes the fields of uvtw__driver_t; the inline functions
 * below read them, for the hot paths of timer.c.  driver.c is also the one
 * file that depends on the libuv release that runs (how its timers phase
 * treats a timer re-armed from its own callback) and on uv_loop_t's
 * layout (where the loop's time is). */

#ifndef UVTW_DRIVER_H
#define UVTW_DRIVER_H

#include "core.h"

/* armed_tick of a stopped driver.  Equal to UVTW__NO_TICK on purpose: a
 * tick compared with it is never the armed one, and "is e earlier than the
 * armed tick?" is true for every e while nothing is armed. */
#define UVTW__DRIVER_DISARMED UVTW__NO_TICK
/* defer_from_id when no start is held for the next pass: above every id. */
#define UVTW__NO_DEFER UINT64_MAX

typedef struct {
  /* The clock the timers read: the loop's time (driver.c reads where
   * uv_now() does), or a virtual wheel's own.  Two loads, where uv_now()
   * would be a call into the shared library on every start. */
  const uint64_t* now;
  uv_timer_t timer;
  /* Re-arms the driver before the loop next polls (driver.c), after the
   * timer it waited for left its tick, and after a pass on libuv before
   * 1.48.  Started only while such a re-arm is pending (rearm_pending);
   * its ref state follows the driver's, so it holds the loop meanwhile. */
  uv_prepare_t rearm;
  int rearm_pending;
  /* The driver's wake-up tick; UVTW__DRIVER_DISARMED while it is stopped,
   * and inside a pass. */
  uint64_t armed_tick;
  /* The first ms whose tick is armed_tick, UINT64_MAX while disarmed: a
   * deadline d is due at the armed tick iff d - armed_first_ms < tick_ms,
   * one compare without the tick's rounding (uvtw__core_may_expire_in).
   * Derived from armed_tick, and kept: computed at each call instead, a
   * stop takes 51.7 instructions where it takes 42.7, a lazy re-arm 74.1
   * where it takes 55.1 (--scenario calls). */
  uint64_t armed_first_ms;
  int never_arms;  /* a virtual wheel's driver: never armed */
  int in_pass;     /* inside uvtw__pass */
  int ref;         /* uv_ref state of the timer (and of rearm) */
  int rearm_in_cb; /* the driver may re-arm itself with 0 (driver.c) */
  /* The first order that the next pass leaves for the pass after it
   * (uvtw__driver_due_start); UVTW__NO_DEFER if none. */
  uint64_t defer_from_id;
  uint64_t wakeups;
  /* Runs after the callbacks of every pass: the task half's flush, given
   * by wheel.c, which alone knows that half. */
  void (*after_pass)(uvtw_wheel_t* wheel);
  /* The checked build (UVTW_CHECK_THREADS; the fields are there in every
   * build, so that the layout does not depend on it): the thread the
   * driver's callbacks last ran on, which runs the loop; unknown (any
   * thread passes) until one has run, so that a wheel may be made and set
   * up on one thread and its loop run on another.  Atomics: a check on a
   * wrong thread races by definition. */
  _Atomic(uv_thread_t) loop_thread;
  _Atomic int loop_thread_known;
} uvtw__driver_t;

/* The state of a driver that was never armed, outside a pass (a virtual
 * wheel's, but for never_arms): the core's model test restarts timers
 * against it. */
#define UVTW__DRIVER_IDLE                                                      \
 {                                                                             \
  .armed_tick = UVTW__DRIVER_DISARMED, .armed_first_ms = UINT64_MAX,           \
  .defer_from_id = UVTW__NO_DEFER                                              \
 }


/* Loop thread, in uvtw_wheel_new: the driver's clock, handles
 * (unreferenced) and state.  Aborts if the loop's time is not where
 * uv_now() reads it (a libuv whose uv_loop_t differs from the one uvtw was
 * compiled against). */
void uvtw__driver_init(uvtw_wheel_t* wheel,
                       void (*after_pass)(uvtw_wheel_t* wheel));

/* One pass at the wheel's clock: collects what is due, runs the callbacks
 * in libuv's order, counting each one's lateness (none on a virtual
 * wheel), then driver->after_pass.  The driver's callback runs it and
 * re-arms the driver after it; uvtw_wheel_advance runs it on a virtual
 * wheel, whose driver is never armed.  A callback may start, stop or
 * restart any timer, or close the wheel, which ends the pass. */
void uvtw__pass(uvtw_wheel_t* wheel);

/* Adds delta (1 or -1) to the lateness bucket of the timer the pass
 * popped last: the pass counts each timer it pops as run, and a task that
 * does not run after all is taken off again. */
void uvtw__driver_count_late(uvtw_wheel_t* wheel, int delta);

/* Arms the driver for the core's next wake-up (outside a pass), and brings
 * its ref state up to date. */
void uvtw__driver_update(uvtw_wheel_t* wheel);

/* A timer was filed at expiry tick e: arms the driver for e if that is
 * earlier than the armed tick (uvtw__driver_moves_for), and brings its
 * ref state up to date.  No scan: the armed tick is never later than the
 * wheel's earliest work. */
void uvtw__driver_earlier(uvtw_wheel_t* wheel, uint64_t e);

/* A timer of expiry tick e was stopped or moved: if the driver waits for
 * e, it re-arms before the loop next polls (the `rearm` handle), for the
 * wheel's next work then (until then it may wake early, never late); and
 * its ref state is brought up to date. */
void uvtw__driver_left(uvtw_wheel_t* wheel, uint64_t e);

/* The active timer t was just stopped (or a task's timer unfiled), and
 * uvtw__driver_hears_stop said the driver must hear of it: tells it by
 * uvtw__driver_left. */
void uvtw__driver_stopped(uvtw_wheel_t* wheel, const uvtw_timer_t* t);

/* Brings the driver's ref state up to date: referenced iff an active
 * referenced timer exists (core->active_ref). */
void uvtw__driver_sync_ref(uvtw_wheel_t* wheel);

/* A timer of the wheel is about to be (re)started with its deadline
 * reached (timeout 0), outside a pass: on a libuv that collects the due
 * timers before running them, the next pass may have to leave it for the
 * one after (driver.c). */
void uvtw__driver_due_start(uvtw_wheel_t* wheel);

/* The checked build (UVTW_CHECK_THREADS): aborts with a message naming
 * `call` if the calling thread is not the one the driver's callbacks last
 * ran on while the wheel holds the loop (an active referenced timer: the
 * loop still runs there); while it holds nothing, the caller may have been
 * handed the loop, and becomes its thread.  UVTW__LOOP_THREAD_ONLY(wheel)
 * calls it with the caller's name, and is nothing in other builds. */
void uvtw__driver_check_thread(const uvtw_wheel_t* wheel, const char* call);
#ifdef UVTW_CHECK_THREADS
# define UVTW__LOOP_THREAD_ONLY(wheel)                                         \
  uvtw__driver_check_thread((wheel), __func__)
#else
# define UVTW__LOOP_THREAD_ONLY(wheel) ((void) 0)
#endif

/* The wheel is closing: stops the driver's handles. */
void uvtw__driver_stop(uvtw_wheel_t* wheel);

/* Closes the driver's handles with `cb`; returns how many it closed. */
int uvtw__driver_close(uvtw_wheel_t* wheel, uv_close_cb cb);


/* The wheel's clock: uv_now(loop), or a virtual wheel's own.  Loop
 * thread. */
static inline uint64_t uvtw__driver_now(const uvtw__driver_t* driver) {
  return *driver->now;
}


/* Non-zero if a timer filed at expiry tick e moves the next wake-up
 * earlier than the armed one, so that the driver must re-arm.  Never
 * inside a pass, whose end re-arms anyway, nor on a virtual wheel. */
static inline int uvtw__driver_moves_for(const uvtw__driver_t* driver,
                                         uint64_t e) {
  return e < driver->armed_tick && !driver->in_pass && !driver->never_arms;
}


/* Non-zero if a start that filed an inactive timer of ref flag `ref` at
 * expiry tick e must tell the driver (uvtw__driver_earlier): e is earlier
 * than the armed tick, or the timer is referenced and the driver is not
 * (a start can only raise active_ref). */
static inline int uvtw__driver_hears_start(const uvtw__driver_t* driver,
                                           uint64_t e,
                                           uint64_t ref) {
  return uvtw__driver_moves_for(driver, e) || (int) ref > driver->ref;
}


/* Non-zero if stopping the active timer t (or unfiling a task's) must
 * tell the driver (uvtw__driver_stopped): it may wait for t's tick, or it
 * is referenced and no referenced timer is left (a stop can only lower
 * active_ref).  Called after the core's stop. */
static inline int uvtw__driver_hears_stop(const uvtw__driver_t* driver,
                                          const uvtw__core_t* core,
                                          const uvtw_timer_t* t) {
  return uvtw__core_may_expire_in(core, t, driver->armed_first_ms) ||
         (core->active_ref == 0 && driver->ref);
}


/* What restarting an active timer does (uvtw__driver_restart): bit 0
 * says how the core moves it, bit 1 whether the driver may have to move
 * later.  (Whether it moves earlier depends on the new expiry, known once
 * the timer is filed: uvtw__driver_moves_for.) */
typedef enum {
  /* Rewrite only the deadline: the timer's old slot comes due first and
   * re-files it then (uvtw__core_rearm_lazy). */
  UVTW__RESTART_LAZY = 0,
  /* Unlink it and file it again (uvtw__core_start). */
  UVTW__RESTART_REFILE = 1,
  /* The driver may wait for the timer's old tick: re-arm it before the
   * loop polls (uvtw__driver_left). */
  UVTW__RESTART_LEAVES = 2
} uvtw__restart_t;


/* The one restart rule: what restarting the active timer t for deadline
 * d does.  Lazy whenever the core allows it (t waits in a slot and d is
 * not earlier); the driver's wake-up, if it was t's, is made exact again
 * before the next poll, not here, so that many re-arms of the earliest
 * timer in one loop iteration cost one re-arm of the driver.  Loop
 * thread; a pure function of its arguments. */
static inline unsigned uvtw__driver_restart(const uvtw__driver_t* driver,
                                            const uvtw__core_t* core,
                                            const uvtw_timer_t* t,
                                            uint64_t d) {
  unsigned leaves;

  /* The driver may be armed for t's tick (uvtw__driver_left says for
   * sure; while disarmed, armed_first_ms is UINT64_MAX). */
  leaves = uvtw__core_may_expire_in(core, t, driver->armed_first_ms)
               ? UVTW__RESTART_LEAVES
               : 0;
  if (!uvtw__core_lazy_ok(core, t, d))
    return UVTW__RESTART_REFILE | leaves;
  return UVTW__RESTART_LAZY | leaves;
}

#endif /* UVTW_DRIVER_H */
