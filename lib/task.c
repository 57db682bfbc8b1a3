/* SPDX-License-Identifier: MIT */
/* Cross-thread tasks, the loop's side.
 *
 * A task is a node from a per-wheel pool.  Its life:
 *
 *   producer: take a free node from the thread's own record (one per
 *             thread and wheel; a free batch from the pool refills it),
 *             fill it, and put its id in the record's queue, which only
 *             this thread fills and only the loop empties; wake the loop,
 *             unless a wake-up is pending that the loop has not begun to
 *             serve (task-submit.c, task-record.h).
 *   loop:     the async callback empties every record's queue, oldest
 *             first, in batches of UVTW__DRAIN_BATCH ids that give every
 *             record a share (drain), and files each task's timer in the
 *             wheel, for the deadline "uv_hrtime at submit + delay" (on a
 *             virtual wheel, "its clock at submit + delay").
 *   loop:     the driver pass pops the timer; the task runs on the loop, or
 *             goes to uv_queue_work, with a request (uvtw__work_t) that it
 *             holds only until after_work, and comes back in after_work.
 *
 * So a submit writes only its own record's lines and its node's first
 * line, and the loop reads queue slots (8 ids per cache line) instead of
 * chasing links through nodes.  A queue is a chain of one-page blocks
 * (uvtw__block_t) that the loop hands back to the producer once read (a
 * few wait for reuse; it frees the others), so it never fills up, one
 * producer's tasks reach the loop in order, and a queue that grew while
 * the loop lagged shrinks back once it caught up.  Only the owner writes
 * a block, and only the loop reads one.
 *
 * Liveness (README.md, "Liveness of tasks"): the loop holds itself alive
 * (the async handle referenced) for the tasks it has taken in and those
 * submitted on its own thread (`held`), and while a queue holds ids it has
 * not taken in (`backlog`, noted after every batch of loop work): see
 * hold_sync.
 *
 * Files: the node pool (task-pool.c), the state word (task-state.h), the
 * records and their queues (task-record.c), submit and cancel
 * (task-submit.c), close (task-close.c); this file takes tasks in, files
 * and runs them.
 */

#include <stdlib.h>
#include <string.h>

#include "driver.h"
#include "task-record.h"


/* Live tasks keep the loop alive the way uv_queue_work requests do: the
 * loop thread references the (otherwise unreferenced) async handle while
 * it holds a task, and drops the reference once it holds none.  It holds a
 * task from the moment it takes it in (or, submitted on the loop thread,
 * from the submit) until it frees its node.  It also holds itself while a
 * drain left ids in a queue (`backlog`): one batch may be all tombstones,
 * and the task behind them holds nothing until it is taken in.  Only the
 * loop thread may call uv_ref.  A task that ends on another thread (a
 * cancel, a pool run) always leads the loop back here: the cancel's notice
 * or the run's after_work_cb; a task a cancel takes back before the loop
 * saw it was never held. */
int uvtw__tasks_hold_wanted(const uvtw_wheel_t* wheel) {
  int want;

  want = wheel->tasks.held != 0 || wheel->tasks.backlog;
  /* On a virtual wheel a filed task waits for uvtw_wheel_advance, as its
   * timers do, and holds nothing: only the tasks held and not filed (not
   * taken in yet, or in the threadpool) hold the loop.  Every filed task
   * is held, so held >= filed.  Asked only when something holds, so that
   * an ordinary wheel with no task pays nothing after each pass. */
  if (want && wheel->virtual_time)
    want = wheel->tasks.held > uvtw__tasks_filed(wheel) || wheel->tasks.backlog;
  return want;
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


/* After each batch of loop work (a drain, a driver pass, a threadpool
 * task's after_work): also notes a backlog, so that a task submitted
 * while the batch ran (say from a thread that a timer's callback joined)
 * holds the loop before it is taken in.  From libuv 1.48 on, the timers
 * phase is the last of an iteration, and uv_run returns right after it if
 * nothing is referenced: the async callback would come too late. */
void uvtw__tasks_flush(uvtw_wheel_t* wheel) {
  uvtw__pool_flush(&wheel->tasks.pool);
  wheel->tasks.backlog = uvtw__records_busy(&wheel->tasks);
  hold_sync(wheel);
}


/* After a pass, the backlog by one shared read instead of a look at every
 * record's queue (one cache line per producer): wake_pending is set from
 * the moment a producer has published something until the async callback
 * that takes it in begins (wake_loop's pair, task-record.h: a producer
 * that finds it set published before a callback that has not yet begun,
 * or that callback's drain sees what it published), and a drain that left
 * ids keeps `backlog` set.  So what a producer that a callback joined has
 * published is seen here, as by uvtw__records_busy.  Only a drain clears
 * `backlog`.  A wheel that no async callback has served yet, with no
 * wake-up pending, has no task on the loop: the pass does not call this
 * (uvtw__tasks_may_be_busy). */
void uvtw__tasks_pass_flush(uvtw_wheel_t* wheel) {
  uvtw__pool_flush(&wheel->tasks.pool);
  wheel->tasks.backlog |=
      atomic_load_explicit(&wheel->tasks.wake_pending, memory_order_relaxed);
  hold_sync(wheel);
}


/* The task's timer became (delta 1) or stopped being (-1) active in the
 * core.  One writer (the loop thread): a relaxed load and store. */
static void count_filed(uvtw_wheel_t* wheel, int delta) {
  uvtw__own_add(&wheel->tasks.filed, (uint64_t) (int64_t) delta,
                memory_order_relaxed);
}


/* Stops the task's timer in the core, if active there. */
static void stop_timer(uvtw_wheel_t* wheel, uvtw_timer_t* timer) {
  if (timer->link_.next == NULL)
    return;
  uvtw__core_stop_task(&wheel->core, timer);
  count_filed(wheel, -1);
}


/* Takes the task's timer out of the wheel, if it is there. */
void uvtw__tasks_unfile(uvtw_wheel_t* wheel, uvtw__task_t* node) {
  if (node->location != AT_WHEEL)
    return;
  stop_timer(wheel, &node->timer);
  node->location = AT_NONE;
}


/* Loop thread: the node has ended; the pool recycles it. */
static void release_node(uvtw__tasks_t* tasks, uvtw__task_t* node) {
  UVTW__ASSERT(node->location == AT_NONE && node->work == NULL);
  if (node->held) {
    node->held = 0;
    tasks->held--;
  }
  node->taken_in = 0;
  if (recycle(node))
    uvtw__pool_release(&tasks->pool, node);
}


/* Frees an ended node once nothing on the loop or in a queue refers to it
 * any more. */
void uvtw__tasks_release_if_idle(uvtw_wheel_t* wheel, uvtw__task_t* node) {
  uint64_t word;

  if (node->location != AT_NONE)
    return;
  word = atomic_load_explicit(&node->state, memory_order_acquire);
  if (word & QUEUE_FLAGS)
    return; /* the loop takes it from its queue later, and frees it then */
  switch (STATE(word)) {
  case T_CANCELLED:
    if (!(word & COUNTED))
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
int uvtw__tasks_queue_final_call(uvtw_wheel_t* wheel,
                                 uvtw__task_t* node,
                                 unsigned from) {
  uint64_t word;

  UVTW__ASSERT(node->location == AT_NONE);
  if (!move(node, S(from), T_CLOSED, 0, &word))
    return 0;
  node->location = AT_FINAL_LIST;
  uvtw__list_append(&wheel->tasks.final, &node->timer.link_);
  return 1;
}


static int is_pool(uvtw__task_t* node) {
  return (atomic_load_explicit(&node->state, memory_order_relaxed) & POOL) != 0;
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
  timer->order_ = UVTW__ORDER_REF; /* referenced; the start orders it */
  node->location = AT_WHEEL;
  e = uvtw__core_start_task(&wheel->core, timer, node->deadline_ms);
  count_filed(wheel, 1);
  uvtw__driver_earlier(wheel, e);
}


/* Takes in a node whose queue flag the loop just cleared (`word`: the state
 * after that): a new task is held and filed in the wheel; a cancelled one
 * (a notice, or a task cancelled before the loop got to it) is unfiled and
 * freed. */
static void take_in(uvtw_wheel_t* wheel, uvtw__task_t* node, uint64_t word) {
  if (!node->taken_in) {
    node->taken_in = 1;
    if (!(word & COUNTED))
      wheel->tasks.accepted++;
  }
  switch (STATE(word)) {
  case T_PENDING:
    /* Only submit queues a pending node: this is a new task. */
    if (!node->held) {
      node->held = 1;
      wheel->tasks.held++;
    }
    if (wheel->closing) {
      uvtw__tasks_queue_final_call(wheel, node, T_PENDING);
      break;
    }
    file_task(wheel, node);
    /* A cancel may win from here on; its notice comes through a queue. */
    break;
  case T_CANCELLED:
    uvtw__tasks_unfile(wheel, node);
    uvtw__tasks_release_if_idle(wheel, node);
    break;
  default:
    UVTW__UNREACHABLE();
  }
}


/* Takes in the id read from a ring slot, unless a cancel took the task back
 * (the flag is gone, or the node already carries a newer generation). */
static void take_slot(uvtw_wheel_t* wheel, uvtw_id_t id) {
  uvtw__task_t* node;
  uint64_t word;
  uint64_t flag;

  node =
      uvtw__pool_node_at(&wheel->tasks.pool, (uint32_t) (id >> UVTW__GEN_BITS));
  if (node == NULL)
    UVTW__UNREACHABLE(); /* a submitted node's chunk is published */
  word = atomic_load_explicit(&node->state, memory_order_acquire);
  for (;;) {
    if (GEN(word) != (id & UVTW__GEN_MASK))
      return;
    flag = word & NOTICE ? NOTICE : word & IN_QUEUE ? IN_QUEUE : 0;
    if (flag == 0)
      return;
    if (cas_word(node, &word, word & ~flag))
      break;
  }
  take_in(wheel, node, word & ~flag);
}


/* Takes in a stack of nodes (newest first) in push order. */
static size_t take_stack(uvtw_wheel_t* wheel, uvtw__task_t* top) {
  uvtw__task_t* fifo;
  uvtw__task_t* next;
  uint64_t word;
  size_t n;

  for (fifo = NULL; top != NULL; top = next) {
    next = atomic_load_explicit(&top->q.queue_next, memory_order_relaxed);
    atomic_store_explicit(&top->q.queue_next, fifo, memory_order_relaxed);
    fifo = top;
  }
  for (n = 0; fifo != NULL; fifo = next, n++) {
    next = atomic_load_explicit(&fifo->q.queue_next, memory_order_relaxed);
    word = atomic_load_explicit(&fifo->state, memory_order_acquire);
    while (!cas_word(fifo, &word, word & ~IN_STACK))
      ;
    take_in(wheel, fifo, word & ~IN_STACK);
  }
  return n;
}


/* Takes in up to `budget` of one record's submissions and notices, oldest
 * first.  Returns how many ids it read. */
static size_t drain_record(uvtw_wheel_t* wheel,
                           uvtw__record_t* rec,
                           size_t budget) {
  uvtw__block_t* b;
  uvtw__block_t* next;
  uvtw_id_t id;
  unsigned i;
  size_t n;

  b = rec->rblock;
  i = rec->ridx;
  for (n = 0; n < budget;) {
    if (i == UVTW__BLOCK_IDS) {
      next = atomic_load_explicit(&b->next, memory_order_acquire);
      if (next == NULL)
        break;
      uvtw__record_block_return(rec, b);
      b = next;
      i = 0;
      continue;
    }
    id = atomic_load_explicit(&b->slot[i], memory_order_acquire);
    if (id == 0)
      break; /* not written yet */
    i++;
    n++;
    if (id != TOMBSTONE)
      take_slot(wheel, id);
  }
  rec->rblock = b;
  rec->ridx = i;
  return n;
}


/* Processes about `budget` ids and nodes, each producer's oldest first.
 * Fair across records: a first pass gives every record its share of the
 * budget (at least one id), a second pass hands what the quiet ones left
 * to the busy ones.  So each record's oldest id is taken in by every
 * batch, however busy the others are (a newer record, first in the list,
 * could otherwise take the whole budget batch after batch).  Returns
 * non-zero if work remains. */
int uvtw__tasks_drain(uvtw_wheel_t* wheel, size_t budget) {
  uvtw__record_t* first;
  uvtw__record_t* rec;
  uvtw__tasks_t* tasks;
  size_t records;
  size_t share;
  size_t count;

  tasks = &wheel->tasks;
  first = atomic_load_explicit(&tasks->records, memory_order_acquire);
  count = take_stack(wheel, atomic_exchange_explicit(&tasks->notices, NULL,
                                                     memory_order_acquire));
  records = 0;
  for (rec = first; rec != NULL; rec = rec->next)
    records++;
  share = records == 0 || budget / records == 0 ? 1 : budget / records;
  for (rec = first; rec != NULL; rec = rec->next)
    count += drain_record(wheel, rec, share);
  for (rec = first; rec != NULL && count < budget; rec = rec->next)
    count += drain_record(wheel, rec, budget - count);
  if (count > tasks->high_water)
    tasks->high_water = count;
  /* A backlog holds the loop until it is taken in (flush): the batch may
   * have been all tombstones, and a task behind them holds nothing yet. */
  uvtw__tasks_flush(wheel);
  uvtw__driver_sync_ref(wheel);
  return tasks->backlog;
}


void uvtw__tasks_woken(uvtw_wheel_t* wheel) {
  wheel->tasks.woken = 1;
  wheel->tasks.async_wakeups++;
  atomic_store_explicit(&wheel->tasks.wake_pending, 0, memory_order_relaxed);
  uvtw__fence();
}


static void work_cb(uv_work_t* req);
static void after_work_cb(uv_work_t* req, int status);


/* The pass counted the task it just popped as run, by its lateness
 * (wheel.c, virtual.c): as it runs now, or is handed to the pool now
 * (tasks_dispatched).  Takes it off again when neither happens after all,
 * which is rare, so that the pass counts without a branch. */
static void uncount_lateness(uvtw_wheel_t* wheel) {
  size_t slot;

  slot = 0; /* virtual time has no lateness */
  if (!wheel->virtual_time)
    slot = uvtw__late_slot(uvtw__popped_lateness(wheel));
  UVTW__ASSERT(wheel->late_bits[slot] > 0);
  wheel->late_bits[slot]--;
}


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
  if (pool &&
      STATE(atomic_load_explicit(&node->state, memory_order_relaxed)) ==
          T_PENDING &&
      (w = work_get(&wheel->tasks, node)) == NULL) {
    /* Out of memory for the request: the task stays PENDING and tries
     * again a millisecond later (never early, never lost). */
    node->location = AT_NONE;
    node->deadline_ms = uvtw__wheel_now(wheel) + 1;
    file_task(wheel, node);
    uncount_lateness(wheel);
    return;
  }
  if (!move(node, S(T_PENDING), pool ? T_QUEUED : T_RUNNING, 0, &word)) {
    /* Cancelled: stop a repeat the wheel re-filed; the notice frees. */
    UVTW__ASSERT(STATE(word) == T_CANCELLED);
    if (w != NULL)
      work_put(&wheel->tasks, node);
    stop_timer(wheel, timer);
    uncount_lateness(wheel);
    return;
  }

  wheel->tasks_dispatched++; /* it runs now, or goes to the pool now */
  if (pool) {
    node->location = AT_POOL;
    w->dispatch_ms = uvtw__wheel_now(wheel);
    uvtw__list_append(&wheel->tasks.in_pool, &timer->link_);
    /* Cannot fail: work_cb is not NULL and the loop is ours. */
    uv_queue_work(wheel->loop, &w->req, work_cb, after_work_cb);
    return;
  }

  outer = uvtw__tls.current_task;
  uvtw__tls.current_task = node;
  node->cb(node->arg, 0);
  uvtw__tls.current_task = outer;
  wheel->tasks.run++;

  /* A one-shot's run is its end.  A repeating task was re-filed by the
   * wheel before the run, from the dispatch time, and just waits again;
   * unless its own callback closed the wheel: its final call follows. */
  next = node->repeat_ms == 0 ? T_DONE : wheel->closing ? T_CLOSED : T_PENDING;
  if (move(node, S(T_RUNNING), next, 0, &word)) {
    if (next == T_PENDING)
      return;
    uvtw__tasks_unfile(wheel, node);
    if (next == T_CLOSED) {
      node->location = AT_FINAL_LIST;
      uvtw__list_append(&wheel->tasks.final, &timer->link_);
      return;
    }
    uvtw__tasks_end_live(&wheel->tasks);
    uvtw__tasks_release_if_idle(wheel, node);
    return;
  }
  if (move(node, S(T_STOPPING), T_DONE, 0, &word)) {
    /* A cancel returned EBUSY during the run: this run was the last. */
    wheel->tasks.cancelled++;
    uvtw__tasks_end_live(&wheel->tasks);
  } else if (STATE(word) != T_CANCELLED) { /* by its own callback */
    UVTW__UNREACHABLE();
  }
  uvtw__tasks_unfile(wheel, node);
  uvtw__tasks_release_if_idle(wheel, node);
}


static void work_cb(uv_work_t* req) {
  uvtw__task_t* node;
  uvtw__task_t* outer;
  uvtw__work_t* w;
  uint64_t word;
  unsigned next;

  w = uvtw__container_of(req, uvtw__work_t, req);
  node = w->node;
  if (!move(node, S(T_QUEUED), T_RUNNING, 0, &word))
    return; /* cancelled or closed before it started */

  outer = uvtw__tls.current_task;
  uvtw__tls.current_task = node;
  node->cb(node->arg, 0);
  uvtw__tls.current_task = outer;
  w->ran = 1; /* after_work_cb reads it after this thread is done */

  /* A repeating task waits (PENDING) for after_work to re-file it; a
   * cancel from now on wins at once.  CANCELLED stays; STOPPING ends below. */
  next = node->repeat_ms != 0 ? T_PENDING : T_DONE;
  /* A one-shot ends by its run: its place is free now, not when the loop
   * gets to after_work_cb.  Close waits for after_work_cb, so the wheel is
   * alive. */
  if (move(node, S(T_RUNNING), next, 0, &word)) {
    if (next == T_DONE)
      count_end(&node->timer.wheel_->tasks, NULL);
  } else if (STATE(word) == T_STOPPING) {
    /* A cancel returned UV_EBUSY during this run: the task ends now, when
     * the run returns, as uvtw_cancel promises.  No other thread moves a
     * STOPPING task; after_work_cb counts it as cancelled. */
    if (!move(node, S(T_STOPPING), T_DONE, 0, &word))
      UVTW__UNREACHABLE();
    w->stopped = 1;
    count_end(&node->timer.wheel_->tasks, NULL);
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
    if (!uvtw__tasks_queue_final_call(wheel, node, T_QUEUED))
      uvtw__tasks_release_if_idle(wheel, node);
    uvtw__tasks_flush(wheel);
    wheel->tasks.pool_returned(wheel);
    return;
  }
  if (ran)
    wheel->tasks.run++;
  switch (STATE(word)) {
  case T_DONE: /* work_cb ended it and freed its place */
    if (stopped)
      wheel->tasks.cancelled++;
    uvtw__tasks_release_if_idle(wheel, node);
    break;
  case T_PENDING:
    if (wheel->closing) {
      uvtw__tasks_queue_final_call(wheel, node, T_PENDING);
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
    uvtw__tasks_release_if_idle(wheel, node);
    break;
  default: /* QUEUED, RUNNING and STOPPING end in work_cb; CLOSED and
            * FREE never come here */
    UVTW__UNREACHABLE();
  }
  uvtw__tasks_flush(wheel);
  if (wheel->closing)
    wheel->tasks.pool_returned(wheel);
}


int uvtw__tasks_init(uvtw_wheel_t* wheel,
                     size_t max_tasks,
                     void (*pool_returned)(uvtw_wheel_t* wheel)) {
  uvtw__tasks_t* tasks;

  tasks = &wheel->tasks;
  memset(tasks, 0, sizeof(*tasks));
  tasks->max_tasks = max_tasks;
  tasks->pool_returned = pool_returned;
  uvtw__records_init(tasks);
  atomic_init(&tasks->close_word, 0);
  atomic_init(&tasks->wake_pending, 0);
  atomic_init(&tasks->records, NULL);
  atomic_init(&tasks->reserved, 0);
  atomic_init(&tasks->ended_shared, 0);
  atomic_init(&tasks->taken_back_shared, 0);
  atomic_init(&tasks->loop_ended, 0);
  atomic_init(&tasks->notices, NULL);
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
  uvtw__records_free(&wheel->tasks);
  uvtw__pool_destroy(&wheel->tasks.pool);
}


uint64_t uvtw__tasks_filed(const uvtw_wheel_t* wheel) {
  return atomic_load_explicit(&wheel->tasks.filed, memory_order_relaxed);
}


uint64_t uvtw__tasks_live(const uvtw_wheel_t* wheel, void (*between)(void)) {
  const uvtw__tasks_t* tasks;

  tasks = &wheel->tasks;
  /* Under max_tasks the places taken are the live tasks (a submit takes
   * its place before it publishes, every end gives it back): one load. */
  if (tasks->max_tasks != 0)
    return atomic_load_explicit(&tasks->reserved, memory_order_relaxed);
  return uvtw__records_live(tasks, between);
}


void uvtw__tasks_stats(const uvtw_wheel_t* wheel, uvtw_stats_t* out) {
  const uvtw__tasks_t* tasks;
  uint64_t taken_back;

  tasks = &wheel->tasks;
  taken_back = uvtw__records_taken_back(tasks);
  out->tasks_live = uvtw__tasks_live(wheel, NULL);
  out->async_wakeups = tasks->async_wakeups;
  /* A task cancelled before the loop took it in never reached the loop:
   * its canceller counted it. */
  out->tasks_accepted = tasks->accepted + taken_back;
  out->tasks_run = tasks->run;
  out->tasks_cancelled = tasks->cancelled + taken_back;
  out->tasks_closed = tasks->closed;
  out->queue_high_water = tasks->high_water;
}
