/* SPDX-License-Identifier: MIT */
/* The wheel on a libuv loop: its lifecycle and the driver uv_timer_t.
 *
 * The driver is armed for uvtw__core_next_tick(), never on a fixed tick.
 * Starting a timer earlier than the armed tick re-arms it at once, and so
 * does stopping or moving the timer it is armed for, so uv_backend_timeout()
 * tells the next wake-up.  That wake-up is exact after starts; it may be
 * early (never late) when a slot's minimum went stale because a timer left
 * it, or when a lazily re-armed timer's old slot comes due: then the pass
 * just re-files (cascades) and re-arms.  A pass collects what is due, then
 * runs it; a callback may start, stop or restart any timer, or close the
 * wheel. */

#include <stdlib.h>

#include "internal.h"


void uvtw_options_init(uvtw_options_t* opts) {
  opts->tick_ms = 1;
  opts->max_tasks = 0;
}


uv_loop_t* uvtw_wheel_loop(const uvtw_wheel_t* wheel) {
  return wheel->loop;
}


static void driver_cb(uv_timer_t* driver);
static void rearm_cb(uv_prepare_t* prepare);


static void arm(uvtw_wheel_t* wheel, uint64_t tick) {
  uint64_t due_ms;
  uint64_t now;

  due_ms = uvtw__core_ms_of(&wheel->core, tick);
  now = uv_now(wheel->loop);
  /* Cannot fail: the driver is initialised and cb is not NULL. */
  uv_timer_start(&wheel->driver, driver_cb, due_ms > now ? due_ms - now : 0,
                 0);
  wheel->armed_tick = tick;
}


static void disarm(uvtw_wheel_t* wheel) {
  if (wheel->armed_tick != UINT64_MAX) {
    uv_timer_stop(&wheel->driver);
    wheel->armed_tick = UINT64_MAX;
  }
}


void uvtw__driver_update(uvtw_wheel_t* wheel) {
  uint64_t next;

  uvtw__core_tighten(&wheel->core);
  next = uvtw__core_next_tick(&wheel->core);
  if (next == UINT64_MAX)
    disarm(wheel);
  else if (next != wheel->armed_tick)
    arm(wheel, next);
  uvtw__driver_sync_ref(wheel);
}


static void rearm_cb(uv_prepare_t* prepare) {
  uvtw_wheel_t* wheel;

  wheel = prepare->data;
  uv_prepare_stop(prepare);
  uvtw__driver_update(wheel);
}


static void driver_cb(uv_timer_t* driver) {
  uvtw_wheel_t* wheel;
  uvtw_timer_t* timer;

  wheel = driver->data;
  wheel->armed_tick = UINT64_MAX; /* a one-shot uv_timer_t: now inactive */
  wheel->driver_wakeups++;
  uvtw__core_expire(&wheel->core, uv_now(wheel->loop));
  wheel->in_pass = 1;
  while (!wheel->closing &&
         (timer = uvtw__core_pop_due(&wheel->core, uv_now(wheel->loop)))) {
    wheel->fired++;
    timer->cb_(timer);
  }
  wheel->in_pass = 0;
  uvtw__tasks_flush(wheel); /* nodes of tasks that ended in the pass */
  if (wheel->closing)
    return;
  if (uvtw__core_next_tick(&wheel->core) <= wheel->core.now_tick) {
    /* Work started during the pass is due already.  Re-arming the driver
     * with 0 here would run it again in this same pass (libuv 1.44), so the
     * prepare handle arms it for the next loop iteration. */
    uv_prepare_start(&wheel->rearm, rearm_cb);
    uvtw__driver_sync_ref(wheel);
  } else {
    uvtw__driver_update(wheel);
  }
}


int uvtw_wheel_new(uv_loop_t* loop,
                   const uvtw_options_t* opts,
                   uvtw_wheel_t** out) {
  uvtw_options_t defaults;
  uvtw_wheel_t* wheel;
  int err;

  if (loop == NULL || out == NULL)
    return UV_EINVAL;
  if (opts == NULL) {
    uvtw_options_init(&defaults);
    opts = &defaults;
  }
  if (opts->tick_ms == 0 || opts->tick_ms > 1000)
    return UV_EINVAL;

  wheel = malloc(sizeof(*wheel));
  if (wheel == NULL)
    return UV_ENOMEM;
  uvtw__core_init(&wheel->core, opts->tick_ms, uv_now(loop));
  wheel->loop = loop;
  wheel->armed_tick = UINT64_MAX;
  wheel->driver_ref = 1;
  wheel->in_pass = 0;
  wheel->closing = 0;
  wheel->open_handles = 0;
  wheel->close_cb = NULL;
  wheel->driver_wakeups = 0;
  wheel->fired = 0;

  err = uvtw__tasks_init(wheel, opts->max_tasks);
  if (err != 0) {
    free(wheel);
    return err;
  }
  /* uv_timer_init and uv_prepare_init cannot fail on unix; uv_async_init
   * can (no eventfd), so it comes last, and its failure closes the other
   * two handles, whose close callbacks free the wheel. */
  uv_timer_init(loop, &wheel->driver);
  uv_prepare_init(loop, &wheel->rearm);
  err = uv_async_init(loop, &wheel->async, uvtw__tasks_async_cb);
  if (err != 0) {
    wheel->open_handles = 2;
    wheel->driver.data = wheel;
    wheel->rearm.data = wheel;
    uvtw__tasks_destroy(wheel);
    wheel->close_cb = NULL;
    wheel->closing = 2; /* no callback, just free */
    uvtw__wheel_close_handles(wheel);
    return err;
  }
  wheel->driver.data = wheel;
  wheel->rearm.data = wheel;
  wheel->async.data = wheel;
  uv_unref((uv_handle_t*) &wheel->driver); /* referenced only while needed */
  wheel->driver_ref = 0;
  uv_unref((uv_handle_t*) &wheel->rearm);
  uv_unref((uv_handle_t*) &wheel->async);
  *out = wheel;
  return 0;
}


static void handle_closed(uv_handle_t* handle) {
  uvtw_wheel_t* wheel;

  wheel = handle->data;
  if (--wheel->open_handles != 0)
    return;
  if (wheel->closing == 1) {
    uvtw__tasks_destroy(wheel);
    if (wheel->close_cb != NULL)
      wheel->close_cb(wheel);
  }
  free(wheel);
}


void uvtw__wheel_close_handles(uvtw_wheel_t* wheel) {
  if (wheel->open_handles == 3)
    uv_close((uv_handle_t*) &wheel->async, handle_closed);
  uv_close((uv_handle_t*) &wheel->driver, handle_closed);
  uv_close((uv_handle_t*) &wheel->rearm, handle_closed);
}


int uvtw_wheel_close(uvtw_wheel_t* wheel, uvtw_close_cb cb) {
  if (wheel == NULL || wheel->closing)
    return UV_EINVAL;
  wheel->closing = 1;
  wheel->close_cb = cb;
  wheel->open_handles = 3;
  uvtw__tasks_close_begin(wheel);
  uvtw__core_clear(&wheel->core);
  disarm(wheel);
  uv_prepare_stop(&wheel->rearm);
  return 0;
}


typedef struct {
  void (*fn)(uvtw_timer_t* timer, void* arg);
  void* arg;
} walk_ctx_t;


static void walk_user_timer(uvtw_timer_t* timer, void* arg) {
  walk_ctx_t* ctx;

  ctx = arg;
  if (!timer->task_)
    ctx->fn(timer, ctx->arg);
}


void uvtw_wheel_walk(uvtw_wheel_t* wheel,
                     void (*fn)(uvtw_timer_t* timer, void* arg),
                     void* arg) {
  walk_ctx_t ctx;

  ctx.fn = fn;
  ctx.arg = arg;
  uvtw__core_walk(&wheel->core, walk_user_timer, &ctx);
}


void uvtw_wheel_stats(const uvtw_wheel_t* wheel, uvtw_stats_t* out) {
  out->timers_active =
      atomic_load_explicit(&wheel->core.active, memory_order_relaxed);
  out->tasks_live = uvtw__tasks_live(wheel);
  /* The driver counts every timer it pops, a task's too; a task counts as
   * fired when its callback runs, wherever that is. */
  out->fired = wheel->fired - wheel->tasks.fires + wheel->tasks.run;
  out->driver_wakeups = wheel->driver_wakeups;
  out->cascades = wheel->core.cascades;
  out->async_wakeups = wheel->tasks.async_wakeups;
  out->tasks_accepted = wheel->tasks.accepted;
  out->tasks_run = wheel->tasks.run;
  out->tasks_cancelled = wheel->tasks.cancelled;
  out->tasks_closed = wheel->tasks.closed;
  out->queue_high_water = wheel->tasks.high_water;
}


size_t uvtw_wheel_pending(const uvtw_wheel_t* wheel) {
  return (size_t) (atomic_load_explicit(&wheel->core.active,
                                        memory_order_relaxed) +
                   uvtw__tasks_live(wheel));
}
