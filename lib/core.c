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
 * So every timer due within 2047 ticks of n expires from level 0 without
 * ever being moved, whatever the phase of the clock: short timeouts never
 * cascade.  While the wheel has nothing due the loop's clock runs ahead of
 * n; a start first brings n up to the loop's tick (uvtw__core_catch_up:
 * nothing is due in between, so no timer expires), so a short timer lands
 * in level 0 however long the wheel sat idle.  Each upper level's ring is twice
 * what its placement uses (level 0's is what it uses), so these invariants hold
 * (uvtw__core_check verifies them all):
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
 * since the last pass, or since the block became the next one if that was
 * later (count * since / (remaining + since), rounded up).  The driver is
 * woken for it when the slot holds more than UVTW__PRECASCADE_CHUNK timers:
 * when the block before it begins, then about every CHUNK timers' worth of
 * time (on a wheel with leeway in use, up to 2 * CHUNK, at a multiple of a
 * power of two, so that the steps share the wake-ups of the coalesced
 * expiries).  A slot of a million timers is thus re-filed ~1,024 at a time
 * over the second (at level 1) before its block, not all in the one
 * iteration that enters it, also when the wheel slept until then.  What is
 * left when the block begins is collected then, as without a pre-cascade.
 * Only levels that held a slot of more than CHUNK timers (big_levels)
 * pre-cascade: a smaller slot is re-filed whole when its block begins, no
 * more work than one pre-cascade step.
 *
 * Lazy re-arm.  Restarting a timer that waits in a slot to a later deadline
 * only rewrites its deadline: its slot's block starts at or before the old
 * expiry, hence before the new one, so the slot is collected in time and the
 * timer re-filed then.  The idle-timeout pattern (push the deadline on every
 * read) thus touches only the timer.  Invariant: every timer in a slot has
 * e > n and e >= the first tick of its slot's block.
 *
 * Order.  A pass collects every expired timer into `due` and sorts it by
 * (deadline, order), libuv's heap order, with a natural merge sort: the
 * collected lists are almost always one or a few sorted runs, so this is one
 * linear scan in the common case.  Lazy re-arms and cascades may leave
 * slots out of order; the sort is what makes the order exact.
 */

#include "core.h"

#include <string.h>


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
uint64_t uvtw__core_next_block_start(const uvtw__core_t* core, unsigned level) {
  return (block_of(core->now_tick, level) + 1) << uvtw__level_shift(level);
}


/* Level 0 slot s's tick: the one in (n, n + L0_SLOTS] that is s mod the
 * ring. */
static uint64_t l0_tick(const uvtw__core_t* core, unsigned s) {
  return core->now_tick + 1 +
         ((s - (core->now_tick + 1)) & (UVTW__L0_SLOTS - 1));
}


/* An upper slot's block, likewise. */
uint64_t uvtw__core_upper_block(const uvtw__core_t* core,
                                unsigned level,
                                unsigned s) {
  uint64_t nb;

  nb = block_of(core->now_tick, level);
  return nb + 1 +
         ((s - uvtw__slot_base(level) - (nb + 1)) & uvtw__ring_mask(level));
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
    *tick =
        level == 0 ? l0_tick(core, s) : core->slot_min[uvtw__upper_index(s)];
  return s;
}


static int slot_occupied(const uvtw__core_t* core, unsigned s) {
  return (core->occupied[s / UVTW__WORD_BITS] >> (s % UVTW__WORD_BITS)) & 1;
}


/* The pre-cascade's slot at upper level `level`: the one that holds the
 * next block (the one after n's), UVTW__NSLOTS if it is empty; and the
 * ticks until that block begins. */
static unsigned precascade_slot(const uvtw__core_t* core,
                                unsigned level,
                                uint64_t* left) {
  unsigned s;

  s = uvtw__core_slot(level, uvtw__core_next_block_start(core, level));
  *left = uvtw__core_next_block_start(core, level) - core->now_tick;
  return slot_occupied(core, s) ? s : UVTW__NSLOTS;
}


/* The block of the first slot of upper level `level` after its next block
 * that holds more than precascade_chunk timers; 0 if none (no such block
 * is 0: it lies after n's).  O(occupied slots of the level). */
static uint64_t crowded_block_after_next(const uvtw__core_t* core,
                                         unsigned level) {
  uint64_t block;
  uint64_t from;
  uint64_t next;
  unsigned mask;
  unsigned s;

  mask = uvtw__ring_mask(level);
  next = block_of(core->now_tick, level) + 1;
  for (from = next + 1; from <= next + mask; from = block + 1) {
    s = ring_first(core, level, (unsigned) (from & mask));
    if (s == UVTW__NSLOTS)
      return 0;
    block = uvtw__core_upper_block(core, level, s);
    if (block < from)
      return 0; /* the search wrapped round */
    if (core->count[uvtw__upper_index(s)] > core->precascade_chunk)
      return block;
  }
  return 0;
}


/* When the pre-cascade must run next: for a crowded next block, about
 * every CHUNK timers' share of the time until it begins; for a crowded
 * block after it, when the block before it begins (the pre-cascade's
 * share counts from there), so that the driver wakes for it even while
 * nothing else is due. */
static uint64_t precascade_tick(const uvtw__core_t* core) {
  uint64_t best;
  uint64_t left;
  uint64_t step;
  uint64_t tick;
  uint64_t grid;
  uint64_t count;
  uint64_t block;
  uint32_t levels;
  unsigned level;
  unsigned s;

  best = UVTW__NO_TICK; /* also when no level is big: the common case */
  for (levels = core->big_levels; levels != 0; levels &= levels - 1) {
    level = (unsigned) __builtin_ctz(levels);
    s = precascade_slot(core, level, &left);
    count = s == UVTW__NSLOTS ? 0 : core->count[uvtw__upper_index(s)];
    if (count > core->precascade_chunk) {
      step = left /
             ((count + core->precascade_chunk - 1) / core->precascade_chunk);
      tick = core->now_tick + (step == 0 ? 1 : step);
      /* With leeway in use: at the next multiple of the power of two at or
       * above the step, where coalesced expiries fall, so that the step
       * shares their wake-up (it then moves up to two chunks). */
      if (core->leeway_used && step > 1) {
        grid = (uint64_t) 2 << (63 ^ __builtin_clzll(step - 1));
        tick = (core->now_tick | (grid - 1)) + 1;
      }
    } else {
      block = crowded_block_after_next(core, level);
      if (block == 0)
        continue;
      tick = (block - 1) << uvtw__level_shift(level);
    }
    if (tick < best)
      best = tick;
  }
  return best;
}


/* Lowers `next` to the wake-ups that are not slots: the overflow list's
 * re-examination and a pre-cascade step. */
uint64_t uvtw__core_next_beyond_slots(const uvtw__core_t* core, uint64_t next) {
  uint64_t tick;
  uint64_t top;

  if (!uvtw__list_empty(&core->overflow)) {
    /* Overflow timers are re-examined when n enters the next top-level
     * block.  None exists while n is in the last one, so no wrap. */
    UVTW__ASSERT(block_of(core->now_tick, UVTW__LEVELS - 1) + 1 <
                 (uint64_t) 1 << (64 - UVTW__TOP_SHIFT));
    top = uvtw__core_next_block_start(core, UVTW__LEVELS - 1);
    if (top < next)
      next = top;
  }
  tick = precascade_tick(core);
  return tick < next ? tick : next;
}


/* The earliest slot over all levels and its tick, or UVTW__NSLOTS.  The
 * rings overlap in time (a timer filed long ago at level 1 may be due
 * before one just filed at level 0): the minimum over all levels. */
unsigned uvtw__core_earliest_slot(const uvtw__core_t* core,
                                  unsigned* level_out,
                                  uint64_t* tick_out) {
  uint64_t tick;
  unsigned best;
  unsigned level;
  unsigned s;

  best = UVTW__NSLOTS;
  *tick_out = UVTW__NO_TICK;
  for (level = 0; level < UVTW__LEVELS; level++) {
    if (level != 0 && uvtw__core_next_block_start(core, level) >= *tick_out)
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
  uvtw__core_earliest_slot(core, &level, &next);
  return uvtw__core_next_beyond_slots(core, next);
}


uint64_t uvtw__core_next_expiry(const uvtw__core_t* core) {
  uint64_t next;
  unsigned level;

  if (!uvtw__list_empty(&core->ready) || !uvtw__list_empty(&core->due))
    return core->now_tick;
  uvtw__core_earliest_slot(core, &level, &next);
  if (!uvtw__list_empty(&core->overflow) && core->overflow_min < next)
    next = core->overflow_min;
  return next;
}


/* A cascade: t, just unlinked from a slot, `due` or the overflow list, is
 * filed where its expiry (uvtw__core_expiry) belongs: the lowest level
 * whose ring holds it (which may be lower than a start's placement),
 * `ready` if it is due. */
void uvtw__core_refile(uvtw__core_t* core, uvtw_timer_t* t) {
  uint64_t e;
  unsigned level;
  unsigned s;

  core->cascades++;
  e = uvtw__core_expiry(core, t);
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
  if (e < core->overflow_min)
    core->overflow_min = e;
  uvtw__list_append(&core->overflow, &t->link_);
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
  if (block_of(n, UVTW__LEVELS - 1) != block_of(n2, UVTW__LEVELS - 1)) {
    /* The cascade re-files the list, and the bound with it. */
    uvtw__list_splice(todo, &core->overflow);
    core->overflow_min = UVTW__NO_TICK;
  }
  uvtw__core_set_now(core, n2);
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
    if (t->deadline_ <= core->collected_ms && uvtw__core_expired(core, t))
      uvtw__list_append(due, link);
    else
      uvtw__core_refile(core, t);
  }
}


/* The pre-cascade step of a pass that advanced by `elapsed` ticks: moves
 * each upper level's next block down by its share (see the top). */
static void precascade(uvtw__core_t* core, uint64_t elapsed) {
  struct uvtw__link* head;
  uvtw_timer_t* t;
  uint64_t since;
  uint64_t span;
  uint64_t left;
  uint64_t quota;
  uint64_t* count;
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
    s = precascade_slot(core, level, &left);
    if (s == UVTW__NSLOTS)
      continue;
    /* The share counts from when the block became the next one: a pass
     * that comes after a long sleep moves only what the time since then
     * owes (the driver woke when it became next, precascade_tick). */
    span = (uint64_t) 1 << uvtw__level_shift(level);
    since = elapsed < span - left ? elapsed : span - left;
    if (since == 0)
      continue;
    count = &core->count[uvtw__upper_index(s)];
    /* count * since / (left + since), rounded up: (x - 1) / d + 1 for
     * x >= 1 (count >= 1 for an occupied slot, since >= 1), so that x
     * alone must fit 64 bits: count < 2^32 and since < 2^32.  A pass that
     * moved 2^32 ticks or more into a block of level 4 or 5 (49.7 days at
     * 1 ms: a loop blocked that long, or a virtual clock moved as far), or
     * a slot counted 2^32 or more, takes the whole slot, which is always
     * correct, only not spread out. */
    if (since >= left || since > UINT32_MAX || *count > UINT32_MAX)
      quota = *count;
    else
      quota = (*count * since - 1) / (left + since) + 1;
    head = &core->slots[s];
    for (; quota > 0 && !uvtw__list_empty(head); quota--) {
      t = uvtw__timer_of(head->next);
      uvtw__list_remove(&t->link_);
      UVTW__ASSERT(*count > 0);
      --*count;
      /* Its expiry is in the next block, or later if lazily re-armed: never
       * due, and never back in this slot. */
      uvtw__core_refile(core, t);
    }
    if (uvtw__list_empty(head))
      uvtw__core_clear_bit(core, s);
  }
}


void uvtw__core_catch_up(uvtw__core_t* core, uint64_t now_ms) {
  struct uvtw__link todo;
  uint64_t work;
  uint64_t n2;
  uint64_t n;
  unsigned level;

  if (!uvtw__list_empty(&core->due))
    return; /* inside a pass, whose tick is the loop's */
  /* The first tick at which a slot, the overflow list or the pre-cascade
   * needs the wheel (`ready` holds what is due already, which a later now
   * leaves due). */
  uvtw__core_earliest_slot(core, &level, &work);
  work = uvtw__core_next_beyond_slots(core, work);
  n = core->now_tick;
  n2 = uvtw__core_tick_floor(core, now_ms);
  if (n2 >= work)
    n2 = work - 1;
  if (n2 <= n)
    return;
  /* Only slots whose block begins before their bound (slot_min) can be
   * reached: their timers move down, none expires.  A crowded one is the
   * next block of its level and is met by pre-cascade steps first (work
   * comes before its block), so each such slot holds at most
   * precascade_chunk timers. */
  uvtw__list_init(&todo);
  advance(core, n2, &todo, &todo);
  cascade(core, &todo, &core->ready);
  /* The pre-cascade's share of the time skipped, as a pass would move:
   * its pace counts from the new now. */
  if (core->big_levels != 0)
    precascade(core, n2 - n);
}


/* Sorts `due`, then re-files the timers in it that are not due. */
static void finish_due(uvtw__core_t* core) {
  struct uvtw__link todo;
  struct uvtw__link* link;
  uvtw_timer_t* t;

  uvtw__core_sort_due(core);
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
      uvtw__core_refile(core, t);
    }
  }
  /* A timer with leeway lazily re-armed in a level-0 slot that a late pass
   * reached may be past its deadline but not its expiry: it waits for it.
   * Only wheels that ever filed one walk. */
  for (link = core->due.next; core->leeway_used && link != &core->due;
       link = todo.next) {
    todo.next = link->next;
    t = uvtw__timer_of(link);
    if (!uvtw__core_expired(core, t)) {
      uvtw__list_remove(link);
      uvtw__core_refile(core, t);
    }
  }
}


/* uvtw__core_expire in general. */
static void expire_slow(uvtw__core_t* core, uint64_t now_ms) {
  struct uvtw__link todo;
  uint64_t n;
  uint64_t n2;

  uvtw__list_init(&todo);
  /* Timers found ready earlier fire first: their expiry is <= n, before
   * anything in a slot. */
  uvtw__list_splice(&core->due, &core->ready);
  n = core->now_tick;
  n2 = uvtw__core_tick_floor(core, now_ms);
  if (n2 > n) {
    /* A level-0 slot holds one tick, so its timers go straight to `due`
     * (one walk less over them), bar lazily re-armed ones, peeled off
     * below.  Higher levels cascade: each timer expires or moves down. */
    advance(core, n2, &core->due, &todo);
    cascade(core, &todo, &core->due);
    if (core->big_levels != 0)
      precascade(core, n2 - n);
  }
  finish_due(core);
}


/* Non-zero if `due` is sorted and holds no timer whose deadline is past
 * collected_ms: then expire_slow's sort and tail cut would change
 * nothing.  A walk without calls, for the pass of one or a few timers. */
static int due_final(const uvtw__core_t* core) {
  const struct uvtw__link* link;

  for (link = core->due.next; link != &core->due; link = link->next)
    if (uvtw__timer_of((struct uvtw__link*) link)->deadline_ >
            core->collected_ms ||
        (link->next != &core->due && uvtw__core_before(link->next, link)))
      return 0;
  return 1;
}


/* The common pass, one tick on inside a level-1 block, with no pre-cascade
 * under way: one level-0 slot, nothing above, and most often nothing to
 * sort or re-file.  A leaf; the rest is expire_slow's. */
void uvtw__core_expire(uvtw__core_t* core, uint64_t now_ms) {
  uint64_t n2;
  unsigned s;

  n2 = uvtw__core_tick_floor(core, now_ms);
  if (n2 != core->now_tick + 1 ||
      !(n2 & (((uint64_t) 1 << uvtw__level_shift(1)) - 1)) ||
      core->big_levels != 0 || !uvtw__list_empty(&core->ready) ||
      !uvtw__list_empty(&core->due))
    return expire_slow(core, now_ms);
  s = (unsigned) (n2 & (UVTW__L0_SLOTS - 1));
  uvtw__core_set_now(core, n2);
  if (!slot_occupied(core, s))
    return;
  uvtw__core_clear_bit(core, s);
  uvtw__list_move(&core->due, &core->slots[s]); /* due was empty */
  if (!due_final(core))
    finish_due(core);
}


void uvtw__core_defer(uvtw__core_t* core, uint64_t first_id) {
  struct uvtw__link* link;
  struct uvtw__link* next;

  for (link = core->due.next; link != &core->due; link = next) {
    next = link->next;
    if (uvtw__timer_of(link)->order_ >= first_id) {
      uvtw__list_remove(link);
      uvtw__list_append(&core->ready, link);
    }
  }
}


uint64_t uvtw__core_late_by_tick(const uvtw__core_t* core, uint64_t now_ms) {
  uint64_t deadline;

  deadline = now_ms - core->popped_late;
  return now_ms - uvtw__core_ms_of(core, uvtw__core_tick_of(core, deadline));
}
