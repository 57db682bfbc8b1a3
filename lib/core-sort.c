/* SPDX-License-Identifier: MIT */
/* The order of a pass: `due` sorted by (deadline, order), libuv's heap
 * order, with a natural merge sort.  The collected lists are almost always
 * one or a few sorted runs (see core.c, "Order"), so this is one linear
 * scan in the common case. */

#include "core.h"


/* Natural merge sort of a NULL-terminated singly linked list by
 * (deadline, order).  Orders are unique, so stability is moot. */
static struct uvtw__link* cut_run(struct uvtw__link* run,
                                  struct uvtw__link** rest) {
  struct uvtw__link* p;

  p = run;
  while (p->next != NULL && !uvtw__core_before(p->next, p))
    p = p->next;
  *rest = p->next;
  p->next = NULL;
  return run;
}


static struct uvtw__link* merge(struct uvtw__link* a,
                                struct uvtw__link* b,
                                struct uvtw__link*** tail) {
  struct uvtw__link* head;
  struct uvtw__link** link;

  link = &head;
  while (a != NULL && b != NULL) {
    if (uvtw__core_before(b, a)) {
      *link = b;
      b = b->next;
    } else {
      *link = a;
      a = a->next;
    }
    link = &(*link)->next;
  }
  *link = a != NULL ? a : b;
  while (*link != NULL)
    link = &(*link)->next;
  *tail = link;
  return head;
}


void uvtw__core_sort_due(uvtw__core_t* core) {
  struct uvtw__link* head;
  struct uvtw__link* list;
  struct uvtw__link* rest;
  struct uvtw__link* a;
  struct uvtw__link* b;
  struct uvtw__link** tail;
  struct uvtw__link** next_tail;
  struct uvtw__link* p;
  struct uvtw__link* prev;
  int runs;

  head = &core->due;
  for (p = head->next; p != head && p->next != head; p = p->next)
    if (uvtw__core_before(p->next, p))
      break;
  if (p == head || p->next == head)
    return; /* already sorted: the common case */

  head->prev->next = NULL;
  list = head->next;
  do {
    struct uvtw__link* merged = NULL;
    tail = &merged;
    runs = 0;
    while (list != NULL) {
      a = cut_run(list, &rest);
      b = rest != NULL ? cut_run(rest, &list) : (list = NULL);
      *tail = merge(a, b, &next_tail);
      tail = next_tail;
      runs++;
    }
    list = merged;
  } while (runs > 1);

  prev = head;
  for (p = list; p != NULL; p = p->next) {
    p->prev = prev;
    prev->next = p;
    prev = p;
  }
  prev->next = head;
  head->prev = prev;
}
