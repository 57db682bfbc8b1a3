/* SPDX-License-Identifier: MIT */
/* Cross-thread tasks: the producer queues and the state machine that
 * makes cancel exact: the loop's side (task.c) and what the other task
 * files share. */

#ifndef UVTW_TASK_H
#define UVTW_TASK_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "atomics.h"
#include "list.h"
#include "task-pool.h"
#include "uvtw-assert.h"
#include "uvtw.h"

typedef struct uvtw__record_s uvtw__record_t;

/* Ids and nodes one async callback takes in before yielding to the rest of
 * the loop; the remainder waits for the next iteration.  (The tests make
 * backlogs of more than this.) */
#define UVTW__DRAIN_BATCH 4096

/* The close word's flags. */
#define CLOSING ((uint64_t) 1) /* uvtw_wheel_close has begun */
#define CLOSED ((uint64_t) 2)  /* close is done with the tasks */

/* The threadpool request of a pool task, only while it is queued or runs:
 * loop tasks never carry one.  Recycled by the loop thread. */
struct uvtw__work_s {
  uv_work_t req;
  uvtw__task_t* node;
  uvtw__work_t* next_free;
  uint64_t dispatch_ms;    /* loop time of the run now in flight */
  uint8_t ran;             /* the pool thread ran cb; read in after_work */
  uint8_t stopped;         /* ended by work_cb after a cancel's UV_EBUSY */
  uint8_t uv_cancel_asked; /* at close */
};


typedef struct uvtw__tasks_s {
  /* Read by every call; written only at creation, close, and when a
   * thread makes its record. */
  size_t max_tasks;
  /* CLOSING | CLOSED. */
  _Atomic uint64_t close_word;
  /* Process-wide serial of this wheel: with the wheel's address, the key
   * of a thread's cached record (a new wheel at a freed wheel's address
   * has a new serial). */
  uint64_t serial;
  /* Records, newest first. */
  uvtw__record_t* _Atomic records;
  /* The thread that created the wheel, which is its loop thread: the
   * address of that thread's token (uvtw__tls_t).  Set before the wheel is
   * shared, never written again. */
  const char* loop_thread;
  /* A virtual wheel's clock, for the deadline of a submit (the wheel's
   * virtual_now_shared); NULL on an ordinary wheel, whose submits count
   * from uv_hrtime().  Set before the wheel is shared. */
  const _Atomic uint64_t* virtual_clock;
  UVTW__PAD(pad0_);

  /* A producer has sent the wake-up that the async callback has not yet
   * begun to serve (wake_loop, task-record.h): written once per wake-up. */
  _Atomic int wake_pending;
  UVTW__PAD(pad1_);

  /* Live tasks under max_tasks, when max_tasks is set: reserved by submit
   * in one CAS, returned by whoever ends the task. */
  _Atomic uint64_t reserved;
  /* Ends counted by threads without a record (out of memory) and by
   * threadpool runs. */
  _Atomic uint64_t ended_shared;
  /* Tasks cancelled before the loop took them in, by threads without a
   * record (the others count theirs in their record). */
  _Atomic uint64_t taken_back_shared;
  /* Calls inside the wheel that have no record (yet): a thread's first
   * call, or one without memory for a record. */
  _Atomic uint64_t calls_shared;
  /* Notices of cancels made without a record: a lock-free stack. */
  uvtw__task_t* _Atomic notices;
  UVTW__PAD(pad2_);

  uvtw__pool_t pool;

  /* Loop thread only. */
  int holds_loop;            /* the async handle is referenced for tasks */
  int backlog;               /* the last drain left ids in a queue */
  int woken;                 /* the async callback has run: tasks may exist */
  uint64_t held;             /* tasks taken in (or submitted here), not ended */
  struct uvtw__link in_pool; /* nodes with work queued on the threadpool */
  uvtw__work_t* free_works;  /* idle threadpool requests */
  struct uvtw__link final;   /* nodes owed their final UV_ECANCELED call */
  /* Task timers active in the core (whose `active` counts every timer):
   * the core's count minus this is the user timers'.  Written by the loop
   * thread only, read by any (uvtw_wheel_pending). */
  _Atomic uint64_t filed;
  _Atomic uint64_t loop_ended; /* tasks the loop ended; one writer */
  uint64_t accepted;
  uint64_t run; /* task callbacks run with status 0 */
  uint64_t cancelled;
  uint64_t closed;
  uint64_t high_water;
  uint64_t async_wakeups;
  void (*pool_returned)(uvtw_wheel_t* wheel); /* see uvtw__tasks_init */
} uvtw__tasks_t;

/* `pool_returned` is called on the loop thread, while the wheel closes,
 * each time a threadpool run has come back (close waits for them). */
int uvtw__tasks_init(uvtw_wheel_t* wheel,
                     size_t max_tasks,
                     void (*pool_returned)(uvtw_wheel_t* wheel));
/* Frees the pool and the producer records. */
void uvtw__tasks_destroy(uvtw_wheel_t* wheel);
/* Loop thread: the task counters of uvtw_stats_t (accepted, run,
 * cancelled, closed, live, high water, async wake-ups). */
void uvtw__tasks_stats(const uvtw_wheel_t* wheel, uvtw_stats_t* out);
/* Live tasks (any thread): with max_tasks, the places taken; otherwise
 * uvtw__records_live.  `between`: NULL, or a test's stand-in for a
 * preemption. */
uint64_t uvtw__tasks_live(const uvtw_wheel_t* wheel, void (*between)(void));
/* Loop thread, after each batch of work: puts the nodes released since the
 * last call on the free stack, with one CAS, and makes the tasks the loop
 * holds keep it alive (or stop, once none is left). */
void uvtw__tasks_flush(uvtw_wheel_t* wheel);
/* Loop thread, after a driver pass: uvtw__tasks_flush at the cost of one
 * shared read (task.c), if uvtw__tasks_may_be_busy. */
void uvtw__tasks_pass_flush(uvtw_wheel_t* wheel);
/* Non-zero unless the wheel never had a task on the loop (no async
 * callback has run yet) and no wake-up is pending. */
static inline int uvtw__tasks_may_be_busy(uvtw__tasks_t* tasks) {
  return tasks->woken ||
         atomic_load_explicit(&tasks->wake_pending, memory_order_relaxed);
}
/* Loop thread: takes in about `budget` ids and notices, each record's
 * oldest first; non-zero if work remains. */
int uvtw__tasks_drain(uvtw_wheel_t* wheel, size_t budget);
/* The async callback's first step: the wake-up flag is cleared before
 * the drain loads the queues (the loop's side of the pair in wake_loop,
 * task-record.h). */
void uvtw__tasks_woken(uvtw_wheel_t* wheel);
/* Loop thread: non-zero if the tasks should hold the loop now (task.c,
 * hold_sync). */
int uvtw__tasks_hold_wanted(const uvtw_wheel_t* wheel);
/* Loop thread: a live task ended. */
static inline void uvtw__tasks_end_live(uvtw__tasks_t* tasks) {
  if (tasks->max_tasks != 0)
    atomic_fetch_sub_explicit(&tasks->reserved, 1, memory_order_relaxed);
  uvtw__own_add(&tasks->loop_ended, 1, memory_order_release);
}
/* Loop thread: takes the task's timer out of the wheel, if it is there. */
void uvtw__tasks_unfile(uvtw_wheel_t* wheel, uvtw__task_t* node);
/* Loop thread: frees an ended node once nothing refers to it any more. */
void uvtw__tasks_release_if_idle(uvtw_wheel_t* wheel, uvtw__task_t* node);
/* Loop thread: moves a waiting task (state `from`) to CLOSED and queues its
 * final call; 0 if a cancel won the race instead. */
int uvtw__tasks_queue_final_call(uvtw_wheel_t* wheel,
                                 uvtw__task_t* node,
                                 unsigned from);
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
 * Returns non-zero once no task is live and no uvtw_submit or uvtw_cancel
 * that close must wait for is inside the wheel; until then it has
 * arranged to be called again (it never blocks). */
int uvtw__tasks_close_step(uvtw_wheel_t* wheel);

/* Checks the tasks' bookkeeping against the nodes (task-check.c); with
 * `quiescent` (no other thread inside the wheel), also where the free
 * nodes are.  Returns 0, or -1 after printing the broken rule to `out`
 * (NULL: silent).  Loop thread. */
int uvtw__tasks_check(const uvtw_wheel_t* wheel, FILE* out, int quiescent);

/* With UVTW_CHECK_INVARIANTS: uvtw__tasks_check, aborting on a broken
 * rule; otherwise nothing. */
static inline void uvtw__tasks_validate(const uvtw_wheel_t* wheel) {
#ifdef UVTW_CHECK_INVARIANTS
  if (uvtw__tasks_check(wheel, stderr, 0) != 0)
    uvtw__abort_at(__FILE__, __LINE__, "uvtw__tasks_check failed");
#else
  (void) wheel;
#endif
}

#endif /* UVTW_TASK_H */
