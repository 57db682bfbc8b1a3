/* SPDX-License-Identifier: MIT */
/* A thread's record of a wheel (task-record.c): the calls' way in and out
 * of the wheel, the node cache and the queue of ids, and the thread-local
 * state that finds a record without a search. */

#ifndef UVTW_TASK_RECORD_H
#define UVTW_TASK_RECORD_H

#include "atomics.h"
#include "internal.h"
#include "task-state.h"

/* A slot whose task a cancel took back: index 1, generation 0, which no
 * id carries. */
#define TOMBSTONE ((uint64_t) 1 << UVTW__GEN_BITS)

/* A record's queue is a chain of blocks of ids, each one page: only the
 * producer writes ids, only the loop reads them (8 per cache line), and a
 * consumed block goes back to its producer.  Slot values: 0 not written
 * yet, an id, or TOMBSTONE. */
#define UVTW__BLOCK_IDS ((4096 - 2 * sizeof(uint64_t)) / sizeof(uint64_t))

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

typedef struct uvtw__record_s uvtw__record_t;
struct uvtw__record_s {
  /* Written once, before the record is published. */
  uvtw__record_t* next; /* in the wheel's list, never removed */
  /* The owning thread's token (uvtw__tls_t); a new thread may adopt it. */
  _Atomic(const char*) owner;

  /* The owner's: the loop reads the counters only for stats and close. */
  /* Tasks accepted by submit. */
  _Alignas(UVTW__LINE) _Atomic uint64_t submitted;
  /* Odd while the owner is inside uvtw_submit or uvtw_cancel on the wheel
   * (+1 on entry, +1 on leaving, release): close waits for it
   * (task-close.c). */
  _Atomic uint64_t calls;
  _Atomic uint64_t ended;      /* tasks ended by a cancel here */
  _Atomic uint64_t taken_back; /* of those, before the loop took them in */
  uvtw__block_t* wblock;       /* the block being filled */
  unsigned widx;               /* its next slot */
  unsigned ncache;
  uvtw__block_t* spare; /* consumed blocks, ready for reuse */
  /* Blocks taken from `spare` (the loop's handed_back minus this is about
   * how many wait there or in `returned`). */
  _Atomic uint64_t blocks_reused;

  /* The loop's. */
  /* Consumed blocks, for the owner. */
  _Alignas(UVTW__LINE) uvtw__block_t* _Atomic returned;
  uvtw__block_t* rblock;          /* the block being read */
  unsigned ridx;                  /* its next slot */
  _Atomic uint64_t blocks_handed; /* blocks pushed on `returned` */
  /* Blocks allocated and not freed: the owner adds, the loop subtracts. */
  _Atomic uint64_t nblocks;
  /* Close: the `calls` value it waits to see change (0: not read yet). */
  uint64_t close_seen;

  _Alignas(UVTW__LINE) uvtw__task_t* cache[UVTW__CACHE]; /* owner only */
};

/* Thread-local records: the last few (wheel, serial) pairs this thread
 * used, so that a call finds its record without a search. */
#define TLS_RECORDS 4

typedef struct {
  const uvtw_wheel_t* wheel;
  uint64_t serial;
  uvtw__record_t* rec;
} uvtw__tls_record_t;

/* This thread's state, in one thread-local object (task-record.c).
 * initial-exec: one %fs-relative load instead of a __tls_get_addr call per
 * access (which cost more than the rest of a cancel); the object is small,
 * so even a dlopen()ed libuvtw finds room for it in glibc's static TLS
 * surplus. */
typedef struct {
  /* The records this thread used last, most recent first, so that a call
   * finds its record without a search. */
  uvtw__tls_record_t records[TLS_RECORDS];
  /* The task whose callback runs on this thread, to tell a cancel from
   * inside its own callback. */
  uvtw__task_t* current_task;
  /* Its address names the thread: the loop thread is the one whose token
   * the wheel recorded at creation, and a record belongs to the thread
   * whose token it holds. */
  char token;
} uvtw__tls_t;

extern _Thread_local uvtw__tls_t uvtw__tls
    __attribute__((tls_model("initial-exec")));

/* enter's search, when the wheel is not the one this thread used last. */
uvtw__record_t* uvtw__record_enter_search(uvtw_wheel_t* wheel);
/* A free node from the record's cache, refilled from the pool; NULL when
 * out of memory. */
uvtw__task_t* uvtw__record_cache_get(uvtw__tasks_t* tasks, uvtw__record_t* rec);
/* A FREE node back into the record's cache. */
void uvtw__record_cache_put(uvtw__tasks_t* tasks,
                            uvtw__record_t* rec,
                            uvtw__task_t* node);
/* Makes room for one more id in the owner's queue; non-zero (UV_ENOMEM)
 * if out of memory. */
int uvtw__record_queue_room(uvtw__record_t* rec);
/* Loop thread: done with a block of the record's queue. */
void uvtw__record_block_return(uvtw__record_t* rec, uvtw__block_t* b);
/* Non-zero if a queue (or the notice stack) holds something the loop has
 * not taken in. */
int uvtw__records_busy(uvtw__tasks_t* tasks);
/* Live tasks, counted over the records (any thread): never misses a task
 * live throughout the call; exact unless tasks kept ending during each of
 * its tries.  `between`: NULL, or a test's stand-in for a preemption. */
uint64_t uvtw__records_live(const uvtw__tasks_t* tasks, void (*between)(void));
/* Tasks cancelled before the loop took them in, over the records. */
uint64_t uvtw__records_taken_back(const uvtw__tasks_t* tasks);
/* Gives the wheel its serial and its loop thread (the calling one). */
void uvtw__records_init(uvtw__tasks_t* tasks);
/* Frees every record and its blocks (the wheel is being freed). */
void uvtw__records_free(uvtw__tasks_t* tasks);


/* The owner marks its record inside a call (odd `calls`). */
static inline void record_enter(uvtw__record_t* rec) {
  uvtw__own_add(&rec->calls, 1, memory_order_relaxed);
}


/* Every uvtw_submit and uvtw_cancel enters the wheel before it reads or
 * writes any of its shared state (apart from the creation-time serial and
 * a first look at the close word), and leaves it when it is done: close
 * does not finish while a call is inside (task-close.c).  Returns the
 * calling thread's record of the wheel, a new one on its first call; NULL
 * if it has none (out of memory, or the wheel is closing), and then the
 * call is inside by the wheel's shared count.  The fence orders the mark
 * before the caller's load of the close word: one side of a Dekker pair
 * whose other side is close's seq_cst read-modify-write of that word,
 * then a fence, then its loads of the marks (calls_inside).  Both fences
 * are uvtw__fence.  enter_unfenced is enter without the fence, for
 * uvtw_submit, which issues a full one later (see there). */
static inline uvtw__record_t* enter_unfenced(uvtw_wheel_t* wheel) {
  if (uvtw__tls.records[0].wheel == wheel &&
      uvtw__tls.records[0].serial == wheel->tasks.serial) {
    record_enter(uvtw__tls.records[0].rec);
    return uvtw__tls.records[0].rec;
  }
  return uvtw__record_enter_search(wheel);
}


static inline uvtw__record_t* enter(uvtw_wheel_t* wheel) {
  uvtw__record_t* rec;

  rec = enter_unfenced(wheel);
  uvtw__fence();
  return rec;
}


/* The call is done with the wheel (release: close, which reads the mark
 * with acquire, sees everything the call did). */
static inline void leave(uvtw_wheel_t* wheel, uvtw__record_t* rec) {
  if (rec != NULL)
    uvtw__own_add(&rec->calls, 1, memory_order_release);
  else
    atomic_fetch_sub_explicit(&wheel->tasks.calls_shared, 1,
                              memory_order_release);
}


/* The owner puts an id in its queue (after queue_room) and returns its
 * slot.  A release store: the loop that reads the id (acquire) sees the
 * node as written before.  The caller then wakes the loop (wake_loop). */
static inline _Atomic uint64_t* queue_put(uvtw__record_t* rec, uvtw_id_t id) {
  _Atomic uint64_t* slot;

  UVTW__ASSERT(rec->widx < UVTW__BLOCK_IDS);
  slot = &rec->wblock->slot[rec->widx++];
  atomic_store_explicit(slot, id, memory_order_release);
  return slot;
}


/* Wakes the loop after an id or a node was published: one uv_async_send
 * per batch that the loop has not begun to take in.  A store (the
 * publish) then a load of another variable (`wake_pending`) on each side,
 * so a seq_cst fence on each side (a Dekker pair, correct on weakly
 * ordered CPUs too):
 *   caller:   publish;                  fence; load wake_pending
 *   async_cb: store wake_pending = 0;   fence; drain (load the queues)
 * Either the caller's fence comes first in the single order of seq_cst
 * fences, and then the drain sees the publish; or the async callback's
 * does, and then the caller sees the flag clear (or set again by a later
 * wake-up, which sent) and sends.  The caller must have issued its fence
 * after publishing (publish_fence). */
static inline void wake_loop(uvtw_wheel_t* wheel) {
  _Atomic int* pending;

  pending = &wheel->tasks.wake_pending;
  if (atomic_load_explicit(pending, memory_order_relaxed) == 0 &&
      atomic_exchange_explicit(pending, 1, memory_order_relaxed) == 0)
    uv_async_send(&wheel->async);
}


/* The caller's side of the seq_cst pairs in wake_loop (and of close, in
 * uvtw_submit): orders what it published before the loads that follow. */
static inline void publish_fence(void) {
  uvtw__fence();
}


/* An end of a live task, counted by the thread that ended it. */
static inline void count_end(uvtw__tasks_t* tasks, uvtw__record_t* rec) {
  if (tasks->max_tasks != 0)
    atomic_fetch_sub_explicit(&tasks->reserved, 1, memory_order_relaxed);
  if (rec != NULL)
    uvtw__own_add(&rec->ended, 1, memory_order_release);
  else
    atomic_fetch_add_explicit(&tasks->ended_shared, 1, memory_order_release);
}

#endif /* UVTW_TASK_RECORD_H */
