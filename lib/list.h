/* SPDX-License-Identifier: MIT */
/* Circular, doubly-linked intrusive lists with a sentinel head, as typed
 * static inline functions.  An unlinked node has next == NULL, which is how
 * a timer says it is inactive. */

#ifndef UVTW_LIST_H
#define UVTW_LIST_H

#include <stddef.h>

#include "uvtw.h"

#define uvtw__container_of(ptr, type, member)                                  \
 ((type*) ((char*) (ptr) -offsetof(type, member)))

static inline void uvtw__list_init(struct uvtw__link* head) {
  head->next = head;
  head->prev = head;
}


static inline int uvtw__list_empty(const struct uvtw__link* head) {
  return head->next == head;
}


static inline void uvtw__list_append(struct uvtw__link* head,
                                     struct uvtw__link* node) {
  struct uvtw__link* prev;

  /* Read once: the stores below may alias it. */
  prev = head->prev;
  node->next = head;
  prev->next = node;
  node->prev = prev;
  head->prev = node;
}


/* Unlinks `node`.  Returns its list's head if the list is now empty, so the
 * caller can tell which slot emptied; NULL otherwise. */
static inline struct uvtw__link* uvtw__list_remove(struct uvtw__link* node) {
  struct uvtw__link* prev;

  prev = node->prev;
  prev->next = node->next;
  node->next->prev = prev;
  node->next = NULL;
  node->prev = NULL;
  return prev->next == prev ? prev : NULL;
}


/* Moves every node of `from`, which is not empty, to `to`, which is;
 * `from` becomes empty.  uvtw__list_splice without its tests, and with
 * each link read once. */
static inline void uvtw__list_move(struct uvtw__link* to,
                                   struct uvtw__link* from) {
  struct uvtw__link* first;
  struct uvtw__link* last;

  first = from->next;
  last = from->prev;
  to->next = first;
  first->prev = to;
  to->prev = last;
  last->next = to;
  from->next = from;
  from->prev = from;
}


/* Moves every node of `from` to the end of `to`; `from` becomes empty. */
static inline void uvtw__list_splice(struct uvtw__link* to,
                                     struct uvtw__link* from) {
  if (uvtw__list_empty(from))
    return;
  from->next->prev = to->prev;
  to->prev->next = from->next;
  from->prev->next = to;
  to->prev = from->prev;
  uvtw__list_init(from);
}

#endif /* UVTW_LIST_H */
