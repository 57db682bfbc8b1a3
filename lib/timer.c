/* SPDX-License-Identifier: MIT */
/* uvtw_timer_*: the loop-thread timer API, mirroring uv_timer_*. */

#include "driver.h"


int uvtw_timer_init(uvtw_wheel_t* wheel, uvtw_timer_t* timer) {
  if (wheel == NULL || timer == NULL)
    return UV_EINVAL;
  timer->link_.next = NULL;
  timer->link_.prev = NULL;
  timer->wheel_ = wheel;
  timer->cb_ = NULL;
  timer->deadline_ = 0;
  timer->repeat_ = 0;
  timer->start_id_ = 0;
  timer->unref_ = 0;
  return 0;
}


/* No pass since the loop's clock moved on (the wheel had nothing due):
 * bring the wheel's now up to the loop's, so that the timer is filed
 * relative to the loop's now and a short timeout lands in level 0. */
static inline void catch_up(uvtw_wheel_t* wheel, uint64_t now) {
  uvtw__core_t* core;

  core = &wheel->core;
  if (now - core->collected_ms >= core->tick_ms && !wheel->driver.in_pass)
    uvtw__core_catch_up(core, now);
}


/* Starts an inactive timer: out of line, so that the lazy re-arm is a
 * short function that saves no registers. */
static int __attribute__((noinline)) start_inactive(uvtw_wheel_t* wheel,
                                                    uvtw_timer_t* timer,
                                                    uint64_t deadline,
                                                    uint64_t now) {
  uvtw__core_t* core;
  uint64_t e;

  core = &wheel->core;
  catch_up(wheel, now);
  timer->start_id_ = core->next_start_id++;
  timer->deadline_ = deadline;
  uvtw__core_count(core, timer, 1);
  e = uvtw__core_tick_of(core, deadline);
  uvtw__core_file(core, timer, e);
  uvtw__driver_earlier(wheel, e);
  uvtw__driver_sync_ref(wheel);
  return 0;
}


/* Out of line: a neighbour's deadline is another cache line. */
static int __attribute__((noinline))
waits_with_neighbour(const uvtw_wheel_t* wheel, const uvtw_timer_t* timer) {
  const uvtw_timer_t* other;

  other = uvtw__core_neighbour(&wheel->core, timer);
  return other != NULL &&
         uvtw__core_tick_of(&wheel->core, other->deadline_) ==
             wheel->driver.armed_tick;
}


/* Moves an active timer that the lazy re-arm does not cover. */
static int __attribute__((noinline)) restart_filed(uvtw_wheel_t* wheel,
                                                   uvtw_timer_t* timer,
                                                   uint64_t deadline,
                                                   uint64_t now) {
  uvtw__core_t* core;
  int waited_for;
  uint64_t e;

  core = &wheel->core;
  /* Later, in a slot, and the driver waits for its tick: lazy still if a
   * neighbour in its slot is due at the same tick (the driver keeps work
   * there, and stays exact). */
  if (deadline >= timer->deadline_ &&
      timer->deadline_ > core->collected_ms &&
      waits_with_neighbour(wheel, timer)) {
    timer->start_id_ = core->next_start_id++;
    timer->deadline_ = deadline;
    return 0;
  }
  catch_up(wheel, now);
  /* If the driver is armed for this timer, re-arm it after the move, so
   * that it does not wake for nothing. */
  waited_for = uvtw__driver_waits_for(wheel, timer);
  e = uvtw__core_start(core, timer, deadline);
  /* A timer left its slot: if that was the crowded one the driver is armed
   * for, it may hold few enough timers to tighten now, and a lazy re-arm
   * at the armed tick must not leave the wake-up early.  Forget the flag;
   * the next re-arm of the driver (tighten) sets it again if it holds. */
  wheel->driver.armed_crowded = 0;
  if (waited_for) {
    uvtw__driver_update(wheel);
  } else {
    uvtw__driver_earlier(wheel, e);
    uvtw__driver_sync_ref(wheel);
  }
  return 0;
}


/* timeout 0: the driver may be held for the timers phase now running
 * (uvtw__driver_due_start).  Out of line, as rare in a hot loop. */
static int __attribute__((noinline)) start_due(uvtw_wheel_t* wheel,
                                               uvtw_timer_t* timer) {
  uint64_t now;

  uvtw__driver_due_start(wheel);
  now = uvtw__wheel_now(wheel);
  if (timer->link_.next != NULL)
    return restart_filed(wheel, timer, now, now);
  return start_inactive(wheel, timer, now, now);
}


int uvtw_timer_start(uvtw_timer_t* timer,
                     uvtw_timer_cb cb,
                     uint64_t timeout,
                     uint64_t repeat) {
  uvtw_wheel_t* wheel;
  uint64_t deadline;
  uint64_t now;

  if (timer == NULL || cb == NULL)
    return UV_EINVAL;
  wheel = timer->wheel_;
  if (wheel->closing)
    return UV_ECANCELED;
  timer->cb_ = cb;
  timer->repeat_ = repeat;
  if (timeout == 0)
    return start_due(wheel, timer);
  now = uvtw__wheel_now(wheel);
  deadline = uvtw__sat_add(now, timeout);
  if (timer->link_.next == NULL)
    return start_inactive(wheel, timer, deadline, now);
  /* The idle-timeout pattern: an active timer waiting in a slot, pushed
   * later, touching only the timer (the lazy re-arm).  Not if the driver
   * waits for this timer (uvtw__driver_waits_for, unrolled: the timer is
   * active here), unless the driver was armed for a slot too crowded to
   * tighten: its wake-up there may be early anyway, and re-filing would
   * not move it.  (restart_filed makes one more exception.)  The crowded
   * test comes first: when many timers share the armed tick, whether this
   * one does is a coin toss for the branch predictor, while the outcome
   * (lazy) is the same either way. */
  if (deadline >= timer->deadline_ &&
      timer->deadline_ > wheel->core.collected_ms &&
      (wheel->driver.armed_crowded ||
       uvtw__core_tick_of(&wheel->core, timer->deadline_) !=
           wheel->driver.armed_tick ||
       wheel->driver.in_pass)) {
    timer->start_id_ = wheel->core.next_start_id++;
    timer->deadline_ = deadline;
    return 0;
  }
  return restart_filed(wheel, timer, deadline, now);
}


int uvtw_timer_stop(uvtw_timer_t* timer) {
  uvtw_wheel_t* wheel;
  int waited_for;

  if (timer == NULL || timer->link_.next == NULL)
    return 0;
  wheel = timer->wheel_;
  waited_for = uvtw__driver_waits_for(wheel, timer);
  uvtw__core_stop(&wheel->core, timer);
  /* The slot it left may no longer be crowded (see restart_filed). */
  wheel->driver.armed_crowded = 0;
  if (waited_for)
    uvtw__driver_update(wheel); /* later, or stopped if nothing is left */
  else
    uvtw__driver_sync_ref(wheel);
  return 0;
}


int uvtw_timer_again(uvtw_timer_t* timer) {
  if (timer == NULL || timer->cb_ == NULL)
    return UV_EINVAL;
  if (timer->repeat_ == 0)
    return 0;
  return uvtw_timer_start(timer, timer->cb_, timer->repeat_, timer->repeat_);
}


void uvtw_timer_set_repeat(uvtw_timer_t* timer, uint64_t repeat) {
  timer->repeat_ = repeat;
}


uint64_t uvtw_timer_get_repeat(const uvtw_timer_t* timer) {
  return timer->repeat_;
}


uint64_t uvtw_timer_get_due_in(const uvtw_timer_t* timer) {
  const uvtw__core_t* core;
  uint64_t due_ms;
  uint64_t now;

  if (timer->link_.next == NULL)
    return 0;
  core = &timer->wheel_->core;
  due_ms = uvtw__core_ms_of(core, uvtw__core_tick_of(core, timer->deadline_));
  now = uvtw__wheel_now(timer->wheel_);
  return due_ms > now ? due_ms - now : 0;
}


int uvtw_timer_is_active(const uvtw_timer_t* timer) {
  return timer->link_.next != NULL;
}


void uvtw_timer_ref(uvtw_timer_t* timer) {
  uvtw__core_set_ref(&timer->wheel_->core, timer, 1);
  uvtw__driver_sync_ref(timer->wheel_);
}


void uvtw_timer_unref(uvtw_timer_t* timer) {
  uvtw__core_set_ref(&timer->wheel_->core, timer, 0);
  uvtw__driver_sync_ref(timer->wheel_);
}


int uvtw_timer_has_ref(const uvtw_timer_t* timer) {
  return !timer->unref_;
}


uvtw_wheel_t* uvtw_timer_wheel(const uvtw_timer_t* timer) {
  return timer->wheel_;
}
