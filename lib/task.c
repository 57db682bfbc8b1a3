/* SPDX-License-Identifier: MIT */
/* Cross-thread tasks, the loop's side: plain single-threaded code, apart
 * from its CASes on a node's state word (task-shared.c, "Ground rules").
 *
 * The loop takes the queue in (uvtw__tasks_drain): a new task is accepted,
 * held (it keeps the loop alive) and filed in the wheel at its deadline; a
 * node that comes again (a notice) is unfiled if cancelled, re-filed if a
 * reset moved it, and freed once it ended.  The pass pops a due task's
 * timer (uvtw__task_fire): it runs on the loop, or goes to uv_queue_work
 * and comes back in after_work_cb.  The loop frees a node once it ended
 * and nothing refers to it (release_if_idle); a cancel frees one that the
 * loop never saw (task-shared.c, unqueue).
 * Liveness (docs/tasks.md): the loop references the async handle while it
 * holds a task (accepted, not freed) or its queue holds entries (backlog);
 * on a virtual wheel a filed task holds nothing. */

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


static void hold_sync(uvtw_wheel_t* wheel) {
  int want;

  if (wheel->closing)
    return; /* close holds the async handle until it closes it */
  want = uvtw__tasks_hold_wanted(wheel);
  if (want == wheel->tasks.holds_loop)
    return;
  wheel->tasks.holds_loop = want;
  if (want)
    uv_ref((uv_handle_t*) &wheel->async);
  else
    uv_unref((uv_handle_t*) &wheel->async);
}


/* After each batch of loop work: a task pushed while it ran (say by a
 * thread that a timer's callback joined) holds the loop before the async
 * callback takes it in: from libuv 1.48 on the timers phase is the last of
 * an iteration, and uv_run returns right after it if nothing holds it. */
void uvtw__tasks_flush(uvtw_wheel_t* wheel) {
  uvtw__tasks_t* tasks;

  tasks = &wheel->tasks;
  uvtw__free_flush(tasks);
  tasks->backlog =
      tasks->inbox != NULL ||
      atomic_load_explicit(&tasks->head, memory_order_relaxed) != NULL;
  hold_sync(wheel);
}


static void count_filed(uvtw_wheel_t* wheel, int delta) {
  atomic_store_explicit(
      &wheel->tasks.filed,
      atomic_load_explicit(&wheel->tasks.filed, memory_order_relaxed) +
          (uint64_t) (int64_t) delta,
      memory_order_relaxed);
}


static void unfile(uvtw_wheel_t* wheel, uvtw__task_t* node) {
  if (node->location != UVTW__AT_WHEEL)
    return;
  if (node->timer.link_.next != NULL) {
    uvtw__core_stop_task(&wheel->core, &node->timer);
    count_filed(wheel, -1);
    /* As a timer's stop: the driver may have waited for it. */
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
  timer->repeat_ =
      atomic_load_explicit(&node->state, memory_order_relaxed) & UVTW__W_WORK
          ? 0
          : node->repeat_ms;
  timer->order_ = UVTW__ORDER_REF; /* referenced; the start orders it */
  node->location = UVTW__AT_WHEEL;
  e = uvtw__core_start_task(&wheel->core, timer, ms);
  count_filed(wheel, 1);
  uvtw__driver_earlier(wheel, e);
}


/* Frees an ended node once nothing refers to it: not in the wheel, the
 * threadpool or the final list, not in the queue, no reset writing it, and not
 * the task whose callback runs now. */
static void release_if_idle(uvtw_wheel_t* wheel, uvtw__task_t* node) {
  uint64_t w;

  if (node->location != UVTW__AT_NONE || node == uvtw__tls.current_task)
    return;
  w = atomic_load_explicit(&node->state, memory_order_acquire);
  if ((w & (UVTW__W_INQ | UVTW__W_WRITERS)) ||
      (UVTW__STATE(w) != UVTW__T_CANCELLED && UVTW__STATE(w) != UVTW__T_DONE))
    return;
  if (node->held) {
    node->held = 0;
    wheel->tasks.held--;
    if (UVTW__STATE(w) == UVTW__T_CANCELLED)
      wheel->tasks.cancelled++; /* a cancel counted it otherwise */
  }
  uvtw__node_free(&wheel->tasks, node);
}


/* Moves a waiting task to CLOSED and queues its final call; a task that a
 * cancel ended first is freed instead. */
static void to_final(uvtw_wheel_t* wheel, uvtw__task_t* node) {
  uint64_t w;

  w = atomic_load_explicit(&node->state, memory_order_acquire);
  do
    if (UVTW__STATE(w) != UVTW__T_PENDING && UVTW__STATE(w) != UVTW__T_QUEUED) {
      release_if_idle(wheel, node);
      return;
    }
  while (!uvtw__task_cas(node, &w, UVTW__WITH_STATE(w, UVTW__T_CLOSED)));
  node->location = UVTW__AT_FINAL_LIST;
  uvtw__list_append(&wheel->tasks.final, &node->timer.link_);
}


/* One queue entry: a new task, or a node that a cancel, a reset or the
 * last reset writer of an ended task pushed again. */
static void take(uvtw_wheel_t* wheel, uvtw__task_t* node) {
  uint64_t w, n;

  w = atomic_load_explicit(&node->state, memory_order_acquire);
  do {
    n = (w & ~UVTW__W_INQ) | UVTW__W_TAKEN;
    if (node->location != UVTW__AT_WORK)
      n &= ~UVTW__W_MOVED; /* applied below; after_work_cb applies it there */
  } while (!uvtw__task_cas(node, &w, n));
  if (!(w & UVTW__W_TAKEN) && UVTW__STATE(w) == UVTW__T_PENDING) {
    wheel->tasks.accepted++;
    wheel->tasks.held++;
    node->held = 1;
  }
  switch (UVTW__STATE(w)) { /* running or closed: dealt with there */
  case UVTW__T_PENDING:
    if (node->location == UVTW__AT_WORK)
      break;
    if (wheel->closing)
      to_final(wheel, node);
    else if (!(w & UVTW__W_TAKEN) || (w & UVTW__W_MOVED))
      file_at(wheel, node,
              atomic_load_explicit(&node->deadline, memory_order_relaxed));
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
  uvtw__task_t* next;
  size_t n;

  tasks = &wheel->tasks;
  /* The whole stack, newest first, reversed into the inbox, once per call:
   * pushes meanwhile find it busy and send no wake-up (the next drain). */
  if (tasks->inbox == NULL) {
    node = atomic_exchange_explicit(&tasks->head, NULL, memory_order_acquire);
    for (; node != NULL; node = next) {
      next = atomic_load_explicit(&node->next, memory_order_relaxed);
      atomic_store_explicit(&node->next, tasks->inbox, memory_order_relaxed);
      tasks->inbox = node;
    }
  }
  for (n = 0; n < budget && tasks->inbox != NULL; n++) {
    node = tasks->inbox;
    tasks->inbox = atomic_load_explicit(&node->next, memory_order_relaxed);
    take(wheel, node);
  }
  if (n > tasks->high_water)
    tasks->high_water = n;
  tasks->woken = 1; /* tasks may exist now: passes flush after them */
  uvtw__tasks_flush(wheel);
  uvtw__driver_sync_ref(wheel);
  return tasks->backlog;
}


void uvtw__tasks_woken(uvtw_wheel_t* wheel) {
  wheel->tasks.woken = 1;
  wheel->tasks.async_wakeups++;
}


static void after_work_cb(uv_work_t* req, int status);


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


void uvtw__task_fire(uvtw_timer_t* timer) {
  uvtw_wheel_t* wheel;
  uvtw__task_t* node;
  uvtw__task_t* outer;
  uvtw__work_t* work;
  uint64_t w;
  int on_work;

  node = uvtw__container_of(timer, uvtw__task_t, timer);
  wheel = timer->wheel_;
  if (timer->link_.next == NULL)
    count_filed(wheel, -1); /* a one-shot: the pass made it inactive */
  w = atomic_load_explicit(&node->state, memory_order_acquire);
  on_work = (w & UVTW__W_WORK) != 0;
  work = NULL;
  if (on_work && (work = work_get(&wheel->tasks, node)) == NULL) {
    /* Out of memory for the request: it tries again a millisecond later
     * (never early, never lost). */
    file_at(wheel, node, uvtw__driver_now(&wheel->driver) + 1);
    uvtw__driver_count_late(wheel, -1);
    return;
  }
  do {
    if (UVTW__STATE(w) != UVTW__T_PENDING || (w & UVTW__W_MOVED)) {
      /* A reset came first (not before its deadline), or a cancel (its
       * notice comes). */
      if (work != NULL)
        work_put(&wheel->tasks, node);
      if (UVTW__STATE(uvtw__task_clear_moved(node)) == UVTW__T_PENDING) {
        file_at(wheel, node,
                atomic_load_explicit(&node->deadline, memory_order_relaxed));
      } else {
        unfile(wheel, node);
        release_if_idle(wheel, node);
      }
      uvtw__driver_count_late(wheel, -1);
      return;
    }
  } while (!uvtw__task_cas(
      node, &w,
      UVTW__WITH_STATE(w, on_work ? UVTW__T_QUEUED : UVTW__T_RUNNING)));

  wheel->tasks_dispatched++; /* it runs now, or goes to the threadpool now */
  if (on_work) {
    unfile(wheel, node);
    node->location = UVTW__AT_WORK;
    work->dispatch_ms = uvtw__driver_now(&wheel->driver);
    uvtw__list_append(&wheel->tasks.in_work, &timer->link_);
    /* Cannot fail: work_cb is not NULL and the loop is ours. */
    uv_queue_work(wheel->loop, &work->req, uvtw__work_cb, after_work_cb);
    return;
  }
  outer = uvtw__tls.current_task;
  uvtw__tls.current_task = node;
  node->cb(node->arg, 0);
  uvtw__tls.current_task = outer;
  wheel->tasks.run++;

  /* A repeating task was re-filed by the pass before its run, from the
   * dispatch time, and waits again, at a reset's deadline if one came
   * during the run; unless its callback closed the wheel. */
  w = uvtw__task_after_run(node, wheel->closing != UVTW__OPEN, &wheel->tasks);
  switch (
      UVTW__STATE(atomic_load_explicit(&node->state, memory_order_relaxed))) {
  case UVTW__T_PENDING:
    /* A cancel now leaves the timer filed; its notice unfiles it. */
    w = uvtw__task_clear_moved(node);
    if (UVTW__STATE(w) == UVTW__T_PENDING && (w & UVTW__W_MOVED))
      file_at(wheel, node,
              atomic_load_explicit(&node->deadline, memory_order_relaxed));
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
    /* Due at dispatch + repeat (if that passed while it ran, it goes in
     * the next pass, never overlapping itself), or at a reset's deadline. */
    if (w & UVTW__W_MOVED)
      deadline = atomic_load_explicit(&node->deadline, memory_order_relaxed);
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


int uvtw__tasks_init(uvtw_wheel_t* wheel,
                     size_t max_tasks,
                     void (*work_returned)(uvtw_wheel_t* wheel)) {
  uvtw__tasks_t* tasks;

  tasks = &wheel->tasks;
  memset(tasks, 0, sizeof(*tasks));
  tasks->max_tasks = max_tasks;
  tasks->work_returned = work_returned;
  tasks->async = &wheel->async;
  atomic_init(&tasks->filed, 0);
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


uint64_t uvtw__tasks_filed(const uvtw_wheel_t* wheel) {
  return atomic_load_explicit(&wheel->tasks.filed, memory_order_relaxed);
}


uint64_t uvtw__tasks_live(const uvtw_wheel_t* wheel) {
  return UVTW__G_LIVES(
      atomic_load_explicit(&wheel->tasks.gate, memory_order_relaxed));
}


void uvtw__tasks_stats(const uvtw_wheel_t* wheel, uvtw_stats_t* out) {
  const uvtw__tasks_t* tasks;
  uint64_t taken_back;

  tasks = &wheel->tasks;
  /* A task cancelled before the loop took it in: its canceller counted. */
  taken_back = atomic_load_explicit(&tasks->taken_back, memory_order_relaxed);
  out->tasks_live = uvtw__tasks_live(wheel);
  out->async_wakeups = tasks->async_wakeups;
  out->tasks_accepted = tasks->accepted + taken_back;
  out->tasks_run = tasks->run;
  out->tasks_cancelled = tasks->cancelled + taken_back;
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
  if (node != uvtw__tls.current_task)
    to_final(wheel, node);
}


void uvtw__tasks_close_begin(uvtw_wheel_t* wheel) {
  atomic_fetch_or_explicit(&wheel->tasks.gate, UVTW__G_CLOSING,
                           memory_order_acq_rel);
  uvtw__core_walk(&wheel->core, take_from_wheel, wheel);
  uvtw__tasks_flush(wheel);
  /* The rest runs from the async callback, outside the caller's stack;
   * the async handle holds the loop until close is done. */
  uv_ref((uv_handle_t*) &wheel->async);
  uv_async_send(&wheel->async);
}


static void run_finals(uvtw_wheel_t* wheel) {
  uvtw__task_t* node;
  uint64_t w;

  while (!uvtw__list_empty(&wheel->tasks.final)) {
    node =
        uvtw__container_of(wheel->tasks.final.next, uvtw__task_t, timer.link_);
    uvtw__list_remove(&node->timer.link_);
    node->location = UVTW__AT_NONE;
    node->cb(node->arg, UV_ECANCELED);
    wheel->tasks.closed++;
    uvtw__live_end(&wheel->tasks);
    /* Only resets move a CLOSED task's word (their writer count). */
    w = atomic_load_explicit(&node->state, memory_order_acquire);
    while (!uvtw__task_cas(node, &w, UVTW__WITH_STATE(w, UVTW__T_DONE)))
      ;
    release_if_idle(wheel, node);
  }
  uvtw__tasks_flush(wheel);
}


int uvtw__tasks_close_step(uvtw_wheel_t* wheel) {
  uvtw__tasks_t* tasks;
  struct uvtw__link* link;
  uvtw__task_t* node;
  uint64_t g;

  tasks = &wheel->tasks;
  do {
    while (uvtw__tasks_drain(wheel, SIZE_MAX))
      ;
    run_finals(wheel); /* user code: may submit (refused) or cancel */
  } while (atomic_load_explicit(&tasks->head, memory_order_relaxed) != NULL);
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
  /* Done once no task is live, no call is inside and the queue is empty,
   * by one CAS: a call that enters later finds UVTW__G_CLOSED.  The gate
   * is read first: with no task live and no call inside, nothing pushes
   * any more, so an empty queue means every notice was taken in (and its
   * cancel counted).  Until then, look again next iteration. */
  g = atomic_load_explicit(&tasks->gate, memory_order_acquire);
  if (UVTW__G_CALLS(g) != 0 || UVTW__G_LIVES(g) != 0 ||
      atomic_load_explicit(&tasks->head, memory_order_relaxed) != NULL ||
      !atomic_compare_exchange_strong_explicit(
          &tasks->gate, &g, g | UVTW__G_CLOSED, memory_order_acquire,
          memory_order_relaxed)) {
    uv_async_send(&wheel->async);
    return 0;
  }
  return 1;
}
