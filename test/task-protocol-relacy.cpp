/* SPDX-License-Identifier: MIT */
/* The task protocol of lib/task-shared.c under the C11 memory model, for
 * the Relacy Race Detector (Debian's relacy-dev).  test/task-protocol.pml
 * checks the protocol's interleavings under sequential consistency; this
 * model checks its memory orders: every atomic step of task-shared.c is
 * here with the code's name and the code's orders (test/relacy-orders.py
 * compares them, function by function, and fails on any difference), and
 * the loop's side (lib/task.c, single-threaded) is here as far as it moves
 * nodes, with a wheel reduced to "filed or not" (a pass fires every filed
 * task, at most twice a task).
 *
 * Plain data is rl::var: the node's payload (cb, arg, repeat_ms, on_pool),
 * a pool request's results, and `wheel_mem`, which stands for the wheel's
 * memory: every call touches it while close must wait for it (a submit
 * while its task's live count holds the wheel, before its push, and
 * inside the call it leaves last; a reset inside the gate; a cancel that
 * ends a task; every wake-up after a push), and close writes it once it
 * is done with the tasks (from there the close callback may free the
 * wheel).  So an order too weak for a publication shows up as a data
 * race, and close freeing what a call still uses shows up as one too.
 * libuv's parts are modelled by what they promise: uv_async_send and the
 * loop's wake-up by a seq_cst exchange of a pending flag, uv_queue_work,
 * uv_cancel and the return to the loop by release and acquire (libuv's
 * mutex and async handle).
 *
 * Scenarios (threads: producers 1 and 2, the loop, a threadpool thread):
 *   submit-cancel-reset: producer 1 submits a repeating task, resets it and
 *     submits a one-shot; producer 2 gets the first id through a relaxed
 *     atomic, cancels and resets it, and submits a one-shot, which may
 *     reuse the first task's node (a stale id then names a later task):
 *     popped from the free stack, or, if the cancel came before take-in,
 *     taken over at the queue's head by either producer's one-shot
 *     (reuse_claim, reuse_publish; pushed again if the loop took the node
 *     in between claim and publish); the loop takes in, fires, runs and
 *     frees; once both producers are done and the loop finds no wake-up,
 *     it closes the wheel;
 *   close-races: max_tasks 2 (the bounded gate); producer 1 submits two
 *     tasks, producer 2 cancels and resets the first; the loop closes the
 *     wheel right after its first look at the queue (so early that the
 *     second submit rarely finds the first task's entry to take over: the
 *     first scenario covers the takeover);
 *   pool-cancel: producer 1 submits a repeating UVTW_THREADPOOL task and
 *     resets it, producer 2 cancels it; the loop hands it to the
 *     threadpool thread, whose run cancels its own task on its second run;
 *   pool-close: producer 1 submits a repeating UVTW_THREADPOOL task and
 *     resets it, producer 2 resets it; the loop closes the wheel once they
 *     are done, racing the pool run (queued work is uv_cancel'ed);
 *   takeover: producer 1 submits a one-shot and cancels it, twice;
 *     producer 2 submits a one-shot; each submit may take over the node of
 *     a task cancelled before take-in (producers racing for one node, a
 *     node taken over twice before the loop sees it: three uses counted
 *     at once); the loop closes once they are done.
 * Random search: each iteration is one schedule, seeded by its number, so
 * a run is reproducible.  (Relacy's context-bound search does not fit: the
 * loop's waits spin, and it reports them as livelocks.)  Each scenario
 * must also reach the outcomes it exists for (main(), must_see), so it
 * cannot pass by never getting there.
 *
 * Properties: every accepted task ends exactly once (a one-shot's run, a
 * cancel that returned 0 or UV_EBUSY, or its final call); no run starts
 * after a cancel returned 0; a node is in the queue at most once; no lost
 * wake-up (once the producers are done and the loop finds no wake-up
 * pending, the queue is empty); the loop applies a reset's deadline, not
 * an older one, and a node's next task never sees a deadline stored for
 * an earlier one; a node a submit claimed is neither freed nor filed
 * while claimed, its entry is queued (or in the loop's inbox) when
 * claimed, the publish moves the word from the claim alone (one writer,
 * CANCELLED, the previous generation), and a publish that finds W_INQ set
 * leaves an entry the loop has yet to take in (the task is not lost); the
 * stats' accepted and cancelled counts (the loop's, by generation: no
 * shared count) are exact after close; close finishes, after every call
 * that it must wait for (wheel_mem), and leaves every node on the free
 * stack exactly once; a push's wake-up comes before close is done (a
 * submit's inside a call: taken with its entry if the queue looked
 * empty, else by the push that finds it empty; the scenarios with
 * takeovers must see both a submit with no call and a push that took
 * one); and Relacy's own checks: data races on plain data, reads of
 * uninitialised atomics, leaks.  (The nodes are
 * type-stable, never freed, so Relacy's checks of freed memory have
 * nothing to see: wheel_mem stands for what the close callback frees.)
 *
 * Not modelled: the table's growth (grow(), under grow_lock: the model's
 * nodes are linked on the free stack before the threads start, as grow
 * leaves them, and a submit that finds none fails with UV_ENOMEM);
 * deadlines and the wheel's time (SPIN's model checks that no run is
 * early); the loop-thread test of a submit (rule 7: it only references
 * the async handle); the shared counts read for stats (live, filed); the
 * retirement of a node at the last generation (the model's generations
 * stay small: reuse_claim's test of it is there, never true).
 *
 * The broken twin (-DUVTW_RELACY_BROKEN) weakens the acquire of the
 * loop's exchange in uvtw__queue_take and the release of a popped node's
 * state store in uvtw_submit to relaxed.  A submit publishes the node's
 * payload (cb, arg, repeat_ms, on_pool) both ways: by its release push,
 * which the exchange's acquire reads (for a push that found the stack
 * busy, so sent no wake-up, nothing else does), and by the state word,
 * which the loop's take CAS reads.  With both weakened the loop, which
 * reads on_pool and repeat_ms as it files the task, races the submit:
 * Relacy must report a data race there (submit-cancel-reset, whose
 * producers push while the stack is busy).  With the exchange alone
 * weakened, Relacy reports a livelock of the loop's waits instead. */

#include <relacy/relacy.hpp>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef UVTW_RELACY_BROKEN
# define TWIN_WEAKENS(mo) rl::mo_relaxed
#else
# define TWIN_WEAKENS(mo) mo
#endif

/* test/relacy-orders.py: the functions of lib/task-shared.c and
 * lib/task.h with memory orders that the model leaves out, their orders
 * (a change there fails the check too), and why.
 * not modelled: grow (relaxed release relaxed relaxed relaxed): under
 *   grow_lock; the model's nodes are linked before the threads start
 * not modelled: uvtw__node_at (acquire): the table's chunks, published by
 *   grow; the model's nodes exist before the threads start
 * not modelled: uvtw__tasks_shared_init (relaxed): before other threads
 * not modelled: uvtw__tasks_live (relaxed): a count for stats
 * not modelled: uvtw__tasks_count_filed (relaxed relaxed): a loop-only
 *   count for stats
 * not modelled: uvtw__tasks_filed (relaxed): a count for stats
 * not modelled: uvtw__loop_thread_seen (relaxed): rule 7, liveness only
 * not modelled: deadline_in (relaxed): the clock, not modelled
 * not modelled: uvtw__tasks_may_be_busy (relaxed): the loop's hint
 *   whether a pass needs a flush */

/* The names and values of lib/task.h. */
/* (unsigned, not an enum: C++ warns of enum and unsigned mixed in ?:) */
static const unsigned UVTW__T_FREE = 0, UVTW__T_PENDING = 1, UVTW__T_QUEUED = 2,
                      UVTW__T_RUNNING = 3, UVTW__T_STOPPING = 4,
                      UVTW__T_CANCELLED = 5, UVTW__T_DONE = 6,
                      UVTW__T_CLOSED = 7;
#define UVTW__W_STATE ((uint64_t) 0xf)
#define UVTW__W_INQ ((uint64_t) 0x20)
#define UVTW__W_TAKEN ((uint64_t) 0x40)
#define UVTW__W_MOVED ((uint64_t) 0x80)
#define UVTW__W_WRITER ((uint64_t) 1 << 8)
#define UVTW__W_WRITERS ((uint64_t) 0xffff << 8)
#define UVTW__W_GEN_SHIFT 24
#define UVTW__STATE(w) ((unsigned) ((w) &UVTW__W_STATE))
#define UVTW__GEN(w) ((w) >> UVTW__W_GEN_SHIFT)
#define UVTW__WITH_STATE(w, st) (((w) & ~UVTW__W_STATE) | (st))
#define UVTW__INDEX_BITS 28
#define UVTW__GEN_BITS 24
#define UVTW__GEN_MASK (((uint64_t) 1 << UVTW__GEN_BITS) - 1)
#define UVTW__ID_INDEX(id)                                                     \
 (((id) >> UVTW__GEN_BITS) & (((uint64_t) 1 << UVTW__INDEX_BITS) - 1))
#define UVTW__FREE_LINK_BITS (UVTW__INDEX_BITS + 1)
#define UVTW__FREE_LINK(top)                                                   \
 ((uint32_t) ((top) & (((uint64_t) 1 << UVTW__FREE_LINK_BITS) - 1)))
#define UVTW__FREE_NEXT_TAG(top)                                               \
 ((((top) >> UVTW__FREE_LINK_BITS) + 1) << UVTW__FREE_LINK_BITS)
#define UVTW__G_CLOSING ((uint64_t) 1)
#define UVTW__G_CLOSED ((uint64_t) 2)
#define UVTW__G_CALL ((uint64_t) 1 << 2)
#define UVTW__G_CALLS(g) (((g) >> 2) & 0xfffff)
#define UVTW__G_LIVE ((uint64_t) 1 << 22)
#define UVTW__G_LIVES(g) ((g) >> 22)
enum { UVTW__AT_NONE, UVTW__AT_WHEEL, UVTW__AT_WORK, UVTW__AT_FINAL_LIST };
enum {
  UV_ENOENT = -2,
  UV_ENOMEM = -12,
  UV_EBUSY = -16,
  UV_ENOSPC = -28,
  UV_ECANCELED = -125
};
#define UVTW_THREADPOOL 1u

#define NNODES 3 /* the model's node table */
#define NTASKS 5 /* task numbers 1..4 (arg) */
#define SERIAL ((uint64_t) 5 << (UVTW__GEN_BITS + UVTW__INDEX_BITS))

typedef uint64_t uvtw_id_t;
struct uvtw__task_t;

/* A threadpool request (libuv's uv_work_t and uvtw__work_t). */
enum { REQ_NONE, REQ_QUEUED, REQ_STARTED, REQ_DONE, REQ_UV_CANCELED };
struct uvtw__work_t {
  rl::atomic<int> req; /* libuv's side, under its mutex: REQ_* */
  rl::var<int> ran;
  rl::var<int> stopped;
  int uv_cancel_asked;
};

struct uvtw__task_t {
  /* Shared (task-shared.c, rule 2). */
  rl::atomic<uint64_t> state;
  rl::atomic<uvtw__task_t*> next;
  rl::atomic<uint64_t> deadline;
  rl::atomic<uint32_t> free_next;
  uint32_t index;
  rl::atomic<int> runner;
  rl::var<int> cb; /* which callback: the model has one, 1 */
  rl::var<int> arg;
  rl::var<uint64_t> repeat_ms;
  rl::var<int> on_pool;
  /* The loop's. */
  int location;
  int held;
  uint64_t seen_gen; /* the latest generation the loop took in */
  int filed;         /* in the wheel's core (timer.link_.next != NULL) */
  int timer_repeat;  /* timer.repeat_ */
  int fires;         /* the model's bound on a task's passes */
  uvtw__work_t work;
};

struct uvtw__tasks_t {
  rl::atomic<uint64_t> gate;
  rl::atomic<uvtw__task_t*> head;
  rl::atomic<uint64_t> free_top;
  size_t max_tasks;
  uint64_t serial;
  rl::atomic<int> async_pending; /* uv_async_t */
  uvtw__task_t nodes[NNODES];
  rl::var<int> wheel_mem;
  rl::atomic<uvtw_id_t> id_chan; /* the user's, between producers */
  /* Loop thread only. */
  uvtw__task_t* inbox;
  uint32_t freed_first;
  uvtw__task_t* freed_last;
  uvtw__task_t* running;
  uvtw__task_t* final[NNODES];
  int nfinal;
  int closing;
  int close_done;
  uint64_t held, accepted, run, cancelled, closed;
};

/* What the properties need, outside the memory model: Relacy runs the
 * threads one at a time, so these plain variables are exact. */
struct ghost_t {
  int accepted[NTASKS];
  int ends[NTASKS];
  int cancelled0[NTASKS];
  int runs[NTASKS];
  uvtw_id_t ids[NTASKS];
  int in_queue[NNODES]; /* pushes not taken in, per node */
  int queued;           /* the same, in all */
  int in_inbox[NNODES]; /* in the loop's inbox */
  int claimed[NNODES];  /* a submit's claim holds the node (reuse_claim) */
  int cancels;          /* cancels that returned 0 or UV_EBUSY */
  int producers_done;
  int producers;
  int loop_done;
  int self_cancel; /* the pool run cancels its own task on run 2 */
  unsigned seen;   /* SEEN_*: the outcomes this iteration reached */
};
static ghost_t* ghost;

/* Outcomes each scenario must reach in some iteration, so that it cannot
 * pass by never getting there (main() checks them). */
enum {
  SEEN_CANCEL_0 = 1 << 0,
  SEEN_CANCEL_EBUSY = 1 << 1,
  SEEN_CANCEL_ENOENT = 1 << 2,
  SEEN_RESET_0 = 1 << 3,
  SEEN_RESET_ENOENT = 1 << 4,
  SEEN_SUBMIT_ECANCELED = 1 << 5,
  SEEN_NODE_REUSED = 1 << 6, /* a later task took a cancelled task's node */
  SEEN_RUN = 1 << 7,
  SEEN_POOL_RUN = 1 << 8,
  SEEN_FINAL_CALL = 1 << 9,
  SEEN_UV_CANCELED = 1 << 10,
  SEEN_OWN_CANCEL_0 = 1 << 11,
  SEEN_BEFORE_TAKE_IN = 1 << 12,   /* a cancel before the loop took it in */
  SEEN_MOVED = 1 << 13,            /* the loop applied a reset's deadline */
  SEEN_TAKEOVER = 1 << 14,         /* a submit took over a cancelled entry */
  SEEN_TAKEOVER_PUSHED = 1 << 15,  /* ... taken in meanwhile: pushed again */
  SEEN_TAKEN_OVER_TWICE = 1 << 16, /* the loop saw 3 uses of a node at once */
  SEEN_SUBMIT_NO_CALL = 1 << 17,   /* a submit that took no call at all */
  SEEN_PUSH_CALL = 1 << 18         /* a push took a call to wake the loop */
};
static const char* const seen_names[] = {"cancel 0",
                                         "cancel UV_EBUSY",
                                         "cancel UV_ENOENT",
                                         "reset 0",
                                         "reset UV_ENOENT",
                                         "submit UV_ECANCELED",
                                         "node reused",
                                         "run on the loop",
                                         "run on the pool",
                                         "final call",
                                         "uv_cancel'ed run",
                                         "own cancel 0",
                                         "cancel before take-in",
                                         "reset applied",
                                         "takeover",
                                         "takeover pushed again",
                                         "taken over twice",
                                         "submit without a call",
                                         "call entered by the push"};
static unsigned seen_all; /* over all iterations */

static int uv_thread_self() {
  return (int) rl::thread_index();
}

static void model_uv_async_send(uvtw__tasks_t* tasks) {
  tasks->async_pending($).exchange(1, rl::mo_seq_cst);
}

static int model_uv_async_woken(uvtw__tasks_t* tasks) {
  return tasks->async_pending($).exchange(0, rl::mo_seq_cst);
}

/* Close may be done with the tasks only after every call it waits for. */
static void model_inside(uvtw__tasks_t* tasks) {
  (void) (int) tasks->wheel_mem($);
}

static uvtw__task_t* uvtw__node_at(uvtw__tasks_t* tasks, uint64_t index) {
  return index < NNODES ? &tasks->nodes[index] : NULL;
}

static void task_cb(uvtw__tasks_t* tasks, uvtw__task_t* node, int status);


/* ---- The gate (rule 1) ------------------------------------------------ */

static uint64_t gate_enter(uvtw__tasks_t* tasks, uint64_t add) {
  return tasks->gate($).fetch_add(add, rl::mo_acquire);
}


static void gate_leave(uvtw__tasks_t* tasks, uint64_t sub) {
  tasks->gate($).fetch_sub(sub, rl::mo_release);
}


static void live_end(uvtw__tasks_t* tasks) {
  gate_leave(tasks, UVTW__G_LIVE);
}


static void uvtw__gate_close_begin(uvtw__tasks_t* tasks) {
  tasks->gate($).fetch_or(UVTW__G_CLOSING, rl::mo_acq_rel);
}


static int uvtw__gate_close_end(uvtw__tasks_t* tasks) {
  uint64_t g;

  g = tasks->gate($).load(rl::mo_acquire);
  return UVTW__G_CALLS(g) == 0 && UVTW__G_LIVES(g) == 0 &&
         tasks->head($).load(rl::mo_relaxed) == NULL &&
         tasks->gate($).compare_exchange_strong(g, g | UVTW__G_CLOSED,
                                                rl::mo_acquire, rl::mo_relaxed);
}


/* ---- The queue (rule 4) ----------------------------------------------- */

static void ghost_pushed(uvtw__task_t* node) {
  RL_ASSERT(ghost->in_queue[node->index] == 0); /* queued at most once */
  ghost->in_queue[node->index]++;
  ghost->queued++;
}


/* `pinned`: the caller keeps the wheel open past the push.  If not, a
 * push that will wake the loop first enters as a call, and returns 1. */
static int queue_push(uvtw__tasks_t* tasks, uvtw__task_t* node, int pinned) {
  uvtw__task_t* head;
  int entered;

  entered = 0;
  head = tasks->head($).load(rl::mo_relaxed);
  do {
    if (head == NULL && !pinned) {
      gate_enter(tasks, UVTW__G_CALL);
      pinned = entered = 1;
    }
    node->next($).store(head, rl::mo_relaxed);
  } while (!tasks->head($).compare_exchange_weak(head, node, rl::mo_release,
                                                 rl::mo_relaxed));
  ghost_pushed(node);
  if (head == NULL) {
    /* The wake-up touches the wheel (its async handle): close must not
     * be done, nor free the wheel before it (a data race on wheel_mem). */
    RL_ASSERT(!tasks->close_done);
    model_inside(tasks);
    model_uv_async_send(tasks);
  }
  if (entered)
    ghost->seen |= SEEN_PUSH_CALL;
  return entered;
}


static void uvtw__queue_take(uvtw__tasks_t* tasks) {
  uvtw__task_t* node;
  uvtw__task_t* next;

  node = tasks->head($).exchange(NULL, TWIN_WEAKENS(rl::mo_acquire));
  for (; node != NULL; node = next) {
    ghost->in_queue[node->index]--;
    ghost->queued--;
    ghost->in_inbox[node->index] = 1;
    next = node->next($).load(rl::mo_relaxed);
    node->next($).store(tasks->inbox, rl::mo_relaxed);
    tasks->inbox = node;
  }
}


static uvtw__task_t* uvtw__inbox_pop(uvtw__tasks_t* tasks) {
  uvtw__task_t* node;

  node = tasks->inbox;
  if (node != NULL)
    tasks->inbox = node->next($).load(rl::mo_relaxed);
  return node;
}


static int uvtw__queue_busy(uvtw__tasks_t* tasks) {
  return tasks->head($).load(rl::mo_relaxed) != NULL;
}


/* ---- The free stack (rule 5) ------------------------------------------ */

static void free_push(uvtw__tasks_t* tasks,
                      uvtw__task_t* first,
                      uvtw__task_t* last) {
  uint64_t top, next;

  top = tasks->free_top($).load(rl::mo_relaxed);
  do {
    last->free_next($).store(UVTW__FREE_LINK(top), rl::mo_relaxed);
    next = UVTW__FREE_NEXT_TAG(top) | (first->index + 1);
  } while (!tasks->free_top($).compare_exchange_weak(top, next, rl::mo_release,
                                                     rl::mo_relaxed));
}


static uvtw__task_t* free_pop(uvtw__tasks_t* tasks) {
  uvtw__task_t* node;
  uint64_t top, next;

  top = tasks->free_top($).load(rl::mo_acquire);
  while (UVTW__FREE_LINK(top) != 0) {
    node = uvtw__node_at(tasks, UVTW__FREE_LINK(top) - 1);
    RL_ASSERT(node != NULL);
    next = UVTW__FREE_NEXT_TAG(top) | node->free_next($).load(rl::mo_relaxed);
    if (tasks->free_top($).compare_exchange_weak(top, next, rl::mo_acquire,
                                                 rl::mo_acquire))
      return node;
  }
  return NULL;
}


static void uvtw__node_free(uvtw__tasks_t* tasks, uvtw__task_t* node) {
  uint64_t gen;

  RL_ASSERT(!ghost->claimed[node->index]); /* a claim holds it */
  gen = UVTW__GEN(node->state($).load(rl::mo_relaxed)) + 1;
  if (gen > UVTW__GEN_MASK)
    return;
  node->state($).store(gen << UVTW__W_GEN_SHIFT | UVTW__T_FREE, rl::mo_relaxed);
  node->free_next($).store(tasks->freed_first, rl::mo_relaxed);
  if (tasks->freed_first == 0)
    tasks->freed_last = node;
  tasks->freed_first = node->index + 1;
}


static void uvtw__free_flush(uvtw__tasks_t* tasks) {
  uvtw__task_t* first;

  if (tasks->freed_first == 0)
    return;
  first = uvtw__node_at(tasks, tasks->freed_first - 1);
  free_push(tasks, first, tasks->freed_last);
  tasks->freed_first = 0;
}


/* ---- The state word (rule 3) ------------------------------------------ */

static int task_cas(uvtw__task_t* node, uint64_t* w, uint64_t n) {
  return node->state($).compare_exchange_weak(*w, n, rl::mo_acq_rel,
                                              rl::mo_acquire);
}


static uint64_t uvtw__task_word(uvtw__task_t* node) {
  return node->state($).load(rl::mo_acquire);
}


static uint64_t uvtw__task_deadline(uvtw__task_t* node) {
  return node->deadline($).load(rl::mo_relaxed);
}


static uint64_t uvtw__task_take(uvtw__task_t* node, int keep_moved) {
  uint64_t w;

  w = uvtw__task_word(node);
  while (!task_cas(
      node, &w,
      ((w & ~UVTW__W_INQ) | UVTW__W_TAKEN) & ~(keep_moved ? 0 : UVTW__W_MOVED)))
    ;
  return w;
}


static void note_runner(uvtw__task_t* node) {
  node->runner($).store(uv_thread_self(), rl::mo_relaxed);
}


static int uvtw__task_dispatch(uvtw__task_t* node, int on_pool) {
  uint64_t w;

  if (!on_pool)
    note_runner(node);
  w = uvtw__task_word(node);
  do
    if (UVTW__STATE(w) != UVTW__T_PENDING || (w & UVTW__W_MOVED))
      return 0;
  while (!task_cas(
      node, &w,
      UVTW__WITH_STATE(w, on_pool ? UVTW__T_QUEUED : UVTW__T_RUNNING)));
  return 1;
}


static uint64_t uvtw__task_clear_moved(uvtw__task_t* node) {
  uint64_t w;

  w = uvtw__task_word(node);
  while (UVTW__STATE(w) == UVTW__T_PENDING && (w & UVTW__W_MOVED) &&
         !task_cas(node, &w, w & ~UVTW__W_MOVED))
    ;
  return w;
}


static uint64_t uvtw__task_after_run(uvtw__tasks_t* tasks,
                                     uvtw__task_t* node,
                                     int closing,
                                     uint64_t* to) {
  uint64_t w, n;

  w = uvtw__task_word(node);
  do {
    if (UVTW__STATE(w) == UVTW__T_RUNNING)
      n = UVTW__WITH_STATE(w, node->repeat_ms($) == 0 ? UVTW__T_DONE
                              : closing               ? UVTW__T_CLOSED
                                                      : UVTW__T_PENDING);
    else if (UVTW__STATE(w) == UVTW__T_STOPPING)
      n = UVTW__WITH_STATE(w, UVTW__T_DONE);
    else
      return *to = w;
  } while (!task_cas(node, &w, n));
  if (UVTW__STATE(w) == UVTW__T_RUNNING && UVTW__STATE(n) == UVTW__T_DONE)
    ghost->ends[node->arg($)]++; /* a one-shot's run is its end */
  if (UVTW__STATE(n) == UVTW__T_DONE)
    live_end(tasks);
  *to = n;
  return w;
}


static int uvtw__task_close(uvtw__task_t* node) {
  uint64_t w;

  w = uvtw__task_word(node);
  do
    if (UVTW__STATE(w) != UVTW__T_PENDING && UVTW__STATE(w) != UVTW__T_QUEUED)
      return 0;
  while (!task_cas(node, &w, UVTW__WITH_STATE(w, UVTW__T_CLOSED)));
  return 1;
}


static void uvtw__task_final_done(uvtw__tasks_t* tasks, uvtw__task_t* node) {
  uint64_t w;

  live_end(tasks);
  w = uvtw__task_word(node);
  while (!task_cas(node, &w, UVTW__WITH_STATE(w, UVTW__T_DONE)))
    ;
}


static int is_self(rl::atomic<int>* thread) {
  int self, seen;

  self = uv_thread_self();
  seen = (*thread)($).load(rl::mo_relaxed);
  return self == seen;
}


/* ---- The calls -------------------------------------------------------- */

/* The queue's newest entry, if a cancel ended it before the loop took it
 * in, takes the next task in place; claimed as a writer, or NULL. */
static uvtw__task_t* reuse_claim(uvtw__tasks_t* tasks) {
  uvtw__task_t* node;
  uint64_t w;

  node = tasks->head($).load(rl::mo_acquire);
  if (node == NULL)
    return NULL;
  w = uvtw__task_word(node);
  for (;;) {
    if ((w & ~(UVTW__GEN_MASK << UVTW__W_GEN_SHIFT | UVTW__W_MOVED)) !=
            (UVTW__T_CANCELLED | UVTW__W_INQ) ||
        UVTW__GEN(w) == UVTW__GEN_MASK)
      return NULL;
    if (node->state($).compare_exchange_strong(w, w + UVTW__W_WRITER,
                                               rl::mo_acq_rel, rl::mo_acquire))
      break;
  }
  /* The entry is in the queue or the loop's inbox, not taken yet. */
  RL_ASSERT(ghost->in_queue[node->index] || ghost->in_inbox[node->index]);
  ghost->claimed[node->index] = 1;
  ghost->seen |= SEEN_TAKEOVER;
  return node;
}


/* The claimed node's next use: generation gen, PENDING, in the queue.
 * 1 if it must be pushed again: the loop took it in (and left it)
 * meanwhile. */
static int reuse_publish(uvtw__task_t* node, uint64_t gen) {
  uint64_t w;

  w = node->state($).load(rl::mo_relaxed);
  while (!task_cas(node, &w,
                   gen << UVTW__W_GEN_SHIFT | UVTW__T_PENDING | UVTW__W_INQ))
    ;
  /* From the claim (the loop's take may have cleared W_INQ): nothing
   * else moved the word. */
  RL_ASSERT(UVTW__STATE(w) == UVTW__T_CANCELLED &&
            (w & UVTW__W_WRITERS) == UVTW__W_WRITER && UVTW__GEN(w) + 1 == gen);
  ghost->claimed[node->index] = 0;
  if (!(w & UVTW__W_INQ)) {
    ghost->seen |= SEEN_TAKEOVER_PUSHED;
    return 1;
  }
  /* Not lost: the loop takes the entry in yet. */
  RL_ASSERT(ghost->in_queue[node->index] || ghost->in_inbox[node->index]);
  return 0;
}


static int uvtw_submit(uvtw__tasks_t* tasks,
                       uint64_t delay_ms,
                       uint64_t repeat_ms,
                       unsigned flags,
                       int arg,
                       uvtw_id_t* id) {
  uvtw__task_t* node;
  uint64_t deadline, g, w, gen, add;
  int reused, push, called;

  deadline = delay_ms;
  /* A call too if the push may wake the loop (rule 1). */
  add = UVTW__G_LIVE;
  if (tasks->head($).load(rl::mo_relaxed) == NULL)
    add += UVTW__G_CALL;
  if (tasks->max_tasks != 0) {
    g = tasks->gate($).load(rl::mo_relaxed);
    do {
      if (g & UVTW__G_CLOSING)
        return UV_ECANCELED;
      if (UVTW__G_LIVES(g) >= tasks->max_tasks)
        return UV_ENOSPC;
    } while (!tasks->gate($).compare_exchange_weak(g, g + add, rl::mo_acquire,
                                                   rl::mo_relaxed));
  } else if (gate_enter(tasks, add) & UVTW__G_CLOSING) {
    gate_leave(tasks, add);
    return UV_ECANCELED;
  }
  reused = (node = reuse_claim(tasks)) != NULL;
  if (!reused && (node = free_pop(tasks)) == NULL) {
    gate_leave(tasks, add);
    return UV_ENOMEM;
  }
  /* The task's live count holds the wheel open until the loop can take
   * the task in. */
  model_inside(tasks);
  node->cb($) = 1;
  node->arg($) = arg;
  node->repeat_ms($) = repeat_ms;
  node->on_pool($) = (flags & UVTW_THREADPOOL) != 0;
  node->deadline($).store(deadline, rl::mo_relaxed);
  w = node->state($).load(rl::mo_relaxed);
  gen = UVTW__GEN(w) + reused;
  *id = tasks->serial | (uint64_t) node->index << UVTW__GEN_BITS | gen;
  ghost->accepted[arg] = 1;
  ghost->ids[arg] = *id;
  called = (add & UVTW__G_CALL) != 0;
  if (reused) {
    push = reuse_publish(node, gen);
  } else {
    node->state($).store(UVTW__WITH_STATE(w, UVTW__T_PENDING) | UVTW__W_INQ,
                         TWIN_WEAKENS(rl::mo_release));
    push = 1;
  }
  if (push)
    called |= queue_push(tasks, node, called);
  /* The task may have ended: from here only a call touches the wheel. */
  if (called) {
    model_inside(tasks);
    gate_leave(tasks, UVTW__G_CALL);
  } else {
    ghost->seen |= SEEN_SUBMIT_NO_CALL;
  }
  return 0;
}


static uvtw__task_t* id_node(uvtw__tasks_t* tasks, uvtw_id_t id, uint64_t* w) {
  uvtw__task_t* node;

  if ((id & UVTW__GEN_MASK) == 0 ||
      (id & ~(((uint64_t) 1 << (UVTW__GEN_BITS + UVTW__INDEX_BITS)) - 1)) !=
          tasks->serial ||
      (node = uvtw__node_at(tasks, UVTW__ID_INDEX(id))) == NULL)
    return NULL;
  *w = uvtw__task_word(node);
  return node;
}


static int uvtw_cancel(uvtw__tasks_t* tasks, uvtw_id_t id) {
  uvtw__task_t* node;
  uint64_t w, n;
  unsigned st;

  if ((node = id_node(tasks, id, &w)) == NULL)
    return UV_ENOENT;
  for (;;) {
    if (UVTW__GEN(w) != (id & UVTW__GEN_MASK))
      return UV_ENOENT;
    st = UVTW__STATE(w);
    if (st == UVTW__T_RUNNING && !is_self(&node->runner)) {
      if (task_cas(node, &w, UVTW__WITH_STATE(w, UVTW__T_STOPPING)))
        return UV_EBUSY;
      continue;
    }
    if (st == UVTW__T_RUNNING ? node->repeat_ms($) == 0
                              : st != UVTW__T_PENDING && st != UVTW__T_QUEUED)
      return UV_ENOENT;
    n = UVTW__WITH_STATE(w, UVTW__T_CANCELLED);
    if ((w & (UVTW__W_TAKEN | UVTW__W_INQ)) == UVTW__W_TAKEN)
      n |= UVTW__W_INQ;
    if (task_cas(node, &w, n))
      break;
  }
  if (!(w & UVTW__W_TAKEN))
    ghost->seen |= SEEN_BEFORE_TAKE_IN;
  if ((w & (UVTW__W_TAKEN | UVTW__W_INQ)) == UVTW__W_TAKEN)
    queue_push(tasks, node, 1); /* pinned: the task counts live */
  model_inside(tasks);
  live_end(tasks);
  return 0;
}


static int uvtw_reset(uvtw__tasks_t* tasks, uvtw_id_t id, uint64_t delay_ms) {
  uvtw__task_t* node;
  uint64_t deadline, w, n;
  int err, closed;

  deadline = delay_ms;
  err = UV_ENOENT;
  closed = (gate_enter(tasks, UVTW__G_CALL) & UVTW__G_CLOSED) != 0;
  if (closed)
    goto out; /* close is done with the tasks: only the gate is read */
  if ((node = id_node(tasks, id, &w)) == NULL)
    goto out;
  do
    if (UVTW__GEN(w) != (id & UVTW__GEN_MASK) ||
        UVTW__STATE(w) < UVTW__T_PENDING || UVTW__STATE(w) > UVTW__T_RUNNING)
      goto out;
  while (!task_cas(node, &w, w + UVTW__W_WRITER));
  node->deadline($).store(deadline, rl::mo_relaxed);
  w += UVTW__W_WRITER;
  do {
    n = w - UVTW__W_WRITER;
    err = UV_ENOENT;
    if (UVTW__STATE(w) >= UVTW__T_PENDING &&
        UVTW__STATE(w) <= UVTW__T_RUNNING) {
      err = UVTW__STATE(w) == UVTW__T_RUNNING ? UV_EBUSY : 0;
      n = UVTW__WITH_STATE(n, UVTW__STATE(w) == UVTW__T_QUEUED
                                  ? UVTW__T_PENDING
                                  : UVTW__STATE(w)) |
          UVTW__W_MOVED;
    }
    if ((n & (UVTW__W_TAKEN | UVTW__W_INQ)) == UVTW__W_TAKEN &&
        (err != UV_ENOENT || !(n & UVTW__W_WRITERS)))
      n |= UVTW__W_INQ;
  } while (!task_cas(node, &w, n));
  if ((n & UVTW__W_INQ) && !(w & UVTW__W_INQ))
    queue_push(tasks, node, 1); /* pinned: a call */
out:
  if (!closed)
    model_inside(tasks);
  gate_leave(tasks, UVTW__G_CALL);
  return err;
}


/* The threadpool run (uv_queue_work's work_cb, on the pool thread). */
static void uvtw__work_cb(uvtw__tasks_t* tasks, uvtw__task_t* node) {
  uvtw__work_t* work;
  uint64_t w, to;

  work = &node->work;
  note_runner(node);
  w = uvtw__task_word(node);
  do
    if (UVTW__STATE(w) != UVTW__T_QUEUED)
      return;
  while (!task_cas(node, &w, UVTW__WITH_STATE(w, UVTW__T_RUNNING)));
  task_cb(tasks, node, 0);
  work->ran($) = 1;
  w = uvtw__task_after_run(tasks, node, 0, &to);
  work->stopped($) = UVTW__STATE(w) == UVTW__T_STOPPING;
}


/* ---- libuv's threadpool: uv_queue_work, the pool thread, uv_cancel and
 * the return to the loop, each under libuv's mutex ---------------------- */

static void model_uv_queue_work(uvtw__work_t* work) {
  work->req($).store(REQ_QUEUED, rl::mo_release);
}


static int model_pool_start(uvtw__work_t* work) {
  int req;

  req = REQ_QUEUED;
  return work->req($).compare_exchange_strong(req, REQ_STARTED, rl::mo_acquire,
                                              rl::mo_relaxed);
}


static void model_pool_done(uvtw__work_t* work) {
  work->req($).store(REQ_DONE, rl::mo_release);
}


static void model_uv_cancel(uvtw__work_t* work) {
  int req;

  req = REQ_QUEUED;
  work->req($).compare_exchange_strong(req, REQ_UV_CANCELED, rl::mo_acq_rel,
                                       rl::mo_relaxed);
}


/* The loop: 1 and *status if the request came back (after_work_cb due). */
static int model_work_returned(uvtw__work_t* work, int* status) {
  int req;

  req = work->req($).load(rl::mo_acquire);
  if (req != REQ_DONE && req != REQ_UV_CANCELED)
    return 0;
  *status = req == REQ_DONE ? 0 : UV_ECANCELED;
  work->req($).store(REQ_NONE, rl::mo_relaxed);
  return 1;
}


/* ---- The user's side ------------------------------------------------- */

/* A cancel's result, for the properties: 0 and UV_EBUSY end the task. */
static int ghost_cancelled(int t, int err) {
  if (err == 0 || err == UV_EBUSY) {
    ghost->ends[t]++;
    ghost->cancels++;
  }
  if (err == 0)
    ghost->cancelled0[t] = 1;
  ghost->seen |= err == 0          ? SEEN_CANCEL_0
                 : err == UV_EBUSY ? SEEN_CANCEL_EBUSY
                                   : SEEN_CANCEL_ENOENT;
  return err;
}


/* The task's callback: a run (status 0), or its final call. */
static void task_cb(uvtw__tasks_t* tasks, uvtw__task_t* node, int status) {
  int t;

  RL_ASSERT(node->cb($) == 1);
  t = node->arg($);
  if (status != 0) {
    ghost->ends[t]++;
    ghost->seen |= SEEN_FINAL_CALL;
    return;
  }
  RL_ASSERT(!ghost->cancelled0[t]); /* no run after a cancel's 0 */
  ghost->runs[t]++;
  ghost->seen |= rl::thread_index() == 3 ? SEEN_POOL_RUN : SEEN_RUN;
  if (ghost->self_cancel && ghost->runs[t] == 2 &&
      ghost_cancelled(t, uvtw_cancel(tasks, ghost->ids[t])) == 0)
    ghost->seen |= SEEN_OWN_CANCEL_0;
}


static void model_id_send(uvtw__tasks_t* tasks, uvtw_id_t id);
static uvtw_id_t model_id_recv(uvtw__tasks_t* tasks);


/* ---- The loop's side (lib/task.c) ------------------------------------- */

static void unfile(uvtw__task_t* node) {
  if (node->location != UVTW__AT_WHEEL)
    return;
  node->filed = 0;
  node->location = UVTW__AT_NONE;
}


/* Submits ask for DELAY_SUBMIT, resets for DELAY_RESET1 or 2.  The loop
 * reads a moved task's deadline after a CAS that saw W_MOVED (acquire):
 * it must be a reset's (rule 2), not the submit's. */
enum { DELAY_SUBMIT = 10, DELAY_RESET1 = 20, DELAY_RESET2 = 30 };

static uint64_t moved_deadline(uvtw__task_t* node) {
  uint64_t d;

  d = uvtw__task_deadline(node);
  RL_ASSERT(d == DELAY_RESET1 || d == DELAY_RESET2);
  ghost->seen |= SEEN_MOVED;
  return d;
}


/* A new task: its submit's deadline, or one of a reset racing the take-in.
 * The scenarios reset only task 1: another task that reuses its node
 * must never see a store of a reset that held the node for task 1 (rule
 * 2: the loop frees a node only after its last writer let go, acquire). */
static uint64_t new_deadline(uvtw__task_t* node) {
  uint64_t d;

  d = uvtw__task_deadline(node);
  RL_ASSERT(d == DELAY_SUBMIT || node->arg($) == 1);
  return d;
}


static void file_at(uvtw__task_t* node, uint64_t deadline) {
  (void) deadline;
  RL_ASSERT(!ghost->claimed[node->index]);
  unfile(node);
  node->filed = 1;
  node->location = UVTW__AT_WHEEL;
  node->timer_repeat = node->on_pool($) ? 0 : node->repeat_ms($) != 0;
}


static void release_if_idle(uvtw__tasks_t* tasks, uvtw__task_t* node) {
  uint64_t w;

  if (node->location != UVTW__AT_NONE || node == tasks->running)
    return;
  w = uvtw__task_word(node);
  if ((w & (UVTW__W_INQ | UVTW__W_WRITERS)) ||
      (UVTW__STATE(w) != UVTW__T_CANCELLED && UVTW__STATE(w) != UVTW__T_DONE))
    return;
  if (node->held) {
    node->held = 0;
    tasks->held--;
    if (UVTW__STATE(w) == UVTW__T_CANCELLED)
      tasks->cancelled++;
  }
  uvtw__node_free(tasks, node);
}


static void to_final(uvtw__tasks_t* tasks, uvtw__task_t* node) {
  if (!uvtw__task_close(node)) {
    release_if_idle(tasks, node);
    return;
  }
  node->location = UVTW__AT_FINAL_LIST;
  tasks->final[tasks->nfinal++] = node;
}


/* A node's use the loop sees first, and each use before it that a submit
 * took the node over from (cancelled unseen). */
static void take_use(uvtw__tasks_t* tasks, uvtw__task_t* node, uint64_t w) {
  uint64_t uses;

  uses = UVTW__GEN(w) - node->seen_gen;
  RL_ASSERT(uses >= 1);
  node->seen_gen = UVTW__GEN(w);
  if (uses > 2)
    ghost->seen |= SEEN_TAKEN_OVER_TWICE;
  tasks->accepted += uses;
  tasks->cancelled += uses - (UVTW__STATE(w) == UVTW__T_PENDING);
  if (UVTW__STATE(w) == UVTW__T_PENDING) {
    tasks->held++;
    node->held = 1;
    node->fires = 0;
  }
}


static void take(uvtw__tasks_t* tasks, uvtw__task_t* node) {
  uint64_t w;

  w = uvtw__task_take(node, node->location == UVTW__AT_WORK);
  ghost->in_inbox[node->index] = 0; /* W_INQ clear: the entry is done */
  if (!(w & UVTW__W_TAKEN))
    take_use(tasks, node, w);
  switch (UVTW__STATE(w)) {
  case UVTW__T_PENDING:
    if (node->location == UVTW__AT_WORK)
      break;
    if (tasks->closing)
      to_final(tasks, node);
    else if (w & UVTW__W_MOVED)
      file_at(node, moved_deadline(node));
    else if (!(w & UVTW__W_TAKEN))
      file_at(node, new_deadline(node));
    break;
  case UVTW__T_CANCELLED:
  case UVTW__T_DONE:
    unfile(node);
    release_if_idle(tasks, node);
  }
}


/* The whole queue, at once (the code takes UVTW__DRAIN_BATCH entries a
 * call; the rest waits in the inbox, which only the loop reads). */
static int uvtw__tasks_drain(uvtw__tasks_t* tasks) {
  uvtw__task_t* node;

  if (tasks->inbox == NULL)
    uvtw__queue_take(tasks);
  while ((node = uvtw__inbox_pop(tasks)) != NULL)
    take(tasks, node);
  uvtw__free_flush(tasks);
  return tasks->inbox != NULL || uvtw__queue_busy(tasks);
}


static void uvtw__task_fire(uvtw__tasks_t* tasks, uvtw__task_t* node) {
  uvtw__task_t* outer;
  uint64_t w, to;
  int on_pool;

  on_pool = node->on_pool($);
  if (!uvtw__task_dispatch(node, on_pool)) {
    /* PENDING: dispatch found W_MOVED (only the loop clears it). */
    if (UVTW__STATE(uvtw__task_clear_moved(node)) == UVTW__T_PENDING) {
      file_at(node, moved_deadline(node));
    } else {
      unfile(node);
      release_if_idle(tasks, node);
    }
    return;
  }
  if (on_pool) {
    unfile(node);
    node->location = UVTW__AT_WORK;
    node->work.ran($) = 0;
    node->work.stopped($) = 0;
    node->work.uv_cancel_asked = 0;
    model_uv_queue_work(&node->work);
    return;
  }
  outer = tasks->running;
  tasks->running = node;
  task_cb(tasks, node, 0);
  tasks->running = outer;
  tasks->run++;
  w = uvtw__task_after_run(tasks, node, tasks->closing, &to);
  switch (UVTW__STATE(to)) {
  case UVTW__T_PENDING:
    w = uvtw__task_clear_moved(node);
    if (UVTW__STATE(w) == UVTW__T_PENDING && (w & UVTW__W_MOVED))
      file_at(node, moved_deadline(node));
    return;
  case UVTW__T_CLOSED:
    unfile(node);
    node->location = UVTW__AT_FINAL_LIST;
    tasks->final[tasks->nfinal++] = node;
    return;
  default:
    if (UVTW__STATE(w) == UVTW__T_STOPPING)
      tasks->cancelled++;
    unfile(node);
    release_if_idle(tasks, node);
  }
}


/* The wheel's pass: each filed task is due (at most twice a task, so that
 * a repeating one leaves time for the rest).  1 if it fired one. */
static int pass(uvtw__tasks_t* tasks) {
  uvtw__task_t* node;
  int i, fired;

  fired = 0;
  for (i = 0; i < NNODES; i++) {
    node = &tasks->nodes[i];
    if (!node->filed || node->fires == 2)
      continue;
    node->fires++;
    if (!node->timer_repeat)
      node->filed = 0; /* a one-shot's timer is inactive as it fires */
    uvtw__task_fire(tasks, node);
    fired = 1;
  }
  uvtw__free_flush(tasks);
  return fired;
}


static void after_work_cb(uvtw__tasks_t* tasks,
                          uvtw__task_t* node,
                          int status) {
  uvtw__work_t* work;
  uint64_t w;

  work = &node->work;
  if (status == UV_ECANCELED)
    ghost->seen |= SEEN_UV_CANCELED;
  node->location = UVTW__AT_NONE;
  if (work->ran($))
    tasks->run++;
  if (work->stopped($))
    tasks->cancelled++;
  if (status != UV_ECANCELED && !tasks->closing &&
      UVTW__STATE(w = uvtw__task_clear_moved(node)) == UVTW__T_PENDING) {
    if (w & UVTW__W_MOVED)
      (void) moved_deadline(node);
    file_at(node, 0);
  } else if (tasks->closing) {
    to_final(tasks, node);
  } else {
    release_if_idle(tasks, node);
  }
  uvtw__free_flush(tasks);
}


static void uvtw__tasks_close_begin(uvtw__tasks_t* tasks) {
  uvtw__task_t* node;
  int i;

  tasks->closing = 1;
  uvtw__gate_close_begin(tasks);
  for (i = 0; i < NNODES; i++) {
    node = &tasks->nodes[i];
    if (!node->filed)
      continue;
    unfile(node);
    if (node != tasks->running)
      to_final(tasks, node);
  }
  uvtw__free_flush(tasks);
  model_uv_async_send(tasks);
}


static void run_finals(uvtw__tasks_t* tasks) {
  uvtw__task_t* node;
  int i;

  while (tasks->nfinal != 0) {
    node = tasks->final[0];
    for (i = 1; i < tasks->nfinal; i++)
      tasks->final[i - 1] = tasks->final[i];
    tasks->nfinal--;
    node->location = UVTW__AT_NONE;
    task_cb(tasks, node, UV_ECANCELED);
    tasks->closed++;
    uvtw__task_final_done(tasks, node);
    release_if_idle(tasks, node);
  }
  uvtw__free_flush(tasks);
}


static int in_work(uvtw__tasks_t* tasks) {
  int i, n;

  n = 0;
  for (i = 0; i < NNODES; i++)
    n += tasks->nodes[i].location == UVTW__AT_WORK;
  return n;
}


/* 1 once close is done with the tasks. */
static int uvtw__tasks_close_step(uvtw__tasks_t* tasks) {
  uvtw__task_t* node;
  int i;

  do {
    while (uvtw__tasks_drain(tasks))
      ;
    run_finals(tasks);
  } while (uvtw__queue_busy(tasks));
  for (i = 0; i < NNODES; i++) {
    node = &tasks->nodes[i];
    if (node->location == UVTW__AT_WORK && !node->work.uv_cancel_asked) {
      node->work.uv_cancel_asked = 1;
      model_uv_cancel(&node->work);
    }
  }
  if (in_work(tasks))
    return 0;
  if (!uvtw__gate_close_end(tasks)) {
    model_uv_async_send(tasks);
    return 0;
  }
  return 1;
}


/* When the loop closes the wheel: right after its first look at the
 * queue; once the producers are done and their tasks are taken in and
 * back from the pool; or once they are done, racing pool runs. */
enum { CLOSE_FIRST, CLOSE_WHEN_QUIET, CLOSE_RACING_POOL };

/* The loop thread: wake-ups, pool returns and passes until close is done. */
static void loop_thread(uvtw__tasks_t* tasks, int close_when) {
  uvtw__task_t* node;
  int i, done_seen, progress, status, closed;

  closed = 0;
  if (close_when == CLOSE_FIRST) {
    if (model_uv_async_woken(tasks))
      uvtw__tasks_drain(tasks);
    uvtw__tasks_close_begin(tasks);
  }
  while (!closed) {
    done_seen = ghost->producers_done == ghost->producers;
    progress = model_uv_async_woken(tasks);
    if (progress) {
      if (tasks->closing)
        closed = uvtw__tasks_close_step(tasks);
      else
        uvtw__tasks_drain(tasks);
    }
    for (i = 0; i < NNODES && !closed; i++) {
      node = &tasks->nodes[i];
      if (node->location == UVTW__AT_WORK &&
          model_work_returned(&node->work, &status)) {
        after_work_cb(tasks, node, status);
        progress = 1;
        if (tasks->closing)
          closed = uvtw__tasks_close_step(tasks);
      }
    }
    if (closed)
      break;
    if (!tasks->closing && pass(tasks))
      progress = 1;
    if (!progress && done_seen && !tasks->closing &&
        (!in_work(tasks) || close_when == CLOSE_RACING_POOL)) {
      /* No lost wake-up: every push after the loop's last exchange of
       * the queue found it empty and woke the loop, which found no
       * wake-up now, after the producers (and pool runs) were done. */
      if (!in_work(tasks))
        RL_ASSERT(ghost->queued == 0);
      uvtw__tasks_close_begin(tasks);
      progress = 1;
    }
    if (!progress)
      rl::yield(1, $);
  }
  /* From here the close callback may free the wheel. */
  tasks->wheel_mem($) = 1;
  tasks->close_done = 1;
  ghost->loop_done = 1;
}


static void pool_thread(uvtw__tasks_t* tasks) {
  uvtw__task_t* node;
  int i, found;

  for (;;) {
    found = 0;
    for (i = 0; i < NNODES; i++) {
      node = &tasks->nodes[i];
      if (model_pool_start(&node->work)) {
        uvtw__work_cb(tasks, node);
        model_pool_done(&node->work);
        found = 1;
      }
    }
    if (!found) {
      if (ghost->loop_done)
        return;
      rl::yield(1, $);
    }
  }
}


/* ---- Scenarios --------------------------------------------------------- */

/* An id handed from one producer to another by the user's code, with no
 * ordering of its own: a relaxed atomic. */
static void model_id_send(uvtw__tasks_t* tasks, uvtw_id_t id) {
  tasks->id_chan($).store(id, rl::mo_relaxed);
}


static uvtw_id_t model_id_recv(uvtw__tasks_t* tasks) {
  uvtw_id_t id;
  int i;

  for (i = 0; i < 8; i++) {
    if ((id = tasks->id_chan($).load(rl::mo_relaxed)) != 0)
      return id;
    rl::yield(1, $);
  }
  return 0;
}


/* The nodes as grow() leaves them: generation 1, all on the free stack. */
static void model_init(uvtw__tasks_t* tasks, size_t max_tasks) {
  uvtw__task_t* node;
  int i;

  tasks->gate($).store(0, rl::mo_relaxed);
  tasks->head($).store(NULL, rl::mo_relaxed);
  tasks->async_pending($).store(0, rl::mo_relaxed);
  tasks->id_chan($).store(0, rl::mo_relaxed);
  tasks->wheel_mem($) = 0;
  tasks->max_tasks = max_tasks;
  tasks->serial = SERIAL;
  for (i = 0; i < NNODES; i++) {
    node = &tasks->nodes[i];
    node->index = i;
    node->state($).store((uint64_t) 1 << UVTW__W_GEN_SHIFT | UVTW__T_FREE,
                         rl::mo_relaxed);
    node->next($).store(NULL, rl::mo_relaxed);
    node->deadline($).store(0, rl::mo_relaxed);
    node->free_next($).store(i + 1 < NNODES ? i + 2 : 0, rl::mo_relaxed);
    node->runner($).store(-1, rl::mo_relaxed);
    node->work.req($).store(REQ_NONE, rl::mo_relaxed);
  }
  tasks->free_top($).store(1, rl::mo_relaxed);
}


/* After close: the loop freed every node once, and the free stack lists
 * each exactly once, as FREE. */
static void model_free_stack_whole(uvtw__tasks_t* tasks) {
  uvtw__task_t* node;
  uint32_t link;
  int listed[NNODES], n;

  memset(listed, 0, sizeof(listed));
  link = UVTW__FREE_LINK(tasks->free_top($).load(rl::mo_acquire));
  for (n = 0; link != 0; n++) {
    RL_ASSERT(n < NNODES && link <= NNODES);
    node = &tasks->nodes[link - 1];
    RL_ASSERT(!listed[link - 1]);
    listed[link - 1] = 1;
    RL_ASSERT(UVTW__STATE(node->state($).load(rl::mo_acquire)) == UVTW__T_FREE);
    link = node->free_next($).load(rl::mo_acquire);
  }
  RL_ASSERT(n == NNODES);
}


enum { SUBMIT_CANCEL_RESET, CLOSE_RACES, POOL_CANCEL, POOL_CLOSE, TAKEOVER };

template <int S, int N>
struct protocol : rl::test_suite<protocol<S, N>, N> {
  uvtw__tasks_t tasks;
  ghost_t g;

  void before() {
    memset(&g, 0, sizeof(g));
    ghost = &g;
    g.producers = 2;
    g.self_cancel = S == POOL_CANCEL;
    model_init(&tasks, S == CLOSE_RACES ? 2 : 0);
  }

  void thread(unsigned i) {
    uvtw_id_t id;
    int err;

    id = 0;
    err = 0;
    if (i == 2) {
      loop_thread(&tasks, S == CLOSE_RACES  ? CLOSE_FIRST
                          : S == POOL_CLOSE ? CLOSE_RACING_POOL
                                            : CLOSE_WHEN_QUIET);
      return;
    }
    if (i == 3) {
      pool_thread(&tasks);
      return;
    }
    if (S == TAKEOVER) {
      takeover_producer(i);
      return;
    }
    if (i == 0) {
      err = uvtw_submit(&tasks, DELAY_SUBMIT, S == CLOSE_RACES ? 0 : 5,
                        S >= POOL_CANCEL ? UVTW_THREADPOOL : 0, 1, &id);
      if (err == 0)
        model_id_send(&tasks, id);
      seen_reset(uvtw_reset(&tasks, id, DELAY_RESET1));
      if (S < POOL_CANCEL)
        seen_submit(uvtw_submit(&tasks, DELAY_SUBMIT, 0, 0, 2, &id));
    } else {
      id = model_id_recv(&tasks);
      if (S != POOL_CLOSE)
        ghost_cancelled(1, uvtw_cancel(&tasks, id));
      if (S != POOL_CANCEL)
        seen_reset(uvtw_reset(&tasks, id, DELAY_RESET2));
      if (S == SUBMIT_CANCEL_RESET)
        seen_submit(uvtw_submit(&tasks, DELAY_SUBMIT, 0, 0, 3, &id));
    }
    g.producers_done++;
  }

  /* Producer 1 submits three one-shots, cancelling the first two;
   * producer 2 submits one: each submit may take over the node of a task
   * cancelled before take-in, also one taken over already. */
  void takeover_producer(unsigned i) {
    uvtw_id_t id;
    int t;

    if (i == 0) {
      for (t = 1; t <= 3; t++)
        if (uvtw_submit(&tasks, DELAY_SUBMIT, 0, 0, t, &id) == 0 && t < 3)
          ghost_cancelled(t, uvtw_cancel(&tasks, id));
    } else {
      seen_submit(uvtw_submit(&tasks, DELAY_SUBMIT, 0, 0, 4, &id));
    }
    g.producers_done++;
  }

  void seen_reset(int err) {
    g.seen |= err == 0           ? SEEN_RESET_0
              : err == UV_ENOENT ? SEEN_RESET_ENOENT
                                 : 0;
  }

  void seen_submit(int err) {
    if (err == UV_ECANCELED)
      g.seen |= SEEN_SUBMIT_ECANCELED;
  }

  void after() {
    uint64_t n;
    int t;

    for (t = 2; t < NTASKS; t++)
      if (g.accepted[t] && UVTW__ID_INDEX(g.ids[t]) == UVTW__ID_INDEX(g.ids[1]))
        g.seen |= SEEN_NODE_REUSED;
    seen_all |= g.seen;
    RL_ASSERT(tasks.close_done);
    RL_ASSERT(g.queued == 0);
    for (t = 1; t < NTASKS; t++)
      RL_ASSERT(g.ends[t] == g.accepted[t]); /* exactly once, or never */
    /* The stats: every task accepted, taken over or not, and every cancel
     * that returned 0 or UV_EBUSY, counted once. */
    n = 0;
    for (t = 1; t < NTASKS; t++)
      n += g.accepted[t];
    RL_ASSERT(tasks.accepted == n);
    RL_ASSERT(tasks.cancelled == (uint64_t) g.cancels);
    model_free_stack_whole(&tasks);
  }
};


/* ---- The setup's own check: store buffering --------------------------- */

/* Each thread stores 1 to its variable, then loads the other's.  Both
 * loads seeing 0 is allowed with release/acquire, forbidden with seq_cst:
 * Relacy must find it in the first and not in the second. */
static int litmus_store_buffering(rl::atomic<int>* mine,
                                  rl::atomic<int>* other,
                                  int seq_cst) {
  (*mine)($).store(1, seq_cst ? rl::mo_seq_cst : rl::mo_release);
  return (*other)($).load(seq_cst ? rl::mo_seq_cst : rl::mo_acquire);
}


template <int SC>
struct store_buffering
    : rl::test_suite<store_buffering<SC>,
                     2,
                     SC ? rl::test_result_success
                        : rl::test_result_user_assert_failed> {
  rl::atomic<int> x, y;
  int r[2];

  void before() {
    x($).store(0, rl::mo_relaxed);
    y($).store(0, rl::mo_relaxed);
  }

  void thread(unsigned i) {
    r[i] = litmus_store_buffering(i ? &y : &x, i ? &x : &y, SC);
  }

  void after() {
    RL_ASSERT(r[0] == 1 || r[1] == 1);
  }
};


template <typename T>
static int run(const char* name,
               rl::scheduler_type_e search,
               long iterations,
               unsigned must_see) {
  rl::test_params p;
  unsigned long long ms;
  unsigned i;
  bool ok;

  p.search_type = search;
  p.iteration_count = iterations;
  p.execution_depth_limit = 20000;
  p.output_history = getenv("UVTW_RELACY_HISTORY") != NULL;
  seen_all = 0;
  ms = get_tick_count();
  ok = rl::simulate<T>(p);
  ms = get_tick_count() - ms;
  printf("%s: %s after %llu iterations (%s), %llu ms: %s\n", name,
         rl::test_result_str(p.test_result),
         (unsigned long long) p.stop_iteration, rl::format(search), ms,
         ok ? "as expected" : "NOT as expected");
  if (p.test_result == rl::test_result_success) {
    printf("  outcomes reached:");
    for (i = 0; i < sizeof(seen_names) / sizeof(seen_names[0]); i++)
      if (seen_all & (1u << i))
        printf(" [%s]", seen_names[i]);
    printf("\n");
    for (i = 0; i < sizeof(seen_names) / sizeof(seen_names[0]); i++)
      if ((must_see & (1u << i)) && !(seen_all & (1u << i))) {
        printf("  NOT reached: %s (more iterations?)\n", seen_names[i]);
        ok = false;
      }
  }
  fflush(stdout);
  return ok ? 0 : 1;
}


int main(int argc, char** argv) {
  const char* s;
  long n;

  if (argc < 2) {
    fprintf(stderr,
            "usage: %s litmus|submit-cancel-reset|close-races|pool-cancel|"
            "pool-close|takeover "
            "[iterations]\n",
            argv[0]);
    return 2;
  }
  s = argv[1];
  n = argc > 2 ? atol(argv[2]) : 20000;
  if (strcmp(s, "litmus") == 0)
    return run<store_buffering<0> >("store-buffering, release/acquire",
                                    rl::sched_full, 0, 0) |
           run<store_buffering<1> >("store-buffering, seq_cst", rl::sched_full,
                                    0, 0);
  if (strcmp(s, "submit-cancel-reset") == 0)
    return run<protocol<SUBMIT_CANCEL_RESET, 3> >(
        s, rl::sched_random, n,
        SEEN_CANCEL_0 | SEEN_CANCEL_ENOENT | SEEN_RESET_0 | SEEN_RESET_ENOENT |
            SEEN_NODE_REUSED | SEEN_RUN | SEEN_FINAL_CALL |
            SEEN_BEFORE_TAKE_IN | SEEN_MOVED | SEEN_TAKEOVER |
            SEEN_TAKEOVER_PUSHED | SEEN_SUBMIT_NO_CALL | SEEN_PUSH_CALL);
  if (strcmp(s, "close-races") == 0)
    return run<protocol<CLOSE_RACES, 3> >(
        s, rl::sched_random, n,
        SEEN_CANCEL_0 | SEEN_CANCEL_ENOENT | SEEN_RESET_0 | SEEN_RESET_ENOENT |
            SEEN_SUBMIT_ECANCELED | SEEN_FINAL_CALL | SEEN_BEFORE_TAKE_IN);
  if (strcmp(s, "pool-cancel") == 0)
    return run<protocol<POOL_CANCEL, 4> >(
        s, rl::sched_random, n,
        SEEN_CANCEL_0 | SEEN_CANCEL_EBUSY | SEEN_RESET_0 | SEEN_POOL_RUN |
            SEEN_OWN_CANCEL_0 | SEEN_FINAL_CALL | SEEN_MOVED);
  if (strcmp(s, "pool-close") == 0)
    return run<protocol<POOL_CLOSE, 4> >(s, rl::sched_random, n,
                                         SEEN_RESET_0 | SEEN_RESET_ENOENT |
                                             SEEN_POOL_RUN | SEEN_UV_CANCELED |
                                             SEEN_FINAL_CALL | SEEN_MOVED);
  if (strcmp(s, "takeover") == 0)
    return run<protocol<TAKEOVER, 3> >(
        s, rl::sched_random, n,
        SEEN_CANCEL_0 | SEEN_BEFORE_TAKE_IN | SEEN_RUN | SEEN_TAKEOVER |
            SEEN_TAKEOVER_PUSHED | SEEN_TAKEN_OVER_TWICE | SEEN_SUBMIT_NO_CALL |
            SEEN_PUSH_CALL);
  fprintf(stderr, "no scenario %s\n", s);
  return 2;
}
