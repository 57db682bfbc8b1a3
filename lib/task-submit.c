/* SPDX-License-Identifier: MIT */
/* uvtw_submit and uvtw_cancel: any thread.  A submit takes a free node from
 * the thread's record, fills it and publishes its id in the record's
 * queue; a cancel moves the task's state word, and takes back a task the
 * loop has not taken in, or tells the loop through its queue that a filed
 * task ended (a notice).  Both run inside the wheel (enter, leave: see
 * task-close.c for why close waits for them). */

#include "task-record.h"

/* A test's stand-in for a preemption between a submit's publish and its
 * fence (test-task-withdraw builds this file with its own); nothing in
 * the library. */
#ifndef UVTW__TEST_BEFORE_FENCE
# define UVTW__TEST_BEFORE_FENCE() ((void) 0)
#endif


/* uvtw_submit inside the wheel (enter_unfenced): the task's node from the
 * record's cache, filled, and its id published in the record's queue; the
 * caller then fences, looks at the close word and wakes the loop.  The
 * node and its generation in *node_out, *gen_out. */
static int submit_inside(uvtw_wheel_t* wheel,
                         uvtw__record_t* rec,
                         uint64_t deadline_ms,
                         uint64_t repeat_ms,
                         unsigned flags,
                         uvtw_task_cb cb,
                         void* arg,
                         uvtw_id_t* id,
                         uvtw__task_t** node_out,
                         uint64_t* gen_out) {
  uvtw__tasks_t* tasks;
  uvtw__task_t* node;
  uint64_t word;
  uint64_t gen;
  uint64_t n;

  tasks = &wheel->tasks;
  if (rec == NULL || uvtw__record_queue_room(rec) != 0)
    return UV_ENOMEM;
  if (tasks->max_tasks != 0) {
    n = atomic_load_explicit(&tasks->reserved, memory_order_relaxed);
    do
      if (n >= tasks->max_tasks)
        return UV_ENOSPC;
    while (!atomic_compare_exchange_weak_explicit(&tasks->reserved, &n, n + 1,
                                                  memory_order_relaxed,
                                                  memory_order_relaxed));
  }
  node = uvtw__record_cache_get(tasks, rec);
  if (node == NULL) {
    if (tasks->max_tasks != 0)
      atomic_fetch_sub_explicit(&tasks->reserved, 1, memory_order_relaxed);
    return UV_ENOMEM;
  }

  /* Counted before its node is published (see "Counting" at the top). */
  uvtw__own_add(&rec->submitted, 1, memory_order_relaxed);

  node->cb = cb;
  node->arg = arg;
  node->repeat_ms = repeat_ms;
  node->deadline_ms = deadline_ms;
  word = atomic_load_explicit(&node->state, memory_order_relaxed);
  UVTW__ASSERT(STATE(word) == T_FREE);
  gen = GEN(word);
  UVTW__ASSERT(gen != 0 && gen < node->gen_end);
  word = gen << GEN_SHIFT | (flags & UVTW_THREADPOOL ? POOL : 0) | T_PENDING;
  if (tasks->loop_thread == &uvtw__tls.token) {
    /* Held from now on; the loop frees it, even if a cancel wins first. */
    word |= LOOP_HELD;
    node->held = 1;
    tasks->held++;
    if (!tasks->holds_loop) {
      tasks->holds_loop = 1;
      uv_ref((uv_handle_t*) &wheel->async);
    }
  }
  if (id != NULL)
    *id = id_of(node, gen); /* before the task can run */
  /* Published to the loop by the release store in queue_put. */
  atomic_store_explicit(&node->state, word | IN_QUEUE, memory_order_relaxed);
  node->q.slot = &rec->wblock->slot[rec->widx];
  queue_put(rec, id_of(node, gen));
  *node_out = node;
  *gen_out = gen;
  return 0;
}


/* Close began while the submit published its task: takes the task back,
 * as a cancel would, unless the loop took it in first (then it is live,
 * and gets its final call).  Returns UV_ECANCELED if taken back, else 0.
 * Not on the loop thread: only it begins close, so it never gets here. */
static int withdraw(uvtw_wheel_t* wheel,
                    uvtw__record_t* rec,
                    uvtw__task_t* node,
                    uvtw_id_t id) {
  uint64_t word;

  word = atomic_load_explicit(&node->state, memory_order_acquire);
  do
    /* Another generation: the task ended already (a cancel took it back,
     * or it ran) and the node may carry another thread's task by now. */
    if (GEN(word) != (id & UVTW__GEN_MASK) || !(word & IN_QUEUE) ||
        STATE(word) != T_PENDING)
      return 0; /* taken in (close gives it its final call), or ended */
  while (!cas_word(node, &word, WITH_STATE(word, T_CANCELLED) & ~IN_QUEUE));
  UVTW__ASSERT(!(word & LOOP_HELD));
  /* Ours: its slot shows a tombstone, its end balances its submit (for
   * live and max_tasks), and it never counts in the stats. */
  if (atomic_load_explicit(node->q.slot, memory_order_relaxed) == id)
    atomic_store_explicit(node->q.slot, TOMBSTONE, memory_order_relaxed);
  count_end(&wheel->tasks, rec);
  if (recycle(node))
    uvtw__record_cache_put(&wheel->tasks, rec, node);
  return UV_ECANCELED;
}


int uvtw_submit(uvtw_wheel_t* wheel,
                uint64_t delay_ms,
                uint64_t repeat_ms,
                unsigned flags,
                uvtw_task_cb cb,
                void* arg,
                uvtw_id_t* id) {
  uvtw__record_t* rec;
  uvtw__task_t* node;
  uvtw_id_t old_id;
  uint64_t start_ms;
  uint64_t deadline_ms;
  uint64_t gen;
  int err;

  if (wheel == NULL || cb == NULL || (flags & ~UVTW_THREADPOOL) != 0)
    return UV_EINVAL;
  /* The delay counts from here, by uv_hrtime().  uv_now() reads the same
   * monotonic clock (or its coarse variant, which never runs ahead), so a
   * deadline in these milliseconds is never early on the loop's clock.  A
   * virtual wheel's delay counts from its own clock instead. */
  if (wheel->tasks.virtual_clock == NULL)
    start_ms = uv_hrtime() / 1000000;
  else
    start_ms =
        atomic_load_explicit(wheel->tasks.virtual_clock, memory_order_relaxed);
  deadline_ms =
      start_ms + delay_ms < start_ms ? UINT64_MAX : start_ms + delay_ms;
  if (atomic_load_explicit(&wheel->tasks.close_word, memory_order_relaxed) &
      CLOSING)
    return UV_ECANCELED;
  rec = enter_unfenced(wheel);
  if (rec == NULL) {
    /* No record: out of memory, or close began (enter's search looked,
     * after a seq_cst read-modify-write). */
    err = atomic_load_explicit(&wheel->tasks.close_word, memory_order_seq_cst) &
                  CLOSING
              ? UV_ECANCELED
              : UV_ENOMEM;
    leave(wheel, rec);
    return err;
  }
  old_id = id != NULL ? *id : 0;
  err = submit_inside(wheel, rec, deadline_ms, repeat_ms, flags, cb, arg, id,
                      &node, &gen);
  if (err == 0) {
    /* One fence for both store-then-load pairs: the mark (enter) and the
     * published id, then the close word and wake_pending.  Close: the
     * mark, this fence, the close word, against close's seq_cst write of
     * CLOSING (or CLOSED), its fence, its loads of the marks.  Either
     * this sees close begun, and takes the task back (withdraw) unless
     * the loop already took it in, which then gives it its final call;
     * or close's fence comes after this one: then every drain after the
     * async callback's fence sees the id, and close's live count (seq_cst
     * loads of the submits) sees the task, so close does not finish
     * before it has drained the task and made its final call.  Either way
     * close never finishes while a published task could be missed.  What
     * close cannot order, a call that marked itself but whose mark it did
     * not see, finds close begun and touches only its own task, its
     * record, the node pool and the max_tasks count, all of which live
     * until the close callback (uvtw.h's shutdown rule).  Wake-up: see
     * wake_loop. */
    UVTW__TEST_BEFORE_FENCE();
    publish_fence();
    if (atomic_load_explicit(&wheel->tasks.close_word, memory_order_relaxed) &
        CLOSING)
      err = withdraw(wheel, rec, node, id_of(node, gen));
    else
      wake_loop(wheel);
    if (err != 0 && id != NULL)
      *id = old_id; /* a call that fails changes nothing */
  }
  leave(wheel, rec);
  return err;
}


/* A task cancelled before the loop took it in, for the stats: counted by
 * its canceller, in the stats at once (uvtw_stats_t). */
static void count_taken_back(uvtw__tasks_t* tasks, uvtw__record_t* rec) {
  if (rec != NULL)
    uvtw__own_add(&rec->taken_back, 1, memory_order_relaxed);
  else
    atomic_fetch_add_explicit(&tasks->taken_back_shared, 1,
                              memory_order_relaxed);
}


/* The canceller won against a task the loop has not taken in: the node is
 * its own.  The task's slot is marked, so that the loop reads no node for
 * it; by a CAS, since the slot may be another thread's, and reused by now
 * (ids are never reused, so a reused slot never matches). */
static void take_back(uvtw__tasks_t* tasks,
                      uvtw__record_t* rec,
                      uvtw__task_t* node,
                      uvtw_id_t id) {
  _Atomic uint64_t* slot;

  slot = node->q.slot;
  /* Only in the block this thread is filling, which nobody else writes and
   * the loop has not moved past (so it is neither handed back nor freed).
   * A slot in an older block may be freed by now
   * (uvtw__record_block_return): the id stays there, and the loop, finding
   * IN_QUEUE gone or a newer generation, skips it. */
  if (rec != NULL && slot >= rec->wblock->slot &&
      slot < rec->wblock->slot + rec->widx &&
      atomic_load_explicit(slot, memory_order_relaxed) == id)
    atomic_store_explicit(slot, TOMBSTONE, memory_order_relaxed);
  count_taken_back(tasks, rec);
  if (rec == NULL) {
    if (recycle(node))
      uvtw__pool_give_batch(&tasks->pool, &node, 1);
    return;
  }
  if (recycle(node))
    uvtw__record_cache_put(tasks, rec, node);
}


static void stack_push(uvtw__task_t* _Atomic* top, uvtw__task_t* node) {
  uvtw__task_t* head;

  head = atomic_load_explicit(top, memory_order_relaxed);
  do
    atomic_store_explicit(&node->q.queue_next, head, memory_order_relaxed);
  while (!atomic_compare_exchange_weak_explicit(
      top, &head, node, memory_order_release, memory_order_relaxed));
}


static int cancel_node(uvtw_wheel_t* wheel,
                       uvtw__record_t* rec,
                       uvtw__task_t* node,
                       uvtw_id_t id,
                       int* ended) {
  cancel_plan_t plan;
  uint64_t word;
  int can_notice;
  int repeating;
  int on_loop;
  int own;

  on_loop = wheel->tasks.loop_thread == &uvtw__tls.token;
  own = node == uvtw__tls.current_task;
  /* Read only for the task whose callback runs on this thread: another
   * node may be refilled by a submit meanwhile (a stale id). */
  repeating = own && node->repeat_ms != 0;
  word = atomic_load_explicit(&node->state, memory_order_acquire);
  do {
    can_notice = cancel_needs_room(word) && rec != NULL &&
                 uvtw__record_queue_room(rec) == 0;
    plan = cancel_plan(word, id & UVTW__GEN_MASK, own, repeating, on_loop,
                       can_notice);
    if (!plan.cas)
      return plan.err;
  } while (!cas_word(node, &word, plan.next));
  if (plan.err == UV_EBUSY)
    return plan.err; /* the run ends the task */
  *ended = 1;
  switch (plan.action) {
  case CANCEL_TAKE_BACK:
    if (word & LOOP_HELD) {
      /* The loop thread: no drain runs now, and `held` is its own. */
      UVTW__ASSERT(node->held);
      node->held = 0;
      wheel->tasks.held--;
    }
    take_back(&wheel->tasks, rec, node, id);
    break;
  case CANCEL_COUNT:
    count_taken_back(&wheel->tasks, rec);
    break;
  case CANCEL_NOTICE:
    queue_put(rec, id);
    publish_fence();
    wake_loop(wheel);
    break;
  case CANCEL_STACK:
    stack_push(&wheel->tasks.notices, node);
    publish_fence();
    wake_loop(wheel);
    break;
  case CANCEL_NONE:
    break;
  }
  return 0;
}


int uvtw_cancel(uvtw_wheel_t* wheel, uvtw_id_t id) {
  uvtw__record_t* rec;
  uvtw__tasks_t* tasks;
  uvtw__task_t* node;
  int ended;
  int err;

  if (wheel == NULL)
    return UV_EINVAL;
  if ((id & UVTW__GEN_MASK) == 0)
    return UV_ENOENT;
  tasks = &wheel->tasks;
  /* Once close is done with the tasks nothing is left to cancel. */
  if (atomic_load_explicit(&tasks->close_word, memory_order_relaxed) & CLOSED)
    return UV_ENOENT;
  /* Without a record (out of memory, or a first call during close), the
   * shared paths. */
  rec = enter(wheel);
  /* After enter's fence: either this sees CLOSED, or close sees this call
   * inside and waits until it has left. */
  err = UV_ENOENT;
  if (!(atomic_load_explicit(&tasks->close_word, memory_order_relaxed) &
        CLOSED)) {
    node = uvtw__pool_node_at(&tasks->pool, (uint32_t) (id >> UVTW__GEN_BITS));
    if (node != NULL) {
      ended = 0;
      err = cancel_node(wheel, rec, node, id, &ended);
      if (ended)
        count_end(tasks, rec);
    }
  }
  leave(wheel, rec);
  return err;
}
