/* SPDX-License-Identifier: MIT */
/* Cross-thread tasks: the node, its state word and the wheel's task state.
 * What other threads touch, and the rules for it, is task-shared.c; the
 * loop's side (take-in, filing, runs, the threadpool, final calls, close,
 * counts) is task.c, plain single-threaded code. */

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

/* An id is index << UVTW__GEN_BITS | generation.  Generation 0 is never
 * issued, so id 0 and a never-used node name nothing. */
#define UVTW__INDEX_BITS 28
#define UVTW__GEN_BITS (64 - UVTW__INDEX_BITS)
/* The free stack's top word: an ABA tag above UVTW__FREE_LINK_BITS, the
 * top node's index + 1 below (0: empty).  The tag has the other 35 bits: a
 * stale CAS succeeds only after a stall through 2^35 pushes and pops. */
#define UVTW__FREE_LINK_BITS (UVTW__INDEX_BITS + 1)
#define UVTW__FREE_LINK(top)                                                   \
 ((uint32_t) ((top) & (((uint64_t) 1 << UVTW__FREE_LINK_BITS) - 1)))
#define UVTW__FREE_NEXT_TAG(top)                                               \
 ((((top) >> UVTW__FREE_LINK_BITS) + 1) << UVTW__FREE_LINK_BITS)
#define UVTW__GEN_MASK (((uint64_t) 1 << UVTW__GEN_BITS) - 1)

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
/* Flags: UVTW_THREADPOOL; in the queue, or about to be pushed; taken in
 * by the loop; a reset's deadline not applied yet.  A writer: one
 * uvtw_reset writing `deadline`, or a cancel in unqueue(). */
#define UVTW__W_WORK ((uint64_t) 0x10)
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
  /* Shared (task-shared.c). */
  _Alignas(64) _Atomic uint64_t state;
  uvtw__task_t* _Atomic next; /* queue link, while UVTW__W_INQ */
  _Atomic uint64_t deadline;  /* ms: written by submit and by resets */
  _Atomic uint32_t free_next; /* free stack link: index + 1, 0 at end */
  uint32_t index;             /* written once, before the node's first push */
  uvtw_task_cb cb;            /* cb, arg, repeat_ms: written by submit */
  void* arg;                  /* before the node is published */
  uint64_t repeat_ms;
  /* The loop's, and gen_end the thread's that frees or makes the node. */
  uvtw_timer_t timer;
  uint64_t gen_end;   /* end of the generations reserved for its index */
  uvtw__work_t* work; /* while on the threadpool */
  uint8_t location;   /* AT_* */
  uint8_t held;       /* accepted by the loop; counted in `held` */
};

/* The threadpool request of a task, only while it is queued or runs. */
struct uvtw__work_s {
  uv_work_t req;
  uvtw__task_t* node;
  uvtw__work_t* next_free;
  uint64_t dispatch_ms; /* loop time of the run now in flight */
  uint8_t ran;          /* work_cb ran cb; read in after_work_cb */
  uint8_t stopped;      /* ended by work_cb after a cancel's UV_EBUSY */
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
  const char* loop_thread; /* the creating (loop) thread's token */
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
  int holds_loop; /* the async handle is referenced for tasks */
  int backlog;    /* the queue or the inbox holds entries */
  int woken;      /* an async callback or a drain has run: tasks may exist */
  uint64_t held;  /* tasks accepted, not freed */
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

/* This thread's task state: the task whose callback runs on it (a cancel
 * from inside its own callback), and a token whose address names it. */
typedef struct {
  uvtw__task_t* current_task;
  char token;
} uvtw__tls_t;
extern _Thread_local uvtw__tls_t uvtw__tls
    __attribute__((tls_model("initial-exec")));

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

/* One CAS of a node's state word (acq_rel; on failure *w is the word). */
static inline int uvtw__task_cas(uvtw__task_t* node, uint64_t* w, uint64_t n) {
  return atomic_compare_exchange_weak_explicit(
      &node->state, w, n, memory_order_acq_rel, memory_order_acquire);
}

/* The process-wide generation counters: chunk c holds those of the
 * indices of every table's chunk c (task-shared.c, rule 6). */
extern _Atomic uint64_t* uvtw__gen_chunks[UVTW__CHUNKS];

/* task-shared.c, for the loop: */
/* Pushes the node (W_INQ set by the caller's CAS); wakes an idle loop. */
void uvtw__queue_push(uvtw__tasks_t* tasks, uvtw__task_t* node);
/* Gives an ended node its next generation (or retires it) and chains it
 * for uvtw__tasks_flush to push on the free stack. */
void uvtw__node_free(uvtw__tasks_t* tasks, uvtw__task_t* node);
void uvtw__free_flush(uvtw__tasks_t* tasks);
/* A live task ended (any thread). */
static inline void uvtw__live_end(uvtw__tasks_t* tasks) {
  atomic_fetch_sub_explicit(&tasks->gate, UVTW__G_LIVE, memory_order_release);
}
int uvtw__tasks_shared_init(uvtw__tasks_t* tasks);
void uvtw__tasks_shared_destroy(uvtw__tasks_t* tasks);
uint64_t uvtw__task_clear_moved(uvtw__task_t* node);
uint64_t uvtw__task_after_run(uvtw__task_t* node,
                              int closing,
                              uvtw__tasks_t* t);
void uvtw__work_cb(uv_work_t* req);

/* task.c: the interface the wheel uses. */
int uvtw__tasks_init(uvtw_wheel_t* wheel,
                     size_t max_tasks,
                     void (*work_returned)(uvtw_wheel_t* wheel));
void uvtw__tasks_destroy(uvtw_wheel_t* wheel);
/* Loop thread: the task counters of uvtw_stats_t. */
void uvtw__tasks_stats(const uvtw_wheel_t* wheel, uvtw_stats_t* out);
/* Live tasks (any thread): one load of the gate. */
uint64_t uvtw__tasks_live(const uvtw_wheel_t* wheel);
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
uint64_t uvtw__tasks_filed(const uvtw_wheel_t* wheel);
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
