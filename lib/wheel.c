/* SPDX-License-Identifier: MIT */
/* The wheel on a libuv loop: the public object's lifecycle (new, close),
 * the after-pass hook it gives the driver, the cross-thread wake-up,
 * walk, stats and pending.  When the driver is armed is driver.c's.
 *
 * Close is owned here (wheel->closing); task.c does the task steps.  In
 * this order:
 *   1. uvtw_wheel_close (loop thread): OPEN -> CLOSING_TASKS.
 *      uvtw__tasks_close_begin refuses submits from now on (UV_ECANCELED),
 *      takes every task timer out of the core and queues each waiting
 *      task's final call.  The core is cleared, so every user timer is
 *      inactive; the driver and the prepare handle stop.  The async handle
 *      is referenced and signalled: the rest runs from the loop, outside
 *      the caller's stack, and the loop keeps running until close is done.
 *   2. On every async callback, and whenever a threadpool run comes back
 *      (close_continue): uvtw__tasks_close_step drains the
 *      queue, makes the final calls, uv_cancels queued threadpool work,
 *      and reports done only when no task is live and no other thread's
 *      call is inside (the gate, task-shared.c); the gate is then closed: a
 *      reset from then on is refused there, and a cancel finds its task
 *      ended (both UV_ENOENT).  Until then it
 *      signals the async handle again, or waits for the threadpool's
 *      after_work_cb.
 *   3. CLOSING_TASKS -> CLOSING_HANDLES: the async, driver and prepare
 *      handles close.
 *   4. The last of their close callbacks calls the user's close callback,
 *      then frees the node table and the wheel. */

#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "uvtw-assert.h"


void uvtw_options_init(uvtw_options_t* opts) {
  opts->tick_ms = 1;
  opts->max_tasks = 0;
  opts->virtual_time = 0;
  opts->precise = 0;
  opts->task_leeway_ms = 0;
}


uv_loop_t* uvtw_wheel_loop(const uvtw_wheel_t* wheel) {
  return wheel->loop;
}


static void close_continue(uvtw_wheel_t* wheel);


/* The task half after every pass (the driver's after_pass): the nodes of
 * tasks that ended in it go back to the free stack, and the tasks the loop
 * holds keep it alive, or stop. */
static void tasks_after_pass(uvtw_wheel_t* wheel) {
  if (uvtw__tasks_may_be_busy(&wheel->tasks))
    uvtw__tasks_flush(wheel);
  uvtw__tasks_validate(wheel);
}


/* The cross-thread wake-up: takes in what other threads published, or
 * takes close a step further. */
static void async_cb(uv_async_t* async) {
  uvtw_wheel_t* wheel;

  wheel = async->data;
  uvtw__tasks_woken(wheel);
  if (wheel->closing) {
    close_continue(wheel);
    return;
  }
  /* A flood of submissions cannot starve the loop: after a batch, signal
   * ourselves and let the rest of this iteration run. */
  if (uvtw__tasks_drain(wheel, UVTW__DRAIN_BATCH))
    uv_async_send(async);
  uvtw__tasks_validate(wheel);
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
  if (opts->tick_ms == 0 || opts->tick_ms > UVTW_TICK_MS_MAX ||
      opts->task_leeway_ms > UVTW_LEEWAY_MS_MAX)
    return UV_EINVAL;

  wheel = malloc(sizeof(*wheel));
  if (wheel == NULL)
    return UV_ENOMEM;
  uvtw__core_init(&wheel->core, opts->tick_ms, uv_now(loop));
  wheel->loop = loop;
  wheel->closing = UVTW__OPEN;
  wheel->handles_closing = 0;
  wheel->close_cb = NULL;
  memset(wheel->late_bits, 0, sizeof(wheel->late_bits));
  wheel->tasks_dispatched = 0;
  /* virtual.c: a virtual wheel's clock starts at the loop's. */
  wheel->virtual_time = opts->virtual_time != 0;
  wheel->advancing = 0;
  wheel->virtual_now = uv_now(loop);
  atomic_init(&wheel->virtual_now_shared, wheel->virtual_now);
  wheel->precise = opts->precise != 0 && !wheel->virtual_time;
  wheel->core.task_leeway =
      uvtw__leeway_bits(&wheel->core, opts->task_leeway_ms);
  wheel->core.leeway_used = wheel->core.task_leeway != 0;

  err = uvtw__tasks_init(wheel, opts->max_tasks, close_continue);
  if (err != 0) {
    free(wheel);
    return err;
  }
  if (wheel->virtual_time)
    wheel->tasks.virtual_clock = &wheel->virtual_now_shared;
  wheel->tasks.precise = wheel->precise;
  /* uv_async_init is the one that can fail (no eventfd), so it comes first:
   * a failure leaves no handle to close.  The other two cannot fail on
   * unix. */
  err = uv_async_init(loop, &wheel->async, async_cb);
  if (err != 0) {
    uvtw__tasks_destroy(wheel);
    free(wheel);
    return err;
  }
  uvtw__driver_init(wheel, tasks_after_pass);
  wheel->async.data = wheel;
  uv_unref((uv_handle_t*) &wheel->async);
  *out = wheel;
  return 0;
}


static void handle_closed(uv_handle_t* handle) {
  uvtw_wheel_t* wheel;

  wheel = handle->data;
  UVTW__ASSERT(wheel->closing == UVTW__CLOSING_HANDLES);
  UVTW__ASSERT(wheel->handles_closing > 0);
  if (--wheel->handles_closing != 0)
    return;
  /* Step 4.  Calls into the wheel must have returned before cb runs, so
   * the node table goes only after it. */
  if (wheel->close_cb != NULL)
    wheel->close_cb(wheel);
  uvtw__tasks_destroy(wheel);
  free(wheel);
}


/* Loop thread, while closing: takes close as far as it can go now (step 2
 * of the list above).  Called on every async callback and whenever a
 * threadpool run comes back. */
static void close_continue(uvtw_wheel_t* wheel) {
  /* Step 2, and when it is done, step 3. */
  if (wheel->closing != UVTW__CLOSING_TASKS || !uvtw__tasks_close_step(wheel))
    return;
  wheel->closing = UVTW__CLOSING_HANDLES;
  uv_close((uv_handle_t*) &wheel->async, handle_closed);
  wheel->handles_closing = 1 + uvtw__driver_close(wheel, handle_closed);
}


int uvtw_wheel_close(uvtw_wheel_t* wheel, uvtw_close_cb cb) {
  if (wheel == NULL || wheel->closing != UVTW__OPEN)
    return UV_EINVAL;
  UVTW__LOOP_THREAD_ONLY(wheel);
  /* Step 1. */
  wheel->closing = UVTW__CLOSING_TASKS;
  wheel->close_cb = cb;
  uvtw__tasks_close_begin(wheel);
  uvtw__core_clear(&wheel->core);
  uvtw__driver_stop(wheel);
  return 0;
}


typedef struct {
  void (*fn)(uvtw_timer_t* timer, void* arg);
  void* arg;
} walk_ctx_t;


static void walk_user_timer(uvtw_timer_t* timer, void* arg) {
  walk_ctx_t* ctx;

  ctx = arg;
  if (!uvtw__task_owns(timer))
    ctx->fn(timer, ctx->arg);
}


void uvtw_wheel_walk(uvtw_wheel_t* wheel,
                     void (*fn)(uvtw_timer_t* timer, void* arg),
                     void* arg) {
  walk_ctx_t ctx;

  UVTW__LOOP_THREAD_ONLY(wheel);
  ctx.fn = fn;
  ctx.arg = arg;
  uvtw__core_walk(&wheel->core, walk_user_timer, &ctx);
}


/* The user's active timers: the core counts no task's (core.h). */
static uint64_t timers_active(const uvtw_wheel_t* wheel) {
  return atomic_load_explicit(&wheel->core.active, memory_order_relaxed);
}


void uvtw_wheel_stats(const uvtw_wheel_t* wheel, uvtw_stats_t* out) {
  UVTW__LOOP_THREAD_ONLY(wheel);
  uvtw__tasks_stats(wheel, out);
  out->timers_active = timers_active(wheel);
  /* A task counts as fired when its callback runs, wherever that is;
   * a timer when its pass pops it (internal.h, late_bits). */
  out->fired = uvtw__lateness_fold(wheel, out->lateness) -
               wheel->tasks_dispatched + wheel->tasks.run;
  out->driver_wakeups = wheel->driver.wakeups;
  out->cascades = wheel->core.cascades;
}


size_t uvtw_wheel_pending(const uvtw_wheel_t* wheel) {
  return (size_t) (timers_active(wheel) + uvtw__tasks_live(wheel));
}
