/* SPDX-License-Identifier: MIT */
/* Cross-thread tasks.
 *
 * A task is a node from a per-wheel pool.  Its life:
 *
 *   producer: pop a free node (lock-free), or take a never-used one by a
 *             bump index (a mutex only to allocate a new chunk), fill it,
 *             push it on the submission stack; the push that finds the
 *             stack empty sends the one uv_async_send of that batch.
 *   loop:     the async callback takes the whole stack, reverses it (FIFO)
 *             and files each task's timer in the wheel, for the deadline
 *             "uv_hrtime at submit + delay".
 *   loop:     the driver pass pops the timer; the task runs on the loop, or
 *             goes to uv_queue_work, with a request (uvtw__work_t) that it
 *             holds only until after_work, and comes back in after_work.
 *
 * The state word.  Each node has one atomic word: generation << 16 |
 * IN_STACK | state.  Every transition that another thread could race with
 * is one CAS on it, so a cancel and an expiry (or close) racing for the
 * same task see exactly one winner, and a stale id, whose generation no
 * longer matches, changes nothing.  Every move of a live task goes through
 * move(), which checks it against the diagram; plain stores only take a
 * free node to PENDING (submit) and an ended one to FREE (release_node),
 * when no other thread can move its state.  Each use of a node carries a
 * new generation, one that no use of the same index in any wheel of the
 * process carried before (task-pool.c), so an id is never reused, and
 * names nothing on another wheel.
 *
 *   PENDING   waiting (in the stack, the wheel, or between pool runs)
 *   QUEUED    handed to uv_queue_work, not started
 *   RUNNING   callback executing
 *   STOPPING  running, and a cancel from another thread returned EBUSY
 *   CANCELLED ended by a cancel that returned 0
 *   DONE      ended by its (last) run
 *   CLOSED    owed its final UV_ECANCELED call (wheel closing)
 *   FREE      in the free list
 *
 *   cancel: PENDING/QUEUED -> CANCELLED (0); RUNNING -> STOPPING (EBUSY), or
 *           from the task's own callback: repeating -> CANCELLED (0),
 *           one-shot unchanged (ENOENT); anything else: ENOENT.
 *   loop:   PENDING -> RUNNING -> PENDING (repeat) or DONE; pool: PENDING
 *           -> QUEUED, and the pool thread QUEUED -> RUNNING -> PENDING or
 *           DONE; after a run: STOPPING -> DONE; close: PENDING/QUEUED ->
 *           CLOSED, a repeating task's RUNNING -> CLOSED after its run, and
 *           CLOSED -> DONE after its final call.
 *
 * IN_STACK says the node is linked in the submission stack.  A cancel that
 * wins against a node not in the stack pushes it there as a notice, so the
 * loop unlinks the cancelled timer promptly instead of at its deadline.
 * The loop frees a node once it is ended, not in the stack (IN_STACK
 * clear) and not on the threadpool; both are checked on the loop thread.
 *
 * live_word.  CLOSING | CLOSED | calls in flight << 40 | live tasks.  A
 * submit reserves its place and checks for close in one CAS; submit and
 * cancel count themselves in flight for as long as they touch the wheel.
 * Close finishes with the tasks by one CAS that sets CLOSED only when no
 * task is live and no call is inside; from then on no call enters, so the
 * wheel can be freed.  Until then close never blocks the loop: it looks
 * again on the next loop iteration.
 */

#include <stdlib.h>
#include <string.h>

#include "driver.h"
#include "uvtw-assert.h"

enum {
  T_FREE,
  T_PENDING,
  T_QUEUED,
  T_RUNNING,
  T_STOPPING,
  T_CANCELLED,
  T_DONE,
  T_CLOSED
};

enum { AT_NONE, AT_WHEEL, AT_POOL, AT_FINAL_LIST };

#define STATE_MASK ((uint64_t) 0xff)
#define IN_STACK ((uint64_t) 0x100)
/* UVTW_THREADPOOL: set by submit, fixed for the task's life. */
#define POOL ((uint64_t) 0x200)
#define STATE(word) ((unsigned) ((word) & STATE_MASK))
#define GEN_SHIFT 16
#define GEN(word) ((word) >> GEN_SHIFT)
#define WITH_STATE(word, st) (((word) & ~STATE_MASK) | (st))
#define S(st) (1u << (st)) /* a set of states */

/* The moves of the diagram above, as the states each state may move to;
 * move() checks every move against it.  (FREE -> PENDING is submit's plain
 * store, CANCELLED/DONE -> FREE release_node's.) */
static const unsigned legal_moves[] = {
    [T_FREE] = 0,
    [T_PENDING] = S(T_QUEUED) | S(T_RUNNING) | S(T_CANCELLED) | S(T_CLOSED),
    [T_QUEUED] = S(T_RUNNING) | S(T_CANCELLED) | S(T_CLOSED),
    [T_RUNNING] = S(T_PENDING) | S(T_STOPPING) | S(T_CANCELLED) | S(T_DONE) |
                  S(T_CLOSED),
    [T_STOPPING] = S(T_DONE),
    [T_CANCELLED] = 0,
    [T_DONE] = 0,
    [T_CLOSED] = S(T_DONE),
};

#define CLOSING ((uint64_t) 1 << 63) /* uvtw_wheel_close has begun */
#define CLOSED ((uint64_t) 1 << 62)  /* close is done with the tasks */
#define INFLIGHT ((uint64_t) 1 << 40) /* one call inside submit/cancel */
#define INFLIGHT_MASK (CLOSED - INFLIGHT) /* 22 bits: 4M calls at once */
#define LIVE_MASK (INFLIGHT - 1)          /* 40 bits; nodes are < 2^28 */

/* Tasks one async callback files before yielding to the rest of the loop;
 * the remainder waits for the next iteration. */
#define DRAIN_BATCH 4096

/* The task whose callback runs on this thread, to tell a cancel from inside
 * its own callback. */
static _Thread_local uvtw__task_t* current_task;

/* Its address names the calling thread: the loop thread is the one whose
 * token the wheel recorded at creation. */
static _Thread_local char thread_token;



static uvtw__task_t* task_of(uvtw_timer_t* timer) {
  return uvtw__container_of(timer, uvtw__task_t, timer);
}


/* Every state move of a live task goes through here: if the node's state
 * is one of `from` (a set of S() bits), and its generation is `gen` (0:
 * any), one CAS moves it to `to` and sets the flag bits `set`; the CAS is
 * retried for as long as only a concurrent change of flag bits, or a move
 * within `from`, made it fail.  Returns non-zero if it moved.  *seen gets
 * the word the move started from, or the word that stopped it. */
static int move(uvtw__task_t* node,
                unsigned from,
                unsigned to,
                uint64_t set,
                uint64_t gen,
                uint64_t* seen) {
  uint64_t word;

  word = atomic_load_explicit(&node->state, memory_order_acquire);
  for (;;) {
    if (!(from & S(STATE(word))) || (gen != 0 && GEN(word) != gen)) {
      *seen = word;
      return 0;
    }
    UVTW__ASSERT(legal_moves[STATE(word)] & S(to));
    if (atomic_compare_exchange_weak_explicit(
            &node->state, &word, WITH_STATE(word, to) | set,
            memory_order_acq_rel, memory_order_acquire)) {
      *seen = word;
      return 1;
    }
  }
}


/* Loop thread: the node has ended; the pool recycles it under a new
 * generation (or retires it).  Its id stays the ended task's, so a late
 * cancel finds it FREE: UV_ENOENT. */
static void release_node(uvtw__tasks_t* tasks, uvtw__task_t* node) {
  uint64_t word;

  word = atomic_load_explicit(&node->state, memory_order_relaxed);
  UVTW__ASSERT(STATE(word) == T_CANCELLED || STATE(word) == T_DONE);
  UVTW__ASSERT(!(word & IN_STACK) && node->location == AT_NONE);
  UVTW__ASSERT(node->work == NULL);
  node->taken_in = 0; /* here, so that a submit writes only line 1 */
  atomic_store_explicit(&node->state, WITH_STATE(word, T_FREE),
                        memory_order_release);
  uvtw__pool_release(&tasks->pool, node);
}


/* Liveness.  Live tasks keep the loop alive the way uv_queue_work requests
 * do: the loop thread references the (otherwise unreferenced) async handle
 * while any task is live, and drops the reference once none is.  Only the
 * loop thread may call uv_ref, so a submit from the loop thread takes the
 * reference itself, at once; a submit from another thread is taken in by
 * the async callback, which then holds the loop.  A task that ends on
 * another thread (a cancel, a pool run) always leads the loop back here:
 * the cancel's notice or the run's after_work_cb. */
static void hold_sync(uvtw_wheel_t* wheel) {
  int want;

  if (wheel->closing)
    return; /* close holds the async handle until it closes it */
  want = uvtw__tasks_live(wheel) != 0;
  if (want == wheel->tasks.holds_loop)
    return;
  wheel->tasks.holds_loop = want;
  if (want)
    uv_ref((uv_handle_t*) &wheel->async);
  else
    uv_unref((uv_handle_t*) &wheel->async);
}


void uvtw__tasks_flush(uvtw_wheel_t* wheel) {
  uvtw__pool_flush(&wheel->tasks.pool);
  hold_sync(wheel);
}


/* ---- producers ---------------------------------------------------------- */

static void queue_push(uvtw_wheel_t* wheel, uvtw__task_t* node) {
  uvtw__task_t* head;

  head = atomic_load_explicit(&wheel->tasks.queue, memory_order_relaxed);
  do
    atomic_store_explicit(&node->queue_next, head, memory_order_relaxed);
  while (!atomic_compare_exchange_weak_explicit(&wheel->tasks.queue, &head,
                                                node, memory_order_release,
                                                memory_order_relaxed));
  /* The first push of a batch wakes the loop; the loop empties the whole
   * stack at once, so the next push after that is a first again. */
  if (head == NULL)
    uv_async_send(&wheel->async);
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
  uint64_t start_ms;
  uint64_t word;

  if (wheel == NULL || cb == NULL || (flags & ~UVTW_THREADPOOL) != 0)
    return UV_EINVAL;
  /* The delay counts from here, by uv_hrtime().  uv_now() reads the same
   * monotonic clock (or its coarse variant, which never runs ahead), so a
   * deadline in these milliseconds is never early on the loop's clock. */
  start_ms = uv_hrtime() / 1000000;
  tasks = &wheel->tasks;

  word = atomic_load_explicit(&tasks->live_word, memory_order_relaxed);
  do {
    if (word & CLOSING)
      return UV_ECANCELED;
    if (tasks->max_tasks != 0 && (word & LIVE_MASK) >= tasks->max_tasks)
      return UV_ENOSPC;
  } while (!atomic_compare_exchange_weak_explicit(
      &tasks->live_word, &word, word + 1 + INFLIGHT, memory_order_acquire,
      memory_order_relaxed));

  node = uvtw__pool_alloc(&tasks->pool);
  if (node == NULL) {
    atomic_fetch_sub_explicit(&tasks->live_word, 1 + INFLIGHT,
                              memory_order_release);
    return UV_ENOMEM;
  }

  node->cb = cb;
  node->arg = arg;
  node->repeat_ms = repeat_ms;
  node->deadline_ms =
      start_ms + delay_ms < start_ms ? UINT64_MAX : start_ms + delay_ms;
  UVTW__ASSERT(STATE(atomic_load_explicit(&node->state,
                                          memory_order_relaxed)) == T_FREE);
  UVTW__ASSERT(node->gen != 0 && node->gen < node->gen_end);
  /* Published to the loop by the release CAS of queue_push. */
  atomic_store_explicit(&node->state,
                        node->gen << GEN_SHIFT | IN_STACK |
                            (flags & UVTW_THREADPOOL ? POOL : 0) | T_PENDING,
                        memory_order_relaxed);
  if (id != NULL)
    *id = (uint64_t) node->index << UVTW__GEN_BITS | node->gen;
  queue_push(wheel, node);
  atomic_fetch_sub_explicit(&tasks->live_word, INFLIGHT, memory_order_release);
  if (tasks->loop_thread == &thread_token && !tasks->holds_loop) {
    tasks->holds_loop = 1;
    uv_ref((uv_handle_t*) &wheel->async);
  }
  return 0;
}


static int cancel_node(uvtw_wheel_t* wheel,
                       uvtw__task_t* node,
                       uint64_t gen,
                       int* ended) {
  uint64_t word;

  for (;;) {
    /* Waiting: cancelled.  Marked IN_STACK, so that it is pushed (as a
     * notice that unlinks its timer promptly) only if it is not there. */
    if (move(node, S(T_PENDING) | S(T_QUEUED), T_CANCELLED, IN_STACK, gen,
             &word)) {
      if (!(word & IN_STACK))
        queue_push(wheel, node);
      *ended = 1;
      return 0;
    }
    if (GEN(word) != gen || STATE(word) != T_RUNNING)
      return UV_ENOENT;
    if (node == current_task) {
      /* A one-shot's run is its end; a repeating task stops here. */
      if (node->repeat_ms == 0)
        return UV_ENOENT;
      if (move(node, S(T_RUNNING), T_CANCELLED, 0, gen, &word)) {
        *ended = 1;
        return 0;
      }
    } else if (move(node, S(T_RUNNING), T_STOPPING, 0, gen, &word)) {
      return UV_EBUSY;
    }
    /* The run ended in between: look again. */
  }
}


int uvtw_cancel(uvtw_wheel_t* wheel, uvtw_id_t id) {
  uvtw__tasks_t* tasks;
  uvtw__task_t* node;
  uint64_t word;
  uint64_t gen;
  int ended;
  int err;

  if (wheel == NULL)
    return UV_EINVAL;
  gen = id & UVTW__GEN_MASK;
  if (gen == 0)
    return UV_ENOENT;
  tasks = &wheel->tasks;
  /* Once close is done with the tasks nothing is left to cancel, and the
   * wheel may be freed: enter only before that. */
  word = atomic_load_explicit(&tasks->live_word, memory_order_relaxed);
  do
    if (word & CLOSED)
      return UV_ENOENT;
  while (!atomic_compare_exchange_weak_explicit(
      &tasks->live_word, &word, word + INFLIGHT, memory_order_acquire,
      memory_order_relaxed));
  ended = 0;
  node = uvtw__pool_node_at(&tasks->pool, (uint32_t) (id >> UVTW__GEN_BITS));
  err = node == NULL ? UV_ENOENT : cancel_node(wheel, node, gen, &ended);
  /* A successful cancel frees the task's place at once.  If it was the
   * last live task, the loop may have counted the tasks before this
   * decrement (the notice, or the node itself, can reach the loop first)
   * and still hold itself for it: wake it to look again.  Still counted in
   * flight here, so the wheel cannot be freed under the send. */
  if (ended && (atomic_fetch_sub_explicit(&tasks->live_word, 1,
                                          memory_order_acq_rel) &
                LIVE_MASK) == 1)
    uv_async_send(&wheel->async);
  atomic_fetch_sub_explicit(&tasks->live_word, INFLIGHT, memory_order_release);
  return err;
}


/* ---- the loop thread ---------------------------------------------------- */

static void end_live(uvtw__tasks_t* tasks) {
  atomic_fetch_sub_explicit(&tasks->live_word, 1, memory_order_relaxed);
}


/* The task's timer became (delta 1) or stopped being (-1) active in the
 * core.  One writer (the loop thread): a relaxed load and store. */
static void count_filed(uvtw_wheel_t* wheel, int delta) {
  atomic_store_explicit(
      &wheel->tasks.filed,
      atomic_load_explicit(&wheel->tasks.filed, memory_order_relaxed) + delta,
      memory_order_relaxed);
}


/* Stops the task's timer in the core, if active there. */
static void stop_timer(uvtw_wheel_t* wheel, uvtw_timer_t* timer) {
  if (timer->link_.next == NULL)
    return;
  uvtw__core_stop(&wheel->core, timer);
  count_filed(wheel, -1);
}


/* Takes the task's timer out of the wheel, if it is there. */
static void unfile(uvtw_wheel_t* wheel, uvtw__task_t* node) {
  if (node->location != AT_WHEEL)
    return;
  stop_timer(wheel, &node->timer);
  node->location = AT_NONE;
}


/* Frees an ended node once nothing on the loop or in the stack refers to
 * it any more. */
static void release_if_idle(uvtw_wheel_t* wheel, uvtw__task_t* node) {
  uint64_t word;

  if (node->location != AT_NONE)
    return;
  word = atomic_load_explicit(&node->state, memory_order_acquire);
  if (word & IN_STACK)
    return; /* the drain of its notice frees it */
  switch (STATE(word)) {
  case T_CANCELLED:
    wheel->tasks.cancelled++;
    release_node(&wheel->tasks, node);
    break;
  case T_DONE:
    release_node(&wheel->tasks, node);
    break;
  default:
    break;
  }
}


/* Moves a waiting task to CLOSED and queues its final call.  Returns 0 if a
 * cancel won the race instead. */
static int queue_final_call(uvtw_wheel_t* wheel,
                            uvtw__task_t* node,
                            unsigned from) {
  uint64_t word;

  UVTW__ASSERT(node->location == AT_NONE);
  if (!move(node, S(from), T_CLOSED, 0, 0, &word))
    return 0;
  node->location = AT_FINAL_LIST;
  uvtw__list_append(&wheel->tasks.final, &node->timer.link_);
  return 1;
}


static int is_pool(uvtw__task_t* node) {
  return (atomic_load_explicit(&node->state, memory_order_relaxed) & POOL) !=
         0;
}


/* Loop thread: a threadpool request for the node, recycled or new; NULL
 * when out of memory. */
static uvtw__work_t* work_get(uvtw__tasks_t* tasks, uvtw__task_t* node) {
  uvtw__work_t* w;

  w = tasks->free_works;
  if (w != NULL)
    tasks->free_works = w->next_free;
  else if ((w = malloc(sizeof(*w))) == NULL)
    return NULL;
  w->node = node;
  w->ran = 0;
  w->stopped = 0;
  w->uv_cancel_asked = 0;
  node->work = w;
  return w;
}


static void work_put(uvtw__tasks_t* tasks, uvtw__task_t* node) {
  uvtw__work_t* w;

  w = node->work;
  node->work = NULL;
  w->next_free = tasks->free_works;
  tasks->free_works = w;
}


static void file_task(uvtw_wheel_t* wheel, uvtw__task_t* node) {
  uvtw_timer_t* timer;
  uint64_t e;

  timer = &node->timer;
  timer->link_.next = NULL;
  timer->wheel_ = wheel;
  timer->cb_ = uvtw__task_fire;
  timer->repeat_ = is_pool(node) ? 0 : node->repeat_ms;
  timer->unref_ = 0;
  node->location = AT_WHEEL;
  e = uvtw__core_start(&wheel->core, timer, node->deadline_ms);
  count_filed(wheel, 1);
  uvtw__driver_earlier(wheel, e);
}


/* Takes in one node from the submission stack: a new task is filed in the
 * wheel; a cancel's notice unfiles its task and frees the node. */
static void take_in_node(uvtw_wheel_t* wheel, uvtw__task_t* node) {
  uint64_t word;

  word = atomic_fetch_and_explicit(&node->state, ~IN_STACK,
                                   memory_order_acq_rel);
  if (!node->taken_in) {
    node->taken_in = 1;
    wheel->tasks.accepted++;
  }
  switch (STATE(word)) {
  case T_PENDING:
    /* Only submit pushes a pending node: this is a new task. */
    if (wheel->closing) {
      queue_final_call(wheel, node, T_PENDING);
      break;
    }
    file_task(wheel, node);
    /* A cancel may win from here on; its notice comes through the stack. */
    break;
  case T_CANCELLED:
    unfile(wheel, node);
    release_if_idle(wheel, node);
    break;
  default:
    break;
  }
}


/* Processes at most `budget` nodes, oldest first: the backlog, and when it
 * is empty, everything pushed so far (reversed into push order).  Returns
 * non-zero if work remains. */
static int drain(uvtw_wheel_t* wheel, size_t budget) {
  uvtw__tasks_t* tasks;
  uvtw__task_t* node;
  uvtw__task_t* next;
  size_t count;

  tasks = &wheel->tasks;
  if (tasks->backlog == NULL) {
    node = atomic_exchange_explicit(&tasks->queue, NULL, memory_order_acquire);
    for (count = 0; node != NULL; node = next, count++) {
      next = atomic_load_explicit(&node->queue_next, memory_order_relaxed);
      atomic_store_explicit(&node->queue_next, tasks->backlog,
                            memory_order_relaxed);
      tasks->backlog = node;
    }
    if (count > tasks->high_water)
      tasks->high_water = count;
  }
  for (; tasks->backlog != NULL && budget != 0; budget--) {
    node = tasks->backlog;
    tasks->backlog =
        atomic_load_explicit(&node->queue_next, memory_order_relaxed);
    take_in_node(wheel, node);
  }
  uvtw__tasks_flush(wheel);
  uvtw__driver_sync_ref(wheel);
  return tasks->backlog != NULL ||
         atomic_load_explicit(&tasks->queue, memory_order_relaxed) != NULL;
}


static void work_cb(uv_work_t* req);
static void after_work_cb(uv_work_t* req, int status);


/* The timer callback of every task: runs it, or sends it to the pool. */
void uvtw__task_fire(uvtw_timer_t* timer) {
  uvtw_wheel_t* wheel;
  uvtw__task_t* node;
  uvtw__task_t* outer;
  uvtw__work_t* w;
  uint64_t word;
  unsigned next;
  int pool;

  node = task_of(timer);
  wheel = timer->wheel_;
  if (timer->link_.next == NULL)
    count_filed(wheel, -1); /* a one-shot: the pass made it inactive */
  UVTW__ASSERT(node->location == AT_WHEEL);
  pool = is_pool(node);
  w = NULL;
  if (pool && STATE(atomic_load_explicit(&node->state,
                                         memory_order_relaxed)) == T_PENDING &&
      (w = work_get(&wheel->tasks, node)) == NULL) {
    /* Out of memory for the request: the task stays PENDING and tries
     * again a millisecond later (never early, never lost). */
    node->location = AT_NONE;
    node->deadline_ms = uv_now(wheel->loop) + 1;
    file_task(wheel, node);
    return;
  }
  if (!move(node, S(T_PENDING), pool ? T_QUEUED : T_RUNNING, 0, 0, &word)) {
    /* Cancelled: stop a repeat the wheel re-filed; the notice frees. */
    UVTW__ASSERT(STATE(word) == T_CANCELLED);
    if (w != NULL)
      work_put(&wheel->tasks, node);
    stop_timer(wheel, timer);
    return;
  }

  if (pool) {
    node->location = AT_POOL;
    w->dispatch_ms = uv_now(wheel->loop);
    uvtw__list_append(&wheel->tasks.in_pool, &timer->link_);
    /* Cannot fail: work_cb is not NULL and the loop is ours. */
    uv_queue_work(wheel->loop, &w->req, work_cb, after_work_cb);
    return;
  }

  outer = current_task;
  current_task = node;
  node->cb(node->arg, 0);
  current_task = outer;
  wheel->tasks.run++;

  /* A one-shot's run is its end.  A repeating task was re-filed by the
   * wheel before the run, from the dispatch time, and just waits again;
   * unless its own callback closed the wheel: its final call follows. */
  next = node->repeat_ms == 0 ? T_DONE : wheel->closing ? T_CLOSED : T_PENDING;
  if (move(node, S(T_RUNNING), next, 0, 0, &word)) {
    if (next == T_PENDING)
      return;
    unfile(wheel, node);
    if (next == T_CLOSED) {
      node->location = AT_FINAL_LIST;
      uvtw__list_append(&wheel->tasks.final, &timer->link_);
      return;
    }
    end_live(&wheel->tasks);
    release_if_idle(wheel, node);
    return;
  }
  if (move(node, S(T_STOPPING), T_DONE, 0, 0, &word)) {
    /* A cancel returned EBUSY during the run: this run was the last. */
    wheel->tasks.cancelled++;
    end_live(&wheel->tasks);
  } else if (STATE(word) != T_CANCELLED) { /* by its own callback */
    UVTW__UNREACHABLE();
  }
  unfile(wheel, node);
  release_if_idle(wheel, node);
}


static void work_cb(uv_work_t* req) {
  uvtw__task_t* node;
  uvtw__task_t* outer;
  uvtw__work_t* w;
  uint64_t word;
  unsigned next;

  w = uvtw__container_of(req, uvtw__work_t, req);
  node = w->node;
  if (!move(node, S(T_QUEUED), T_RUNNING, 0, 0, &word))
    return; /* cancelled or closed before it started */

  outer = current_task;
  current_task = node;
  node->cb(node->arg, 0);
  current_task = outer;
  w->ran = 1; /* after_work_cb reads it after this thread is done */

  /* A repeating task waits (PENDING) for after_work to re-file it; a
   * cancel from now on wins at once.  CANCELLED stays; STOPPING ends below. */
  next = node->repeat_ms != 0 ? T_PENDING : T_DONE;
  /* A one-shot ends by its run: its place is free now, not when the loop
   * gets to after_work_cb.  Close waits for after_work_cb, so the wheel is
   * alive. */
  if (move(node, S(T_RUNNING), next, 0, 0, &word)) {
    if (next == T_DONE)
      end_live(&node->timer.wheel_->tasks);
  } else if (STATE(word) == T_STOPPING) {
    /* A cancel returned UV_EBUSY during this run: the task ends now, when
     * the run returns, as uvtw_cancel promises.  No other thread moves a
     * STOPPING task; after_work_cb counts it as cancelled. */
    if (!move(node, S(T_STOPPING), T_DONE, 0, 0, &word))
      UVTW__UNREACHABLE();
    w->stopped = 1;
    end_live(&node->timer.wheel_->tasks);
  }
}


static void after_work_cb(uv_work_t* req, int status) {
  uvtw__task_t* node;
  uvtw_wheel_t* wheel;
  uvtw__work_t* w;
  uint64_t word;
  uint64_t deadline;
  uint64_t dispatch_ms;
  int stopped;
  int ran;

  w = uvtw__container_of(req, uvtw__work_t, req);
  node = w->node;
  wheel = node->timer.wheel_;
  UVTW__ASSERT(node->location == AT_POOL && node->work == w);
  uvtw__list_remove(&node->timer.link_);
  node->location = AT_NONE;
  ran = w->ran;
  stopped = w->stopped;
  dispatch_ms = w->dispatch_ms;
  work_put(&wheel->tasks, node);

  word = atomic_load_explicit(&node->state, memory_order_acquire);
  if (status == UV_ECANCELED) {
    /* uv_cancel at close: the work never started. */
    if (!queue_final_call(wheel, node, T_QUEUED))
      release_if_idle(wheel, node);
    uvtw__tasks_flush(wheel);
    uvtw__wheel_close_continue(wheel);
    return;
  }
  if (ran)
    wheel->tasks.run++;
  switch (STATE(word)) {
  case T_DONE: /* work_cb ended it and freed its place */
    if (stopped)
      wheel->tasks.cancelled++;
    release_if_idle(wheel, node);
    break;
  case T_PENDING:
    if (wheel->closing) {
      queue_final_call(wheel, node, T_PENDING);
      break;
    }
    /* Due at dispatch + repeat; if that passed while it ran, it goes
     * again in the next pass, never overlapping itself. */
    deadline = dispatch_ms + node->repeat_ms;
    node->deadline_ms = deadline < dispatch_ms ? UINT64_MAX : deadline;
    file_task(wheel, node);
    uvtw__driver_sync_ref(wheel);
    break;
  case T_CANCELLED:
    release_if_idle(wheel, node);
    break;
  default: /* QUEUED, RUNNING and STOPPING end in work_cb; CLOSED and
            * FREE never come here */
    UVTW__UNREACHABLE();
  }
  uvtw__tasks_flush(wheel);
  if (wheel->closing)
    uvtw__wheel_close_continue(wheel);
}


/* ---- close ------------------------------------------------------------- */

static void take_from_wheel(uvtw_timer_t* timer, void* arg) {
  uvtw_wheel_t* wheel;
  uvtw__task_t* node;

  if (!uvtw__task_owns(timer))
    return;
  wheel = arg;
  node = task_of(timer);
  unfile(wheel, node);
  /* Close called from this task's own callback: uvtw__task_fire ends it
   * after the callback returns (even if it cancelled itself first). */
  if (node == current_task)
    return;
  if (!queue_final_call(wheel, node, T_PENDING))
    release_if_idle(wheel, node); /* a cancel won */
}


void uvtw__tasks_close_begin(uvtw_wheel_t* wheel) {
  atomic_fetch_or_explicit(&wheel->tasks.live_word, CLOSING,
                           memory_order_seq_cst);
  uvtw__core_walk(&wheel->core, take_from_wheel, wheel);
  uvtw__tasks_flush(wheel);
  /* The rest runs from the async callback, outside the caller's stack.  The
   * async handle holds the loop until close is done. */
  uv_ref((uv_handle_t*) &wheel->async);
  uv_async_send(&wheel->async);
}


static void run_finals(uvtw_wheel_t* wheel) {
  uvtw__task_t* node;
  uint64_t word;

  while (!uvtw__list_empty(&wheel->tasks.final)) {
    node = task_of(uvtw__container_of(wheel->tasks.final.next, uvtw_timer_t,
                                      link_));
    UVTW__ASSERT(node->location == AT_FINAL_LIST);
    uvtw__list_remove(&node->timer.link_);
    node->location = AT_NONE;
    node->cb(node->arg, UV_ECANCELED);
    wheel->tasks.closed++;
    end_live(&wheel->tasks);
    /* No other thread moves a CLOSED task. */
    if (!move(node, S(T_CLOSED), T_DONE, 0, 0, &word))
      UVTW__UNREACHABLE();
    release_if_idle(wheel, node);
  }
  uvtw__tasks_flush(wheel);
}


int uvtw__tasks_close_step(uvtw_wheel_t* wheel) {
  uvtw__tasks_t* tasks;
  struct uvtw__link* link;
  uvtw__task_t* node;
  uint64_t word;

  tasks = &wheel->tasks;
  UVTW__ASSERT(wheel->closing == UVTW__CLOSING_TASKS);
  do {
    while (drain(wheel, SIZE_MAX))
      ;
    run_finals(wheel); /* user code: may submit (refused) or cancel */
  } while (atomic_load_explicit(&tasks->queue, memory_order_relaxed) != NULL);
  /* Queued pool work is cancelled; running work is waited for. */
  for (link = tasks->in_pool.next; link != &tasks->in_pool; link = link->next) {
    node = task_of(uvtw__container_of(link, uvtw_timer_t, link_));
    if (node->work->uv_cancel_asked)
      continue;
    node->work->uv_cancel_asked = 1;
    uv_cancel((uv_req_t*) &node->work->req);
  }
  if (!uvtw__list_empty(&tasks->in_pool))
    return 0; /* after_work_cb calls again */
  word = atomic_load_explicit(&tasks->live_word, memory_order_acquire);
  do {
    if ((word & (INFLIGHT_MASK | LIVE_MASK)) != 0) {
      /* A submit or cancel is inside the wheel, or its task is still on
       * the way to the stack: look again next iteration. */
      uv_async_send(&wheel->async);
      return 0;
    }
  } while (!atomic_compare_exchange_weak_explicit(
      &tasks->live_word, &word, word | CLOSED, memory_order_acq_rel,
      memory_order_acquire));
  /* No task is live and no call can enter any more. */
  return 1;
}


void uvtw__tasks_async_cb(uv_async_t* async) {
  uvtw_wheel_t* wheel;

  wheel = async->data;
  wheel->tasks.async_wakeups++;
  if (wheel->closing) {
    uvtw__wheel_close_continue(wheel);
    return;
  }
  /* A flood of submissions cannot starve the loop: after a batch, signal
   * ourselves and let the rest of this iteration run. */
  if (drain(wheel, DRAIN_BATCH))
    uv_async_send(async);
}


/* ---- set-up ------------------------------------------------------------ */

int uvtw__tasks_init(uvtw_wheel_t* wheel, size_t max_tasks) {
  uvtw__tasks_t* tasks;

  tasks = &wheel->tasks;
  memset(tasks, 0, sizeof(*tasks));
  tasks->max_tasks = max_tasks;
  tasks->loop_thread = &thread_token;
  atomic_init(&tasks->live_word, 0);
  atomic_init(&tasks->queue, NULL);
  uvtw__list_init(&tasks->in_pool);
  uvtw__list_init(&tasks->final);
  return uvtw__pool_init(&tasks->pool);
}


void uvtw__tasks_destroy(uvtw_wheel_t* wheel) {
  uvtw__work_t* w;

  /* Every request is idle: close waited for the threadpool. */
  while ((w = wheel->tasks.free_works) != NULL) {
    wheel->tasks.free_works = w->next_free;
    free(w);
  }
  uvtw__pool_destroy(&wheel->tasks.pool);
}


uint64_t uvtw__tasks_filed(const uvtw_wheel_t* wheel) {
  return atomic_load_explicit(&wheel->tasks.filed, memory_order_relaxed);
}


uint64_t uvtw__tasks_live(const uvtw_wheel_t* wheel) {
  return atomic_load_explicit(&wheel->tasks.live_word, memory_order_relaxed) &
         LIVE_MASK;
}
