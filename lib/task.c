/* SPDX-License-Identifier: MIT */
/* Cross-thread tasks, the loop's side: single-threaded, no atomic
 * operation; it moves a node only through task-shared.c's verbs (rule 3
 * there), and all that runs on other threads is there too.
 *
 * The loop takes the queue in (uvtw__tasks_drain): a new task is accepted,
 * held and filed in the wheel at its deadline; a node that comes again (a
 * notice) is unfiled if cancelled, re-filed if a reset moved it, freed
 * once it ended.  A due task's timer (uvtw__task_fire) runs it on the
 * loop, or hands it to uv_queue_work until after_work_cb.  A node is freed
 * once it ended and nothing refers to it (release_if_idle).  Liveness
 * (docs/tasks.md): the async handle is referenced while the loop holds a
 * task (accepted, not freed; on a virtual wheel, not filed) or its queue
 * holds entries (backlog). */

#include <stdlib.h>
#include <string.h>

#include "internal.h"


int uvtw__tasks_hold_wanted(const uvtw_wheel_t* wheel) {
  const uvtw__tasks_t* tasks;

  tasks = &wheel->tasks;
  if (wheel->virtual_time)
    return tasks->held > uvtw__tasks_filed(wheel) || tasks->backlog;
  return tasks->held != 0 || tasks->backlog;
}


/* After each batch of loop work, so that a task pushed meanwhile (say by
 * a thread a timer's callback joined) holds the loop before the async
 * callback takes it in: from libuv 1.48 on the timers phase ends an
 * iteration, and uv_run returns right after it if nothing holds it. */
void uvtw__tasks_flush(uvtw_wheel_t* wheel) {
  uvtw__tasks_t* tasks;
  int want;

  tasks = &wheel->tasks;
  uvtw__loop_thread_seen(tasks);
  uvtw__free_flush(tasks);
  tasks->backlog = tasks->inbox != NULL || uvtw__queue_busy(tasks);
  if (wheel->closing)
    return; /* close holds the async handle until it closes it */
  want = uvtw__tasks_hold_wanted(wheel);
  if (want == tasks->holds_loop)
    return;
  tasks->holds_loop = want;
  if (want)
    uv_ref((uv_handle_t*) &wheel->async);
  else
    uv_unref((uv_handle_t*) &wheel->async);
}


static void unfile(uvtw_wheel_t* wheel, uvtw__task_t* node) {
  if (node->location != UVTW__AT_WHEEL)
    return;
  if (node->timer.link_.next != NULL) {
    uvtw__core_stop(&wheel->core, &node->timer);
    uvtw__tasks_count_filed(&wheel->tasks, -1);
    /* As a timer's stop: the driver may have waited for it. */
    if (uvtw__driver_hears_stop(&wheel->driver, &wheel->core, &node->timer))
      uvtw__driver_stopped(wheel, &node->timer);
  }
  node->location = UVTW__AT_NONE;
}


static void file_at(uvtw_wheel_t* wheel, uvtw__task_t* node, uint64_t ms) {
  uvtw_timer_t* timer;
  uint64_t e;

  unfile(wheel, node);
  timer = &node->timer;
  timer->link_.next = NULL;
  timer->wheel_ = wheel;
  timer->cb_ = uvtw__task_fire;
  timer->repeat_ = node->on_pool ? 0 : node->repeat_ms;
  /* Referenced, a task's (no UVTW__ORDER_USER), the wheel's task leeway;
   * the start orders it. */
  timer->order_ = UVTW__ORDER_REF | wheel->core.task_leeway;
  node->location = UVTW__AT_WHEEL;
  e = uvtw__core_start(&wheel->core, timer, ms,
                       uvtw__driver_now(&wheel->driver));
  uvtw__tasks_count_filed(&wheel->tasks, 1);
  uvtw__driver_earlier(wheel, e);
}


/* Frees an ended node nothing refers to: not filed, on the pool or the
 * final list, not queued, no reset writing it, its callback not running. */
static void release_if_idle(uvtw_wheel_t* wheel, uvtw__task_t* node) {
  uint64_t w;

  if (node->location != UVTW__AT_NONE || node == wheel->tasks.running)
    return;
  w = uvtw__task_word(node);
  if ((w & (UVTW__W_INQ | UVTW__W_WRITERS)) ||
      (UVTW__STATE(w) != UVTW__T_CANCELLED && UVTW__STATE(w) != UVTW__T_DONE))
    return;
  if (node->held) {
    node->held = 0;
    wheel->tasks.held--;
    if (UVTW__STATE(w) == UVTW__T_CANCELLED)
      wheel->tasks.cancelled++; /* else take_use counted it */
  }
  uvtw__node_free(&wheel->tasks, node);
}


/* Moves a waiting task to CLOSED and queues its final call; a task that a
 * cancel ended first is freed instead. */
static void to_final(uvtw_wheel_t* wheel, uvtw__task_t* node) {
  if (!uvtw__task_close(node)) {
    release_if_idle(wheel, node);
    return;
  }
  node->location = UVTW__AT_FINAL_LIST;
  uvtw__list_append(&wheel->tasks.final, &node->timer.link_);
}


/* A node's use the loop sees first: counts it, and each use before it
 * that a submit took the node over from (rule 4: cancelled unseen). */
static void take_use(uvtw__tasks_t* tasks, uvtw__task_t* node, uint64_t w) {
  uint64_t uses;

  uses = UVTW__GEN(w) - node->seen_gen;
  node->seen_gen = (uint32_t) UVTW__GEN(w);
  tasks->accepted += uses;
  tasks->cancelled += uses - (UVTW__STATE(w) == UVTW__T_PENDING);
  if (UVTW__STATE(w) == UVTW__T_PENDING) {
    tasks->held++;
    node->held = 1;
  }
}


/* One queue entry: a new task, or a node that a cancel, a reset or the
 * last reset writer of an ended task pushed again. */
static void take(uvtw_wheel_t* wheel, uvtw__task_t* node) {
  uint64_t w;

  /* W_MOVED is applied below; after_work_cb applies it to a pool run. */
  w = uvtw__task_take(node, node->location == UVTW__AT_WORK);
  if (!(w & UVTW__W_TAKEN))
    take_use(&wheel->tasks, node, w);
  switch (UVTW__STATE(w)) { /* running or closed: dealt with there */
  case UVTW__T_PENDING:
    if (node->location == UVTW__AT_WORK)
      break;
    if (wheel->closing)
      to_final(wheel, node);
    else if (!(w & UVTW__W_TAKEN) || (w & UVTW__W_MOVED))
      file_at(wheel, node, uvtw__task_deadline(node));
    break;
  case UVTW__T_CANCELLED:
  case UVTW__T_DONE:
    unfile(wheel, node);
    release_if_idle(wheel, node);
  }
}


int uvtw__tasks_drain(uvtw_wheel_t* wheel, size_t budget) {
  uvtw__tasks_t* tasks;
  uvtw__task_t* node;
  size_t n;

  tasks = &wheel->tasks;
  /* The whole stack once per call: pushes meanwhile find it busy and send
   * no wake-up (the next drain takes them). */
  if (tasks->inbox == NULL)
    uvtw__queue_take(tasks);
  for (n = 0; n < budget && (node = uvtw__inbox_pop(tasks)) != NULL; n++)
    take(wheel, node);
  if (n > tasks->high_water)
    tasks->high_water = n;
  tasks->woken = 1; /* tasks may exist now: passes flush after them */
  uvtw__tasks_flush(wheel);
  uvtw__driver_sync_ref(wheel);
  return tasks->backlog;
}


void uvtw__tasks_woken(uvtw_wheel_t* wheel) {
  uvtw__loop_thread_seen(&wheel->tasks);
  wheel->tasks.woken = 1;
  wheel->tasks.async_wakeups++;
}


static uvtw__work_t* work_get(uvtw__tasks_t* tasks, uvtw__task_t* node) {
  uvtw__work_t* w;

  w = tasks->free_works;
  if (w != NULL)
    tasks->free_works = w->next_free;
  else if ((w = malloc(sizeof(*w))) == NULL)
    return NULL;
  memset(w, 0, sizeof(*w));
  w->node = node;
  node->work = w;
  return w;
}


static void work_put(uvtw__tasks_t* tasks, uvtw__task_t* node) {
  node->work->next_free = tasks->free_works;
  tasks->free_works = node->work;
  node->work = NULL;
}


static void after_work_cb(uv_work_t* req, int status) {
  uvtw__task_t* node;
  uvtw_wheel_t* wheel;
  uvtw__work_t* work;
  uint64_t deadline, w;

  work = uvtw__container_of(req, uvtw__work_t, req);
  node = work->node;
  wheel = node->timer.wheel_;
  uvtw__list_remove(&node->timer.link_);
  node->location = UVTW__AT_NONE;
  if (work->ran)
    wheel->tasks.run++;
  if (work->stopped)
    wheel->tasks.cancelled++;
  deadline = uvtw__sat_add(work->dispatch_ms, node->repeat_ms);
  work_put(&wheel->tasks, node);
  if (status != UV_ECANCELED && !wheel->closing &&
      UVTW__STATE(w = uvtw__task_clear_moved(node)) == UVTW__T_PENDING) {
    /* Due at dispatch + repeat (if that passed, in the next pass: never
     * overlapping itself), or at a reset's deadline. */
    if (w & UVTW__W_MOVED)
      deadline = uvtw__task_deadline(node);
    file_at(wheel, node, deadline);
    uvtw__driver_sync_ref(wheel);
  } else if (wheel->closing) {
    to_final(wheel, node); /* or frees it if it ended */
  } else {
    release_if_idle(wheel, node);
  }
  uvtw__tasks_flush(wheel);
  if (wheel->closing)
    wheel->tasks.work_returned(wheel);
}


void uvtw__task_fire(uvtw_timer_t* timer) {
  uvtw_wheel_t* wheel;
  uvtw__task_t* node;
  uvtw__task_t* outer;
  uvtw__work_t* work;
  uint64_t w, to;

  node = uvtw__container_of(timer, uvtw__task_t, timer);
  wheel = timer->wheel_;
  if (timer->link_.next == NULL) /* a one-shot: the pass made it inactive */
    uvtw__tasks_count_filed(&wheel->tasks, -1);
  work = NULL;
  if (node->on_pool && (work = work_get(&wheel->tasks, node)) == NULL) {
    /* No memory for the request: again 1 ms later (never early or lost). */
    file_at(wheel, node, uvtw__driver_now(&wheel->driver) + 1);
    uvtw__driver_count_late(wheel, -1);
    return;
  }
  if (!uvtw__task_dispatch(node, node->on_pool)) {
    /* A reset came first (re-file at its deadline), or a cancel (its
     * notice comes). */
    if (work != NULL)
      work_put(&wheel->tasks, node);
    if (UVTW__STATE(uvtw__task_clear_moved(node)) == UVTW__T_PENDING) {
      file_at(wheel, node, uvtw__task_deadline(node));
    } else {
      unfile(wheel, node);
      release_if_idle(wheel, node);
    }
    uvtw__driver_count_late(wheel, -1);
    return;
  }

  wheel->tasks_dispatched++; /* it runs now, or goes to the threadpool now */
  if (work != NULL) {
    unfile(wheel, node);
    node->location = UVTW__AT_WORK;
    work->dispatch_ms = uvtw__driver_now(&wheel->driver);
    uvtw__list_append(&wheel->tasks.in_work, &timer->link_);
    /* Cannot fail: the work callback is not NULL and the loop is ours. */
    uv_queue_work(wheel->loop, &work->req, uvtw__work_cb, after_work_cb);
    return;
  }
  outer = wheel->tasks.running;
  wheel->tasks.running = node;
  node->cb(node->arg, 0);
  wheel->tasks.running = outer;
  wheel->tasks.run++;

  /* The pass re-filed a repeating task from the dispatch time: it waits
   * again (at a reset's deadline if one came meanwhile) unless its
   * callback closed the wheel. */
  w = uvtw__task_after_run(&wheel->tasks, node, wheel->closing != UVTW__OPEN,
                           &to);
  switch (UVTW__STATE(to)) {
  case UVTW__T_PENDING:
    /* A cancel now leaves the timer filed; its notice unfiles it. */
    w = uvtw__task_clear_moved(node);
    if (UVTW__STATE(w) == UVTW__T_PENDING && (w & UVTW__W_MOVED))
      file_at(wheel, node, uvtw__task_deadline(node));
    return;
  case UVTW__T_CLOSED:
    unfile(wheel, node);
    node->location = UVTW__AT_FINAL_LIST;
    uvtw__list_append(&wheel->tasks.final, &timer->link_);
    return;
  default:
    if (UVTW__STATE(w) == UVTW__T_STOPPING)
      wheel->tasks.cancelled++; /* a cancel returned UV_EBUSY */
    unfile(wheel, node);
    release_if_idle(wheel, node);
  }
}


int uvtw__tasks_init(uvtw_wheel_t* wheel,
                     size_t max_tasks,
                     void (*work_returned)(uvtw_wheel_t* wheel)) {
  uvtw__tasks_t* tasks;

  tasks = &wheel->tasks;
  memset(tasks, 0, sizeof(*tasks));
  tasks->max_tasks = max_tasks;
  tasks->work_returned = work_returned;
  tasks->async = &wheel->async;
  uvtw__list_init(&tasks->in_work);
  uvtw__list_init(&tasks->final);
  return uvtw__tasks_shared_init(tasks);
}


void uvtw__tasks_destroy(uvtw_wheel_t* wheel) {
  uvtw__work_t* w;

  while ((w = wheel->tasks.free_works) != NULL) {
    wheel->tasks.free_works = w->next_free;
    free(w);
  }
  uvtw__tasks_shared_destroy(&wheel->tasks);
}


void uvtw__tasks_stats(const uvtw_wheel_t* wheel, uvtw_stats_t* out) {
  const uvtw__tasks_t* tasks;

  tasks = &wheel->tasks;
  out->tasks_live = uvtw__tasks_live(wheel);
  out->async_wakeups = tasks->async_wakeups;
  out->tasks_accepted = tasks->accepted;
  out->tasks_run = tasks->run;
  out->tasks_cancelled = tasks->cancelled;
  out->tasks_closed = tasks->closed;
  out->queue_high_water = tasks->high_water;
}


static void take_from_wheel(uvtw_timer_t* timer, void* arg) {
  uvtw_wheel_t* wheel;
  uvtw__task_t* node;

  if (!uvtw__task_owns(timer))
    return;
  wheel = arg;
  node = uvtw__container_of(timer, uvtw__task_t, timer);
  unfile(wheel, node);
  /* Close from this task's own callback: its run's end deals with it. */
  if (node != wheel->tasks.running)
    to_final(wheel, node);
}


void uvtw__tasks_close_begin(uvtw_wheel_t* wheel) {
  uvtw__gate_close_begin(&wheel->tasks);
  uvtw__core_walk(&wheel->core, take_from_wheel, wheel);
  uvtw__tasks_flush(wheel);
  /* The rest runs from the async callback, outside the caller's stack;
   * the async handle holds the loop until close is done. */
  uv_ref((uv_handle_t*) &wheel->async);
  uv_async_send(&wheel->async);
}


static void run_finals(uvtw_wheel_t* wheel) {
  uvtw__task_t* node;

  while (!uvtw__list_empty(&wheel->tasks.final)) {
    node =
        uvtw__container_of(wheel->tasks.final.next, uvtw__task_t, timer.link_);
    uvtw__list_remove(&node->timer.link_);
    node->location = UVTW__AT_NONE;
    node->cb(node->arg, UV_ECANCELED);
    wheel->tasks.closed++;
    uvtw__task_final_done(&wheel->tasks, node);
    release_if_idle(wheel, node);
  }
  uvtw__tasks_flush(wheel);
}


int uvtw__tasks_close_step(uvtw_wheel_t* wheel) {
  uvtw__tasks_t* tasks;
  struct uvtw__link* link;
  uvtw__task_t* node;

  tasks = &wheel->tasks;
  do {
    while (uvtw__tasks_drain(wheel, SIZE_MAX))
      ;
    run_finals(wheel); /* user code: may submit (refused) or cancel */
  } while (uvtw__queue_busy(tasks));
  /* Queued threadpool work is cancelled; running work is waited for. */
  for (link = tasks->in_work.next; link != &tasks->in_work; link = link->next) {
    node = uvtw__container_of(link, uvtw__task_t, timer.link_);
    if (!node->work->uv_cancel_asked) {
      node->work->uv_cancel_asked = 1;
      uv_cancel((uv_req_t*) &node->work->req);
    }
  }
  if (!uvtw__list_empty(&tasks->in_work))
    return 0; /* after_work_cb calls again */
  /* Done once G_CLOSED is set (a call entering later finds it); until
   * then, look again next iteration. */
  if (!uvtw__gate_close_end(tasks)) {
    uv_async_send(&wheel->async);
    return 0;
  }
  return 1;
}
