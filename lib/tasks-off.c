/* SPDX-License-Identifier: MIT */
/* task.h's interface in a library built with -DUVTW_TASKS=OFF, the timer
 * half only (no task file is compiled).  No task ever exists: the wheel's
 * calls into the tasks do nothing, and uvtw_submit, uvtw_cancel and
 * uvtw_reset return UV_ENOSYS. */

#include <string.h>

#include "internal.h"
#include "uvtw-assert.h"

/* Stubs: most ignore their arguments. */
#pragma GCC diagnostic ignored "-Wunused-parameter"


int uvtw__tasks_init(uvtw_wheel_t* wheel,
                     size_t max_tasks,
                     void (*work_returned)(uvtw_wheel_t* wheel)) {
  memset(&wheel->tasks, 0, sizeof(wheel->tasks));
  return 0;
}


void uvtw__tasks_destroy(uvtw_wheel_t* wheel) {
}


void uvtw__tasks_stats(const uvtw_wheel_t* wheel, uvtw_stats_t* out) {
  out->tasks_live = out->async_wakeups = out->tasks_accepted = 0;
  out->tasks_run = out->tasks_cancelled = out->tasks_closed = 0;
  out->queue_high_water = 0;
}


uint64_t uvtw__tasks_live(const uvtw_wheel_t* wheel) {
  return 0;
}


void uvtw__tasks_flush(uvtw_wheel_t* wheel) {
}


int uvtw__tasks_drain(uvtw_wheel_t* wheel, size_t budget) {
  return 0;
}


void uvtw__tasks_woken(uvtw_wheel_t* wheel) {
}


/* As with tasks, the rest of close runs from the async callback, outside
 * the caller's stack; the async handle holds the loop until close is done. */
void uvtw__tasks_close_begin(uvtw_wheel_t* wheel) {
  uv_ref((uv_handle_t*) &wheel->async);
  uv_async_send(&wheel->async);
}


int uvtw__tasks_close_step(uvtw_wheel_t* wheel) {
  return 1;
}


int uvtw__tasks_check(const uvtw_wheel_t* wheel, FILE* out, int quiescent) {
  return 0;
}


/* Only its address is used (uvtw__task_owns): no timer has it. */
void uvtw__task_fire(uvtw_timer_t* timer) {
  UVTW__UNREACHABLE();
}


int uvtw_submit(uvtw_wheel_t* wheel,
                uint64_t delay_ms,
                uint64_t repeat_ms,
                unsigned flags,
                uvtw_task_cb cb,
                void* arg,
                uvtw_id_t* id) {
  return UV_ENOSYS;
}


int uvtw_cancel(uvtw_wheel_t* wheel, uvtw_id_t id) {
  return UV_ENOSYS;
}


int uvtw_reset(uvtw_wheel_t* wheel, uvtw_id_t id, uint64_t delay_ms) {
  return UV_ENOSYS;
}
