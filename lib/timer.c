/* SPDX-License-Identifier: MIT */
/* uvtw_timer_*: the loop-thread timer API, mirroring uv_timer_*. */

#include "internal.h"


int uvtw_timer_init(uvtw_wheel_t* wheel, uvtw_timer_t* timer) {
  if (wheel == NULL || timer == NULL)
    return UV_EINVAL;
  timer->link_.next = NULL;
  timer->link_.prev = NULL;
  timer->wheel_ = wheel;
  timer->cb_ = NULL;
  timer->deadline_ = 0;
  timer->repeat_ = 0;
  timer->order_ = UVTW__ORDER_REF; /* referenced, as a uv_timer_t is */
  return 0;
}


/* What a start or a stop rarely needs (a catch-up, a re-arm of the
 * driver, a change of its ref state) is in cold functions of its own, so
 * that the common path stays short. */

/* The driver after a start of an inactive timer whose expiry tick is e:
 * armed later than e, or unreferenced while the timer is referenced. */
static int __attribute__((noinline, cold))
start_driver(uvtw_wheel_t* wheel, uint64_t e) {
  if (uvtw__driver_moves_for(&wheel->driver, e))
    uvtw__driver_update(wheel);
  else
    uvtw__driver_sync_ref(wheel);
  return 0;
}


/* Starts an inactive timer by the core's start.  A start can only raise
 * active_ref, so the driver's ref state changes only if it is 0 and the
 * timer is referenced. */
static inline int start_inactive(uvtw_wheel_t* wheel,
                                 uvtw_timer_t* timer,
                                 uvtw_timer_cb cb,
                                 uint64_t repeat,
                                 uint64_t deadline) {
  uint64_t ref;
  uint64_t e;

  ref = uvtw__timer_ref(timer);
  timer->cb_ = cb;
  timer->repeat_ = repeat;
  e = uvtw__core_start(&wheel->core, timer, deadline);
  if (uvtw__driver_moves_for(&wheel->driver, e) ||
      (int) ref > wheel->driver.ref)
    return start_driver(wheel, e);
  return 0;
}


/* No pass since the loop's clock moved on (the wheel had nothing due):
 * brings the wheel's now up to the loop's, so that the timer is filed
 * relative to the loop's now and a short timeout lands in level 0.  Not
 * inside a pass, which collected up to the loop's now when it began. */
static void catch_up_loop(uvtw_wheel_t* wheel, uint64_t now) {
  if (uvtw__core_behind(&wheel->core, now) &&
      !uvtw__driver_in_pass(&wheel->driver))
    uvtw__core_catch_up(&wheel->core, now);
}


static int __attribute__((noinline, cold))
start_catching_up(uvtw_wheel_t* wheel,
                  uvtw_timer_t* timer,
                  uvtw_timer_cb cb,
                  uint64_t repeat,
                  uint64_t deadline,
                  uint64_t now) {
  catch_up_loop(wheel, now);
  return start_inactive(wheel, timer, cb, repeat, deadline);
}


/* Restarts an active timer as uvtw__driver_restart says, once its first
 * half said no.  The timer was active and stays so: active_ref, hence the
 * driver's ref state, is unchanged. */
static int __attribute__((noinline)) restart_by_rule(uvtw_wheel_t* wheel,
                                                     uvtw_timer_t* timer,
                                                     uint64_t deadline,
                                                     uint64_t now) {
  uvtw__restart_t what;
  uint64_t e;

  what =
      uvtw__driver_restart_rest(&wheel->driver, &wheel->core, timer, deadline);
  if (what == UVTW__RESTART_LAZY) {
    uvtw__core_rearm_lazy(&wheel->core, timer, deadline);
    return 0;
  }
  catch_up_loop(wheel, now);
  e = uvtw__core_start(&wheel->core, timer, deadline);
  if (what == UVTW__RESTART_REARM || uvtw__driver_moves_for(&wheel->driver, e))
    uvtw__driver_update(wheel);
  return 0;
}


/* Restarts an active timer (so the wheel is not closing: close makes every
 * timer inactive, and no start succeeds after it).  The lazy re-arm, the
 * idle-timeout pattern, touches only the timer: when the rule's first half
 * says so, nothing else is called. */
static inline int restart(uvtw_wheel_t* wheel,
                          uvtw_timer_t* timer,
                          uvtw_timer_cb cb,
                          uint64_t repeat,
                          uint64_t deadline,
                          uint64_t now) {
  timer->cb_ = cb;
  timer->repeat_ = repeat;
  if (uvtw__driver_restart_lazy(&wheel->driver, &wheel->core, timer,
                                deadline)) {
    uvtw__core_rearm_lazy(&wheel->core, timer, deadline);
    return 0;
  }
  return restart_by_rule(wheel, timer, deadline, now);
}


/* timeout 0: the driver may be held for the timers phase now running
 * (uvtw__driver_due_start).  Out of line, as rare in a hot loop. */
static int __attribute__((noinline)) start_due(uvtw_wheel_t* wheel,
                                               uvtw_timer_t* timer,
                                               uvtw_timer_cb cb,
                                               uint64_t repeat) {
  uint64_t now;

  if (wheel->closing)
    return UV_ECANCELED;
  uvtw__driver_due_start(wheel);
  now = uvtw__wheel_now(wheel);
  if (timer->link_.next != NULL)
    return restart(wheel, timer, cb, repeat, now, now);
  return start_catching_up(wheel, timer, cb, repeat, now, now);
}


/* A start for `deadline` (the wheel is not closing unless the timer is
 * inactive, which it checks). */
static inline int start_at(uvtw_wheel_t* wheel,
                           uvtw_timer_t* timer,
                           uvtw_timer_cb cb,
                           uint64_t repeat,
                           uint64_t deadline,
                           uint64_t now) {
  if (timer->link_.next != NULL)
    return restart(wheel, timer, cb, repeat, deadline, now);
  if (wheel->closing)
    return UV_ECANCELED;
  if (uvtw__core_behind(&wheel->core, now))
    return start_catching_up(wheel, timer, cb, repeat, deadline, now);
  return start_inactive(wheel, timer, cb, repeat, deadline);
}


/* options.precise: the deadline counts from uv_hrtime(), rounded up.  Out
 * of line, so that the clock call does not make every start save
 * registers. */
static int __attribute__((noinline)) start_precise(uvtw_wheel_t* wheel,
                                                   uvtw_timer_t* timer,
                                                   uvtw_timer_cb cb,
                                                   uint64_t timeout,
                                                   uint64_t repeat) {
  uint64_t deadline;

  deadline = uvtw__sat_add(uvtw__hrtime_ms(uv_hrtime(), 1), timeout);
  return start_at(wheel, timer, cb, repeat, deadline, uvtw__wheel_now(wheel));
}


int uvtw_timer_start(uvtw_timer_t* timer,
                     uvtw_timer_cb cb,
                     uint64_t timeout,
                     uint64_t repeat) {
  uvtw_wheel_t* wheel;
  uint64_t now;

  if (timer == NULL || cb == NULL)
    return UV_EINVAL;
  wheel = timer->wheel_;
  /* One test for both rarer paths: timeout 0 wraps to UINT64_MAX, and a
   * precise wheel's bound takes every timeout (internal.h). */
  if (timeout - 1 >= wheel->plain_timeouts)
    return timeout == 0 ? start_due(wheel, timer, cb, repeat)
                        : start_precise(wheel, timer, cb, timeout, repeat);
  now = uvtw__wheel_now(wheel);
  return start_at(wheel, timer, cb, repeat, uvtw__sat_add(now, timeout), now);
}


/* The driver after a stop: it may have waited for the timer's tick, or
 * be referenced with no referenced timer left. */
static int __attribute__((noinline, cold))
stop_driver(uvtw_wheel_t* wheel, const uvtw_timer_t* timer) {
  if (uvtw__driver_waits_for(&wheel->driver,
                             uvtw__core_expiry(&wheel->core, timer)))
    uvtw__driver_update(wheel); /* later, or stopped if nothing is left */
  else
    uvtw__driver_sync_ref(wheel);
  return 0;
}


int uvtw_timer_stop(uvtw_timer_t* timer) {
  uvtw_wheel_t* wheel;
  int awaited;

  if (timer == NULL || timer->link_.next == NULL)
    return 0;
  wheel = timer->wheel_;
  awaited =
      uvtw__driver_may_wait_for(&wheel->driver, &wheel->core, timer->deadline_);
  uvtw__core_stop(&wheel->core, timer);
  /* A stop can only lower active_ref: the driver's ref state changes only
   * if it reached 0. */
  if (awaited || (timer->order_ & UVTW__ORDER_LEEWAY) ||
      (wheel->core.active_ref == 0 && wheel->driver.ref))
    return stop_driver(wheel, timer);
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


int uvtw_timer_set_leeway(uvtw_timer_t* timer, uint64_t ms) {
  if (timer == NULL)
    return UV_EINVAL;
  if (timer->link_.next != NULL)
    return UV_EBUSY; /* its expiry must not move while it is filed */
  timer->order_ = (timer->order_ & ~UVTW__ORDER_LEEWAY) |
                  uvtw__leeway_bits(&timer->wheel_->core, ms);
  if (timer->order_ & UVTW__ORDER_LEEWAY)
    timer->wheel_->core.leeway_used = 1;
  return 0;
}


uint64_t uvtw_timer_get_leeway(const uvtw_timer_t* timer) {
  return uvtw__leeway_ms(&timer->wheel_->core, timer->order_);
}


uint64_t uvtw_timer_get_due_in(const uvtw_timer_t* timer) {
  const uvtw__core_t* core;
  uint64_t due_ms;
  uint64_t now;

  if (timer->link_.next == NULL)
    return 0;
  core = &timer->wheel_->core;
  due_ms = uvtw__core_ms_of(core, uvtw__core_expiry(core, timer));
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
  return uvtw__timer_ref(timer) != 0;
}


uvtw_wheel_t* uvtw_timer_wheel(const uvtw_timer_t* timer) {
  return timer->wheel_;
}
