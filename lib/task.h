/* SPDX-License-Identifier: MIT */
/* Cross-thread tasks: the submission stack and the state machine that
 * makes cancel exact.  See task.c for the protocol; the nodes come from
 * task-pool.c. */

#ifndef UVTW_TASK_H
#define UVTW_TASK_H

#include <stdatomic.h>
#include <stdint.h>

#include "list.h"
#include "task-pool.h"
#include "uvtw.h"

typedef struct uvtw__task_s uvtw__task_t;
typedef struct uvtw__work_s uvtw__work_t;

/* A task node: three cache lines, laid out by who writes them, so that a
 * loop task moves one line between threads on its way in (the first) and
 * the loop keeps the rest.  192 bytes on LP64. */
struct uvtw__task_s {
  /* Line 1: what a submit writes and the loop reads, and the state that
   * cancels race on.  gen << 16 | flags | state (task.c); every contended
   * transition is one CAS. */
  _Alignas(64) _Atomic uint64_t state;
  /* Link in the submission stack (producers push, the loop takes all). */
  uvtw__task_t* _Atomic queue_next;
  uvtw_task_cb cb;
  void* arg;
  uint64_t deadline_ms; /* uv_hrtime ms at submit + delay, saturated */
  uint64_t repeat_ms;
  /* The generation of the node's current (or next) use (task-pool.c). */
  uint64_t gen;
  /* Free-list link: index + 1 of the next free node, 0 at the end. */
  _Atomic uint32_t free_next;
  uint32_t index;

  /* Line 2, loop thread only: filed in the wheel while the task waits. */
  uvtw_timer_t timer;

  /* Line 3, loop thread only (gen_end also by the producer that takes a
   * never-used node). */
  uint64_t gen_end;   /* end of the generations reserved for its index */
  uvtw__work_t* work; /* while on the threadpool */
  uint8_t location;   /* wheel, pool, final list or none */
  uint8_t taken_in;   /* counted in `accepted` once */
};

/* The threadpool request of a pool task, only while it is queued or runs:
 * loop tasks never carry one.  Recycled by the loop thread. */
struct uvtw__work_s {
  uv_work_t req;
  uvtw__task_t* node;
  uvtw__work_t* next_free;
  uint64_t dispatch_ms; /* loop time of the run now in flight */
  uint8_t ran;             /* the pool thread ran cb; read in after_work */
  uint8_t stopped; /* ended by work_cb after a cancel's UV_EBUSY */
  uint8_t uv_cancel_asked; /* at close */
};

typedef struct uvtw__tasks_s {
  size_t max_tasks;
  /* CLOSING | CLOSED | calls inside submit/cancel (INFLIGHT units) | live
   * tasks.  One word, so a submit reserves its place and sees close in a
   * single CAS, and close finishes only when no call is inside. */
  _Atomic uint64_t live_word;
  /* Treiber stack of submitted and cancelled nodes; NULL when drained. */
  uvtw__task_t* _Atomic queue;
  uvtw__pool_t pool;

  /* The thread that created the wheel, which is its loop thread: the
   * address of that thread's `thread_token` (task.c).  Set before the
   * wheel is shared, never written again. */
  const char* loop_thread;

  /* Loop thread only. */
  int holds_loop;          /* the async handle is referenced for tasks */
  uvtw__task_t* backlog;   /* taken from `queue`, not processed yet */
  struct uvtw__link in_pool; /* nodes with work queued on the threadpool */
  uvtw__work_t* free_works;  /* idle threadpool requests */
  struct uvtw__link final; /* nodes owed their final UV_ECANCELED call */
  /* Task timers active in the core (whose `active` counts every timer):
   * the core's count minus this is the user timers'.  Written by the loop
   * thread only, read by any (uvtw_wheel_pending). */
  _Atomic uint64_t filed;
  uint64_t accepted;
  uint64_t run;      /* task callbacks run with status 0 */
  uint64_t cancelled;
  uint64_t closed;
  uint64_t high_water;
  uint64_t async_wakeups;
} uvtw__tasks_t;

int uvtw__tasks_init(uvtw_wheel_t* wheel, size_t max_tasks);
/* Frees the pool; every node must be free. */
void uvtw__tasks_destroy(uvtw_wheel_t* wheel);
/* Live tasks (any thread). */
uint64_t uvtw__tasks_live(const uvtw_wheel_t* wheel);
/* Loop thread, after each batch of work: puts the nodes released since the
 * last call on the free list, with one CAS, and makes the live tasks hold
 * the loop (or stop holding it, once none is live). */
void uvtw__tasks_flush(uvtw_wheel_t* wheel);
/* The uv_async_t callback: drains the submission stack in bounded batches. */
void uvtw__tasks_async_cb(uv_async_t* async);
/* The callback of every task's timer: runs the task on the loop or hands
 * it to the threadpool. */
void uvtw__task_fire(uvtw_timer_t* timer);
/* Non-zero if `timer` is a task's (its callback is the tasks' own). */
static inline int uvtw__task_owns(const uvtw_timer_t* timer) {
  return timer->cb_ == uvtw__task_fire;
}
/* Task timers active in the core (any thread; a snapshot). */
uint64_t uvtw__tasks_filed(const uvtw_wheel_t* wheel);
/* Close, step 1 (wheel.c): called once by uvtw_wheel_close, before the
 * core is cleared: refuses submits, takes the task timers out of the wheel
 * and queues their final calls. */
void uvtw__tasks_close_begin(uvtw_wheel_t* wheel);
/* Close, step 2: drains, makes the final calls, cancels queued pool work.
 * Returns non-zero once no task is live and no call can enter the wheel
 * any more; until then it has arranged to be called again. */
int uvtw__tasks_close_step(uvtw_wheel_t* wheel);

#endif /* UVTW_TASK_H */
