/* SPDX-License-Identifier: MIT */
/* Tightening: making the wheel's next wake-up exact after stops and lazy
 * re-arms left a slot's bound early (uvtw__core_tighten, for the driver's
 * re-arm; uvtw__core_next_due, for uvtw_wheel_next_due).  Apart from
 * core.c, whose level helpers it uses (core.h, "Shared by core.c and
 * core-tighten.c"). */

#include "core.h"


/* What tighten_slot found in a slot. */
enum { SLOT_CROWDED, SLOT_EMPTIED, SLOT_EXACT, SLOT_LATER };

/* Tightens slot s of `level`, the earliest, whose bound is `first`: one
 * walk finds its timers' minimum expiry and whether any was lazily
 * re-armed past the slot's block, then those are re-filed (the wheel
 * would wake at this block only to re-file them).  A slot of more than
 * *budget timers is left alone (SLOT_CROWDED), keeping its early bound;
 * otherwise *budget shrinks by its size.  SLOT_EXACT: the bound was
 * exact; SLOT_LATER: it is now, and later than `first`. */
static int tighten_slot(uvtw__core_t* core,
                        unsigned s,
                        unsigned level,
                        uint64_t first,
                        uint64_t* budget) {
  struct uvtw__link* head;
  struct uvtw__link* link;
  struct uvtw__link* next;
  uvtw_timer_t* t;
  uint64_t block_end;
  uint64_t min_e;
  uint64_t count;
  uint64_t e;
  int beyond;

  head = &core->slots[s];
  block_end = level == 0 ? first
                         : (uvtw__core_upper_block(core, level, s)
                            << uvtw__level_shift(level)) |
                               (((uint64_t) 1 << uvtw__level_shift(level)) - 1);
  min_e = UVTW__NO_TICK;
  count = 0;
  beyond = 0;
  for (link = head->next; link != head; link = link->next) {
    if (++count > *budget)
      return SLOT_CROWDED;
    e = uvtw__core_expiry(core, uvtw__timer_of(link));
    if (e > block_end)
      beyond = 1;
    else if (e < min_e)
      min_e = e;
  }
  *budget -= count;
  for (link = head->next; beyond && link != head; link = next) {
    next = link->next;
    t = uvtw__timer_of(link);
    if (uvtw__core_expiry(core, t) > block_end) {
      uvtw__core_unlink(core, t);
      uvtw__core_refile(core, t);
    }
  }
  if (min_e == UVTW__NO_TICK)
    return SLOT_EMPTIED;
  if (level != 0)
    core->slot_min[uvtw__upper_index(s)] = min_e;
  return min_e == first ? SLOT_EXACT : SLOT_LATER;
}


/* uvtw__core_tighten in general. */
static uint64_t tighten_slow(uvtw__core_t* core) {
  uint64_t budget;
  uint64_t first;
  unsigned level;
  unsigned s;

  if (!uvtw__list_empty(&core->ready) || !uvtw__list_empty(&core->due))
    return core->now_tick; /* due work first; nothing to tighten for it */
  level = 0;
  for (budget = UVTW__TIGHTEN_MAX;;) {
    s = uvtw__core_earliest_slot(core, &level, &first);
    if (s == UVTW__NSLOTS)
      return uvtw__core_next_beyond_slots(core, first);
    switch (tighten_slot(core, s, level, first, &budget)) {
    case SLOT_CROWDED: /* its early bound stays */
    case SLOT_EXACT:   /* still the earliest slot, at the same tick */
      return uvtw__core_next_beyond_slots(core, first);
    case SLOT_LATER: /* another slot may come first */
      return uvtw__core_next_tick(core);
    default: /* the slot emptied: look at the next one, within the budget */
      break;
    }
  }
}


uint64_t uvtw__core_next_due(uvtw__core_t* core) {
  struct uvtw__link* link;
  uint64_t budget;
  uint64_t first;
  uint64_t over;
  uint64_t e;
  unsigned level;
  unsigned s;

  if (!uvtw__list_empty(&core->ready) || !uvtw__list_empty(&core->due))
    return core->now_tick;
  /* The overflow list's bound may be early: make it exact. */
  over = UVTW__NO_TICK;
  for (link = core->overflow.next; link != &core->overflow; link = link->next)
    if ((e = uvtw__core_expiry(core, uvtw__timer_of(link))) < over)
      over = e;
  core->overflow_min = over;
  level = 0;
  budget = UINT64_MAX;
  for (;;) {
    /* Exact still: a re-filing below lowers it to the exact expiry of
     * what it files there. */
    over = core->overflow_min;
    s = uvtw__core_earliest_slot(core, &level, &first);
    if (s == UVTW__NSLOTS || over <= first)
      return over;
    if (tighten_slot(core, s, level, first, &budget) == SLOT_EXACT)
      return first;
  }
}


/* The common case of uvtw__core_tighten, by the same rule in fewer steps:
 * nothing due, no overflow list, no pre-cascade, and level 0's first slot
 * lies in the occupancy word of now_tick + 1, is the earliest slot (no
 * upper slot's block begins before its tick: the test that ends
 * earliest_slot's scan), holds at most UVTW__TIGHTEN_MAX timers, and all
 * of them expire at its tick: their expiry is at least that tick (a slot's
 * invariant), so a deadline at most the tick's last ms says it, without a
 * division.  Then that tick is exact, and it is what tighten_slow would
 * return.  Anything else goes to tighten_slow. */
uint64_t uvtw__core_tighten(uvtw__core_t* core) {
  const struct uvtw__link* head;
  const struct uvtw__link* link;
  uint64_t first;
  uint64_t last_ms;
  uint64_t word;
  unsigned count;
  size_t p;

  if (!uvtw__list_empty(&core->ready) || !uvtw__list_empty(&core->due) ||
      !uvtw__list_empty(&core->overflow) || core->big_levels != 0)
    return tighten_slow(core);
  p = (size_t) ((core->now_tick + 1) & (UVTW__L0_SLOTS - 1));
  word = core->occupied[p / UVTW__WORD_BITS] >> (p % UVTW__WORD_BITS);
  if (word == 0)
    return tighten_slow(core);
  p += (size_t) __builtin_ctzll(word);
  first = core->now_tick + 1 + (uint64_t) __builtin_ctzll(word);
  if (first > uvtw__core_next_block_start(core, 1))
    return tighten_slow(core);
  last_ms = uvtw__core_ms_of(core, first);
  head = &core->slots[p];
  count = 0;
  for (link = head->next; link != head; link = link->next)
    if (++count > UVTW__TIGHTEN_MAX ||
        uvtw__timer_of((struct uvtw__link*) link)->deadline_ > last_ms)
      return tighten_slow(core);
  return first;
}
