/* SPDX-License-Identifier: MIT */
/* uvtw__tasks_check: the tasks' bookkeeping re-derived from the nodes, as
 * uvtw__core_check does for the core: for the tests, and after every pass
 * and every drain in UVTW_CHECK_INVARIANTS builds.
 *
 * Loop thread.  While other threads may submit and cancel, it reads only
 * what the loop thread alone writes (held, location, work, the lists, the
 * filed count), plus state words, which only ever leave FREE by a submit
 * of a node no other thread holds.  With `quiescent` set (no other thread
 * inside the wheel: the tests, after joining their threads) it also counts
 * the free nodes where they wait: the pool's stack of free batches, the
 * records' caches and the loop's batch being filled. */

#include <inttypes.h>

#include "check.h"
#include "task-record.h"

#define CHECK(cond, ...) UVTW__CHECK("uvtw__tasks_check", cond, __VA_ARGS__)

typedef struct {
  uint64_t held;
  uint64_t at_wheel;
  uint64_t at_pool;
  uint64_t at_final;
  uint64_t free;
} tally_t;


static uint64_t list_length(const struct uvtw__link* head) {
  const struct uvtw__link* link;
  uint64_t n;

  n = 0;
  for (link = head->next; link != head; link = link->next)
    n++;
  return n;
}


/* Free nodes on the pool's stack (quiescent only: producers pop it). */
static uint64_t stacked_free(const uvtw__pool_t* pool) {
  const uvtw__task_t* node;
  uint32_t batch;
  uint32_t link;
  uint64_t n;

  n = 0;
  batch =
      (uint32_t) atomic_load_explicit(&pool->free_head, memory_order_acquire);
  while (batch != 0) {
    node = uvtw__pool_node_at(pool, batch - 1);
    batch = atomic_load_explicit(&node->batch_next, memory_order_relaxed);
    for (;;) {
      n++;
      link = atomic_load_explicit(&node->free_next, memory_order_relaxed);
      if (link == 0)
        break;
      node = uvtw__pool_node_at(pool, link - 1);
    }
  }
  return n;
}


int uvtw__tasks_check(const uvtw_wheel_t* wheel, FILE* out, int quiescent) {
  const uvtw__tasks_t* tasks;
  const uvtw__task_t* node;
  const uvtw__record_t* rec;
  uint64_t nodes;
  uint64_t cached;
  uint64_t filed;
  uint64_t word;
  uint64_t i;
  tally_t tally;

  tasks = &wheel->tasks;
  memset(&tally, 0, sizeof(tally));
  nodes = atomic_load_explicit(&tasks->pool.bump, memory_order_acquire);
  for (i = 0; i < nodes; i++) {
    node = uvtw__pool_node_at(&tasks->pool, (uint32_t) i);
    /* A producer takes an index before it publishes the index's chunk. */
    CHECK(node != NULL || !quiescent,
          "node %" PRIu64 " below bump has no chunk", i);
    if (node == NULL)
      continue;
    word = atomic_load_explicit(&node->state, memory_order_acquire);
    tally.held += node->held;
    /* A retired node (no generation left, task-pool.c) is FREE with
     * generation 0, and in no list. */
    tally.free += STATE(word) == T_FREE && GEN(word) != 0;
    CHECK(!node->held || STATE(word) != T_FREE,
          "node %" PRIu64 " is held and free", i);
    CHECK((node->location == AT_POOL) == (node->work != NULL),
          "node %" PRIu64 ": location %u, work %p", i, node->location,
          (void*) node->work);
    switch (node->location) {
    case AT_NONE:
      break;
    case AT_WHEEL:
      CHECK(uvtw__task_owns(&node->timer),
            "node %" PRIu64 ": a timer not the tasks'", i);
      /* A cancelled task whose timer the pass took out waits there for
       * its notice (uvtw__task_fire). */
      CHECK(node->timer.link_.next != NULL || STATE(word) == T_CANCELLED,
            "node %" PRIu64 " in the wheel, its timer is not (state %u)", i,
            STATE(word));
      tally.at_wheel += node->timer.link_.next != NULL;
      break;
    case AT_POOL:
      tally.at_pool++;
      break;
    case AT_FINAL_LIST:
      CHECK(STATE(word) == T_CLOSED,
            "node %" PRIu64 " owed a final call in state %u", i, STATE(word));
      tally.at_final++;
      break;
    default:
      CHECK(0, "node %" PRIu64 ": location %u", i, node->location);
    }
  }
  CHECK(tally.held == tasks->held, "held %" PRIu64 ", nodes held %" PRIu64,
        tasks->held, tally.held);
  filed = atomic_load_explicit(&tasks->filed, memory_order_relaxed);
  CHECK(tally.at_wheel == filed,
        "filed %" PRIu64 ", nodes in the wheel %" PRIu64, filed,
        tally.at_wheel);
  CHECK(tally.at_pool == list_length(&tasks->in_pool),
        "threadpool list %" PRIu64 ", nodes on the pool %" PRIu64,
        list_length(&tasks->in_pool), tally.at_pool);
  CHECK(tally.at_final == list_length(&tasks->final),
        "final list %" PRIu64 ", nodes owed a final call %" PRIu64,
        list_length(&tasks->final), tally.at_final);
  CHECK(tasks->holds_loop == uvtw__tasks_hold_wanted(wheel) || wheel->closing,
        "holds_loop %d with held %" PRIu64 ", backlog %d", tasks->holds_loop,
        tasks->held, tasks->backlog);
  if (!quiescent)
    return 0;

  cached = 0;
  for (rec = atomic_load_explicit(&tasks->records, memory_order_acquire);
       rec != NULL; rec = rec->next)
    cached += rec->ncache;
  CHECK(tally.free == stacked_free(&tasks->pool) + cached + tasks->pool.nfreed,
        "free nodes %" PRIu64 ": on the stack %" PRIu64 ", in caches %" PRIu64
        ", in the loop's batch %u",
        tally.free, stacked_free(&tasks->pool), cached, tasks->pool.nfreed);
  if (tasks->max_tasks != 0)
    CHECK(atomic_load_explicit(&tasks->reserved, memory_order_relaxed) ==
              uvtw__records_live(tasks, NULL),
          "places taken %" PRIu64 ", live tasks %" PRIu64,
          atomic_load_explicit(&tasks->reserved, memory_order_relaxed),
          uvtw__records_live(tasks, NULL));
  return 0;
}
