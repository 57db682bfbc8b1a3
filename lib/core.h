/* SPDX-License-Identifier: MIT */
/* The pure timing wheel: no libuv calls, no threads, no allocation.  Time is
 * passed in as loop milliseconds, so tests drive it on a simulated clock.
 * It files uvtw_timer_t's by their private fields (link_, deadline_,
 * start_id_, unref_, repeat_); the libuv layer (wheel.c, driver.c,
 * timer.c) owns everything else.  See core.c for the level table and the
 * invariants. */

#ifndef UVTW_CORE_H
#define UVTW_CORE_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "list.h"
#include "uvtw.h"

/* Level 0 has 1024 slots (10 bits of ticks: a second at tick 1, so most
 * timeouts of a server expire without ever cascading); levels 1 to 5 have
 * 64 (6 bits each, one bitmap word).  40 bits of ticks in all.  The slots
 * of all levels are one flat array; level l's start at uvtw__slot_base(l),
 * which is a multiple of 64, so slot i's bit is bit i % 64 of word i / 64
 * of `occupied`. */
#define UVTW__LEVELS 6
#define UVTW__L0_BITS 10
#define UVTW__LN_BITS 6
#define UVTW__WHEEL_BITS (UVTW__L0_BITS + UVTW__LN_BITS * (UVTW__LEVELS - 1))
#define UVTW__L0_SLOTS (1u << UVTW__L0_BITS)
#define UVTW__NSLOTS (UVTW__L0_SLOTS + (UVTW__LEVELS - 1) * 64)
#define UVTW__NWORDS (UVTW__NSLOTS / 64)
#define UVTW__L0_WORDS (UVTW__L0_SLOTS / 64)

static inline unsigned uvtw__level_shift(unsigned level) {
  return level == 0 ? 0 : UVTW__L0_BITS + UVTW__LN_BITS * (level - 1);
}


static inline unsigned uvtw__level_bits(unsigned level) {
  return level == 0 ? UVTW__L0_BITS : UVTW__LN_BITS;
}


static inline unsigned uvtw__slot_base(unsigned level) {
  return level == 0 ? 0 : UVTW__L0_SLOTS + 64 * (level - 1);
}

typedef struct uvtw__core_s {
  uint64_t tick_ms;
  /* Every tick <= now_tick has been collected: timers in slots expire
   * strictly after it, timers in `ready` and `due` at or before it. */
  uint64_t now_tick;
  uint64_t collected_ms; /* now_tick * tick_ms: d > it <=> d's tick > it */
  uint64_t next_start_id;
  /* Timers filed anywhere (slots, overflow, ready, due), tasks' apart.
   * Only the loop thread writes `active`; other threads may read it. */
  _Atomic uint64_t active;
  uint64_t tasks_filed;
  uint64_t active_ref;     /* of both, the referenced ones */
  uint64_t cascades;       /* timers re-filed from a slot, not expired */
  /* Bit i % 64 of word i / 64 <=> slots[i] is non-empty. */
  uint64_t occupied[UVTW__NWORDS];
  uint32_t l0_words; /* bit w <=> occupied[w] != 0, for level 0's words */
  /* A lower bound on the expiry tick of every timer in an occupied slot,
   * within the slot's block (never before its first tick, so a wake-up at
   * it always collects the slot; never after its last).  Stale (too low)
   * after a stop or a lazy re-arm: that costs one early wake-up, never a
   * late one. */
  uint64_t slot_min[UVTW__NSLOTS];
  struct uvtw__link slots[UVTW__NSLOTS];
  struct uvtw__link overflow; /* expiry beyond the top level's range */
  struct uvtw__link ready;    /* due when filed: run by the next pass */
  struct uvtw__link due;      /* the pass now running, sorted */
} uvtw__core_t;

void uvtw__core_init(uvtw__core_t* core, uint64_t tick_ms, uint64_t now_ms);

/* The earliest tick at which the wheel has work (a due timer, or a slot to
 * collect), UINT64_MAX if it is empty.  <= now_tick when work is ready.
 * Never later than the true minimum expiry; O(levels). */
uint64_t uvtw__core_next_tick(const uvtw__core_t* core);

/* Makes the wheel's next wake-up exact when the earliest slots hold at most
 * UVTW__TIGHTEN_MAX timers together: recomputes the earliest slot's
 * minimum from the timers' real expiries (a stop or a lazy re-arm leaves it
 * stale, too early), re-filing at once the timers lazily re-armed past the
 * slot.  The bound keeps it O(1); a larger slot keeps its early wake-up,
 * at which the slot is re-filed (a cascade). */
#define UVTW__TIGHTEN_MAX 8
void uvtw__core_tighten(uvtw__core_t* core);

/* Starts a pass at `now_ms`: advances the wheel, and moves every timer that
 * has expired by then, plus those in `ready`, to `due`, sorted by (deadline,
 * start_id).  Timers started while the pass runs wait for the next pass.
 * Work is bounded by the occupied slots (at most 1344 lists), not by
 * the length of the gap since the last pass. */
void uvtw__core_expire(uvtw__core_t* core, uint64_t now_ms);

/* Takes the first timer of the running pass, or NULL when the pass is over.
 * A one-shot is made inactive; a repeating timer is restarted for now_ms +
 * repeat, as libuv does before the callback.  The caller runs timer->cb_. */
uvtw_timer_t* uvtw__core_pop_due(uvtw__core_t* core, uint64_t now_ms);

/* Leaves for the next pass the timers of the running pass whose start_id
 * is >= first_id, that is, started after the moment the pass stands for;
 * they stay due, in `ready`.  Call right after uvtw__core_expire.  O(due). */
void uvtw__core_defer(uvtw__core_t* core, uint64_t first_id);

/* Calls fn for every active timer, once each, also if fn restarts it. */
void uvtw__core_walk(uvtw__core_t* core,
                     void (*fn)(uvtw_timer_t* timer, void* arg),
                     void* arg);

/* Makes every timer inactive (wheel close).  O(active). */
void uvtw__core_clear(uvtw__core_t* core);

/* Brute-force check of every invariant above, for tests: re-derives the
 * occupancy bitmaps, counters and true minimum expiry from the lists.
 * Returns 0, or -1 after printing which rule broke to `out`. */
int uvtw__core_check(const uvtw__core_t* core, FILE* out);

#include "core-inl.h"

#endif /* UVTW_CORE_H */
