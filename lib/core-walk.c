/* SPDX-License-Identifier: MIT */
/* Every timer of the core, visited (uvtw__core_walk) or let go at once
 * (uvtw__core_clear): the traversals of the whole wheel, which no start,
 * stop or pass makes. */

#include "core.h"

#include <string.h>


static void walk_list(struct uvtw__link* head,
                      uint64_t limit,
                      void (*fn)(uvtw_timer_t*, void*),
                      void* arg) {
  struct uvtw__link* link;
  struct uvtw__link* next;
  uvtw_timer_t* t;

  for (link = head->next; link != head; link = next) {
    next = link->next; /* fn may move or stop this timer, and only it */
    t = uvtw__timer_of(link);
    if (t->order_ < limit)
      fn(t, arg);
  }
}


void uvtw__core_walk(uvtw__core_t* core,
                     void (*fn)(uvtw_timer_t* timer, void* arg),
                     void* arg) {
  uint64_t limit;
  unsigned s;

  /* A timer that fn restarts gets an order >= limit, so wherever it is
   * re-filed, the walk does not visit it again. */
  limit = core->next_order;
  for (s = 0; s < UVTW__NSLOTS; s++)
    walk_list(&core->slots[s], limit, fn, arg);
  walk_list(&core->overflow, limit, fn, arg);
  walk_list(&core->ready, limit, fn, arg);
  walk_list(&core->due, limit, fn, arg);
}


static void clear_list(struct uvtw__link* head) {
  while (!uvtw__list_empty(head))
    uvtw__list_remove(head->next);
}


void uvtw__core_clear(uvtw__core_t* core) {
  unsigned s;

  for (s = 0; s < UVTW__NSLOTS; s++)
    clear_list(&core->slots[s]);
  memset(core->occupied, 0, sizeof(core->occupied));
  core->l0_words = 0;
  clear_list(&core->overflow);
  core->overflow_min = UVTW__NO_TICK;
  clear_list(&core->ready);
  clear_list(&core->due);
  atomic_store_explicit(&core->active, 0, memory_order_relaxed);
  core->active_ref = 0;
}
