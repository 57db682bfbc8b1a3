/* SPDX-License-Identifier: MIT */
/* uvtw_timer_*: the loop-thread timer API, mirroring uv_timer_*. */

#include "internal.h"


int uvtw_timer_init(uvtw_wheel_t* wheel, uvtw_timer_t* timer) {
  if (wheel == NULL || timer == NULL)
    return UV_EINVAL;
  UVTW__LOOP_THREAD_ONLY(wheel);
  timer->link_.next = NULL;
  timer->link_.prev = NULL;
  timer->wheel_ = wheel;
  timer->cb_ = NULL;
  timer->deadline_ = 0;
  timer->repeat_ = 0;
  /* A user's, and referenced, as a uv_timer_t is. */
  timer->order_ = UVTW__ORDER_REF | UVTW__ORDER_USER;
  return 0;
}


/* No call scans the wheel: a start that comes earlier than the driver
 * arms it at its own tick, and a stop or restart of the timer the driver
 * waits for leaves the re-arm to the loop's prepare phase (driver.c). */

/* A restart that is not lazy (uvtw__driver_restart said what it does):
 * the timer is filed again, and the driver re-armed if it moves earlier,
 * or told if it may have waited for the timer.  The timer stays active:
 * active_ref, hence the driver's ref state, is unchanged.  Out of line:
 * inlined, its register saves cost every lazy re-arm (84.1 instructions
 * where it takes 55.1, --scenario calls). */
static int __attribute__((noinline)) restart_slow(uvtw_wheel_t* wheel,
                                                  uvtw_timer_t* timer,
                                                  uint64_t deadline,
                                                  uint64_t now,
                                                  unsigned what) {
  uint64_t old_e;
  uint64_t e;

  old_e = 0; /* read only if it leaves */
  if (what & UVTW__RESTART_LEAVES)
    old_e = uvtw__core_expiry(&wheel->core, timer);
  if (what & UVTW__RESTART_REFILE) {
    e = uvtw__core_start(&wheel->core, timer, deadline, now);
    if (uvtw__driver_moves_for(&wheel->driver, e)) {
      uvtw__driver_earlier(wheel, e);
      return 0;
    }
  } else {
    uvtw__core_rearm_lazy(&wheel->core, timer, deadline);
  }
  if (what & UVTW__RESTART_LEAVES)
    uvtw__driver_left(wheel, old_e);
  return 0;
}


/* Restarts an active timer (so the wheel is not closing: close makes every
 * timer inactive, and no start succeeds after it).  The lazy re-arm, the
 * idle-timeout pattern, touches only the timer. */
static int restart(uvtw_wheel_t* wheel,
                   uvtw_timer_t* timer,
                   uint64_t deadline,
                   uint64_t now) {
  unsigned what;

  what = uvtw__driver_restart(&wheel->driver, &wheel->core, timer, deadline);
  if (what != UVTW__RESTART_LAZY)
    return restart_slow(wheel, timer, deadline, now, what);
  uvtw__core_rearm_lazy(&wheel->core, timer, deadline);
  return 0;
}


/* Files an inactive timer, against a core that does not lag, and re-arms
 * the driver if the timer comes first. */
static int file_new(uvtw_wheel_t* wheel,
                    uvtw_timer_t* timer,
                    uint64_t deadline) {
  uint64_t e;

  e = uvtw__core_place(&wheel->core, timer, deadline);
  if (uvtw__driver_hears_start(&wheel->driver, e, uvtw__timer_ref(timer)))
    uvtw__driver_earlier(wheel, e);
  return 0;
}


/* The same after a quiet spell: the core's time catches up first.  Out of
 * line: inlined, a lazy re-arm takes 61.1 instructions where it takes
 * 55.1, a start 116.8 where it takes 110.7. */
static int __attribute__((noinline))
file_new_late(uvtw_wheel_t* wheel, uvtw_timer_t* timer, uint64_t deadline) {
  uvtw__core_catch_up(&wheel->core, uvtw__driver_now(&wheel->driver));
  return file_new(wheel, timer, deadline);
}


/* A start for `deadline` at the loop's time `now`: a restart if the timer is
 * active, else a filing, refused on a closing wheel (close makes every timer
 * inactive, so an active timer's wheel is open).  A failed start changes
 * nothing. */
static int start_at(uvtw_wheel_t* wheel,
                    uvtw_timer_t* timer,
                    uvtw_timer_cb cb,
                    uint64_t repeat,
                    uint64_t deadline,
                    uint64_t now) {
  if (timer->link_.next != NULL) {
    timer->cb_ = cb;
    timer->repeat_ = repeat;
    return restart(wheel, timer, deadline, now);
  }
  if (wheel->closing)
    return UV_ECANCELED;
  timer->cb_ = cb;
  timer->repeat_ = repeat;
  if (uvtw__core_lags(&wheel->core, now))
    return file_new_late(wheel, timer, deadline);
  return file_new(wheel, timer, deadline);
}


/* A start whose deadline is not simply timeout ms after the loop's time.
 * Timeout 0 waits for the next timers phase if the driver is held for the
 * one now running (uvtw__driver_due_start), as a uv_timer_t would; on a
 * precise wheel the deadline counts from uv_hrtime(), rounded up.  Out of
 * line: inlined, a lazy re-arm takes 73.1 instructions where it takes
 * 55.1, a start 128.7 where it takes 110.7. */
static int __attribute__((noinline)) start_special(uvtw_wheel_t* wheel,
                                                   uvtw_timer_t* timer,
                                                   uvtw_timer_cb cb,
                                                   uint64_t timeout,
                                                   uint64_t repeat) {
  uint64_t deadline;
  uint64_t now;

  if (timer->link_.next == NULL && wheel->closing)
    return UV_ECANCELED; /* before due_start: a failed start changes nothing */
  now = uvtw__driver_now(&wheel->driver);
  if (timeout == 0) {
    uvtw__driver_due_start(wheel);
    deadline = now;
  } else {
    deadline = uvtw__sat_add(uvtw__hrtime_ms(uv_hrtime(), 1), timeout);
  }
  return start_at(wheel, timer, cb, repeat, deadline, now);
}


int uvtw_timer_start(uvtw_timer_t* timer,
                     uvtw_timer_cb cb,
                     uint64_t timeout,
                     uint64_t repeat) {
  uvtw_wheel_t* wheel;
  uint64_t now;

  if (timer == NULL || cb == NULL || timer->wheel_ == NULL)
    return UV_EINVAL;
  wheel = timer->wheel_;
  UVTW__LOOP_THREAD_ONLY(wheel);
  if (wheel->precise || timeout == 0)
    return start_special(wheel, timer, cb, timeout, repeat);
  now = uvtw__driver_now(&wheel->driver);
  return start_at(wheel, timer, cb, repeat, uvtw__sat_add(now, timeout), now);
}


int uvtw_timer_stop(uvtw_timer_t* timer) {
  uvtw_wheel_t* wheel;

  if (timer == NULL || timer->link_.next == NULL)
    return 0;
  wheel = timer->wheel_;
  UVTW__LOOP_THREAD_ONLY(wheel);
  uvtw__core_stop(&wheel->core, timer);
  if (uvtw__driver_hears_stop(&wheel->driver, &wheel->core, timer))
    uvtw__driver_stopped(wheel, timer);
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
  if (timer == NULL || ms > UVTW_LEEWAY_MS_MAX)
    return UV_EINVAL;
  UVTW__LOOP_THREAD_ONLY(timer->wheel_);
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
  if (due_ms == UINT64_MAX)
    return UINT64_MAX; /* never reached, as uvtw_wheel_next_due says */
  now = uvtw__driver_now(&timer->wheel_->driver);
  return due_ms > now ? due_ms - now : 0;
}


int uvtw_timer_is_active(const uvtw_timer_t* timer) {
  return timer->link_.next != NULL;
}


void uvtw_timer_ref(uvtw_timer_t* timer) {
  UVTW__LOOP_THREAD_ONLY(timer->wheel_);
  uvtw__core_set_ref(&timer->wheel_->core, timer, 1);
  uvtw__driver_sync_ref(timer->wheel_);
}


void uvtw_timer_unref(uvtw_timer_t* timer) {
  UVTW__LOOP_THREAD_ONLY(timer->wheel_);
  uvtw__core_set_ref(&timer->wheel_->core, timer, 0);
  uvtw__driver_sync_ref(timer->wheel_);
}


int uvtw_timer_has_ref(const uvtw_timer_t* timer) {
  return uvtw__timer_ref(timer) != 0;
}


uvtw_wheel_t* uvtw_timer_wheel(const uvtw_timer_t* timer) {
  return timer->wheel_;
}
