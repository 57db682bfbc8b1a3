/* SPDX-License-Identifier: MIT */
/* Cross-thread tasks: the node, its state word and the wheel's task state.
 * task-shared.c holds every atomic step and the rules for them (its
 * "Ground rules", cited as rule N); task.c, the loop's side, moves a node
 * only through its verbs. */

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

/* Queue entries one async callback takes in; the rest wait for the next
 * iteration. */
#define UVTW__DRAIN_BATCH 4096

/* An id is serial << 52 | index << 24 | generation (rule 6): the wheel's
 * serial, the node's index in the table, its generation.  Generation 0 is
 * never issued, so id 0 and a never-used node name nothing. */
#define UVTW__SERIAL_BITS 12
#define UVTW__INDEX_BITS 28
#define UVTW__GEN_BITS 24
#define UVTW__GEN_MASK (((uint64_t) 1 << UVTW__GEN_BITS) - 1)
#define UVTW__ID_INDEX(id)                                                     \
 (((id) >> UVTW__GEN_BITS) & (((uint64_t) 1 << UVTW__INDEX_BITS) - 1))
#define UVTW__ID_SERIAL(id) ((id) >> (UVTW__GEN_BITS + UVTW__INDEX_BITS))
/* The free stack's top word (rule 5): the top node's index + 1 (0: empty)
 * below an ABA tag of the other 35 bits, so a stale CAS succeeds only
 * after a stall through 2^35 pushes and pops. */
#define UVTW__FREE_LINK_BITS (UVTW__INDEX_BITS + 1)
#define UVTW__FREE_LINK(top)                                                   \
 ((uint32_t) ((top) & (((uint64_t) 1 << UVTW__FREE_LINK_BITS) - 1)))
#define UVTW__FREE_NEXT_TAG(top)                                               \
 ((((top) >> UVTW__FREE_LINK_BITS) + 1) << UVTW__FREE_LINK_BITS)

/* Chunk c of the node table holds UVTW__CHUNK0 << c nodes: 20 chunks hold
 * just under 2^28 (rule 2: no chunk moves before the wheel is freed). */
#define UVTW__CHUNK0 256u
#define UVTW__CHUNKS 20
#define UVTW__GROW_STEP 4096u /* the most nodes a growth frees at once */

/* A node's state word (rule 3): generation << 24 | writers << 8 | flags |
 * state. */
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
#define UVTW__W_INQ ((uint64_t) 0x20)      /* in the queue, or about to be */
#define UVTW__W_TAKEN ((uint64_t) 0x40)    /* taken in by the loop */
#define UVTW__W_MOVED ((uint64_t) 0x80)    /* a reset's deadline to apply */
#define UVTW__W_WRITER ((uint64_t) 1 << 8) /* a uvtw_reset writing deadline */
#define UVTW__W_WRITERS ((uint64_t) 0xffff << 8)
#define UVTW__W_GEN_SHIFT 24
#define UVTW__STATE(w) ((unsigned) ((w) &UVTW__W_STATE))
#define UVTW__GEN(w) ((w) >> UVTW__W_GEN_SHIFT)
#define UVTW__WITH_STATE(w, st) (((w) & ~UVTW__W_STATE) | (st))

/* Where a taken-in node is, for the loop. */
enum { UVTW__AT_NONE, UVTW__AT_WHEEL, UVTW__AT_WORK, UVTW__AT_FINAL_LIST };

struct uvtw__task_s {
  /* Shared: rule 2 says who writes each. */
  _Alignas(64) _Atomic uint64_t state;
  uvtw__task_t* _Atomic next;  /* queue link, while UVTW__W_INQ */
  _Atomic uint64_t deadline;   /* ms */
  _Atomic uint32_t free_next;  /* free stack link: index + 1, 0 at end */
  uint32_t index;              /* set before the node's first push */
  _Atomic(uv_thread_t) runner; /* the thread of its latest run */
  uvtw_task_cb cb;
  void* arg;
  uint64_t repeat_ms;
  uint8_t on_pool; /* UVTW_THREADPOOL */
  /* The loop's. */
  uint8_t location;  /* AT_* */
  uint8_t held;      /* accepted by the loop; counted in `held` */
  uint32_t seen_gen; /* the latest generation the loop took in */
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

/* The gate word (rule 1): close's flags, the calls inside, the live tasks. */
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
  char pad1_[64];
  uvtw__task_t* _Atomic head; /* the queue, newest first */
  char pad2_[64];
  _Atomic uint64_t free_top; /* UVTW__FREE_LINK, with its ABA tag */
  char pad3_[64];
  /* Read by every call; written at creation (and chunks[] as it grows). */
  size_t max_tasks;
  uint64_t serial;                       /* the top bits of this wheel's ids */
  _Atomic(uv_thread_t) loop_thread;      /* rule 7 */
  const _Atomic uint64_t* virtual_clock; /* a virtual wheel's; else NULL */
  int precise;                           /* options.precise */
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
  _Atomic uint64_t filed; /* task timers in the core; any thread reads */
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

/* task-shared.c's verbs for task.c, one atomic step (or a retry loop of
 * one) each; the moves are rule 3's, by name.  Close begins; close ends,
 * 1 (G_CLOSED set) with no call inside, no task live and the queue empty. */
void uvtw__gate_close_begin(uvtw__tasks_t* tasks);
int uvtw__gate_close_end(uvtw__tasks_t* tasks);
/* The whole queue into the inbox, oldest first; pop the inbox; a hint
 * (relaxed) that the queue holds entries. */
void uvtw__queue_take(uvtw__tasks_t* tasks);
uvtw__task_t* uvtw__inbox_pop(uvtw__tasks_t* tasks);
int uvtw__queue_busy(uvtw__tasks_t* tasks);
uint64_t uvtw__task_word(uvtw__task_t* node); /* acquire */
uint64_t uvtw__task_deadline(uvtw__task_t* node);
/* Each returns the word it moved from (or saw last, moving nothing);
 * keep_moved: leave W_MOVED to after_work_cb. */
uint64_t uvtw__task_take(uvtw__task_t* node, int keep_moved);
uint64_t uvtw__task_clear_moved(uvtw__task_t* node);
/* Ends the live count on DONE; *to: the word moved to (or seen). */
uint64_t uvtw__task_after_run(uvtw__tasks_t* tasks,
                              uvtw__task_t* node,
                              int closing,
                              uint64_t* to);
/* 1 if it moved the task, else 0 (another move came first). */
int uvtw__task_dispatch(uvtw__task_t* node, int on_pool);
int uvtw__task_close(uvtw__task_t* node);
void uvtw__task_final_done(uvtw__tasks_t* tasks, uvtw__task_t* node);
void uvtw__work_cb(uv_work_t* req); /* a threadpool thread */
/* An ended node gets its next generation (or is retired) and joins the
 * chain that uvtw__free_flush pushes on the free stack. */
void uvtw__node_free(uvtw__tasks_t* tasks, uvtw__task_t* node);
void uvtw__free_flush(uvtw__tasks_t* tasks);
/* Counts: task timers filed (loop writes), live tasks (one load of the
 * gate). */
void uvtw__tasks_count_filed(uvtw__tasks_t* tasks, int delta);
uint64_t uvtw__tasks_filed(const uvtw_wheel_t* wheel);
uint64_t uvtw__tasks_live(const uvtw_wheel_t* wheel);
void uvtw__loop_thread_seen(uvtw__tasks_t* tasks); /* rule 7 */
int uvtw__tasks_shared_init(uvtw__tasks_t* tasks);
void uvtw__tasks_shared_destroy(uvtw__tasks_t* tasks);

/* task.c, for the wheel; all on the loop thread. */
int uvtw__tasks_init(uvtw_wheel_t* wheel,
                     size_t max_tasks,
                     void (*work_returned)(uvtw_wheel_t* wheel));
void uvtw__tasks_destroy(uvtw_wheel_t* wheel);
void uvtw__tasks_stats(const uvtw_wheel_t* wheel, uvtw_stats_t* out);
/* After each batch of work: frees ended nodes, holds the loop or not. */
void uvtw__tasks_flush(uvtw_wheel_t* wheel);
/* 0 only if nothing was taken in yet and the queue is empty: then a pass
 * needs no uvtw__tasks_flush. */
static inline int uvtw__tasks_may_be_busy(uvtw__tasks_t* tasks) {
  return tasks->woken ||
         atomic_load_explicit(&tasks->head, memory_order_relaxed) != NULL;
}
/* Takes in about `budget` entries; non-zero if some remain. */
int uvtw__tasks_drain(uvtw_wheel_t* wheel, size_t budget);
void uvtw__tasks_woken(uvtw_wheel_t* wheel); /* the async callback's start */
int uvtw__tasks_hold_wanted(const uvtw_wheel_t* wheel);
void uvtw__task_fire(uvtw_timer_t* timer); /* every task timer's callback */
static inline int uvtw__task_owns(const uvtw_timer_t* timer) {
  return timer->cb_ == uvtw__task_fire;
}
/* Close, step 1: refuses submits, takes the task timers out of the wheel
 * and queues their final calls.  Step 2: non-zero once no task is live,
 * no call inside and the queue empty; else it has arranged to be called
 * again (never blocks). */
void uvtw__tasks_close_begin(uvtw_wheel_t* wheel);
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
