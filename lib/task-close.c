/* SPDX-License-Identifier: MIT */
/* The task steps of close (wheel.c owns close and lists its steps).
 *
 * Calls inside the wheel.  uvtw_submit and uvtw_cancel enter the wheel before
 * they touch its shared state, and leave it when done (enter and leave,
 * task-record.h): a thread marks its record (`calls` odd; a call without a
 * record uses the wheel's `calls_shared`), then a seq_cst fence, then it reads
 * the close word.  Close sets CLOSING (seq_cst read-modify-write) when it
 * begins, and when no task is live any more, CLOSED; then a fence, then it
 * reads the marks (calls_inside), and finishes only once no call it must wait
 * for is inside, looking again on later loop iterations (it never blocks the
 * loop).  The two fences are a Dekker pair: of a call and close, at least one
 * sees the other's write.  So a submit either sees CLOSING after its fence and
 * takes back the task it published (UV_ECANCELED) unless the loop took it in,
 * or close drains its task and gives it its final call; a cancel either sees
 * CLOSED (UV_ENOENT: nothing is left) or is waited for.  Leaving is a release
 * store, read with acquire by close, and by a thread that adopts the record of
 * an exited one (an acq_rel read-modify-write of `calls`): each sees what the
 * call did.  What close cannot wait for is a call that has not marked itself
 * yet when close finishes: the wheel, its pool and its records are freed after
 * the close callback, so other threads must have stopped calling by then
 * (uvtw.h).
 *
 * The store-then-load pairs, correct on weakly ordered CPUs as well as on
 * x86:
 *   enter:     mark; fence; load close word  /  close: set CLOSING or
 *              CLOSED; fence; load the marks (calls_inside);
 *   wake_loop: publish an id; fence; load wake_pending  /  the async
 *              callback: clear wake_pending; fence; drain the queues;
 * each fence is uvtw__fence (atomics.h).
 */

#include "task-record.h"


static void take_from_wheel(uvtw_timer_t* timer, void* arg) {
  uvtw_wheel_t* wheel;
  uvtw__task_t* node;

  if (!uvtw__task_owns(timer))
    return;
  wheel = arg;
  node = task_of(timer);
  uvtw__tasks_unfile(wheel, node);
  /* Close called from this task's own callback: uvtw__task_fire ends it
   * after the callback returns (even if it cancelled itself first). */
  if (node == uvtw__tls.current_task)
    return;
  if (!uvtw__tasks_queue_final_call(wheel, node, T_PENDING))
    uvtw__tasks_release_if_idle(wheel, node); /* a cancel won */
}


void uvtw__tasks_close_begin(uvtw_wheel_t* wheel) {
  atomic_fetch_or_explicit(&wheel->tasks.close_word, CLOSING,
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
    node = task_of(
        uvtw__container_of(wheel->tasks.final.next, uvtw_timer_t, link_));
    UVTW__ASSERT(node->location == AT_FINAL_LIST);
    uvtw__list_remove(&node->timer.link_);
    node->location = AT_NONE;
    node->cb(node->arg, UV_ECANCELED);
    wheel->tasks.closed++;
    uvtw__tasks_end_live(&wheel->tasks);
    /* No other thread moves a CLOSED task. */
    if (!move(node, S(T_CLOSED), T_DONE, 0, &word))
      UVTW__UNREACHABLE();
    uvtw__tasks_release_if_idle(wheel, node);
  }
  uvtw__tasks_flush(wheel);
}


/* Close's side of the Dekker pair in enter: after its seq_cst
 * read-modify-writes of the close word (CLOSING at close_begin, CLOSED just
 * before), a fence, then the marks.  Non-zero while a call that close must
 * wait for is inside the wheel: one that had marked itself before the
 * fence (the fence order puts its own fence first, so it may have missed
 * CLOSING or CLOSED), seen as a record's odd `calls` value at the first
 * look, which must change; a call that entered after that look saw the
 * flags and does nothing, but waiting for the first one after it (an even
 * value at the first look, + 1) costs nothing.  Calls without a record
 * are waited for by their shared count.  Acquire: what a call did before
 * it left is visible to close from here on. */
static int calls_inside(uvtw__tasks_t* tasks) {
  uvtw__record_t* rec;
  uint64_t calls;
  int inside;

  uvtw__fence();
  inside =
      atomic_load_explicit(&tasks->calls_shared, memory_order_acquire) != 0;
  for (rec = atomic_load_explicit(&tasks->records, memory_order_acquire);
       rec != NULL; rec = rec->next) {
    calls = atomic_load_explicit(&rec->calls, memory_order_acquire);
    if (rec->close_seen == 0)
      rec->close_seen = calls | 1;
    if (calls == rec->close_seen)
      inside = 1;
  }
  return inside;
}


int uvtw__tasks_close_step(uvtw_wheel_t* wheel) {
  uvtw__tasks_t* tasks;
  struct uvtw__link* link;
  uvtw__task_t* node;

  tasks = &wheel->tasks;
  UVTW__ASSERT(wheel->closing == UVTW__CLOSING_TASKS);
  do {
    while (uvtw__tasks_drain(wheel, SIZE_MAX))
      ;
    run_finals(wheel); /* user code: may submit (refused) or cancel */
  } while (uvtw__tasks_drain(wheel, SIZE_MAX) ||
           !uvtw__list_empty(&tasks->final));
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
  if (uvtw__records_live(tasks, NULL) != 0) {
    /* A task is on its way to a queue, or a cancel has not counted its end
     * yet: look again next iteration. */
    uv_async_send(&wheel->async);
    return 0;
  }
  /* No task is live.  From here on a cancel finds nothing (CLOSED), and
   * close waits only for the calls already inside. */
  atomic_fetch_or_explicit(&tasks->close_word, CLOSED, memory_order_seq_cst);
  if (calls_inside(tasks)) {
    /* Never blocks the loop: looks again next iteration (a submit inside
     * may still publish a task, which this step then drains). */
    uv_async_send(&wheel->async);
    return 0;
  }
  return 1;
}
