/* SPDX-License-Identifier: MIT */
/* uvtw__tasks_check (tests; UVTW_CHECK_INVARIANTS): the loop's task
 * bookkeeping re-derived from the nodes, as uvtw__core_check does for the
 * core.  Loop thread: it reads what the loop alone writes, and state words;
 * with `quiescent` (no other thread inside, the queue taken in) also the
 * free stack and the gate. */

#include <inttypes.h>

#include "check.h"
#include "internal.h"

#define CHECK(cond, ...) UVTW__CHECK("uvtw__tasks_check", cond, __VA_ARGS__)


static uint64_t list_length(const struct uvtw__link* head) {
  const struct uvtw__link* link;
  uint64_t n;

  for (n = 0, link = head->next; link != head; link = link->next)
    n++;
  return n;
}


/* Nodes on the free stack, and on the loop's chain not yet pushed. */
static uint64_t free_listed(const uvtw__tasks_t* tasks) {
  const uvtw__task_t* node;
  uint32_t link;
  uint64_t n;

  link = UVTW__FREE_LINK(
      atomic_load_explicit(&tasks->free_top, memory_order_acquire));
  for (n = 0; link != 0; n++) {
    node = uvtw__node_at(tasks, link - 1);
    link = atomic_load_explicit(&node->free_next, memory_order_relaxed);
  }
  for (link = tasks->freed_first; link != 0; n++) {
    node = uvtw__node_at(tasks, link - 1);
    link = node == tasks->freed_last
               ? 0
               : atomic_load_explicit(&node->free_next, memory_order_relaxed);
  }
  return n;
}


int uvtw__tasks_check(const uvtw_wheel_t* wheel, FILE* out, int quiescent) {
  const uvtw__tasks_t* tasks;
  const uvtw__task_t* node;
  uint64_t counts[4] = {0, 0, 0, 0}; /* by location, wheel: timer active */
  uint64_t held, free, live, filed, gate, w, i, n;
  unsigned c;
  int idle;

  tasks = &wheel->tasks;
  idle = quiescent && tasks->inbox == NULL &&
         atomic_load_explicit(&tasks->head, memory_order_acquire) == NULL;
  held = free = live = 0;
  for (c = 0; c < UVTW__CHUNKS; c++) {
    if (atomic_load_explicit(&tasks->chunks[c], memory_order_acquire) == NULL)
      break;
    n = (uint64_t) UVTW__CHUNK0 << c;
    for (i = UVTW__CHUNK0 * ((1u << c) - 1); n-- > 0; i++) {
      node = uvtw__node_at(tasks, i);
      w = atomic_load_explicit(&node->state, memory_order_acquire);
      held += node->held;
      free += UVTW__STATE(w) == UVTW__T_FREE && UVTW__GEN(w) != 0;
      live += UVTW__STATE(w) != UVTW__T_FREE &&
              UVTW__STATE(w) != UVTW__T_CANCELLED &&
              UVTW__STATE(w) != UVTW__T_DONE;
      CHECK(!node->held || UVTW__STATE(w) != UVTW__T_FREE,
            "node %" PRIu64 " is held and free", i);
      /* The stats count each use once (take_use): the loop has seen every
       * use of a node out of the queue but a free node's next one. */
      CHECK(UVTW__GEN(w) == 0 ||
                ((w & UVTW__W_INQ) ? node->seen_gen <= UVTW__GEN(w)
                                   : UVTW__GEN(w) - node->seen_gen ==
                                         (UVTW__STATE(w) == UVTW__T_FREE)),
            "node %" PRIu64 ": generation %" PRIu64 ", the loop saw %" PRIu32,
            i, UVTW__GEN(w), node->seen_gen);
      /* Taken in, all: nothing waits for the loop, and an ended node
       * nothing refers to is free (or retired). */
      CHECK(
          !idle || (!(w & UVTW__W_INQ) &&
                    (node->location != UVTW__AT_NONE ||
                     node == tasks->running || UVTW__GEN(w) == UVTW__GEN_MASK ||
                     (UVTW__STATE(w) != UVTW__T_CANCELLED &&
                      UVTW__STATE(w) != UVTW__T_DONE))),
          "node %" PRIu64 ": word %#" PRIx64 " with the queue taken in", i, w);
      CHECK((node->location == UVTW__AT_WORK) == (node->work != NULL),
            "node %" PRIu64 ": location %u, work %p", i, node->location,
            (void*) node->work);
      CHECK(node->location <= UVTW__AT_FINAL_LIST,
            "node %" PRIu64 ": location %u", i, node->location);
      CHECK(node->location != UVTW__AT_FINAL_LIST ||
                UVTW__STATE(w) == UVTW__T_CLOSED,
            "node %" PRIu64 " owed a final call in state %u", i,
            UVTW__STATE(w));
      CHECK(node->location != UVTW__AT_WHEEL || uvtw__task_owns(&node->timer),
            "node %" PRIu64 ": a timer not the tasks'", i);
      if (node->location == UVTW__AT_WHEEL)
        counts[UVTW__AT_WHEEL] += node->timer.link_.next != NULL;
      else
        counts[node->location]++;
    }
  }
  CHECK(held == tasks->held, "held %" PRIu64 ", nodes held %" PRIu64,
        tasks->held, held);
  filed = uvtw__tasks_filed(wheel);
  CHECK(counts[UVTW__AT_WHEEL] == filed,
        "filed %" PRIu64 ", task timers in the wheel %" PRIu64, filed,
        counts[UVTW__AT_WHEEL]);
  CHECK(counts[UVTW__AT_WORK] == list_length(&tasks->in_work),
        "threadpool list %" PRIu64 ", nodes on the pool %" PRIu64,
        list_length(&tasks->in_work), counts[UVTW__AT_WORK]);
  CHECK(counts[UVTW__AT_FINAL_LIST] == list_length(&tasks->final),
        "final list %" PRIu64 ", nodes owed a final call %" PRIu64,
        list_length(&tasks->final), counts[UVTW__AT_FINAL_LIST]);
  /* A submit on the loop thread holds it at once, before a flush notes
   * the backlog. */
  CHECK(tasks->holds_loop == uvtw__tasks_hold_wanted(wheel) || wheel->closing ||
            (tasks->holds_loop &&
             atomic_load_explicit(&tasks->head, memory_order_relaxed)),
        "holds_loop %d with held %" PRIu64 ", backlog %d", tasks->holds_loop,
        tasks->held, tasks->backlog);
  if (!quiescent)
    return 0;
  CHECK(free == free_listed(tasks),
        "free nodes %" PRIu64 ", on the free stack %" PRIu64, free,
        free_listed(tasks));
  gate = atomic_load_explicit(&tasks->gate, memory_order_acquire);
  CHECK(UVTW__G_LIVES(gate) == live && UVTW__G_CALLS(gate) == 0,
        "live %" PRIu64 " and calls %" PRIu64
        " in the gate, live nodes %" PRIu64,
        UVTW__G_LIVES(gate), UVTW__G_CALLS(gate), live);
  return 0;
}
