/* SPDX-License-Identifier: MIT */
/* clang-format off */
/* Everything of a wheel's tasks that threads other than the loop touch:
 * the node table, the free stack, the queue, the gate, and uvtw_submit,
 * uvtw_cancel and uvtw_reset.  The loop's side is task.c.
 *
 * Ground rules.  (Flag names drop their UVTW__ prefix, as in task.h.)
 *
 * 1. The gate (tasks->gate, one word): G_CLOSING | G_CLOSED | calls inside
 *    (x G_CALL) | live tasks (x G_LIVE).  Submit and reset enter by one
 *    read-modify-write of it and leave by another, as libuv's
 *    uv_async_send marks itself busy and uv_close waits for it:
 *      submit:   fetch_add +G_CALL +G_LIVE, undone and refused
 *                (UV_ECANCELED) if G_CLOSING; with max_tasks, a CAS
 *                instead, refused (UV_ENOSPC) at max_tasks live;
 *      reset:    fetch_add +G_CALL, refused (UV_ENOENT) if G_CLOSED;
 *      leaving:  fetch_sub G_CALL, release.
 *    A cancel does not enter: one that ends a task writes while the task
 *    counts live (close waits for it) and ends the count last (release);
 *    any other writes at most a running, so live, task's STOPPING.
 *    Close (loop thread) sets G_CLOSING, and finishes by one CAS that sets
 *    G_CLOSED only from a word with no call inside and no task live.  All
 *    are read-modify-writes of one word, so totally ordered: a submit
 *    enters before G_CLOSING (close waits for it and drains its task) or is
 *    refused; a leave (release) makes all the call did visible to close's
 *    acquire.  No fence is needed.  A task counts live from its submit's
 *    entry to the read-modify-write of whoever ends it.
 *
 * 2. A node is type-stable: chunks of the table are never moved or freed
 *    before the wheel is, so any thread may read a node found by an id's
 *    index.  Its fields:
 *      state     all threads, by CAS only (acq_rel), except plain stores
 *                by a thread that owns a node no other can move: submit's
 *                FREE -> PENDING of a node it popped, the freeing of an
 *                ended node with no writer (ended states are final) by
 *                the loop (uvtw__node_free) or by a cancel (unqueue), and
 *                grow's first store into a node of generation 0 (never
 *                used: no id names it).
 *      next      the thread that set W_INQ, then the loop (or unqueue).
 *      deadline  submit, before publishing; a reset, only while its
 *                writer count in the state word holds the node (so a
 *                stale id never writes another task's deadline); the loop
 *                reads it after a CAS that saw W_MOVED or took the node in
 *                (acquire): the last reset's value, or a later one.
 *      cb, arg, repeat_ms   submit, before publishing; then read only.
 *      free_next whoever pushes the node on the free stack; read by
 *                poppers, whose CAS fails if it left the stack meanwhile.
 *      the rest  the loop's (task.c), and gen_end the freeing thread's.
 *
 * 3. The state word: generation << 24 | writers << 8 | flags | state.
 *    Every move is one CAS on the whole word, so it carries the id's
 *    generation: an id never moves another task of its node, and of a
 *    cancel, a reset, an expiry, a run and close, exactly one wins each
 *    race.  Moves (task.h lists the states):
 *      submit  FREE -> PENDING | W_INQ (then pushes the node);
 *      cancel  PENDING/QUEUED -> CANCELLED (returns 0); RUNNING ->
 *              STOPPING (UV_EBUSY), or from the task's own callback, a
 *              repeating one -> CANCELLED (0), a one-shot stays (ENOENT);
 *              one not taken in, no writer, on top of the queue: also
 *              writers + 1, and pops and frees it (rule 4);
 *      reset   writers + 1 if PENDING/QUEUED/RUNNING (else ENOENT); stores
 *              the deadline; writers - 1 | W_MOVED, and QUEUED -> PENDING
 *              (0; RUNNING: UV_EBUSY, the next run of a repeating task
 *              moves), or ENOENT if the task ended meanwhile;
 *      loop    take-in: clears W_INQ, and W_MOVED as it files the node
 *              (never during a run of the task), sets W_TAKEN; expiry
 *              PENDING -> RUNNING or QUEUED, or if W_MOVED, clears it and
 *              re-files; after a run RUNNING -> PENDING/DONE/CLOSED,
 *              STOPPING -> DONE; close PENDING/QUEUED -> CLOSED -> DONE;
 *      work    QUEUED -> RUNNING -> PENDING/DONE, STOPPING -> DONE.
 *    A thread that needs the loop to look again at a node it took in (a
 *    cancel: unfile it; a reset: re-file it; the last reset writer of an
 *    ended task: free it) sets W_INQ in its CAS if it was clear, then
 *    pushes the node: W_INQ means "in the queue, or about to be", so a
 *    node is queued at most once, and the loop frees a node only with
 *    W_INQ clear and no writer.  A node not taken in yet has W_INQ.
 *
 * 4. The queue (tasks->head) is an intrusive stack in the style of Linux's
 *    llist: a push is a CAS of the head (release: the node's fields are
 *    visible to the loop); the loop takes the whole stack with one
 *    exchange (acquire) and reverses it, so each producer's entries come
 *    in order.  A push that finds the stack empty wakes the loop with
 *    uv_async_send: after the loop's exchange, the next push finds it
 *    empty, so no entry is left without a wake-up, and no fence is needed.
 *    A cancel may pop its own node off the top (unqueue): the bottom entry
 *    still found the stack empty (its wake-up stands), and the cancel's
 *    writer keeps the node from being freed, so from coming back to the
 *    top with another `next` (no ABA).
 *
 * 5. The free stack (tasks->free_top) is a Treiber stack of node indices
 *    with a 35-bit ABA tag in the same 64-bit word (lock-free on every
 *    target: i686, armv7 and aarch64 have 64-bit CAS; the static asserts
 *    below check it, with the 8-byte alignment GCC 11 and clang give).
 *    The loop pushes freed nodes a chain per batch, a cancel the node it
 *    unqueued; producers pop one.  An empty stack grows the table by at
 *    most UVTW__GROW_STEP nodes, under grow_lock (and gen_lock for a chunk).
 *
 * 6. Generations: an index's generations are handed out by one
 *    process-wide counter per index, to every wheel, a block at a time, so
 *    no two uses of an index in any wheel carry the same generation: an id
 *    is never reused, and is UV_ENOENT on every other wheel.  An index
 *    with no generation left is retired (never reused).
 */
/* clang-format on */

#include <stdlib.h>
#include <string.h>

#include "internal.h"

_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2,
               "64-bit atomics must be lock-free (the gate, the free stack, "
               "the state words)");
_Static_assert(_Alignof(_Atomic uint64_t) == 8,
               "64-bit atomics must be 8-byte aligned (GCC >= 11 or clang)");

_Thread_local uvtw__tls_t uvtw__tls __attribute__((tls_model("initial-exec")));

#define GEN_FIRST 64
#define GEN_BLOCK 65536

static uv_once_t gen_once = UV_ONCE_INIT;
static uv_mutex_t gen_lock;
/* Chunk c: the generation counters of the indices of a table's chunk c. */
_Atomic uint64_t* uvtw__gen_chunks[UVTW__CHUNKS];


static void gen_lock_init(void) {
  if (uv_mutex_init(&gen_lock) != 0)
    abort(); /* as libuv's own lock does on failure */
}


/* Reserves n generations for the node's index (its counters exist: grow
 * made them).  Returns the first, 0 if the index has none left. */
static uint64_t gen_reserve(uvtw__task_t* node, uint64_t n) {
  _Atomic uint64_t* counter;
  uint64_t offset, used;
  unsigned c;

  c = 63 - (unsigned) __builtin_clzll(node->index / UVTW__CHUNK0 + 1);
  offset = node->index - (uint64_t) UVTW__CHUNK0 * ((1u << c) - 1);
  counter = &uvtw__gen_chunks[c][offset];
  used = atomic_fetch_add_explicit(counter, n, memory_order_relaxed);
  if (used >= UVTW__GEN_MASK - n)
    return 0; /* the counter stays above: every later reserve fails too */
  node->gen_end = used + 1 + n;
  return used + 1;
}


/* Pushes the chain first..last (linked by free_next) on the free stack. */
static void free_push(uvtw__tasks_t* tasks,
                      uvtw__task_t* first,
                      uvtw__task_t* last) {
  uint64_t top, next;

  top = atomic_load_explicit(&tasks->free_top, memory_order_relaxed);
  do {
    atomic_store_explicit(&last->free_next, UVTW__FREE_LINK(top),
                          memory_order_relaxed);
    next = UVTW__FREE_NEXT_TAG(top) | (first->index + 1);
  } while (!atomic_compare_exchange_weak_explicit(&tasks->free_top, &top, next,
                                                  memory_order_release,
                                                  memory_order_relaxed));
}


/* Pops a free node, or NULL.  The tag makes the CAS fail if the top left
 * and came back since `top` was read (its free_next may be stale then). */
static uvtw__task_t* free_pop(uvtw__tasks_t* tasks) {
  uvtw__task_t* node;
  uint64_t top, next;

  top = atomic_load_explicit(&tasks->free_top, memory_order_acquire);
  while (UVTW__FREE_LINK(top) != 0) {
    node = uvtw__node_at(tasks, UVTW__FREE_LINK(top) - 1);
    if (node == NULL)
      UVTW__UNREACHABLE(); /* a listed node's chunk is published */
    next = UVTW__FREE_NEXT_TAG(top) |
           atomic_load_explicit(&node->free_next, memory_order_relaxed);
    if (atomic_compare_exchange_weak_explicit(&tasks->free_top, &top, next,
                                              memory_order_acquire,
                                              memory_order_acquire))
      return node;
  }
  return NULL;
}


/* Slow path, unless another thread freed or added nodes meanwhile: frees
 * UVTW__GROW_STEP more nodes of the newest chunk (adding one if it is all
 * in use), so that memory is touched as it comes into use.  0, UV_ENOMEM. */
static int grow(uvtw__tasks_t* tasks) {
  uvtw__task_t* chunk;
  uvtw__task_t* node;
  uvtw__task_t* first;
  uvtw__task_t* tail;
  uint64_t gen;
  void* mem;
  size_t n, lo, i;
  _Atomic uint64_t* gens;
  unsigned c;
  int err;

  uv_once(&gen_once, gen_lock_init);
  err = 0;
  uv_mutex_lock(&tasks->grow_lock);
  if (UVTW__FREE_LINK(
          atomic_load_explicit(&tasks->free_top, memory_order_relaxed)))
    goto out;
  c = tasks->nchunks;
  if (c == 0 || tasks->linked == (size_t) UVTW__CHUNK0 << (c - 1)) {
    err = UV_ENOMEM;
    n = (size_t) UVTW__CHUNK0 << c;
    if (c == UVTW__CHUNKS)
      goto out;
    uv_mutex_lock(&gen_lock);
    if (uvtw__gen_chunks[c] == NULL)
      uvtw__gen_chunks[c] = calloc(n, sizeof(*uvtw__gen_chunks[c]));
    gens = uvtw__gen_chunks[c]; /* read under the lock: others may set it */
    uv_mutex_unlock(&gen_lock);
    /* One node more, to start the chunk on a cache line. */
    if (gens == NULL || (mem = calloc(n + 1, sizeof(*chunk))) == NULL)
      goto out;
    err = 0;
    tasks->chunk_mem[c] = mem;
    chunk = (uvtw__task_t*) (((uintptr_t) mem + 63) & ~(uintptr_t) 63);
    atomic_store_explicit(&tasks->chunks[c], chunk, memory_order_release);
    tasks->nchunks = ++c;
    tasks->linked = 0;
  }
  chunk = atomic_load_explicit(&tasks->chunks[c - 1], memory_order_relaxed);
  n = (size_t) UVTW__CHUNK0 << (c - 1);
  lo = tasks->linked;
  tasks->linked = n - lo > UVTW__GROW_STEP ? lo + UVTW__GROW_STEP : n;
  first = NULL;
  tail = NULL;
  for (i = tasks->linked; i-- > lo;) {
    node = &chunk[i];
    node->index =
        (uint32_t) ((uint64_t) UVTW__CHUNK0 * ((1u << (c - 1)) - 1) + i);
    if ((gen = gen_reserve(node, GEN_FIRST)) == 0)
      continue; /* retired by other wheels' use */
    /* Stores, not atomic_init: a stale id may read the node meanwhile. */
    atomic_store_explicit(&node->state, gen << UVTW__W_GEN_SHIFT | UVTW__T_FREE,
                          memory_order_relaxed);
    atomic_store_explicit(&node->free_next,
                          first != NULL ? first->index + 1 : 0,
                          memory_order_relaxed);
    if (tail == NULL)
      tail = node;
    first = node;
  }
  if (first != NULL)
    free_push(tasks, first, tail);
out:
  uv_mutex_unlock(&tasks->grow_lock);
  return err;
}


void uvtw__queue_push(uvtw__tasks_t* tasks, uvtw__task_t* node) {
  uvtw__task_t* head;

  head = atomic_load_explicit(&tasks->head, memory_order_relaxed);
  do
    atomic_store_explicit(&node->next, head, memory_order_relaxed);
  while (!atomic_compare_exchange_weak_explicit(
      &tasks->head, &head, node, memory_order_release, memory_order_relaxed));
  if (head == NULL)
    uv_async_send(tasks->async);
}


/* Gives an ended node only the caller can reach its next generation, as
 * a free node: 0 if its index has none left (retired, never reused). */
static int renew(uvtw__task_t* node) {
  uint64_t gen;

  gen = UVTW__GEN(atomic_load_explicit(&node->state, memory_order_relaxed)) + 1;
  if (gen == node->gen_end && (gen = gen_reserve(node, GEN_BLOCK)) == 0)
    return 0;
  atomic_store_explicit(&node->state, gen << UVTW__W_GEN_SHIFT | UVTW__T_FREE,
                        memory_order_relaxed);
  return 1;
}


void uvtw__node_free(uvtw__tasks_t* tasks, uvtw__task_t* node) {
  if (!renew(node))
    return;
  atomic_store_explicit(&node->free_next, tasks->freed_first,
                        memory_order_relaxed);
  if (tasks->freed_first == 0)
    tasks->freed_last = node;
  tasks->freed_first = node->index + 1;
}


void uvtw__free_flush(uvtw__tasks_t* tasks) {
  uvtw__task_t* first;

  if (tasks->freed_first == 0)
    return;
  first = uvtw__node_at(tasks, tasks->freed_first - 1);
  if (first == NULL)
    UVTW__UNREACHABLE();
  free_push(tasks, first, tasks->freed_last);
  tasks->freed_first = 0;
}


static void leave(uvtw__tasks_t* tasks, uint64_t sub) {
  atomic_fetch_sub_explicit(&tasks->gate, sub, memory_order_release);
}


/* A deadline delay_ms from now: by uv_hrtime() (uvtw__hrtime_ms: never
 * early on the loop's clock, nor in real time with options.precise), or
 * on a virtual wheel from its clock. */
static uint64_t deadline_in(const uvtw__tasks_t* tasks, uint64_t delay_ms) {
  uint64_t now;

  if (tasks->virtual_clock == NULL)
    now = uvtw__hrtime_ms(uv_hrtime(), tasks->precise);
  else
    now = atomic_load_explicit(tasks->virtual_clock, memory_order_relaxed);
  return uvtw__sat_add(now, delay_ms);
}


int uvtw_submit(uvtw_wheel_t* wheel,
                uint64_t delay_ms,
                uint64_t repeat_ms,
                unsigned flags,
                uvtw_task_cb cb,
                void* arg,
                uvtw_id_t* id) {
  uvtw__tasks_t* tasks;
  uvtw__task_t* node;
  uint64_t deadline, g, w;

  if (wheel == NULL || cb == NULL || (flags & ~UVTW_THREADPOOL) != 0)
    return UV_EINVAL;
  tasks = &wheel->tasks;
  deadline = deadline_in(tasks, delay_ms);
  if (tasks->max_tasks == 0) {
    /* One fetch_add, which never retries (a CAS loop does, under
     * contention), undone if close has begun. */
    g = atomic_fetch_add_explicit(&tasks->gate, UVTW__G_CALL + UVTW__G_LIVE,
                                  memory_order_acquire);
    if (g & UVTW__G_CLOSING) {
      leave(tasks, UVTW__G_CALL + UVTW__G_LIVE);
      return UV_ECANCELED;
    }
  } else {
    g = atomic_load_explicit(&tasks->gate, memory_order_relaxed);
    do {
      if (g & UVTW__G_CLOSING)
        return UV_ECANCELED;
      if (UVTW__G_LIVES(g) >= tasks->max_tasks)
        return UV_ENOSPC;
    } while (!atomic_compare_exchange_weak_explicit(
        &tasks->gate, &g, g + UVTW__G_CALL + UVTW__G_LIVE, memory_order_acquire,
        memory_order_relaxed));
  }
  while ((node = free_pop(tasks)) == NULL)
    if (grow(tasks) != 0) {
      leave(tasks, UVTW__G_CALL + UVTW__G_LIVE);
      return UV_ENOMEM;
    }
  node->cb = cb;
  node->arg = arg;
  node->repeat_ms = repeat_ms;
  atomic_store_explicit(&node->deadline, deadline, memory_order_relaxed);
  w = atomic_load_explicit(&node->state, memory_order_relaxed);
  if (id != NULL)
    *id = (uint64_t) node->index << UVTW__GEN_BITS | UVTW__GEN(w);
  w = UVTW__WITH_STATE(w, UVTW__T_PENDING) | UVTW__W_INQ |
      (flags & UVTW_THREADPOOL ? UVTW__W_WORK : 0);
  atomic_store_explicit(&node->state, w, memory_order_relaxed);
  uvtw__queue_push(tasks, node); /* release: publishes all of the above */
  /* Liveness: the loop holds itself for its queue from its next flush on;
   * a submit on the loop thread (say before uv_run) holds it at once, as
   * uv_queue_work does.  Only the loop thread may uv_ref. */
  if (tasks->loop_thread == &uvtw__tls.token && !tasks->holds_loop) {
    tasks->holds_loop = 1;
    uv_ref((uv_handle_t*) tasks->async);
  }
  leave(tasks, UVTW__G_CALL);
  return 0;
}


/* Lets go of a writer's hold (w: a word with it), applying a reset's
 * deadline (W_MOVED, release) to a task that waits or runs: 0, UV_EBUSY if
 * it runs, else UV_ENOENT; pushes a notice if the loop must re-file the
 * task or, as the last writer of a task that ended, free it. */
static int let_go(uvtw__tasks_t* tasks, uvtw__task_t* node, uint64_t w) {
  uint64_t n;
  int err;

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
  } while (!uvtw__task_cas(node, &w, n));
  if ((n & UVTW__W_INQ) && !(w & UVTW__W_INQ))
    uvtw__queue_push(tasks, node);
  return err;
}


/* A cancel ended a task not taken in yet and holds it as a writer (word
 * w): pops it if still on top of the queue and frees it (a retired one
 * keeps its ended word), or else lets go (rule 4). */
static void unqueue(uvtw__tasks_t* tasks, uvtw__task_t* node, uint64_t w) {
  uvtw__task_t* head;

  head = atomic_load_explicit(&tasks->head, memory_order_acquire);
  if (head == node &&
      atomic_compare_exchange_strong_explicit(
          &tasks->head, &head,
          atomic_load_explicit(&node->next, memory_order_relaxed),
          memory_order_acquire, memory_order_relaxed)) {
    if (renew(node))
      free_push(tasks, node, node); /* release: publishes the word */
    return;
  }
  let_go(tasks, node, w);
}


/* No gate (rule 1). */
int uvtw_cancel(uvtw_wheel_t* wheel, uvtw_id_t id) {
  uvtw__tasks_t* tasks;
  uvtw__task_t* node;
  uint64_t w, n;
  unsigned st;
  int hold;

  if (wheel == NULL)
    return UV_EINVAL;
  tasks = &wheel->tasks;
  node = uvtw__node_at(tasks, id >> UVTW__GEN_BITS);
  if ((id & UVTW__GEN_MASK) == 0 || node == NULL)
    return UV_ENOENT;
  w = atomic_load_explicit(&node->state, memory_order_acquire);
  for (;;) {
    if (UVTW__GEN(w) != (id & UVTW__GEN_MASK))
      return UV_ENOENT;
    st = UVTW__STATE(w);
    if (st == UVTW__T_RUNNING && node != uvtw__tls.current_task) {
      if (uvtw__task_cas(node, &w, UVTW__WITH_STATE(w, UVTW__T_STOPPING)))
        return UV_EBUSY; /* the run ends the task */
      continue;
    }
    /* From its own callback, a repeating task has no run after this one;
     * a one-shot's run is its end. */
    if (st == UVTW__T_RUNNING ? node->repeat_ms == 0
                              : st != UVTW__T_PENDING && st != UVTW__T_QUEUED)
      return UV_ENOENT;
    n = UVTW__WITH_STATE(w, UVTW__T_CANCELLED);
    /* A notice if the loop must unfile it; a writer if unqueue() may pop
     * it (not on the loop thread: its submit held the loop for the entry). */
    hold = !(w & (UVTW__W_TAKEN | UVTW__W_WRITERS)) &&
           tasks->loop_thread != &uvtw__tls.token &&
           atomic_load_explicit(&tasks->head, memory_order_relaxed) == node;
    if ((w & (UVTW__W_TAKEN | UVTW__W_INQ)) == UVTW__W_TAKEN)
      n |= UVTW__W_INQ;
    if (uvtw__task_cas(node, &w, hold ? n + UVTW__W_WRITER : n))
      break;
  }
  if (!(w & UVTW__W_TAKEN))
    atomic_fetch_add_explicit(&tasks->taken_back, 1, memory_order_relaxed);
  if (hold)
    unqueue(tasks, node, n + UVTW__W_WRITER);
  else if ((n & UVTW__W_INQ) && !(w & UVTW__W_INQ))
    uvtw__queue_push(tasks, node);
  uvtw__live_end(tasks); /* release: all of the above happens before */
  return 0;
}


int uvtw_reset(uvtw_wheel_t* wheel, uvtw_id_t id, uint64_t delay_ms) {
  uvtw__tasks_t* tasks;
  uvtw__task_t* node;
  uint64_t deadline, w;
  int err;

  if (wheel == NULL)
    return UV_EINVAL;
  tasks = &wheel->tasks;
  deadline = deadline_in(tasks, delay_ms);
  if ((id & UVTW__GEN_MASK) == 0)
    return UV_ENOENT;
  err = UV_ENOENT;
  if (atomic_fetch_add_explicit(&tasks->gate, UVTW__G_CALL,
                                memory_order_acquire) &
      UVTW__G_CLOSED)
    goto out; /* close is done with the tasks */
  node = uvtw__node_at(tasks, id >> UVTW__GEN_BITS);
  w = node != NULL ? atomic_load_explicit(&node->state, memory_order_acquire)
                   : 0;
  /* Hold the node as a writer: it is not freed (nor reused) meanwhile. */
  do
    if (node == NULL || UVTW__GEN(w) != (id & UVTW__GEN_MASK) ||
        UVTW__STATE(w) < UVTW__T_PENDING || UVTW__STATE(w) > UVTW__T_RUNNING)
      goto out;
  while (!uvtw__task_cas(node, &w, w + UVTW__W_WRITER));
  atomic_store_explicit(&node->deadline, deadline, memory_order_relaxed);
  err = let_go(tasks, node, w + UVTW__W_WRITER);
out:
  leave(tasks, UVTW__G_CALL);
  return err;
}


/* Clears W_MOVED of a waiting task; returns the word it saw last (not
 * PENDING if a cancel won first: its notice follows, so file nothing). */
uint64_t uvtw__task_clear_moved(uvtw__task_t* node) {
  uint64_t w;

  w = atomic_load_explicit(&node->state, memory_order_acquire);
  while (UVTW__STATE(w) == UVTW__T_PENDING && (w & UVTW__W_MOVED) &&
         !uvtw__task_cas(node, &w, w & ~UVTW__W_MOVED))
    ;
  return w;
}


/* After a run on the loop, or on the threadpool: the task waits again, ends, or
 * is owed its final call.  Returns the word it moved from. */
uint64_t uvtw__task_after_run(uvtw__task_t* node,
                              int closing,
                              uvtw__tasks_t* t) {
  uint64_t w, n;

  w = atomic_load_explicit(&node->state, memory_order_acquire);
  for (;;) {
    if (UVTW__STATE(w) == UVTW__T_RUNNING)
      n = UVTW__WITH_STATE(w, node->repeat_ms == 0 ? UVTW__T_DONE
                              : closing            ? UVTW__T_CLOSED
                                                   : UVTW__T_PENDING);
    else if (UVTW__STATE(w) == UVTW__T_STOPPING)
      n = UVTW__WITH_STATE(w, UVTW__T_DONE);
    else
      return w; /* cancelled from its own callback */
    if (uvtw__task_cas(node, &w, n))
      break;
  }
  if (UVTW__STATE(n) == UVTW__T_DONE)
    uvtw__live_end(t);
  return w;
}


void uvtw__work_cb(uv_work_t* req) {
  uvtw__task_t* node;
  uvtw__task_t* outer;
  uvtw__work_t* work;
  uint64_t w;

  work = uvtw__container_of(req, uvtw__work_t, req);
  node = work->node;
  w = atomic_load_explicit(&node->state, memory_order_acquire);
  do
    if (UVTW__STATE(w) != UVTW__T_QUEUED)
      return; /* cancelled, reset or closed before it started */
  while (!uvtw__task_cas(node, &w, UVTW__WITH_STATE(w, UVTW__T_RUNNING)));
  outer = uvtw__tls.current_task;
  uvtw__tls.current_task = node;
  node->cb(node->arg, 0);
  uvtw__tls.current_task = outer;
  work->ran = 1;
  /* A one-shot ends by its run (its place is free now, not at
   * after_work_cb); a repeating one waits for after_work_cb to re-file
   * it.  Close waits for after_work_cb, so the wheel is alive. */
  w = uvtw__task_after_run(node, 0, &node->timer.wheel_->tasks);
  work->stopped = UVTW__STATE(w) == UVTW__T_STOPPING;
}


int uvtw__tasks_shared_init(uvtw__tasks_t* tasks) {
  atomic_init(&tasks->gate, 0);
  atomic_init(&tasks->head, NULL);
  atomic_init(&tasks->free_top, 0);
  atomic_init(&tasks->taken_back, 0);
  memset(tasks->chunks, 0, sizeof(tasks->chunks));
  memset(tasks->chunk_mem, 0, sizeof(tasks->chunk_mem));
  tasks->nchunks = 0;
  tasks->linked = 0;
  tasks->loop_thread = &uvtw__tls.token;
  return uv_mutex_init(&tasks->grow_lock);
}


void uvtw__tasks_shared_destroy(uvtw__tasks_t* tasks) {
  unsigned c;

  for (c = 0; c < UVTW__CHUNKS; c++)
    free(tasks->chunk_mem[c]);
  uv_mutex_destroy(&tasks->grow_lock);
}
