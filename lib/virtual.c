/* SPDX-License-Identifier: MIT */
/* The wheel's clock, and virtual time.
 *
 * A wheel made with options.virtual_time keeps a clock of its own
 * (virtual_now), which starts at uv_now(loop) and moves only in
 * uvtw_wheel_advance.  Everything else is the ordinary wheel: its timers
 * read the clock through the driver (uvtw__driver_now), tasks submitted from
 * any thread count their delay from virtual_now_shared, the loop takes tasks in
 * through the async handle.  What differs:
 *   - the driver is never armed (driver.c, uvtw__driver_update), so its
 *     timers neither wake the loop nor keep it alive, and no pass is ever
 *     deferred for the timers phase now running (armed_tick stays
 *     DISARMED);
 *   - a filed task no longer holds the loop (task.c, uvtw__tasks_hold_wanted);
 *   - advance runs the passes, here: it moves the clock to each tick at
 *     which a timer may expire (uvtw__core_next_expiry, never later than
 *     the earliest expiry; unlike the driver's wake-ups it skips those
 *     that only move timers, since a pass takes any gap), one after
 *     another up to the end of the span, and runs the pass at each
 *     (uvtw__pass, without a re-arm).  A pass at the expiry tick of a
 *     timer runs it with the clock at that tick (its deadline rounded up
 *     to the tick, and by its leeway), so a repeating timer is re-filed
 *     for that plus its repeat, or on its grid if it has leeway
 *     (uvtw__core_pop_due), and work a callback leaves due at that tick
 *     gets a pass of its own before the clock moves on.  A tick that was
 *     early (a stale slot minimum or overflow bound, core.h) only
 *     re-files; each pass takes now_tick up to its tick, and next_expiry
 *     is beyond now_tick unless work is ready, so the loop ends.  A step
 *     costs the same beside any number of far timers: the overflow list
 *     is not walked per pass (core.h, overflow_min). */

#include "internal.h"


uint64_t uvtw_wheel_now(const uvtw_wheel_t* wheel) {
  return uvtw__driver_now(&wheel->driver);
}


static void set_clock(uvtw_wheel_t* wheel, uint64_t ms) {
  wheel->virtual_now = ms;
  atomic_store_explicit(&wheel->virtual_now_shared, ms, memory_order_relaxed);
}


/* Takes in a batch of what the queue holds, if it holds anything (one load
 * of its head): tasks other threads submitted, and the cancels and resets
 * of tasks the loop holds, from any thread, a callback of this advance
 * included, so that a task a callback moves earlier runs at its new
 * deadline in this advance. */
static void take_in(uvtw_wheel_t* wheel) {
  if (wheel->tasks.backlog ||
      atomic_load_explicit(&wheel->tasks.head, memory_order_relaxed) != NULL)
    uvtw__tasks_drain(wheel, UVTW__DRAIN_BATCH);
}


int uvtw_wheel_advance(uvtw_wheel_t* wheel, uint64_t ms) {
  uint64_t last_tick;
  uint64_t target;
  uint64_t next;
  uint64_t at;

  if (wheel == NULL || !wheel->virtual_time)
    return UV_EINVAL;
  UVTW__LOOP_THREAD_ONLY(wheel);
  if (wheel->closing)
    return UV_ECANCELED;
  if (wheel->advancing)
    return UV_EBUSY;
  wheel->advancing = 1;
  target = uvtw__sat_add(wheel->virtual_now, ms);
  /* The last tick the span reaches; the clock never reaches UINT64_MAX
   * ms, so a saturated deadline is never reached (core.h, max_tick). */
  last_tick = uvtw__core_tick_floor(&wheel->core, target);
  while (!wheel->closing) {
    /* Before the clock moves, and after each pass: a submit that happened
     * before this call is filed (and, if due in the span, runs) before
     * time moves on; the async handle's wake-up takes in any rest. */
    take_in(wheel);
    if (wheel->closing)
      break;
    next = uvtw__core_next_expiry(&wheel->core);
    if (next == UVTW__NO_TICK || next > last_tick)
      break;
    /* Ready work (a late task, or a timer a callback started with its
     * deadline reached) is at or before now_tick: it runs now, the clock
     * does not go back. */
    at = uvtw__core_ms_of(&wheel->core, next);
    if (at > wheel->virtual_now)
      set_clock(wheel, at);
    uvtw__pass(wheel);
  }
  /* A callback that closed the wheel ends the span there. */
  if (!wheel->closing)
    set_clock(wheel, target);
  wheel->advancing = 0;
  return 0;
}


/* On a virtual wheel, after taking in what its queue holds, as advance
 * does first: a task just submitted counts. */
uint64_t uvtw_wheel_next_due(uvtw_wheel_t* wheel) {
  uint64_t tick;
  uint64_t due_ms;
  uint64_t now;

  UVTW__LOOP_THREAD_ONLY(wheel);
  if (wheel->virtual_time && !wheel->advancing)
    take_in(wheel);
  tick = uvtw__core_next_due(&wheel->core);
  if (tick == UVTW__NO_TICK)
    return UINT64_MAX;
  due_ms = uvtw__core_ms_of(&wheel->core, tick);
  now = uvtw__driver_now(&wheel->driver);
  return due_ms > now ? due_ms - now : 0;
}
