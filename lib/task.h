/* SPDX-License-Identifier: MIT */
/* Cross-thread tasks: the node, its state word and the wheel's task state.
 * Every atomic step, and the rules for them, is task-shared.c; the loop's
 * side (take-in, filing, runs, final calls, close, counts) is task.c,
 * single-threaded code that moves a node's state only by task-shared.c's
 * verbs. */

#ifndef UVTW_TASK_H
#define UVTW_TASK_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "list.h"
#include "uvtw-assert.h"
#include "uvtw.h"

typedef struct uvtw__task_s uvtw__task_t;
typedef struct uvtw__work_s uvtw__work_t;

/* Queue entries one async callback takes in before yielding to the rest of
 * the loop; the remainder waits for the next iteration. */
#define UVTW__DRAIN_BATCH 4096

/* An id is serial << 52 | index << 24 | generation: the wheel's serial
 * (task-shared.c, rule 6), the node's index in the table and its
 * generation.  Generation 0 is never issued, so id 0 and a never-used node
 * name nothing. */
#define UVTW__SERIAL_BITS 12
#define UVTW__INDEX_BITS 28
#define UVTW__GEN_BITS 24
#define UVTW__GEN_MASK (((uint64_t) 1 << UVTW__GEN_BITS) - 1)
#define UVTW__ID_INDEX(id)                                                     \
 (((id) >> UVTW__GEN_BITS) & (((uint64_t) 1 << UVTW__INDEX_BITS) - 1))
#define UVTW__ID_SERIAL(id) ((id) >> (UVTW__GEN_BITS + UVTW__INDEX_BITS))
/* The free stack's top word: an ABA tag above UVTW__FREE_LINK_BITS, the
 * top node's index + 1 below (0: empty).  The tag has the other 35 bits: a
 * stale CAS succeeds only after a stall through 2^35 pushes and pops. */
#define UVTW__FREE_LINK_BITS (UVTW__INDEX_BITS + 1)
#define UVTW__FREE_LINK(top)                                                   \
 ((uint32_t) ((top) & (((uint64_t) 1 << UVTW__FREE_LINK_BITS) - 1)))
#define UVTW__FREE_NEXT_TAG(top)                                               \
 ((((top) >> UVTW__FREE_LINK_BITS) + 1) << UVTW__FREE_LINK_BITS)

/* Chunk c of the node table holds UVTW__CHUNK0 << c nodes: 20 chunks
 * address just under 2^28 nodes, and no chunk moves before the wheel is
 * freed (type-stable nodes, found by index without a lock). */
#define UVTW__CHUNK0 256u
#define UVTW__CHUNKS 20
#define UVTW__GROW_STEP 4096u /* the most nodes a growth frees at once */

/* The state word of a node: generation << 24 | writers << 8 | flags |
 * state.  task-shared.c, "Ground rules", says who may make which move. */
enum {
  UVTW__T_FREE,      /* on the free stack, or never used */
  UVTW__T_PENDING,   /* waiting: in the queue, in the wheel, or between runs */
  UVTW__T_QUEUED,    /* handed to uv_queue_work, not started */
  UVTW__T_RUNNING,   /* its callback is executing */
  UVTW__T_STOPPING,  /* running, and a cancel returned UV_EBUSY: its last run */
  UVTW__T_CANCELLED, /* ended by a cancel that returned 0 */
  UVTW__T_DONE,      /* ended by its (last) run, or after its final call */
  UVTW__T_CLOSED     /* owed its final UV_ECANCELED call */
};
#define UVTW__W_STATE ((uint64_t) 0xf)
/* Flags: in the queue, or about to be pushed; taken in by the loop; a
 * reset's deadline not applied yet.  A writer: one uvtw_reset writing
 * `deadline`. */
#define UVTW__W_INQ ((uint64_t) 0x20)
#define UVTW__W_TAKEN ((uint64_t) 0x40)
#define UVTW__W_MOVED ((uint64_t) 0x80)
#define UVTW__W_WRITER ((uint64_t) 1 << 8)
#define UVTW__W_WRITERS ((uint64_t) 0xffff << 8)
#define UVTW__W_GEN_SHIFT 24
#define UVTW__STATE(w) ((unsigned) ((w) &UVTW__W_STATE))
#define UVTW__GEN(w) ((w) >> UVTW__W_GEN_SHIFT)
#define UVTW__WITH_STATE(w, st) (((w) & ~UVTW__W_STATE) | (st))

/* Where a taken-in node is, for the loop. */
enum { UVTW__AT_NONE, UVTW__AT_WHEEL, UVTW__AT_WORK, UVTW__AT_FINAL_LIST };

struct uvtw__task_s {
  /* Shared (task-shared.c, rule 2). */
  _Alignas(64) _Atomic uint64_t state;
  uvtw__task_t* _Atomic next;  /* queue link, while UVTW__W_INQ */
  _Atomic uint64_t deadline;   /* ms: written by submit and by resets */
  _Atomic uint32_t free_next;  /* free stack link: index + 1, 0 at end */
  uint32_t index;              /* written once, before the node's first push */
  _Atomic(uv_thread_t) runner; /* the thread of its latest run */
  uvtw_task_cb cb;             /* cb, arg, repeat_ms, on_pool: written by */
  void* arg;                   /* submit before the node is published */
  uint64_t repeat_ms;
  uint8_t on_pool; /* UVTW_THREADPOOL */
  /* The loop's. */
  uint8_t location; /* AT_* */
  uint8_t held;     /* accepted by the loop; counted in `held` */
  uvtw_timer_t timer;
  uvtw__work_t* work; /* while on the threadpool */
};

/* The threadpool request of a task, only while it is queued or runs. */
struct uvtw__work_s {
  uv_work_t req;
  uvtw__task_t* node;
  uvtw__work_t* next_free;
  uint64_t dispatch_ms; /* loop time of the run now in flight */
  uint8_t ran;          /* uvtw__work_cb ran cb; read in after_work_cb */
  uint8_t stopped;      /* ended by its run after a cancel's UV_EBUSY */
  uint8_t uv_cancel_asked;
};

/* The gate word: close's flags, the calls inside, the live tasks. */
#define UVTW__G_CLOSING ((uint64_t) 1) /* uvtw_wheel_close has begun */
#define UVTW__G_CLOSED ((uint64_t) 2)  /* close is done with the tasks */
#define UVTW__G_CALL ((uint64_t) 1 << 2)
#define UVTW__G_CALLS(g) (((g) >> 2) & 0xfffff)
#define UVTW__G_LIVE ((uint64_t) 1 << 22)
#define UVTW__G_LIVES(g) ((g) >> 22)

typedef struct uvtw__tasks_s {
  /* Shared, each on a line of its own (padding, not _Alignas: the wheel
   * is malloc()ed): the gate, which calls write, apart from the queue's
   * head and the free stack, which the loop writes too. */
  char pad0_[64];
  _Atomic uint64_t gate;
  _Atomic uint64_t taken_back; /* cancelled before the loop took them in */
  char pad1_[64];
  uvtw__task_t* _Atomic head; /* the queue, newest first */
  char pad2_[64];
  _Atomic uint64_t free_top; /* UVTW__FREE_LINK, with its ABA tag */
  char pad3_[64];
  /* Read by every call; written at creation (and chunks[] as it grows). */
  size_t max_tasks;
  uint64_t serial; /* this wheel's serial: the top bits of its ids */
  /* The thread that last ran the loop's task work (rule 7). */
  _Atomic(uv_thread_t) loop_thread;
  /* Deadlines count from a virtual wheel's clock, or uv_hrtime() if NULL */
  const _Atomic uint64_t* virtual_clock;
  int precise; /* options.precise: uv_hrtime() rounded up to a ms */
  uv_async_t* async;
  uvtw__task_t* _Atomic chunks[UVTW__CHUNKS];
  void* chunk_mem[UVTW__CHUNKS]; /* what calloc returned */
  uv_mutex_t grow_lock;          /* growing the table only */
  unsigned nchunks;              /* under grow_lock */
  size_t linked; /* under grow_lock: nodes of the newest chunk set up */

  char pad4_[64];
  /* Loop thread only. */
  uvtw__task_t* inbox;  /* taken from the queue, oldest first */
  uint32_t freed_first; /* ended nodes for the free stack: index + 1 */
  uvtw__task_t* freed_last;
  uvtw__task_t* running; /* the task whose callback runs on the loop now */
  int holds_loop;        /* the async handle is referenced for tasks */
  int backlog;           /* the queue or the inbox holds entries */
  int woken;     /* an async callback or a drain has run: tasks may exist */
  uint64_t held; /* tasks accepted, not freed */
  struct uvtw__link in_work; /* nodes with work on the threadpool */
  struct uvtw__link final;   /* nodes owed their final call */
  uvtw__work_t* free_works;
  /* Task timers active in the core; read by any thread (pending). */
  _Atomic uint64_t filed;
  uint64_t accepted;
  uint64_t run;
  uint64_t cancelled;
  uint64_t closed;
  uint64_t high_water;
  uint64_t async_wakeups;
  void (*work_returned)(uvtw_wheel_t* wheel);
} uvtw__tasks_t;

static inline uvtw__task_t* uvtw__node_at(const uvtw__tasks_t* tasks,
                                          uint64_t index) {
  uvtw__task_t* chunk;
  uint64_t q;
  unsigned c;

  q = index / UVTW__CHUNK0 + 1;
  c = 63 - (unsigned) __builtin_clzll(q);
  if (c >= UVTW__CHUNKS)
    return NULL;
  chunk = atomic_load_explicit(&tasks->chunks[c], memory_order_acquire);
  if (chunk == NULL)
    return NULL;
  return &chunk[index - (uint64_t) UVTW__CHUNK0 * ((1u << c) - 1)];
}

/* task-shared.c: the verbs, one per move of rule 3, for the loop (task.c).
 * Each is one atomic step (or a retry loop of one) with its orders. */
/* The gate: a live task ended (any thread); close begins; close ends (1 if
 * no call is inside and no task live: G_CLOSED is set). */
void uvtw__live_end(uvtw__tasks_t* tasks);
void uvtw__gate_close_begin(uvtw__tasks_t* tasks);
int uvtw__gate_close_end(uvtw__tasks_t* tasks);
/* The queue: take the whole stack into the inbox, oldest first; pop the
 * inbox; 1 if the stack holds entries (a hint, relaxed). */
void uvtw__queue_take(uvtw__tasks_t* tasks);
uvtw__task_t* uvtw__inbox_pop(uvtw__tasks_t* tasks);
int uvtw__queue_busy(uvtw__tasks_t* tasks);
/* The loop's reads of a node: its word (acquire), its deadline. */
uint64_t uvtw__task_word(uvtw__task_t* node);
uint64_t uvtw__task_deadline(uvtw__task_t* node);
/* Take-in: clears W_INQ, sets W_TAKEN, and W_MOVED unless keep_moved.
 * Returns the word it moved from. */
uint64_t uvtw__task_take(uvtw__task_t* node, int keep_moved);
/* Expiry: PENDING without W_MOVED -> RUNNING (on the loop) or QUEUED
 * (on_pool): 1, else 0 (a reset or a cancel came first). */
int uvtw__task_dispatch(uvtw__task_t* node, int on_pool);
/* Clears W_MOVED of a waiting task; returns the word it saw last. */
uint64_t uvtw__task_clear_moved(uvtw__task_t* node);
/* After a run: RUNNING -> PENDING/DONE/CLOSED, STOPPING -> DONE; ends the
 * live count on DONE.  Returns the word moved from, *to the word moved to
 * (the word seen, if a cancel from its callback ended it). */
uint64_t uvtw__task_after_run(uvtw__tasks_t* tasks,
                              uvtw__task_t* node,
                              int closing,
                              uint64_t* to);
/* Close: PENDING/QUEUED -> CLOSED (1), else 0; after the final call
 * CLOSED -> DONE. */
int uvtw__task_close(uvtw__task_t* node);
void uvtw__task_final_done(uvtw__task_t* node);
/* The threadpool run (uv_queue_work's work_cb, on a threadpool thread). */
void uvtw__work_cb(uv_work_t* req);
/* The free stack: gives an ended node its next generation (or retires
 * it) and chains it; the loop pushes the chain after each batch. */
void uvtw__node_free(uvtw__tasks_t* tasks, uvtw__task_t* node);
void uvtw__free_flush(uvtw__tasks_t* tasks);
/* Counts: task timers filed (loop writes, any thread reads), cancels
 * before take-in, live tasks. */
void uvtw__tasks_count_filed(uvtw__tasks_t* tasks, int delta);
uint64_t uvtw__tasks_filed(const uvtw_wheel_t* wheel);
uint64_t uvtw__tasks_taken_back(const uvtw__tasks_t* tasks);
/* Live tasks (any thread): one load of the gate. */
uint64_t uvtw__tasks_live(const uvtw_wheel_t* wheel);
/* The loop notes the thread it runs on (rule 7). */
void uvtw__loop_thread_seen(uvtw__tasks_t* tasks);
int uvtw__tasks_shared_init(uvtw__tasks_t* tasks);
void uvtw__tasks_shared_destroy(uvtw__tasks_t* tasks);

/* task.c: the interface the wheel uses. */
int uvtw__tasks_init(uvtw_wheel_t* wheel,
                     size_t max_tasks,
                     void (*work_returned)(uvtw_wheel_t* wheel));
void uvtw__tasks_destroy(uvtw_wheel_t* wheel);
/* Loop thread: the task counters of uvtw_stats_t. */
void uvtw__tasks_stats(const uvtw_wheel_t* wheel, uvtw_stats_t* out);
/* Loop thread, after each batch of work: frees the ended nodes to the free
 * stack and makes the tasks hold the loop, or not (task.c, hold_sync). */
void uvtw__tasks_flush(uvtw_wheel_t* wheel);
/* Non-zero unless nothing was taken in yet (no async callback or drain) and
 * the queue is empty: then a pass needs no uvtw__tasks_flush. */
static inline int uvtw__tasks_may_be_busy(uvtw__tasks_t* tasks) {
  return tasks->woken ||
         atomic_load_explicit(&tasks->head, memory_order_relaxed) != NULL;
}
/* Loop thread: takes in about `budget` entries; non-zero if some remain. */
int uvtw__tasks_drain(uvtw_wheel_t* wheel, size_t budget);
/* The async callback's first step. */
void uvtw__tasks_woken(uvtw_wheel_t* wheel);
int uvtw__tasks_hold_wanted(const uvtw_wheel_t* wheel);
/* The callback of every task's timer. */
void uvtw__task_fire(uvtw_timer_t* timer);
static inline int uvtw__task_owns(const uvtw_timer_t* timer) {
  return timer->cb_ == uvtw__task_fire;
}
/* Close, step 1 (wheel.c): refuses submits, takes the task timers out of
 * the wheel and queues their final calls. */
void uvtw__tasks_close_begin(uvtw_wheel_t* wheel);
/* Close, step 2: non-zero once no task is live, no call is inside and the
 * queue is empty; else it has arranged to be called again (never blocks). */
int uvtw__tasks_close_step(uvtw_wheel_t* wheel);

/* The loop's bookkeeping against the nodes (task-check.c); with
 * `quiescent` (no other thread inside), also the free nodes.  0, or -1
 * after printing the broken rule to `out` (NULL: silent). */
int uvtw__tasks_check(const uvtw_wheel_t* wheel, FILE* out, int quiescent);

static inline void uvtw__tasks_validate(const uvtw_wheel_t* wheel) {
#ifdef UVTW_CHECK_INVARIANTS
  if (uvtw__tasks_check(wheel, stderr, 0) != 0)
    uvtw__abort_at(__FILE__, __LINE__, "uvtw__tasks_check failed");
#else
  (void) wheel;
#endif
}

#endif /* UVTW_TASK_H */
