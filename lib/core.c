/* SPDX-License-Identifier: MIT */
/* The hierarchical timing wheel.
 *
 * Six levels, each a ring.  Times inside are ticks: a deadline in ms is
 * rounded UP to a tick (e = ceil(deadline / tick_ms)), so nothing fires
 * early.  With tick_ms = 1 (multiply by tick_ms for other ticks):
 *
 *   level  ring   slot granularity  a start files here if e - now is
 *     0    2048        1 ms             1 ..  2047 ms
 *     1     128      1.0 s           2048 ms .. 65.5 s
 *     2     128     65.5 s             65.5 s .. 69.9 min
 *     3     128     69.9 min           69.9 min .. 3.1 days
 *     4     128      3.1 days           3.1 days .. 199 days
 *     5     128    199 days           199 days .. 34.8 years (2^40 ticks)
 *   overflow list: anything later, up to UINT64_MAX
 *
 * Placement.  With n = now_tick and d = e - n > 0: d < 2048 goes to level
 * 0, slot e mod 2048; otherwise level l = the first whose granularity
 * times 64 exceeds d (by d's bit length), slot (e >> shift(l)) mod 128.
 * So every timer due within 2047 ticks of now expires from level 0 without
 * ever being moved, whatever the phase of the clock: short timeouts never
 * cascade.  Each level's ring is twice what its placement uses, so
 * invariants (uvtw__core_check verifies them all):
 *   - a level-0 slot holds timers of one tick, in (n, n + 2047]: slot r's
 *     tick is the one in that window that is r mod 2048;
 *   - an upper slot holds timers of one block (2^shift(l) ticks), the
 *     block after n's at that level or up to 127 blocks later; slot r's
 *     block is the one in that window that is r mod 128;
 *   - a slot must be collected when n enters its block (for level 0: its
 *     tick); then each timer either expires or is re-filed lower
 *     ("cascade");
 *   - advancing n over any gap visits each occupied slot once at most: the
 *     work is bounded by the 42 bitmap words and the occupied lists, not
 *     by the length of the gap.
 * A cascade (and a pre-cascade) re-files into the lowest level whose ring
 * the timer fits, which may be more than a start's placement allows.
 *
 * Pre-cascade.  The next block of level l >= 1 fits in level l - 1 for as
 * long as n is in the block before it (the lower ring is twice as long as
 * one block of this level).  So each pass moves a share of that slot's
 * timers down: the share of the time until the block begins that elapsed
 * since the last pass (count * elapsed / (remaining + elapsed), rounded up),
 * and the driver is woken for it when the slot holds more than
 * UVTW__PRECASCADE_CHUNK timers, about every CHUNK timers' worth of time.
 * A slot of a million timers is thus re-filed ~1,024 at a time over the
 * second (at level 1) before its block, not all in the one iteration that
 * enters it.  What is left when the block begins is collected then, as
 * without a pre-cascade.  Only levels that held a slot of more than CHUNK
 * timers (big_levels) pre-cascade: a smaller slot is re-filed whole when
 * its block begins, no more work than one pre-cascade step.
 *
 * Lazy re-arm.  Restarting a timer that waits in a slot to a later deadline
 * only rewrites its deadline: its slot's block starts at or before the old
 * expiry, hence before the new one, so the slot is collected in time and the
 * timer re-filed then.  The idle-timeout pattern (push the deadline on every
 * read) thus touches only the timer.  Invariant: every timer in a slot has
 * e > n and e >= the first tick of its slot's block.
 *
 * Order.  A pass collects every expired timer into `due` and sorts it by
 * (deadline, start_id), libuv's heap order, with a natural merge sort: the
 * collected lists are almost always one or a few sorted runs, so this is one
 * linear scan in the common case.  Lazy re-arms and cascades may leave
 * slots out of order; the sort is what makes the order exact.
 */

#include "core.h"

#include <string.h>



void uvtw__core_init(uvtw__core_t* core, uint64_t tick_ms, uint64_t now_ms) {
  unsigned s;

  UVTW__ASSERT(tick_ms >= 1);
  memset(core, 0, sizeof(*core));
  core->tick_ms = tick_ms;
  core->precascade_chunk = UVTW__PRECASCADE_CHUNK;
  core->now_tick = now_ms / tick_ms;
  core->collected_ms = core->now_tick * tick_ms;
  for (s = 0; s < UVTW__NSLOTS; s++)
    uvtw__list_init(&core->slots[s]);
  uvtw__list_init(&core->overflow);
  uvtw__list_init(&core->ready);
  uvtw__list_init(&core->due);
}


/* n's block at `level`. */
static uint64_t block_of(uint64_t tick, unsigned level) {
  return tick >> uvtw__level_shift(level);
}


/* The first occupied slot of `level` in ring order from ring position p
 * (0 <= p < ring size), as a flat index; UVTW__NSLOTS if the level is
 * empty. */
static unsigned ring_first(const uvtw__core_t* core,
                           unsigned level,
                           unsigned p) {
  const uint64_t* occupied;
  uint64_t word;
  uint64_t summary;
  unsigned base;
  unsigned w0;
  unsigned w;
  unsigned i;

  base = uvtw__slot_base(level) / UVTW__WORD_BITS;
  occupied = &core->occupied[base];
  w0 = p / UVTW__WORD_BITS;
  word = occupied[w0] & (~(uint64_t) 0 << (p % UVTW__WORD_BITS));
  if (word != 0)
    return (base + w0) * UVTW__WORD_BITS + __builtin_ctzll(word);
  if (level == 0) {
    /* The other words by the summary: after w0, then from 0 (the wrap). */
    summary = core->l0_words & ~(((uint64_t) 2 << w0) - 1);
    if (summary == 0)
      summary = core->l0_words;
    if (summary == 0)
      return UVTW__NSLOTS;
    w = (unsigned) __builtin_ctzll(summary);
    return w * UVTW__WORD_BITS + __builtin_ctzll(occupied[w]);
  }
  /* UVTW__LN_WORDS is a constant power of two: the modulo is a mask. */
  for (i = 1; i <= UVTW__LN_WORDS; i++) {
    w = (w0 + i) % UVTW__LN_WORDS;
    if (occupied[w] != 0)
      return (base + w) * UVTW__WORD_BITS + __builtin_ctzll(occupied[w]);
  }
  return UVTW__NSLOTS;
}


/* Non-zero if upper level `level` has an occupied slot. */
static int upper_occupied(const uvtw__core_t* core, unsigned level) {
  const uint64_t* occupied;
  uint64_t any;
  unsigned i;

  occupied = &core->occupied[uvtw__slot_base(level) / UVTW__WORD_BITS];
  any = 0;
  for (i = 0; i < UVTW__LN_WORDS; i++)
    any |= occupied[i];
  return any != 0;
}


/* The first tick of the block after n's at `level`: no slot of the level,
 * nor of any higher one, holds anything earlier. */
static uint64_t next_block_start(const uvtw__core_t* core, unsigned level) {
  return (block_of(core->now_tick, level) + 1) << uvtw__level_shift(level);
}


/* Level 0 slot s's tick: the one in (n, n + L0_SLOTS] that is s mod the
 * ring. */
static uint64_t l0_tick(const uvtw__core_t* core, unsigned s) {
  return core->now_tick + 1 +
         ((s - (core->now_tick + 1)) & (UVTW__L0_SLOTS - 1));
}


/* An upper slot's block, likewise. */
static uint64_t upper_block(const uvtw__core_t* core,
                            unsigned level,
                            unsigned s) {
  uint64_t nb;

  nb = block_of(core->now_tick, level);
  return nb + 1 + ((s - uvtw__slot_base(level) - (nb + 1)) &
                   uvtw__ring_mask(level));
}


/* The first occupied slot of `level` (UVTW__NSLOTS if none) and the lower
 * bound on its timers' expiry. */
static unsigned level_first(const uvtw__core_t* core,
                            unsigned level,
                            uint64_t* tick) {
  unsigned s;

  if (level != 0 && !upper_occupied(core, level))
    return UVTW__NSLOTS;
  s = ring_first(core, level,
                 (unsigned) ((block_of(core->now_tick, level) + 1) &
                             uvtw__ring_mask(level)));
  if (s != UVTW__NSLOTS)
    *tick = level == 0 ? l0_tick(core, s)
                       : core->slot_min[uvtw__upper_index(s)];
  return s;
}


/* The slot that holds level l's next block (the one after n's), for the
 * pre-cascade. */
static unsigned next_block_slot(const uvtw__core_t* core, unsigned level) {
  return uvtw__core_slot(level, (block_of(core->now_tick, level) + 1)
                                    << uvtw__level_shift(level));
}


static int slot_occupied(const uvtw__core_t* core, unsigned s) {
  return (core->occupied[s / UVTW__WORD_BITS] >> (s % UVTW__WORD_BITS)) & 1;
}


/* When the pre-cascade of a big next block must run next: about every
 * CHUNK timers' share of the time until the block begins. */
static uint64_t precascade_tick(const uvtw__core_t* core) {
  uint64_t best;
  uint64_t left;
  uint64_t step;
  uint32_t count;
  unsigned level;
  unsigned s;

  best = UVTW__NO_TICK;
  if (core->big_levels == 0)
    return best; /* the common case: no crowded slot anywhere */
  for (level = 1; level < UVTW__LEVELS; level++) {
    if (!(core->big_levels & (1u << level)))
      continue;
    s = next_block_slot(core, level);
    if (!slot_occupied(core, s))
      continue;
    count = core->count[uvtw__upper_index(s)];
    if (count <= core->precascade_chunk)
      continue;
    left = ((block_of(core->now_tick, level) + 1) << uvtw__level_shift(level)) -
           core->now_tick;
    step = left / ((count + core->precascade_chunk - 1) /
                   core->precascade_chunk);
    if (step == 0)
      step = 1;
    if (core->now_tick + step < best)
      best = core->now_tick + step;
  }
  return best;
}


/* Lowers `next` to the wake-ups that are not slots: the overflow list's
 * re-examination and a pre-cascade step. */
static uint64_t next_beyond_slots(const uvtw__core_t* core, uint64_t next) {
  uint64_t tick;
  uint64_t top;

  if (!uvtw__list_empty(&core->overflow)) {
    /* Overflow timers are re-examined when n enters the next top-level
     * block.  None exists while n is in the last one, so no wrap. */
    top = block_of(core->now_tick, UVTW__LEVELS - 1) + 1;
    UVTW__ASSERT(top < (uint64_t) 1 << (64 - UVTW__TOP_SHIFT));
    top <<= UVTW__TOP_SHIFT;
    if (top < next)
      next = top;
  }
  tick = precascade_tick(core);
  return tick < next ? tick : next;
}


/* The earliest slot over all levels and its tick, or UVTW__NSLOTS.  The
 * rings overlap in time (a timer filed long ago at level 1 may be due
 * before one just filed at level 0): the minimum over all levels. */
static unsigned earliest_slot(const uvtw__core_t* core,
                              unsigned* level_out,
                              uint64_t* tick_out) {
  uint64_t tick;
  unsigned best;
  unsigned level;
  unsigned s;

  best = UVTW__NSLOTS;
  *tick_out = UVTW__NO_TICK;
  for (level = 0; level < UVTW__LEVELS; level++) {
    if (level != 0 && next_block_start(core, level) >= *tick_out)
      break; /* this level and those above hold nothing earlier */
    s = level_first(core, level, &tick);
    if (s != UVTW__NSLOTS && tick < *tick_out) {
      best = s;
      *tick_out = tick;
      *level_out = level;
    }
  }
  return best;
}


uint64_t uvtw__core_next_tick(const uvtw__core_t* core) {
  uint64_t next;
  unsigned level;

  if (!uvtw__list_empty(&core->ready) || !uvtw__list_empty(&core->due))
    return core->now_tick;
  earliest_slot(core, &level, &next);
  return next_beyond_slots(core, next);
}


/* Files t where its expiry belongs: the lowest level whose ring holds it
 * (for cascades, which may place lower than a start would), `ready` if it
 * is due. */
static void file_lowest(uvtw__core_t* core, uvtw_timer_t* t) {
  uint64_t e;
  unsigned level;
  unsigned s;

  e = uvtw__core_tick_of(core, t->deadline_);
  if (e <= core->now_tick) {
    uvtw__list_append(&core->ready, &t->link_);
    return;
  }
  for (level = 0; level < UVTW__LEVELS; level++) {
    if (block_of(e, level) - block_of(core->now_tick, level) <=
        uvtw__ring_mask(level)) {
      s = uvtw__core_slot(level, e);
      uvtw__core_occupy(core, s, e);
      uvtw__list_append(&core->slots[s], &t->link_);
      return;
    }
  }
  uvtw__list_append(&core->overflow, &t->link_);
}


uint64_t uvtw__core_tighten(uvtw__core_t* core, int* crowded) {
  struct uvtw__link* head;
  struct uvtw__link* link;
  struct uvtw__link* next;
  uvtw_timer_t* t;
  uint64_t block_end;
  uint64_t first;
  uint64_t min_e;
  uint64_t e;
  unsigned level;
  unsigned budget;
  unsigned count;
  unsigned s;
  int beyond;

  *crowded = 0;
  if (!uvtw__list_empty(&core->ready) || !uvtw__list_empty(&core->due))
    return core->now_tick; /* due work first; nothing to tighten for it */
  level = 0;
  for (budget = UVTW__TIGHTEN_MAX;;) {
    s = earliest_slot(core, &level, &first);
    if (s == UVTW__NSLOTS)
      return next_beyond_slots(core, first);
    head = &core->slots[s];
    /* A timer lazily re-armed past the slot's block would make the wheel
     * wake at this block only to re-file it: re-file it now instead. */
    block_end = level == 0 ? first
                           : (upper_block(core, level, s)
                              << uvtw__level_shift(level)) |
                                 (((uint64_t) 1 << uvtw__level_shift(level)) -
                                  1);
    /* One walk finds the minimum and whether any timer left the block;
     * it stops at once in a large slot, which keeps its early minimum. */
    min_e = UVTW__NO_TICK;
    count = 0;
    beyond = 0;
    for (link = head->next; link != head; link = link->next) {
      if (++count > budget) {
        *crowded = 1;
        return next_beyond_slots(core, first);
      }
      e = uvtw__core_tick_of(core, uvtw__timer_of(link)->deadline_);
      if (e > block_end)
        beyond = 1;
      else if (e < min_e)
        min_e = e;
    }
    budget -= count;
    for (link = head->next; beyond && link != head; link = next) {
      next = link->next;
      t = uvtw__timer_of(link);
      if (uvtw__core_tick_of(core, t->deadline_) > block_end) {
        uvtw__core_unlink(core, t);
        file_lowest(core, t);
        core->cascades++;
      }
    }
    if (min_e != UVTW__NO_TICK) {
      if (level != 0)
        core->slot_min[uvtw__upper_index(s)] = min_e;
      if (min_e == first) /* still the earliest slot, at the same tick */
        return next_beyond_slots(core, first);
      return uvtw__core_next_tick(core); /* another slot may come first */
    }
    /* The slot emptied: look at the next one, within the budget. */
  }
}


/* Natural merge sort of a NULL-terminated singly linked list by
 * (deadline, start_id).  Start ids are unique, so stability is moot. */
static int before(const struct uvtw__link* a, const struct uvtw__link* b) {
  const uvtw_timer_t* ta = uvtw__container_of(a, uvtw_timer_t, link_);
  const uvtw_timer_t* tb = uvtw__container_of(b, uvtw_timer_t, link_);

  if (ta->deadline_ != tb->deadline_)
    return ta->deadline_ < tb->deadline_;
  return ta->start_id_ < tb->start_id_;
}


static struct uvtw__link* cut_run(struct uvtw__link* run,
                                  struct uvtw__link** rest) {
  struct uvtw__link* p;

  p = run;
  while (p->next != NULL && !before(p->next, p))
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
    if (before(b, a)) {
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


static void sort_due(uvtw__core_t* core) {
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
    if (before(p->next, p))
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


/* Moves the occupied slots with flat index lo..hi (within one level) to
 * `to`, in index order. */
static void take_slots(uvtw__core_t* core,
                       struct uvtw__link* to,
                       unsigned lo,
                       unsigned hi) {
  uint64_t mask;
  uint64_t take;
  unsigned w;
  unsigned s;

  for (w = lo / UVTW__WORD_BITS; w <= hi / UVTW__WORD_BITS; w++) {
    mask = ~(uint64_t) 0;
    if (w == lo / UVTW__WORD_BITS)
      mask &= ~(uint64_t) 0 << (lo % UVTW__WORD_BITS);
    if (w == hi / UVTW__WORD_BITS)
      mask &= ~(uint64_t) 0 >> (UVTW__WORD_BITS - 1 - hi % UVTW__WORD_BITS);
    take = core->occupied[w] & mask;
    for (; take != 0; take &= take - 1) {
      s = w * UVTW__WORD_BITS + (unsigned) __builtin_ctzll(take);
      uvtw__core_clear_bit(core, s);
      uvtw__list_splice(to, &core->slots[s]);
    }
  }
}


/* Moves level l's slots of blocks first..last (in ring order, at most one
 * ring's worth) to `to`. */
static void take_blocks(uvtw__core_t* core,
                        struct uvtw__link* to,
                        unsigned level,
                        uint64_t first,
                        uint64_t last) {
  unsigned mask;
  unsigned base;
  unsigned p1;
  unsigned p2;

  mask = uvtw__ring_mask(level);
  base = uvtw__slot_base(level);
  if (last - first >= mask) {
    p1 = (unsigned) (first & mask); /* the whole ring, in time order */
    p2 = (p1 + mask) & mask;
  } else {
    p1 = (unsigned) (first & mask);
    p2 = (unsigned) (last & mask);
  }
  if (p1 <= p2) {
    take_slots(core, to, base + p1, base + p2);
  } else {
    take_slots(core, to, base + p1, base + mask);
    take_slots(core, to, base, base + p2);
  }
}


/* Advances now_tick to n2, moving every slot that n2 reached: level 0's to
 * `l0_to`, the others' (and the overflow list when the top block changed)
 * to `todo`. */
static void advance(uvtw__core_t* core,
                    uint64_t n2,
                    struct uvtw__link* l0_to,
                    struct uvtw__link* todo) {
  uint64_t nb;
  uint64_t nb2;
  unsigned level;
  uint64_t n;

  n = core->now_tick;
  UVTW__ASSERT(n2 > n);
  for (level = 0; level < UVTW__LEVELS; level++) {
    nb = block_of(n, level);
    nb2 = block_of(n2, level);
    if (nb == nb2)
      break; /* so do all higher levels */
    take_blocks(core, level == 0 ? l0_to : todo, level, nb + 1, nb2);
  }
  if (block_of(n, UVTW__LEVELS - 1) != block_of(n2, UVTW__LEVELS - 1))
    uvtw__list_splice(todo, &core->overflow);
  core->now_tick = n2;
  core->collected_ms = n2 * core->tick_ms;
}


/* Expires (to `due`) or re-files every timer of `todo`. */
static void cascade(uvtw__core_t* core,
                    struct uvtw__link* todo,
                    struct uvtw__link* due) {
  struct uvtw__link* link;
  uvtw_timer_t* t;

  while (!uvtw__list_empty(todo)) {
    link = todo->next;
    uvtw__list_remove(link);
    t = uvtw__timer_of(link);
    if (t->deadline_ <= core->collected_ms) {
      uvtw__list_append(due, link);
    } else {
      file_lowest(core, t);
      core->cascades++;
    }
  }
}


/* The pre-cascade step of a pass that advanced by `elapsed` ticks: moves
 * each upper level's next block down by its share (see the top). */
uint64_t uvtw__mul_div_ceil(uint32_t a, uint64_t b, uint64_t d) {
  uint64_t hi;
  uint64_t q;
  uint64_t r;

  UVTW__ASSERT(b < d && d <= (uint64_t) 1 << 47);
  /* a * b can take 66 bits, and there is no 128-bit integer on 32-bit
   * targets (nor in MSVC): with a = ah * 2^16 + al, a * b / d is
   * (ah * b / d) * 2^16 plus the rest, ((ah * b % d) * 2^16 + al * b) / d,
   * and d <= 2^47 keeps every term below 2^64. */
  hi = (uint64_t) (a >> 16) * b;
  q = hi / d;
  r = hi % d;
  return (q << 16) + ((r << 16) + (uint64_t) (a & 0xffff) * b + d - 1) / d;
}


static void precascade(uvtw__core_t* core, uint64_t elapsed) {
  struct uvtw__link* head;
  uvtw_timer_t* t;
  uint64_t left;
  uint64_t quota;
  uint32_t* count;
  uint32_t levels;
  unsigned level;
  unsigned s;

  /* Only levels that held a crowded slot: every slot of another level
   * holds at most precascade_chunk timers, which the pass that enters its
   * block re-files at once, as one pre-cascade step would. */
  for (levels = core->big_levels; levels != 0; levels &= levels - 1) {
    level = (unsigned) __builtin_ctz(levels);
    if (!upper_occupied(core, level)) {
      core->big_levels &= ~(1u << level);
      continue;
    }
    s = next_block_slot(core, level);
    if (!slot_occupied(core, s))
      continue;
    count = &core->count[uvtw__upper_index(s)];
    left = ((block_of(core->now_tick, level) + 1) << uvtw__level_shift(level)) -
           core->now_tick;
    /* count * elapsed / (left + elapsed), rounded up; elapsed < left <=
     * 2^34 here and count < 2^32, so 64 bits do not overflow while
     * elapsed < 2^32, and uvtw__mul_div_ceil's domain holds beyond. */
    if (elapsed >= left)
      quota = *count;
    else if (elapsed <= UINT32_MAX) /* the common case: 64 bits suffice */
      quota = ((uint64_t) *count * elapsed + left + elapsed - 1) /
              (left + elapsed);
    else
      quota = uvtw__mul_div_ceil(*count, elapsed, left + elapsed);
    head = &core->slots[s];
    for (; quota > 0 && !uvtw__list_empty(head); quota--) {
      t = uvtw__timer_of(head->next);
      uvtw__list_remove(&t->link_);
      UVTW__ASSERT(*count > 0);
      --*count;
      /* Its expiry is in the next block, or later if lazily re-armed: never
       * due, and never back in this slot. */
      file_lowest(core, t);
      core->cascades++;
    }
    if (uvtw__list_empty(head))
      uvtw__core_clear_bit(core, s);
  }
}


void uvtw__core_expire(uvtw__core_t* core, uint64_t now_ms) {
  struct uvtw__link todo;
  struct uvtw__link* link;
  uvtw_timer_t* t;
  uint64_t n;
  uint64_t n2;
  unsigned s;

  uvtw__list_init(&todo);
  /* Timers found ready earlier fire first: their expiry is <= n, before
   * anything in a slot. */
  uvtw__list_splice(&core->due, &core->ready);
  n = core->now_tick;
  n2 = now_ms / core->tick_ms;
  if (n2 == n + 1 && (n2 & (((uint64_t) 1 << uvtw__level_shift(1)) - 1))) {
    /* The common pass, one tick on inside a level-1 block: one level-0
     * slot, nothing above.  (As advance() does, without its loop.) */
    s = (unsigned) (n2 & (UVTW__L0_SLOTS - 1));
    if (slot_occupied(core, s)) {
      uvtw__core_clear_bit(core, s);
      uvtw__list_splice(&core->due, &core->slots[s]);
    }
    core->now_tick = n2;
    core->collected_ms = n2 * core->tick_ms;
    if (core->big_levels != 0)
      precascade(core, 1);
  } else if (n2 > n) {
    /* A level-0 slot holds one tick, so its timers go straight to `due`
     * (one walk less over them), bar lazily re-armed ones, peeled off
     * below.  Higher levels cascade: each timer expires or moves down. */
    advance(core, n2, &core->due, &todo);
    cascade(core, &todo, &core->due);
    if (core->big_levels != 0)
      precascade(core, n2 - n);
  }
  sort_due(core);
  /* Sorted by deadline, timers re-armed past now (lazily, in a level-0
   * slot) are all at the end: cut that tail off, then re-file it. */
  for (link = core->due.prev; link != &core->due; link = link->prev)
    if (uvtw__timer_of(link)->deadline_ <= core->collected_ms)
      break;
  if (link->next != &core->due) {
    todo.next = link->next;
    todo.prev = core->due.prev;
    todo.next->prev = &todo;
    todo.prev->next = &todo;
    link->next = &core->due;
    core->due.prev = link;
    while (!uvtw__list_empty(&todo)) {
      t = uvtw__timer_of(todo.next);
      uvtw__list_remove(&t->link_);
      uvtw__core_file(core, t, uvtw__core_tick_of(core, t->deadline_));
      core->cascades++;
    }
  }
}


void uvtw__core_catch_up(uvtw__core_t* core, uint64_t now_ms) {
  struct uvtw__link todo;
  uint64_t n2;

  n2 = now_ms / core->tick_ms;
  if (n2 <= core->now_tick)
    return;
  uvtw__list_init(&todo);
  advance(core, n2, &todo, &todo);
  cascade(core, &todo, &core->ready);
}


uvtw_timer_t* uvtw__core_pop_due(uvtw__core_t* core, uint64_t now_ms) {
  uvtw_timer_t* t;
  uint64_t deadline;

  if (uvtw__list_empty(&core->due))
    return NULL;
  t = uvtw__timer_of(core->due.next);
  /* Never early, and linked where `due` says: a broken list or an early
   * timer here would run a callback libuv would not run. */
  UVTW__ASSERT(t->link_.next->prev == &t->link_ &&
               t->deadline_ <= core->collected_ms);
  uvtw__list_remove(&t->link_);
  if (t->repeat_ != 0) {
    /* libuv's rule: the next deadline counts from the loop time at
     * dispatch, so an overdue timer fires once, not once per period. */
    deadline = uvtw__sat_add(now_ms, t->repeat_);
    t->start_id_ = core->next_start_id++;
    t->deadline_ = deadline;
    uvtw__core_file(core, t, uvtw__core_tick_of(core, deadline));
  } else {
    uvtw__core_count(core, t, -1);
  }
  return t;
}


void uvtw__core_defer(uvtw__core_t* core, uint64_t first_id) {
  struct uvtw__link* link;
  struct uvtw__link* next;

  for (link = core->due.next; link != &core->due; link = next) {
    next = link->next;
    if (uvtw__timer_of(link)->start_id_ >= first_id) {
      uvtw__list_remove(link);
      uvtw__list_append(&core->ready, link);
    }
  }
}


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
    if (t->start_id_ < limit)
      fn(t, arg);
  }
}


void uvtw__core_walk(uvtw__core_t* core,
                     void (*fn)(uvtw_timer_t* timer, void* arg),
                     void* arg) {
  uint64_t limit;
  unsigned s;

  /* A timer that fn restarts gets a start_id >= limit, so wherever it is
   * re-filed, the walk does not visit it again. */
  limit = core->next_start_id;
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
  clear_list(&core->ready);
  clear_list(&core->due);
  atomic_store_explicit(&core->active, 0, memory_order_relaxed);
  core->active_ref = 0;
}


/* ---- uvtw__core_check ------------------------------------------------ */

#define CHECK(cond, ...)                                                      \
  do {                                                                        \
    if (!(cond)) {                                                            \
      if (out != NULL) {                                                      \
        fprintf(out, "uvtw__core_check: %s: ", #cond);                       \
        fprintf(out, __VA_ARGS__);                                            \
        fputc('\n', out);                                                     \
      }                                                                       \
      return -1;                                                              \
    }                                                                         \
  } while (0)

typedef struct {
  uint64_t count;
  uint64_t refs;
  uint64_t min_e; /* true minimum expiry tick in slots and overflow */
} tally_t;


/* Checks the links of one list and that each timer's expiry e satisfies
 * lo <= e <= hi; adds to the tally. */
static int check_list(const uvtw__core_t* core,
                      const struct uvtw__link* head,
                      uint64_t lo,
                      uint64_t hi,
                      const char* name,
                      tally_t* tally,
                      FILE* out) {
  const struct uvtw__link* link;
  const uvtw_timer_t* t;
  uint64_t e;

  CHECK(head->next->prev == head, "%s: head links", name);
  for (link = head->next; link != head; link = link->next) {
    CHECK(link->next != NULL && link->next->prev == link, "%s: links", name);
    t = uvtw__container_of(link, uvtw_timer_t, link_);
    e = uvtw__core_tick_of(core, t->deadline_);
    CHECK(e >= lo && e <= hi,
          "%s: expiry %llu outside [%llu, %llu] (now_tick %llu)", name,
          (unsigned long long) e, (unsigned long long) lo,
          (unsigned long long) hi, (unsigned long long) core->now_tick);
    CHECK(t->start_id_ < core->next_start_id, "%s: start_id", name);
    tally->count++;
    tally->refs += !t->unref_;
    if (e < tally->min_e)
      tally->min_e = e;
  }
  return 0;
}


int uvtw__core_check(const uvtw__core_t* core, FILE* out) {
  const struct uvtw__link* head;
  const struct uvtw__link* link;
  tally_t tally;
  uint64_t n;
  uint64_t nb;
  uint64_t block;
  uint64_t first;
  uint64_t last;
  uint64_t next;
  uint64_t length;
  unsigned shift;
  unsigned mask;
  unsigned r;
  unsigned s;
  unsigned u;
  unsigned w;
  uint64_t bits;
  int l;

  n = core->now_tick;
  CHECK(core->collected_ms == n * core->tick_ms, "collected_ms %llu",
        (unsigned long long) core->collected_ms);
  memset(&tally, 0, sizeof(tally));
  tally.min_e = UVTW__NO_TICK;

  for (w = 0; w < UVTW__L0_WORDS; w++)
    CHECK(((core->l0_words >> w) & 1) == (core->occupied[w] != 0),
          "level 0 word summary bit %u", w);
  CHECK((core->l0_words >> (UVTW__L0_WORDS - 1) >> 1) == 0,
        "level 0 word summary beyond level 0");
  /* The bitmaps match the lists: one tight pass over all heads. */
  for (w = 0; w < UVTW__NWORDS; w++) {
    bits = 0;
    for (r = 0; r < UVTW__WORD_BITS; r++) {
      head = &core->slots[w * UVTW__WORD_BITS + r];
      bits |= (uint64_t) (head->next != head) << r;
    }
    CHECK(bits == core->occupied[w],
          "occupancy word %u is %llx, the lists say %llx", w,
          (unsigned long long) core->occupied[w], (unsigned long long) bits);
  }
  for (l = 0; l < UVTW__LEVELS; l++) {
    shift = uvtw__level_shift(l);
    mask = uvtw__ring_mask(l);
    nb = n >> shift;
    for (r = 0; r <= mask; r++) {
      s = uvtw__slot_base(l) + r;
      if (r % UVTW__WORD_BITS == 0 &&
          core->occupied[s / UVTW__WORD_BITS] == 0) {
        r += UVTW__WORD_BITS - 1; /* a whole empty word */
        continue;
      }
      if (!((core->occupied[s / UVTW__WORD_BITS] >> (s % UVTW__WORD_BITS)) &
            1))
        continue;
      head = &core->slots[s];
      /* The slot's block: the one in (nb, nb + ring) that is r mod ring. */
      block = nb + 1 + ((r - (nb + 1)) & mask);
      first = block << shift;
      last = first | (((uint64_t) 1 << shift) - 1);
      CHECK(block > nb && (first >> shift) == block,
            "level %d slot %u: block %llu beyond the range of ticks", l, r,
            (unsigned long long) block);
      if (l == 0) {
        CHECK(check_list(core, head, first, UVTW__NO_TICK, "slot", &tally,
                         out) == 0,
              "level 0 slot %u (tick %llu)", r, (unsigned long long) first);
        continue;
      }
      u = uvtw__upper_index(s);
      CHECK(core->slot_min[u] >= first && core->slot_min[u] <= last,
            "level %d slot %u: slot_min %llu outside its block [%llu, %llu]",
            l, r, (unsigned long long) core->slot_min[u],
            (unsigned long long) first, (unsigned long long) last);
      CHECK(check_list(core, head, core->slot_min[u], UVTW__NO_TICK, "slot",
                       &tally, out) == 0,
            "level %d slot %u", l, r);
      length = 0;
      for (link = head->next; link != head; link = link->next)
        length++;
      CHECK(core->count[u] >= length, "level %d slot %u: count %u < %llu", l,
            r, core->count[u], (unsigned long long) length);
    }
  }
  /* Overflow timers belong to a later top-level block than n's. */
  block = (n >> UVTW__TOP_SHIFT) + 1;
  CHECK(uvtw__list_empty(&core->overflow) ||
            block < (uint64_t) 1 << (64 - UVTW__TOP_SHIFT),
        "overflow timers in the last top-level block");
  CHECK(check_list(core, &core->overflow, block << UVTW__TOP_SHIFT,
                   UVTW__NO_TICK, "overflow", &tally, out) == 0,
        "overflow");
  /* Nothing is due early: ready and due hold only expired timers. */
  first = tally.min_e;
  CHECK(check_list(core, &core->ready, 0, n, "ready", &tally, out) == 0,
        "ready");
  CHECK(check_list(core, &core->due, 0, n, "due", &tally, out) == 0, "due");
  tally.min_e = first;
  for (link = core->due.next; link != &core->due && link->next != &core->due;
       link = link->next)
    CHECK(before(link, link->next), "due list out of order");

  CHECK(tally.count == atomic_load_explicit(&core->active,
                                            memory_order_relaxed),
        "active %llu, counted %llu",
        (unsigned long long) atomic_load_explicit(&core->active,
                                                  memory_order_relaxed),
        (unsigned long long) tally.count);
  CHECK(tally.refs == core->active_ref, "active_ref %llu, counted %llu",
        (unsigned long long) core->active_ref,
        (unsigned long long) tally.refs);

  /* The next wake-up is never later than the true minimum. */
  next = uvtw__core_next_tick(core);
  if (!uvtw__list_empty(&core->ready) || !uvtw__list_empty(&core->due))
    CHECK(next <= n, "ready work but next wake-up %llu",
          (unsigned long long) next);
  CHECK(next <= tally.min_e, "next wake-up %llu after the minimum %llu",
        (unsigned long long) next, (unsigned long long) tally.min_e);
  CHECK(tally.count != 0 || next == UVTW__NO_TICK,
        "empty wheel wakes at %llu", (unsigned long long) next);
  return 0;
}
