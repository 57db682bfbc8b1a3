/* SPDX-License-Identifier: MIT */
/* Cross-thread tasks: the producer queues and the state machine that
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
   * transition is one CAS.  A free node's word carries the generation of
   * its next use. */
  _Alignas(64) _Atomic uint64_t state;
  /* Until the loop takes the task in: the queue slot that holds its id
   * (a cancel that takes it back marks the slot).  After: the link of a
   * notice on the wheel's stack, for a cancel made without a record. */
  union {
    _Atomic uint64_t* slot;
    uvtw__task_t* _Atomic queue_next;
  } q;
  uvtw_task_cb cb;
  void* arg;
  uint64_t deadline_ms; /* uv_hrtime ms at submit + delay, saturated */
  uint64_t repeat_ms;
  /* Free batches (task-pool.c): index + 1 of the next node of the batch,
   * and in a batch's first node, of the next batch's; 0 at the end. */
  _Atomic uint32_t free_next;
  _Atomic uint32_t batch_next;
  uint32_t index;

  /* Line 2, loop thread only: filed in the wheel while the task waits. */
  uvtw_timer_t timer;

  /* Line 3, loop thread only (gen_end also by the one thread that owns the
   * node while it is free). */
  uint64_t gen_end;   /* end of the generations reserved for its index */
  uvtw__work_t* work; /* while on the threadpool */
  uint8_t location;   /* wheel, pool, final list or none */
  uint8_t taken_in;   /* counted in `accepted` once */
  uint8_t held;       /* counted in the loop's `held` */
};

/* The node with this index, or NULL if its chunk does not exist (an id
 * that was never issued).  Any thread. */
static inline uvtw__task_t* uvtw__pool_node_at(const uvtw__pool_t* pool,
                                               uint32_t index) {
  uvtw__task_t* chunk;
  uint64_t offset;
  unsigned c;

  c = uvtw__pool_chunk_of(index, &offset);
  if (c >= UVTW__CHUNKS)
    return NULL;
  chunk = atomic_load_explicit(&pool->chunks[c], memory_order_acquire);
  if (chunk == NULL)
    return NULL;
  return &chunk[offset];
}


/* A producer's queue is a chain of blocks of ids, each one page: only the
 * producer writes ids, only the loop reads them (8 per cache line), and a
 * consumed block goes back to its producer.  Slot values: 0 not written
 * yet, an id, or TOMBSTONE (task.c). */
#define UVTW__BLOCK_IDS 510

/* Ids and nodes one async callback takes in before yielding to the rest of
 * the loop; the remainder waits for the next iteration.  (The tests make
 * backlogs of more than this.) */
#define UVTW__DRAIN_BATCH 4096

typedef struct uvtw__block_s uvtw__block_t;
struct uvtw__block_s {
  _Atomic uint64_t slot[UVTW__BLOCK_IDS];
  /* The next block of the queue, of the returned stack, or of the spare
   * list: each block is in exactly one of the three. */
  uvtw__block_t* _Atomic next;
};

/* One per (thread, wheel): created on the thread's first submit or cancel
 * on the wheel, owned by the wheel (freed with it, so a thread may exit at
 * any time; a later thread whose thread-local block lands at the same
 * address adopts it).  Its thread submits through it without writing any
 * line that another thread writes: a cache of free nodes, and a queue of
 * ids that only this thread fills and only the loop empties. */
#define UVTW__CACHE 64 /* free nodes; at least 2 * UVTW__BATCH */

typedef struct uvtw__producer_s uvtw__producer_t;
struct uvtw__producer_s {
  /* Written once, before the record is published. */
  uvtw__producer_t* next; /* in the wheel's list, never removed */
  /* The owning thread's token (task.c); a new thread may adopt it. */
  _Atomic(const char*) owner;

  /* The owner's: the loop reads the counters only for stats and close. */
  _Alignas(64) _Atomic uint64_t submitted; /* tasks accepted by submit */
  /* Odd while the owner is inside uvtw_submit or uvtw_cancel on the wheel
   * (+1 on entry, +1 on leaving, release): close waits for it (task.c,
   * "Close"). */
  _Atomic uint64_t calls;
  _Atomic uint64_t ended;                  /* tasks ended by a cancel here */
  _Atomic uint64_t retracted; /* of those, before the loop took them in */
  uvtw__block_t* wblock;      /* the block being filled */
  unsigned widx;              /* its next slot */
  unsigned ncache;
  uvtw__block_t* spare;       /* consumed blocks, ready for reuse */
  /* Blocks taken from `spare` (the loop's handed_back minus this is about
   * how many wait there or in `returned`). */
  _Atomic uint64_t taken_back;

  /* The loop's. */
  _Alignas(64) uvtw__block_t* _Atomic returned; /* consumed, for the owner */
  uvtw__block_t* rblock; /* the block being read */
  unsigned ridx;         /* its next slot */
  _Atomic uint64_t handed_back; /* blocks pushed on `returned` */
  /* Blocks allocated and not freed: the owner adds, the loop subtracts. */
  _Atomic uint64_t nblocks;
  /* Close: the `calls` value it waits to see change (0: not read yet). */
  uint64_t close_seen;

  _Alignas(64) uvtw__task_t* cache[UVTW__CACHE]; /* owner only */
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

/* The wheel is malloc()ed, so lines are kept apart by padding rather than
 * by alignment: fields more than 64 bytes apart never share a line. */
#define UVTW__PAD(name) char name[64]

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
  /* Producer records, newest first. */
  uvtw__producer_t* _Atomic producers;
  /* The thread that created the wheel, which is its loop thread: the
   * address of that thread's token (task.c).  Set before the wheel is
   * shared, never written again. */
  const char* loop_thread;
  UVTW__PAD(pad0_);

  /* A producer has sent the wake-up that the async callback has not yet
   * begun to serve (task.c, wake_loop): written once per wake-up. */
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
  _Atomic uint64_t retracted_shared;
  /* Calls inside the wheel that have no record (yet): a thread's first
   * call, or one without memory for a record. */
  _Atomic uint64_t calls_shared;
  /* Notices of cancels made without a record: a Treiber stack. */
  uvtw__task_t* _Atomic queue;
  UVTW__PAD(pad2_);

  uvtw__pool_t pool;

  /* Loop thread only. */
  int holds_loop;          /* the async handle is referenced for tasks */
  int backlog;             /* the last drain left ids in a queue */
  uint64_t held;           /* tasks taken in (or submitted here), not ended */
  struct uvtw__link in_pool; /* nodes with work queued on the threadpool */
  uvtw__work_t* free_works;  /* idle threadpool requests */
  struct uvtw__link final; /* nodes owed their final UV_ECANCELED call */
  /* Task timers active in the core (whose `active` counts every timer):
   * the core's count minus this is the user timers'.  Written by the loop
   * thread only, read by any (uvtw_wheel_pending). */
  _Atomic uint64_t filed;
  _Atomic uint64_t loop_ended; /* tasks the loop ended; one writer */
  uint64_t accepted;
  uint64_t run;      /* task callbacks run with status 0 */
  uint64_t cancelled;
  uint64_t closed;
  uint64_t high_water;
  uint64_t async_wakeups;
} uvtw__tasks_t;

int uvtw__tasks_init(uvtw_wheel_t* wheel, size_t max_tasks);
/* Frees the pool and the producer records. */
void uvtw__tasks_destroy(uvtw_wheel_t* wheel);
/* Loop thread: the task counters of uvtw_stats_t (accepted, run,
 * cancelled, closed, live, high water, async wake-ups). */
void uvtw__tasks_stats(const uvtw_wheel_t* wheel, uvtw_stats_t* out);
/* Live tasks (any thread). */
uint64_t uvtw__tasks_live(const uvtw_wheel_t* wheel);
/* Loop thread, after each batch of work: puts the nodes released since the
 * last call on the free stack, with one CAS, and makes the tasks the loop
 * holds keep it alive (or stop, once none is left). */
void uvtw__tasks_flush(uvtw_wheel_t* wheel);
/* The uv_async_t callback: drains the producers' queues in bounded
 * batches. */
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
 * Returns non-zero once no task is live and no uvtw_submit or uvtw_cancel
 * that close must wait for is inside the wheel; until then it has
 * arranged to be called again (it never blocks). */
int uvtw__tasks_close_step(uvtw_wheel_t* wheel);

#endif /* UVTW_TASK_H */
