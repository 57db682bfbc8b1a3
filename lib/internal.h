/* SPDX-License-Identifier: MIT */
/* The wheel object: the pure core plus the libuv handles that drive it.
 *
 * Words used across lib/, with one meaning each:
 *   core         the pure timing wheel (core.c): no libuv, time passed in.
 *   wheel        the public uvtw_wheel_t (wheel.c): a core on a loop.
 *   driver       the one uv_timer_t per wheel, armed for the core's next
 *                wake-up (driver.c).
 *   tick         the core's unit of time, tick_ms milliseconds; deadlines
 *                round up to a tick, so nothing fires early.
 *   file         put a timer in the slot (or list) its expiry tick belongs
 *                to, relative to the core's now.
 *   pass         one run of uvtw__pass (driver.c), by the driver's
 *                callback or by uvtw_wheel_advance: collect every timer
 *                that is due, sort it into libuv's order, then run the
 *                callbacks.  Timers started during a pass wait for the next.
 *   cascade      re-filing a timer from a higher level's slot to a lower
 *                one when its slot comes due before the timer does.
 *   pre-cascade  cascading early: each pass moves a share of the slot whose
 *                block begins next, so no pass re-files a crowded slot.
 *   lazy re-arm  restarting a filed timer to a later deadline by rewriting
 *                only its deadline; its old slot comes due first and
 *                re-files it then.
 *   crowded      a slot of more timers than tighten looks at: the driver's
 *                wake-up for it may be early (never late).
 *   leaves       a stop or restart of the timer the driver waits for: the
 *                driver re-arms before the loop polls (driver.c).
 *   task         work submitted by uvtw_submit, from any thread: a node of
 *                the wheel's node table (task-shared.c) with a timer of
 *                its own.
 *   gate         the one word other threads enter and leave by, which
 *                close waits on and which counts the live tasks
 *                (task-shared.c).
 *   queue        the stack of nodes other threads push for the loop: new
 *                tasks, and tasks a cancel or reset moved (task-shared.c).
 *   take in      the loop takes the queue and files each new task's timer
 *                (task.c); from then on the loop holds the task.
 *   held         a task the loop keeps itself alive for: taken in, or
 *                submitted on the loop thread, and not yet freed.
 *   backlog      entries a drain left for later; they hold the loop too.
 *   final call   the one cb(arg, UV_ECANCELED) a live task gets when its
 *                wheel closes.
 *   virtual      a wheel made with options.virtual_time: its clock is its
 *                own, moved only by uvtw_wheel_advance (virtual.c), and
 *                its driver is never armed.
 *   leeway       how late a timer may run, so that timers due close
 *                together share one wake-up: its expiry is its deadline's
 *                tick rounded up to 2^g ticks (uvtw__core_coalesce).
 *   precise      options.precise: deadlines count from uv_hrtime() at the
 *                call, rounded up, not from the loop's cached time.
 *   lateness     the wheel's clock when a callback starts minus its
 *                deadline rounded up to a tick. */

#ifndef UVTW_INTERNAL_H
#define UVTW_INTERNAL_H

#include "core.h"
#include "driver.h"
#include "task.h"
#include "uvtw.h"

/* Where the wheel is in its close; wheel.c owns close and lists its steps.
 * OPEN is 0, so `if (wheel->closing)` asks "has close begun?". */
typedef enum {
  UVTW__OPEN = 0,
  UVTW__CLOSING_TASKS,  /* uvtw_wheel_close ran: the tasks are ending */
  UVTW__CLOSING_HANDLES /* no task left: the three handles are closing */
} uvtw__close_state_t;

struct uvtw_wheel_s {
  uvtw__core_t core;
  uv_loop_t* loop;
  /* options.precise, on a wheel of the loop's clock: starts count from
   * uv_hrtime(), rounded up (uvtw__hrtime_ms, core.h). */
  int precise;
  uvtw__driver_t driver;
  uv_async_t async; /* cross-thread wake-up; referenced only while it holds
                     * the loop for tasks or for close (task.c) */
  uvtw__close_state_t closing;
  int handles_closing; /* CLOSING_HANDLES: close callbacks still to come */
  uvtw_close_cb close_cb;
  /* Callbacks by the bit length of their lateness (0: on time), folded
   * into uvtw_stats_t.lateness by uvtw_wheel_stats: so counting one is a
   * bit scan and an add, with no clamp (uvtw__late_slot).  A pass counts
   * every timer it pops (uvtw__task_fire takes a task off again if it
   * neither runs nor goes to the threadpool), so the timer callbacks run are
   * the sum less tasks_dispatched: no counter of their own. */
  uint64_t late_bits[64];
  uint64_t tasks_dispatched; /* loop-thread runs and work hand-offs */
  int virtual_time;          /* options.virtual_time: set at creation only */
  int advancing;             /* inside uvtw_wheel_advance */
  /* A virtual wheel's clock, loop thread only: never goes back. */
  uint64_t virtual_now;
  /* The same value for uvtw_submit on other threads, stored by the loop
   * thread after virtual_now (relaxed: a task's delay needs no ordering
   * beyond the clock's own).  An atomic, so that a 32-bit target does not
   * tear it. */
  _Atomic uint64_t virtual_now_shared;
  uvtw__tasks_t tasks;
};


/* The order_ leeway bits for a leeway of `ms`: the largest g, at most 63,
 * with 2^g - 1 ticks <= ms, so a timer runs at most ms after its
 * deadline's tick.  A division: set once per timer, not per start. */
static inline uint64_t uvtw__leeway_bits(const uvtw__core_t* core,
                                         uint64_t ms) {
  uint64_t ticks;
  uint64_t g;

  ticks = ms / core->tick_ms;
  g = ticks == UINT64_MAX ? 63 : 63 ^ (uint64_t) __builtin_clzll(ticks + 1);
  return g << UVTW__ORDER_LEEWAY_SHIFT;
}


/* The leeway in ms that order_'s bits stand for: 2^g - 1 ticks. */
static inline uint64_t uvtw__leeway_ms(const uvtw__core_t* core,
                                       uint64_t order) {
  uint64_t ticks;

  ticks = ((uint64_t) 1 << ((order & UVTW__ORDER_LEEWAY) >>
                            UVTW__ORDER_LEEWAY_SHIFT)) -
          1;
  return ticks > UINT64_MAX / core->tick_ms ? UINT64_MAX
                                            : ticks * core->tick_ms;
}


/* late_bits into the public buckets `lateness` (slot i is bucket i, the
 * last bucket takes every slot from it on); returns their sum.  Loop
 * thread (lateness.c). */
uint64_t uvtw__lateness_fold(const uvtw_wheel_t* wheel, uint64_t* lateness);


#endif /* UVTW_INTERNAL_H */
