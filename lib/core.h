/* SPDX-License-Identifier: MIT */
/* The pure timing wheel: no libuv calls, no threads, no allocation.  Time is
 * passed in as loop milliseconds, so tests drive it on a simulated clock.
 * It files uvtw_timer_t's by their private fields (link_, deadline_,
 * order_, repeat_); the libuv layer (wheel.c, driver.c,
 * timer.c, task.c) owns everything else: the core does not know which of
 * its timers belong to tasks.  See core.c for the level table and the
 * invariants. */

#ifndef UVTW_CORE_H
#define UVTW_CORE_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "uvtw-assert.h"
#include "list.h"
#include "uvtw.h"

/* The geometry, all derived from three knobs (as the Linux wheel derives
 * LVL_SIZE and LVL_OFFS from LVL_BITS):
 *   - UVTW__L0_BITS: level 0's span, 2^10 ticks; every timer due within
 *     2 * 2^10 ticks of now is filed in level 0 and never cascades;
 *   - UVTW__LN_BITS: each upper level multiplies the granularity by 2^6;
 *   - UVTW__LEVELS.
 * Every level is a ring of twice its span (UVTW__RING_BITS = 1), so that a
 * slot whose block begins next can be re-filed into the level below while
 * the current block runs: the re-filing of a big slot is spread over the
 * block before it (see core.c, "Pre-cascade"). */
#define UVTW__LEVELS 6
#define UVTW__L0_BITS 10
#define UVTW__LN_BITS 6
#define UVTW__RING_BITS 1
#define UVTW__WORD_BITS 64 /* bits per occupancy word */

#define UVTW__L0_SLOTS (1u << (UVTW__L0_BITS + UVTW__RING_BITS))
#define UVTW__LN_SLOTS (1u << (UVTW__LN_BITS + UVTW__RING_BITS))
#define UVTW__UPPER_SLOTS ((UVTW__LEVELS - 1) * UVTW__LN_SLOTS)
#define UVTW__NSLOTS (UVTW__L0_SLOTS + UVTW__UPPER_SLOTS)
#define UVTW__NWORDS (UVTW__NSLOTS / UVTW__WORD_BITS)
#define UVTW__L0_WORDS (UVTW__L0_SLOTS / UVTW__WORD_BITS)
#define UVTW__LN_WORDS (UVTW__LN_SLOTS / UVTW__WORD_BITS)
/* The top level's granularity: overflow timers are re-examined whenever
 * now enters a new block of it. */
#define UVTW__TOP_SHIFT (UVTW__L0_BITS + UVTW__LN_BITS * (UVTW__LEVELS - 2))
/* A start files by the bit length of (expiry - now): level 0 below
 * L0_SLOTS, level l >= 1 up to L0_BITS + LN_BITS * l bits, the overflow
 * list beyond FILE_MAX_LEN bits. */
#define UVTW__FILE_MAX_LEN (UVTW__TOP_SHIFT + UVTW__LN_BITS)

_Static_assert(UVTW__L0_SLOTS % UVTW__WORD_BITS == 0,
               "level 0 must fill whole occupancy words");
_Static_assert(UVTW__LN_SLOTS % UVTW__WORD_BITS == 0,
               "an upper level must fill whole occupancy words");
_Static_assert(UVTW__L0_WORDS <= 64,
               "l0_words has one bit per occupancy word of level 0");
_Static_assert(UVTW__LN_BITS >= 2, "an upper level needs a ring of >= 8");
_Static_assert((UVTW__LN_WORDS & (UVTW__LN_WORDS - 1)) == 0,
               "an upper level's words are a power of two");
_Static_assert(UVTW__FILE_MAX_LEN < 64, "the wheel must fit in 64 bits");

/* "No tick": an empty wheel's next wake-up. */
#define UVTW__NO_TICK UINT64_MAX

static inline unsigned uvtw__level_shift(unsigned level) {
  /* Branch-free: level 0 is 0, level l >= 1 is L0_BITS + LN_BITS (l - 1). */
  return (UVTW__L0_BITS + UVTW__LN_BITS * level - UVTW__LN_BITS) &
         -(unsigned) (level != 0);
}


static inline unsigned uvtw__ring_mask(unsigned level) {
  return (level == 0 ? UVTW__L0_SLOTS : UVTW__LN_SLOTS) - 1;
}


static inline unsigned uvtw__slot_base(unsigned level) {
  return (UVTW__L0_SLOTS + UVTW__LN_SLOTS * level - UVTW__LN_SLOTS) &
         -(unsigned) (level != 0);
}


/* An upper-level slot's index among the upper slots, for slot_min and
 * count. */
static inline unsigned uvtw__upper_index(unsigned s) {
  return s - UVTW__L0_SLOTS;
}

/* A timer's order_ word: its start order in the bits above bit 1; bit 0
 * holds its ref flag, bit 1 marks a task's timer.  Orders step by 4, so
 * comparing two words compares the orders (no two timers share one), and
 * a start writes the new order and keeps the flags in one store.  A task's
 * timer is not counted in the core's `active`, which so counts the user's
 * timers alone (the wheel counts the tasks' apart). */
#define UVTW__ORDER_STEP 4
#define UVTW__ORDER_REF 1
#define UVTW__ORDER_TASK 2
#define UVTW__ORDER_FLAGS (UVTW__ORDER_REF | UVTW__ORDER_TASK)

/* 1 if the timer is referenced, else 0. */
static inline uint64_t uvtw__timer_ref(const uvtw_timer_t* t) {
  return t->order_ & UVTW__ORDER_REF;
}


/* 1 if the timer is counted in `active` (the user's), else 0. */
static inline uint64_t uvtw__timer_counted(const uvtw_timer_t* t) {
  return ((t->order_ & UVTW__ORDER_TASK) >> 1) ^ 1;
}

/* Where a start files a timer of level >= 1, by the bit index of
 * e - now_tick (63 - clz): the level's shift and its first upper slot
 * (uvtw__upper_index).  A table, because the level is a division by
 * UVTW__LN_BITS otherwise.  Indices up to UVTW__L0_BITS are level 0's and
 * unused. */
typedef struct {
  uint8_t shift;
  uint16_t upper_base;
} uvtw__file_level_t;

typedef struct uvtw__core_s {
  uint64_t tick_ms;
  /* Every tick <= now_tick has been collected: timers in slots expire
   * strictly after it, timers in `ready` and `due` at or before it. */
  uint64_t now_tick;
  uint64_t collected_ms; /* now_tick * tick_ms: d > it <=> d's tick > it */
  /* collected_ms + tick_ms, saturated: a loop time at or past it is a tick
   * ahead of the wheel (uvtw__core_behind). */
  uint64_t behind_ms;
  uint64_t next_order; /* the order_ of the next start (bit 0 clear) */
  /* Timers filed anywhere (slots, overflow, ready, due).  Only the loop
   * thread writes it; other threads may read it. */
  _Atomic uint64_t active;
  uint64_t active_ref; /* of them, the referenced ones */
  uint64_t cascades;   /* timers re-filed from a slot, not expired */
  /* UVTW__PRECASCADE_CHUNK; the model test lowers it, to check the
   * invariants after every small pre-cascade step. */
  uint32_t precascade_chunk;
  /* Bit l: a slot of level l held more than precascade_chunk timers since
   * the level was last empty; only such levels can need a wake-up for the
   * pre-cascade. */
  uint32_t big_levels;
  /* ms / tick_ms by a multiply (uvtw__core_div), for tick_ms > 1: the
   * round-up reciprocal (2^64 (2^l - tick_ms) / tick_ms + 1, l the bit
   * length of tick_ms - 1) and l - 1. */
  uint64_t tick_magic;
  unsigned tick_shift;
  uint64_t max_tick; /* UINT64_MAX / tick_ms: ms_of saturates above it */
  /* By bit index (uvtw__file_level_t), in the core so that a start reads
   * it by the core's address. */
  uvtw__file_level_t file_levels[UVTW__FILE_MAX_LEN];
  /* Bit i % 64 of word i / 64 <=> slots[i] is non-empty. */
  uint64_t occupied[UVTW__NWORDS];
  uint64_t l0_words; /* bit w <=> occupied[w] != 0, for level 0's words */
  /* Upper levels only (a level-0 slot holds one tick, its own): a lower
   * bound on the expiry tick of every timer in the slot, within the
   * slot's block (never before its first tick, so a wake-up at it always
   * collects the slot; never after its last).  Stale (too low) after a
   * stop or a lazy re-arm: that costs one early wake-up, never a late one.
   */
  uint64_t slot_min[UVTW__UPPER_SLOTS];
  /* Upper levels only: an upper bound on the timers in the slot (filed
   * into it since it was last empty, minus those pre-cascaded out); it
   * paces the pre-cascade. */
  uint32_t count[UVTW__UPPER_SLOTS];
  struct uvtw__link slots[UVTW__NSLOTS];
  struct uvtw__link overflow; /* expiry beyond the top level's range */
  /* A lower bound on the expiry tick of every timer in `overflow`, for
   * uvtw__core_next_expiry without a walk of the list: lowered as timers
   * are filed there, and reset to UVTW__NO_TICK whenever now_tick enters a
   * new top-level block (the list is then emptied and re-filed, which
   * tightens it).  A stop or a lazy re-arm leaves it too early, never too
   * late.  Every timer filed there since that reset was due in a later
   * top-level block than now_tick's, so it is UVTW__NO_TICK or beyond
   * now_tick's top-level block: a pass at it moves into a new block and
   * re-files the list. */
  uint64_t overflow_min;
  struct uvtw__link ready; /* due when filed: run by the next pass */
  struct uvtw__link due;   /* the pass now running, sorted */
  /* now_ms - deadline of the timer uvtw__core_pop_due returned last, its
   * deadline as it was before a repeat moved it on: for the lateness of
   * its callback (internal.h, uvtw__popped_lateness). */
  uint64_t popped_late;
} uvtw__core_t;

void uvtw__core_init(uvtw__core_t* core, uint64_t tick_ms, uint64_t now_ms);

/* The earliest tick at which the wheel has work (a due timer, a slot to
 * collect, or a pre-cascade step), UVTW__NO_TICK if it is empty.
 * <= now_tick when work is ready.  Never later than the true minimum
 * expiry; O(levels). */
uint64_t uvtw__core_next_tick(const uvtw__core_t* core);

/* A lower bound on the earliest expiry tick, as uvtw__core_next_tick, but
 * without the wake-ups that only move timers (the overflow list's
 * re-examination, pre-cascade steps).  UVTW__NO_TICK if nothing can expire.  A
 * pass may jump straight to it, however far (uvtw__core_expire takes any gap):
 * the virtual clock does (virtual.c), where a wake-up per top-level block on
 * the way to a far deadline would be 2^30 passes to UINT64_MAX.  The
 * overflow list counts by its bound (overflow_min), which may be early:
 * then the pass at it re-files the list and the next call is exact.
 * Greater than now_tick unless work is ready (so a loop of passes at it
 * ends).  O(levels). */
uint64_t uvtw__core_next_expiry(const uvtw__core_t* core);

/* Makes the wheel's next wake-up exact when the earliest slots hold at most
 * UVTW__TIGHTEN_MAX timers together: recomputes the earliest slot's
 * minimum from the timers' real expiries (a stop or a lazy re-arm leaves it
 * stale, too early), re-filing at once the timers lazily re-armed past the
 * slot.  The bound keeps it O(1); a larger slot keeps its early wake-up,
 * at which the slot is re-filed (a cascade). */
#define UVTW__TIGHTEN_MAX 8

/* The pre-cascade wakes the driver for a next block of more than this many
 * timers, and moves about this many per wake-up (see core.c). */
#define UVTW__PRECASCADE_CHUNK 1024

/* Tightens as said above, then returns uvtw__core_next_tick(): one scan of
 * the levels in the common case, for the driver's re-arm after a pass.
 * Sets *crowded to 1 if it left the earliest slot alone because it holds
 * more than UVTW__TIGHTEN_MAX timers (so the wake-up at its bound may be
 * early already), to 0 otherwise. */
uint64_t uvtw__core_tighten(uvtw__core_t* core, int* crowded);

/* Starts a pass at `now_ms`: advances the wheel, and moves every timer that
 * has expired by then, plus those in `ready`, to `due`, sorted by (deadline,
 * order).  Timers started while the pass runs wait for the next pass.
 * Work is bounded by the occupied slots, not by the length of the gap
 * since the last pass, plus a pre-cascade step of at most what the time
 * that passed owes (see core.c). */
void uvtw__core_expire(uvtw__core_t* core, uint64_t now_ms);

/* Outside a pass: brings now_tick up to now_ms when the loop's clock ran
 * ahead of the wheel (no pass since), so that a timer started now is filed
 * relative to the loop's now and a short one lands in level 0.  Timers
 * expired by now_ms go to `ready`: the driver is armed for them already.
 * Does nothing if now_ms is not a tick ahead. */
void uvtw__core_catch_up(uvtw__core_t* core, uint64_t now_ms);

/* Sorts `due` into libuv's order (core-sort.c). */
void uvtw__core_sort_due(uvtw__core_t* core);

/* uvtw__core_pop_due (core-inl.h) takes the timers of the pass. */

/* Leaves for the next pass the timers of the running pass whose order_
 * is >= first_id (a next_order), that is, started after the moment the
 * pass stands for; they stay due, in `ready`.  Call right after
 * uvtw__core_expire.  O(due). */
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

/* Built with UVTW_CHECK_INVARIANTS (the CMake option of that name), runs
 * uvtw__core_check and aborts on a broken invariant; otherwise nothing.
 * The driver calls it after every pass (h2o's H2O_TIMER_VALIDATE). */
static inline void uvtw__core_validate(const uvtw__core_t* core) {
#ifdef UVTW_CHECK_INVARIANTS
  if (uvtw__core_check(core, stderr) != 0)
    uvtw__abort_at(__FILE__, __LINE__, "uvtw__core_check failed after a pass");
#else
  (void) core;
#endif
}

#include "core-inl.h"

#endif /* UVTW_CORE_H */
