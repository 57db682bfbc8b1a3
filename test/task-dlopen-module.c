/* SPDX-License-Identifier: MIT */
/* A shared object that uses tasks, for test-task-dlopen.c to load with
 * dlopen(), as Node loads an addon or Python an extension module: it links
 * the shared libuvtw, and its one entry point runs a loop with tasks
 * submitted from two threads and the threadpool. */

#include <stdatomic.h>

#include <uv.h>

#include "uvtw.h"

#define PER_THREAD 1000

static uvtw_wheel_t* wheel;
static uvtw_id_t keeper_id;
static atomic_int runs;


static void task_cb(void* arg, int status) {
  (void) arg;
  if (status == 0)
    atomic_fetch_add(&runs, 1);
}


static void producer(void* arg) {
  int i;

  (void) arg;
  for (i = 0; i < PER_THREAD; i++)
    if (uvtw_submit(wheel, (uint64_t) i % 5, 0,
                    i % 4 == 0 ? UVTW_THREADPOOL : 0u, task_cb, NULL,
                    NULL) != 0)
      return;
}


/* Holds the loop (submitted on the loop thread) until every task ran. */
static void keeper_cb(void* arg, int status) {
  (void) arg;
  if (status == 0 && atomic_load(&runs) == 2 * PER_THREAD)
    uvtw_cancel(wheel, keeper_id);
}


/* Runs 2 * PER_THREAD tasks to the end; returns how many ran, -1 on a
 * failed call. */
__attribute__((visibility("default"))) int module_run(void) {
  uv_thread_t threads[2];
  uv_loop_t loop;
  int i;

  if (uv_loop_init(&loop) != 0 || uvtw_wheel_new(&loop, NULL, &wheel) != 0 ||
      uvtw_submit(wheel, 1, 1, 0, keeper_cb, NULL, &keeper_id) != 0)
    return -1;
  for (i = 0; i < 2; i++)
    if (uv_thread_create(&threads[i], producer, NULL) != 0)
      return -1;
  if (uv_run(&loop, UV_RUN_DEFAULT) != 0)
    return -1;
  for (i = 0; i < 2; i++)
    uv_thread_join(&threads[i]);
  if (uvtw_wheel_close(wheel, NULL) != 0 ||
      uv_run(&loop, UV_RUN_DEFAULT) != 0 || uv_loop_close(&loop) != 0)
    return -1;
  return atomic_load(&runs);
}
