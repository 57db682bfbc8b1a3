/* SPDX-License-Identifier: MIT */
/* Every atomic step of a wheel's tasks, and the code that runs on other
 * threads than the loop: uvtw_submit, uvtw_cancel, uvtw_reset and the
 * threadpool run (uvtw__work_cb).  The loop's side, task.c, has no atomic
 * operation: it moves a node only through the verbs below, one per move of
 * rule 3.  Elsewhere only loads: task.h's chunk lookup (acquire), the
 * queue hints (relaxed; also virtual.c's) and the checker's.
 *
 * Ground rules (flag names without their UVTW__ prefix).
 *
 * 1. The gate (tasks->gate): G_CLOSING | G_CLOSED | calls inside (x G_CALL)
 *    | live tasks (x G_LIVE).  Close waits for both to be 0, as uv_close
 *    waits for a busy uv_async_send:
 *      submit  fetch_add +G_LIVE (acquire), undone and refused
 *              (UV_ECANCELED) if G_CLOSING; with max_tasks, a CAS instead,
 *              refused (UV_ENOSPC) at max_tasks live.  The task's count
 *              holds the wheel open until the loop can take the task in
 *              (no other thread has its id yet); once it can, the task may
 *              end at once, so the submit touches the wheel after that
 *              only inside a call, to wake the loop: +G_CALL in the same
 *              fetch_add if the queue looks empty, else entered by the
 *              push that finds it empty (queue_push);
 *      reset   fetch_add +G_CALL (acquire), refused (UV_ENOENT) if G_CLOSED;
 *      leave   fetch_sub G_CALL (release).
 *    A cancel does not enter: one that ends a task writes while the task
 *    counts live (close waits for it) and ends the count last (release);
 *    any other writes at most a running, so live, task's STOPPING.  Close
 *    (loop) sets G_CLOSING (acq_rel) and ends by a CAS (acquire) that sets
 *    G_CLOSED only with no call inside and no task live.  All are
 *    read-modify-writes of one word, so totally ordered: a submit enters
 *    before G_CLOSING (close waits for it and drains its task) or is
 *    refused, and a leave (release) makes what the call did visible to
 *    close's acquire.  A task counts live from its submit's entry to the
 *    read-modify-write that ends it.
 *
 * 2. Nodes are type-stable: no chunk of the table moves or is freed before
 *    the wheel, so any thread may read the node an id's index finds.
 *      state     by CAS only (acq_rel), but for plain stores by a thread
 *                owning a node no other can move: submit's FREE -> PENDING
 *                of a node it popped, the loop's freeing of an ended node
 *                with no writer and W_INQ clear (ended states are final),
 *                grow's first store into a node of generation 0 (never
 *                used: no id names it).
 *      next      the thread that set W_INQ, then the loop.
 *      deadline  submit before publishing; a reset only while its writer
 *                count holds the node (a stale id never writes another
 *                task's); the loop reads it after a CAS (acquire) that saw
 *                W_MOVED or took the node in: the last reset's, or later.
 *      runner    whoever moves the task to RUNNING, just before (relaxed;
 *                the CAS publishes it): a cancel that sees RUNNING
 *                (acquire) and its own thread there is inside the task's
 *                callback.
 *      cb, arg, repeat_ms, on_pool   submit, before publishing (in a node
 *                it took over, while its claim holds it: rule 4).
 *      free_next whoever pushes the node on the free stack; read by
 *                poppers, whose CAS fails if it left the stack meanwhile.
 *      the rest  the loop's (task.c).
 *
 * 3. The state word: generation << 24 | writers << 8 | flags | state.
 *    Every move is one CAS of the whole word, so it carries the id's
 *    generation (an id never moves another task of its node), and of a
 *    cancel, a reset, an expiry, a run and close, exactly one wins each
 *    race.  The moves (task.h lists the states), by thread:
 *      submit  (any) FREE -> PENDING | W_INQ, then pushes the node; or
 *              takes over a node (rule 4): CANCELLED | W_INQ, no writer,
 *              no W_TAKEN, not its last generation -> writers + 1 (the
 *              claim), then -> the next generation's PENDING | W_INQ
 *              (W_MOVED clear), pushed again if a take cleared W_INQ
 *              meanwhile;
 *      cancel  (any) PENDING/QUEUED -> CANCELLED (0); RUNNING -> STOPPING
 *              (UV_EBUSY), or from the task's own callback a repeating
 *              one -> CANCELLED (0), a one-shot stays (UV_ENOENT);
 *              STOPPING stays (UV_ENOENT, also from its own callback);
 *      reset   (any) writers + 1 if PENDING/QUEUED/RUNNING (else ENOENT),
 *              stores the deadline, then writers - 1 | W_MOVED and QUEUED
 *              -> PENDING (0; RUNNING: UV_EBUSY, a repeating task's next
 *              run moves), or UV_ENOENT if the task ended meanwhile;
 *      take    (loop, uvtw__task_take) clears W_INQ, and W_MOVED as it
 *              files the node (never during a threadpool run); sets W_TAKEN;
 *      expiry  (loop, uvtw__task_dispatch) PENDING -> RUNNING or QUEUED,
 *              or if W_MOVED, clears it (uvtw__task_clear_moved), re-files;
 *      run     (threadpool thread, uvtw__work_cb) QUEUED -> RUNNING;
 *      after   (the thread that ran it, uvtw__task_after_run) RUNNING ->
 *              PENDING/DONE/CLOSED (CLOSED: loop only), STOPPING -> DONE;
 *      close   (loop, uvtw__task_close) PENDING/QUEUED -> CLOSED, and after
 *              the final call (uvtw__task_final_done) -> DONE.
 *    W_INQ means "in the queue, or about to be": a thread that needs the
 *    loop to look again at a node it took in (a cancel: unfile it; a reset:
 *    re-file it; the last reset writer of an ended task: free it) sets
 *    W_INQ in its CAS if clear, then pushes the node.  So a node is queued
 *    at most once, and the loop frees it only with W_INQ clear and no
 *    writer.  A node not taken in yet has W_INQ: a task cancelled before
 *    take-in stays in the queue, and take-in frees it, unless a submit
 *    takes the node over first.
 *
 * 4. The queue (tasks->head), a stack like Linux's llist: a push is a CAS
 *    of the head (release: the node's fields are visible to the loop); the
 *    loop takes the whole stack by one exchange (acquire) and reverses it,
 *    so each producer's entries come in order.  A push that finds the
 *    stack empty wakes the loop (uv_async_send): after the loop's exchange
 *    the next push finds it empty, so no entry lacks a wake-up, and no
 *    fence is needed.  Only the loop removes entries, all at once, so a
 *    node never comes back to the top with another `next` (no ABA).
 *    A submit that finds at the head a node a cancel ended before take-in
 *    takes it over in place: the newest entry, so as good as a push (a
 *    push meanwhile was concurrent, hence unordered).  It claims the node
 *    as a writer, so that a take meanwhile leaves it, writes the task and
 *    publishes it by one CAS (release).  The loop counts each generation
 *    it did not see as accepted and cancelled (seen_gen).
 *
 * 5. The free stack (tasks->free_top): a Treiber stack of node indices
 *    with a 35-bit ABA tag in the same 64-bit word (lock-free on i686,
 *    armv7 and aarch64 too, with the 8-byte alignment GCC 11 and clang
 *    give: the static asserts below check it).  The loop pushes a chain of
 *    freed nodes per batch (release); producers pop one (acquire).  An
 *    empty stack grows the table by at most UVTW__GROW_STEP nodes, under
 *    grow_lock.
 *
 * 6. Ids: a node's generation counts its uses in its wheel, from 1; at
 *    UVTW__GEN_MASK the node is retired (never reused), so an id never
 *    names a later task of its wheel.  Each wheel takes a serial from one
 *    process-wide atomic counter, carried in its ids (UVTW__SERIAL_BITS):
 *    cancel and reset refuse an id of another serial, so an id names no
 *    task of another wheel unless 2^12 = 4,096 wheels were created after
 *    its own.
 *
 * 7. The loop thread is whichever thread runs the loop: at creation, and
 *    whenever the loop takes tasks in or flushes, the wheel notes
 *    uv_thread_self() in loop_thread (relaxed).  A submit on that thread
 *    references the async handle at once, as uv_queue_work holds the loop;
 *    from any other thread the loop holds itself from its next wake-up.
 *    No thread-local storage: a cancel knows it runs inside the task's own
 *    callback by `runner` (rule 2). */

#include <stdlib.h>

#include "internal.h"

_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2,
               "64-bit atomics must be lock-free (the gate, the free stack, "
               "the state words)");
_Static_assert(_Alignof(_Atomic uint64_t) == 8,
               "64-bit atomics must be 8-byte aligned (GCC >= 11 or clang)");

/* Rule 6: the next wheel's serial. */
static _Atomic uint64_t next_serial;


/* ---- The gate (rule 1) ------------------------------------------------ */

static uint64_t gate_enter(uvtw__tasks_t* tasks, uint64_t add) {
  return atomic_fetch_add_explicit(&tasks->gate, add, memory_order_acquire);
}


static void gate_leave(uvtw__tasks_t* tasks, uint64_t sub) {
  atomic_fetch_sub_explicit(&tasks->gate, sub, memory_order_release);
}


static void live_end(uvtw__tasks_t* tasks) {
  gate_leave(tasks, UVTW__G_LIVE);
}


void uvtw__gate_close_begin(uvtw__tasks_t* tasks) {
  atomic_fetch_or_explicit(&tasks->gate, UVTW__G_CLOSING, memory_order_acq_rel);
}


/* The gate first: with no task live and no call inside nothing pushes, so
 * an empty queue means every notice was taken in. */
int uvtw__gate_close_end(uvtw__tasks_t* tasks) {
  uint64_t g;

  g = atomic_load_explicit(&tasks->gate, memory_order_acquire);
  return UVTW__G_CALLS(g) == 0 && UVTW__G_LIVES(g) == 0 &&
         atomic_load_explicit(&tasks->head, memory_order_relaxed) == NULL &&
         atomic_compare_exchange_strong_explicit(
             &tasks->gate, &g, g | UVTW__G_CLOSED, memory_order_acquire,
             memory_order_relaxed);
}


uint64_t uvtw__tasks_live(const uvtw_wheel_t* wheel) {
  return UVTW__G_LIVES(
      atomic_load_explicit(&wheel->tasks.gate, memory_order_relaxed));
}


/* ---- The queue (rule 4) ----------------------------------------------- */

/* `pinned`: the caller keeps the wheel open past the push (rule 1).  If
 * not, a push that will wake the loop first enters as a call, and returns
 * 1: the caller leaves it after. */
static int queue_push(uvtw__tasks_t* tasks, uvtw__task_t* node, int pinned) {
  uvtw__task_t* head;
  int entered;

  entered = 0;
  head = atomic_load_explicit(&tasks->head, memory_order_relaxed);
  do {
    if (head == NULL && !pinned) {
      gate_enter(tasks, UVTW__G_CALL);
      pinned = entered = 1;
    }
    atomic_store_explicit(&node->next, head, memory_order_relaxed);
  } while (!atomic_compare_exchange_weak_explicit(
      &tasks->head, &head, node, memory_order_release, memory_order_relaxed));
  if (head == NULL)
    uv_async_send(tasks->async);
  return entered;
}


void uvtw__queue_take(uvtw__tasks_t* tasks) {
  uvtw__task_t* node;
  uvtw__task_t* next;

  node = atomic_exchange_explicit(&tasks->head, NULL, memory_order_acquire);
  for (; node != NULL; node = next) {
    next = atomic_load_explicit(&node->next, memory_order_relaxed);
    atomic_store_explicit(&node->next, tasks->inbox, memory_order_relaxed);
    tasks->inbox = node;
  }
}


uvtw__task_t* uvtw__inbox_pop(uvtw__tasks_t* tasks) {
  uvtw__task_t* node;

  node = tasks->inbox;
  if (node != NULL)
    tasks->inbox = atomic_load_explicit(&node->next, memory_order_relaxed);
  return node;
}


int uvtw__queue_busy(uvtw__tasks_t* tasks) {
  return atomic_load_explicit(&tasks->head, memory_order_relaxed) != NULL;
}


/* ---- The free stack and the table (rules 5, 6) ------------------------ */

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


/* Pops a free node, or NULL.  The tag fails the CAS if the top left and
 * came back since `top` was read (its free_next may be stale then). */
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


/* Unless another thread freed nodes meanwhile: frees UVTW__GROW_STEP more
 * nodes of the newest chunk (adding a chunk if it is all in use), so that
 * memory is touched as it comes into use.  0, or UV_ENOMEM. */
static int grow(uvtw__tasks_t* tasks) {
  uvtw__task_t* chunk;
  uvtw__task_t* node;
  void* mem;
  size_t n, lo, i;
  unsigned c;
  int err;

  err = 0;
  uv_mutex_lock(&tasks->grow_lock);
  if (UVTW__FREE_LINK(
          atomic_load_explicit(&tasks->free_top, memory_order_relaxed)))
    goto out;
  c = tasks->nchunks;
  if (c == 0 || tasks->linked == (size_t) UVTW__CHUNK0 << (c - 1)) {
    err = UV_ENOMEM;
    n = (size_t) UVTW__CHUNK0 << c;
    /* One node more, to start the chunk on a cache line. */
    if (c == UVTW__CHUNKS || (mem = calloc(n + 1, sizeof(*chunk))) == NULL)
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
  for (i = tasks->linked; i-- > lo;) {
    node = &chunk[i];
    node->index =
        (uint32_t) ((uint64_t) UVTW__CHUNK0 * ((1u << (c - 1)) - 1) + i);
    /* Stores, not atomic_init: a stale id may read the node meanwhile. */
    atomic_store_explicit(&node->state,
                          (uint64_t) 1 << UVTW__W_GEN_SHIFT | UVTW__T_FREE,
                          memory_order_relaxed);
    atomic_store_explicit(&node->free_next,
                          i + 1 < tasks->linked ? node->index + 2 : 0,
                          memory_order_relaxed);
  }
  free_push(tasks, &chunk[lo], &chunk[tasks->linked - 1]);
out:
  uv_mutex_unlock(&tasks->grow_lock);
  return err;
}


/* Loop thread, an ended node with no writer and W_INQ clear (rule 2). */
void uvtw__node_free(uvtw__tasks_t* tasks, uvtw__task_t* node) {
  uint64_t gen;

  gen = UVTW__GEN(atomic_load_explicit(&node->state, memory_order_relaxed)) + 1;
  if (gen > UVTW__GEN_MASK)
    return;
  atomic_store_explicit(&node->state, gen << UVTW__W_GEN_SHIFT | UVTW__T_FREE,
                        memory_order_relaxed);
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


/* ---- The state word (rule 3) ------------------------------------------ */

/* One CAS of a node's state word (acq_rel; on failure *w is the word). */
static int task_cas(uvtw__task_t* node, uint64_t* w, uint64_t n) {
  return atomic_compare_exchange_weak_explicit(
      &node->state, w, n, memory_order_acq_rel, memory_order_acquire);
}


uint64_t uvtw__task_word(uvtw__task_t* node) {
  return atomic_load_explicit(&node->state, memory_order_acquire);
}


uint64_t uvtw__task_deadline(uvtw__task_t* node) {
  return atomic_load_explicit(&node->deadline, memory_order_relaxed);
}


uint64_t uvtw__task_take(uvtw__task_t* node, int keep_moved) {
  uint64_t w;

  w = uvtw__task_word(node);
  while (!task_cas(
      node, &w,
      ((w & ~UVTW__W_INQ) | UVTW__W_TAKEN) & ~(keep_moved ? 0 : UVTW__W_MOVED)))
    ;
  return w;
}


/* Before the move to RUNNING, whose CAS publishes it (rule 2). */
static void note_runner(uvtw__task_t* node) {
  atomic_store_explicit(&node->runner, uv_thread_self(), memory_order_relaxed);
}


int uvtw__task_dispatch(uvtw__task_t* node, int on_pool) {
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


uint64_t uvtw__task_clear_moved(uvtw__task_t* node) {
  uint64_t w;

  w = uvtw__task_word(node);
  while (UVTW__STATE(w) == UVTW__T_PENDING && (w & UVTW__W_MOVED) &&
         !task_cas(node, &w, w & ~UVTW__W_MOVED))
    ;
  return w;
}


uint64_t uvtw__task_after_run(uvtw__tasks_t* tasks,
                              uvtw__task_t* node,
                              int closing,
                              uint64_t* to) {
  uint64_t w, n;

  w = uvtw__task_word(node);
  do {
    if (UVTW__STATE(w) == UVTW__T_RUNNING)
      n = UVTW__WITH_STATE(w, node->repeat_ms == 0 ? UVTW__T_DONE
                              : closing            ? UVTW__T_CLOSED
                                                   : UVTW__T_PENDING);
    else if (UVTW__STATE(w) == UVTW__T_STOPPING)
      n = UVTW__WITH_STATE(w, UVTW__T_DONE);
    else
      return *to = w; /* cancelled from its own callback */
  } while (!task_cas(node, &w, n));
  if (UVTW__STATE(n) == UVTW__T_DONE)
    live_end(tasks);
  *to = n;
  return w;
}


int uvtw__task_close(uvtw__task_t* node) {
  uint64_t w;

  w = uvtw__task_word(node);
  do
    if (UVTW__STATE(w) != UVTW__T_PENDING && UVTW__STATE(w) != UVTW__T_QUEUED)
      return 0;
  while (!task_cas(node, &w, UVTW__WITH_STATE(w, UVTW__T_CLOSED)));
  return 1;
}


/* The task ends; only resets move a CLOSED task's word (their writers). */
void uvtw__task_final_done(uvtw__tasks_t* tasks, uvtw__task_t* node) {
  uint64_t w;

  live_end(tasks);
  w = uvtw__task_word(node);
  while (!task_cas(node, &w, UVTW__WITH_STATE(w, UVTW__T_DONE)))
    ;
}


/* ---- Counts ----------------------------------------------------------- */

void uvtw__tasks_count_filed(uvtw__tasks_t* tasks, int delta) {
  atomic_store_explicit(
      &tasks->filed,
      atomic_load_explicit(&tasks->filed, memory_order_relaxed) +
          (uint64_t) (int64_t) delta,
      memory_order_relaxed);
}


uint64_t uvtw__tasks_filed(const uvtw_wheel_t* wheel) {
  return atomic_load_explicit(&wheel->tasks.filed, memory_order_relaxed);
}


/* ---- The loop thread (rule 7) ----------------------------------------- */

/* Whether *thread (relaxed) is the calling thread. */
static int is_self(const _Atomic(uv_thread_t)* thread) {
  uv_thread_t self, seen;

  self = uv_thread_self();
  seen = atomic_load_explicit(thread, memory_order_relaxed);
  return uv_thread_equal(&self, &seen);
}


/* Stores only on a change: every submit reads the line. */
void uvtw__loop_thread_seen(uvtw__tasks_t* tasks) {
  if (!is_self(&tasks->loop_thread))
    atomic_store_explicit(&tasks->loop_thread, uv_thread_self(),
                          memory_order_relaxed);
}


/* ---- The calls -------------------------------------------------------- */

/* delay_ms from now by uv_hrtime() (uvtw__hrtime_ms: never early on the
 * loop's clock, nor in real time with options.precise), or a virtual
 * wheel's clock. */
static uint64_t deadline_in(const uvtw__tasks_t* tasks, uint64_t delay_ms) {
  uint64_t now;

  if (tasks->virtual_clock == NULL)
    now = uvtw__hrtime_ms(uv_hrtime(), tasks->precise);
  else
    now = atomic_load_explicit(tasks->virtual_clock, memory_order_relaxed);
  return uvtw__sat_add(now, delay_ms);
}


/* Rule 4: the queue's newest entry, if a cancel ended it before the loop
 * took it in, takes the next task in place, as good as a push.  Claims it
 * as a writer (rule 3), so that the loop leaves it; or NULL.  The head's
 * acquire makes the node's index visible (set before its first push). */
static uvtw__task_t* reuse_claim(uvtw__tasks_t* tasks) {
  uvtw__task_t* node;
  uint64_t w;

  node = atomic_load_explicit(&tasks->head, memory_order_acquire);
  if (node == NULL)
    return NULL;
  w = uvtw__task_word(node);
  /* A strong CAS: a spurious failure would leave the entry behind. */
  while ((w & ~(UVTW__GEN_MASK << UVTW__W_GEN_SHIFT | UVTW__W_MOVED)) ==
             (UVTW__T_CANCELLED | UVTW__W_INQ) &&
         UVTW__GEN(w) != UVTW__GEN_MASK)
    if (atomic_compare_exchange_strong_explicit(
            &node->state, &w, w + UVTW__W_WRITER, memory_order_acq_rel,
            memory_order_acquire))
      return node;
  return NULL;
}


/* The claimed node's next use: generation gen, PENDING, in the queue.
 * 1 if it must be pushed again: the loop took it in (and left it)
 * meanwhile. */
static int reuse_publish(uvtw__task_t* node, uint64_t gen) {
  uint64_t w;

  w = atomic_load_explicit(&node->state, memory_order_relaxed);
  while (!task_cas(node, &w,
                   gen << UVTW__W_GEN_SHIFT | UVTW__T_PENDING | UVTW__W_INQ))
    ;
  return !(w & UVTW__W_INQ);
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
  uint64_t deadline, g, w, gen, add;
  int reused, called;

  if (wheel == NULL || cb == NULL || (flags & ~UVTW_THREADPOOL) != 0)
    return UV_EINVAL;
  tasks = &wheel->tasks;
  deadline = deadline_in(tasks, delay_ms);
  /* A call too if the push may wake the loop (rule 1). */
  add = UVTW__G_LIVE;
  if (atomic_load_explicit(&tasks->head, memory_order_relaxed) == NULL)
    add += UVTW__G_CALL;
  if (tasks->max_tasks != 0) { /* a CAS: enters unless closing or full */
    g = atomic_load_explicit(&tasks->gate, memory_order_relaxed);
    do {
      if (g & UVTW__G_CLOSING)
        return UV_ECANCELED;
      if (UVTW__G_LIVES(g) >= tasks->max_tasks)
        return UV_ENOSPC;
    } while (!atomic_compare_exchange_weak_explicit(
        &tasks->gate, &g, g + add, memory_order_acquire, memory_order_relaxed));
  } else if (gate_enter(tasks, add) & UVTW__G_CLOSING) {
    /* One fetch_add never retries (a CAS does, under contention). */
    gate_leave(tasks, add);
    return UV_ECANCELED;
  }
  reused = (node = reuse_claim(tasks)) != NULL;
  if (!reused)
    while ((node = free_pop(tasks)) == NULL)
      if (grow(tasks) != 0) {
        gate_leave(tasks, add);
        return UV_ENOMEM;
      }
  node->cb = cb;
  node->arg = arg;
  node->repeat_ms = repeat_ms;
  node->on_pool = (flags & UVTW_THREADPOOL) != 0;
  atomic_store_explicit(&node->deadline, deadline, memory_order_relaxed);
  w = atomic_load_explicit(&node->state, memory_order_relaxed);
  gen = UVTW__GEN(w) + reused;
  if (id != NULL)
    *id = tasks->serial | (uint64_t) node->index << UVTW__GEN_BITS | gen;
  /* On the loop thread (say before uv_run), hold the loop at once (rule
   * 7); only that thread may uv_ref.  Before the task is published: after
   * that, the task may end and close finish, and the submit touches the
   * wheel only inside a call (rule 1). */
  if (is_self(&tasks->loop_thread) && !tasks->holds_loop) {
    tasks->holds_loop = 1;
    uv_ref((uv_handle_t*) tasks->async);
  }
  called = (add & UVTW__G_CALL) != 0;
  /* Release: a cancel's CAS that reads it (its id passed on by any means)
   * orders the fields before a later takeover's writes. */
  if (!reused)
    atomic_store_explicit(&node->state,
                          UVTW__WITH_STATE(w, UVTW__T_PENDING) | UVTW__W_INQ,
                          memory_order_release);
  /* Release, both: publishes all of the above. */
  if (!reused || reuse_publish(node, gen))
    called |= queue_push(tasks, node, called);
  if (called)
    gate_leave(tasks, UVTW__G_CALL);
  return 0;
}


/* The node an id names, if it is of this wheel (rule 6), and its word. */
static uvtw__task_t* id_node(uvtw__tasks_t* tasks, uvtw_id_t id, uint64_t* w) {
  uvtw__task_t* node;

  if ((id & UVTW__GEN_MASK) == 0 ||
      UVTW__ID_SERIAL(id) != UVTW__ID_SERIAL(tasks->serial) ||
      (node = uvtw__node_at(tasks, UVTW__ID_INDEX(id))) == NULL)
    return NULL;
  *w = uvtw__task_word(node);
  return node;
}


/* No gate (rule 1). */
int uvtw_cancel(uvtw_wheel_t* wheel, uvtw_id_t id) {
  uvtw__tasks_t* tasks;
  uvtw__task_t* node;
  uint64_t w, n;
  unsigned st;

  if (wheel == NULL)
    return UV_EINVAL;
  tasks = &wheel->tasks;
  if ((node = id_node(tasks, id, &w)) == NULL)
    return UV_ENOENT;
  for (;;) {
    if (UVTW__GEN(w) != (id & UVTW__GEN_MASK))
      return UV_ENOENT;
    st = UVTW__STATE(w);
    /* Run by another thread: not from inside its own callback (rule 2). */
    if (st == UVTW__T_RUNNING && !is_self(&node->runner)) {
      if (task_cas(node, &w, UVTW__WITH_STATE(w, UVTW__T_STOPPING)))
        return UV_EBUSY; /* the run ends the task */
      continue;
    }
    /* From its own callback: a repeating task runs no more; a one-shot's
     * run is its end. */
    if (st == UVTW__T_RUNNING ? node->repeat_ms == 0
                              : st != UVTW__T_PENDING && st != UVTW__T_QUEUED)
      return UV_ENOENT;
    /* A notice if the loop must unfile it. */
    n = UVTW__WITH_STATE(w, UVTW__T_CANCELLED);
    if ((w & (UVTW__W_TAKEN | UVTW__W_INQ)) == UVTW__W_TAKEN)
      n |= UVTW__W_INQ;
    if (task_cas(node, &w, n))
      break;
  }
  /* Pinned: the task counts live until live_end. */
  if ((w & (UVTW__W_TAKEN | UVTW__W_INQ)) == UVTW__W_TAKEN)
    queue_push(tasks, node, 1);
  live_end(tasks); /* release: all of the above happens before */
  return 0;
}


/* Holds the node as a writer, so it is not freed (nor reused) meanwhile,
 * stores the deadline, and lets go, applying it (W_MOVED, release) to a
 * task that waits or runs; pushes a notice if the loop must re-file the
 * task or, as the last writer of a task that ended, free it. */
int uvtw_reset(uvtw_wheel_t* wheel, uvtw_id_t id, uint64_t delay_ms) {
  uvtw__tasks_t* tasks;
  uvtw__task_t* node;
  uint64_t deadline, w, n;
  int err;

  if (wheel == NULL)
    return UV_EINVAL;
  tasks = &wheel->tasks;
  deadline = deadline_in(tasks, delay_ms);
  err = UV_ENOENT;
  if (gate_enter(tasks, UVTW__G_CALL) & UVTW__G_CLOSED)
    goto out; /* close is done with the tasks */
  if ((node = id_node(tasks, id, &w)) == NULL)
    goto out;
  do
    if (UVTW__GEN(w) != (id & UVTW__GEN_MASK) ||
        UVTW__STATE(w) < UVTW__T_PENDING || UVTW__STATE(w) > UVTW__T_RUNNING)
      goto out;
  while (!task_cas(node, &w, w + UVTW__W_WRITER));
  atomic_store_explicit(&node->deadline, deadline, memory_order_relaxed);
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
  gate_leave(tasks, UVTW__G_CALL);
  return err;
}


/* A threadpool thread: QUEUED -> RUNNING (unless a cancel, a reset or
 * close came first), the run and its end: a one-shot's place is free now,
 * a repeating task waits for after_work_cb to re-file it.  Close waits for
 * after_work_cb, so the wheel lives; `work` is the loop's once this ends. */
void uvtw__work_cb(uv_work_t* req) {
  uvtw__task_t* node;
  uvtw__work_t* work;
  uint64_t w, to;

  work = uvtw__container_of(req, uvtw__work_t, req);
  node = work->node;
  note_runner(node);
  w = uvtw__task_word(node);
  do
    if (UVTW__STATE(w) != UVTW__T_QUEUED)
      return;
  while (!task_cas(node, &w, UVTW__WITH_STATE(w, UVTW__T_RUNNING)));
  node->cb(node->arg, 0);
  work->ran = 1;
  w = uvtw__task_after_run(&node->timer.wheel_->tasks, node, 0, &to);
  work->stopped = UVTW__STATE(w) == UVTW__T_STOPPING;
}


/* After task.c zeroed *tasks. */
int uvtw__tasks_shared_init(uvtw__tasks_t* tasks) {
  atomic_init(&tasks->gate, 0);
  atomic_init(&tasks->head, NULL);
  atomic_init(&tasks->free_top, 0);
  atomic_init(&tasks->filed, 0);
  atomic_init(&tasks->loop_thread, uv_thread_self());
  tasks->serial =
      (atomic_fetch_add_explicit(&next_serial, 1, memory_order_relaxed) &
       (((uint64_t) 1 << UVTW__SERIAL_BITS) - 1))
      << (UVTW__GEN_BITS + UVTW__INDEX_BITS);
  return uv_mutex_init(&tasks->grow_lock);
}


void uvtw__tasks_shared_destroy(uvtw__tasks_t* tasks) {
  unsigned c;

  for (c = 0; c < UVTW__CHUNKS; c++)
    free(tasks->chunk_mem[c]);
  uv_mutex_destroy(&tasks->grow_lock);
}
