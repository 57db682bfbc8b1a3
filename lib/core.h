/* SPDX-License-Identifier: MIT */
/* The pure timing wheel: no libuv calls, no threads, no allocation.  Time is
 * passed in as loop milliseconds, so tests drive it on a simulated clock.
 * It files uvtw_timer_t's by their private fields (link_, deadline_,
 * order_, repeat_); the libuv layer (wheel.c, driver.c, timer.c, task.c)
 * owns everything else.  A user's timer differs from a task's only by a
 * flag in order_ (UVTW__ORDER_USER): it is counted as an active user
 * timer, and with leeway, its repeat keeps to its grid, where a task's
 * counts from its dispatch.  See core.c for the level table and the
 * invariants.
 *
 * This header is the core's interface: the geometry, the types, and a
 * contract for every function; the inline bodies are in core-inl.h. */

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


/* A timer's order_ word: its start order in the bits above bit 7; bit 0
 * holds its ref flag, bit 1 marks a user's timer, bits 2..7 its leeway
 * exponent g (uvtw__core_coalesce).  Orders step by 256, so comparing two
 * words compares the orders (no two timers share one; 2^56 starts), and a
 * start writes the new order and keeps the flags in one store.  Only a
 * user's timer is counted in the core's `active` (the wheel counts the
 * tasks' apart).  g changes only while the timer is inactive (a task's is
 * the wheel's, fixed): a filed timer's expiry (uvtw__core_expiry) never
 * moves under it. */
#define UVTW__ORDER_STEP 256
#define UVTW__ORDER_REF 1
#define UVTW__ORDER_USER 2
#define UVTW__ORDER_LEEWAY_SHIFT 2
#define UVTW__ORDER_LEEWAY ((uint64_t) 63 << UVTW__ORDER_LEEWAY_SHIFT)
#define UVTW__ORDER_FLAGS                                                      \
 (UVTW__ORDER_REF | UVTW__ORDER_USER | UVTW__ORDER_LEEWAY)

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
  uint64_t next_order;   /* the order_ of the next start (flags clear) */
  uint64_t task_leeway;  /* the order_ leeway bits of every task's timer */
  /* A timer with leeway was ever set up: a slow pass then checks its due
   * timers' expiries (core.c, finish_due). */
  int leeway_used;
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
  /* The last tick the wheel's clock reaches: (UINT64_MAX - 1) / tick_ms.
   * The clock never reaches UINT64_MAX ms, so a saturated deadline
   * (UINT64_MAX), or any whose tick begins later, is never reached, at
   * every tick: its expiry tick is UVTW__NO_TICK, and ms_of saturates above
   * max_tick. */
  uint64_t max_tick;
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
   * paces the pre-cascade.  64 bits: stops do not lower it, and no slot
   * sees 2^64 filings. */
  uint64_t count[UVTW__UPPER_SLOTS];
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
   * its callback (uvtw__core_popped_lateness). */
  uint64_t popped_late;
} uvtw__core_t;

/* Sets up an empty wheel of tick_ms ticks whose time is now_ms (core-init.c).
 */
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
 * the levels in the common case, for the driver's re-arm. */
uint64_t uvtw__core_tighten(uvtw__core_t* core);

/* The earliest tick at which a timer expires, exactly (UVTW__NO_TICK if
 * none; now_tick if one is ready): tightens the earliest slots and the
 * overflow list's bound without a budget, so O(timers in the slots it
 * looks at), work a later pass would do anyway.  For uvtw_wheel_next_due.
 */
uint64_t uvtw__core_next_due(uvtw__core_t* core);

/* Starts a pass at `now_ms`: advances the wheel, and moves every timer that
 * has expired by then, plus those in `ready`, to `due`, sorted by (deadline,
 * order).  Timers started while the pass runs wait for the next pass.
 * Work is bounded by the occupied slots, not by the length of the gap
 * since the last pass, plus a pre-cascade step of at most what the time
 * that passed owes (see core.c). */
void uvtw__core_expire(uvtw__core_t* core, uint64_t now_ms);

/* Outside a pass: brings now_tick up to the tick of now_ms, the loop's
 * time, or to the tick before the wheel's next work if that comes first,
 * so that a timer started now is filed relative to the loop's now and a
 * short one lands in level 0 however long the wheel sat idle.  Nothing
 * expires; the slots whose block it enters (each of at most
 * UVTW__PRECASCADE_CHUNK timers) move down, and the pre-cascade takes its
 * share of the time it skips, as a pass would.  O(levels) when nothing is
 * filed in between.  uvtw__core_start calls it when the loop's time is a
 * tick or more ahead. */
void uvtw__core_catch_up(uvtw__core_t* core, uint64_t now_ms);

/* Sorts `due` into libuv's order (core-sort.c). */
void uvtw__core_sort_due(uvtw__core_t* core);

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

/* Shared by core.c and core-tighten.c: the first tick of the block after
 * now_tick's at `level`; upper slot s's block; the wake-ups that are not
 * slots (the overflow list, a pre-cascade step) lowering `next`; the
 * earliest occupied slot over all levels (UVTW__NSLOTS if none) and its
 * level and bound; a cascade of `t`, just unlinked, to where its expiry
 * belongs (counted in `cascades`). */
uint64_t uvtw__core_next_block_start(const uvtw__core_t* core, unsigned level);
uint64_t uvtw__core_upper_block(const uvtw__core_t* core,
                                unsigned level,
                                unsigned s);
uint64_t uvtw__core_next_beyond_slots(const uvtw__core_t* core, uint64_t next);
unsigned uvtw__core_earliest_slot(const uvtw__core_t* core,
                                  unsigned* level_out,
                                  uint64_t* tick_out);
void uvtw__core_refile(uvtw__core_t* core, uvtw_timer_t* t);

/* Brute-force check of every invariant above, for tests: re-derives the
 * occupancy bitmaps, counters and true minimum expiry from the lists.
 * Returns 0, or -1 after printing which rule broke to `out`. */
int uvtw__core_check(const uvtw__core_t* core, FILE* out);

/* The hot paths and the time arithmetic, inline (core-inl.h), so that the
 * timer API compiles to one short function per call.  Loop thread, as all
 * of the core.  One line each; the bodies say more. */

/* (Re)starts `t` for deadline_ms, filed relative to now_ms, the loop's
 * time, which the core's is caught up to first; returns its expiry tick. */
static inline uint64_t uvtw__core_start(uvtw__core_t* core,
                                        uvtw_timer_t* t,
                                        uint64_t deadline_ms,
                                        uint64_t now_ms);

/* Non-zero if the core's time lags now_ms, the loop's, by a tick or more,
 * so that a start must catch it up first (uvtw__core_start does). */
static inline int uvtw__core_lags(const uvtw__core_t* core, uint64_t now_ms);

/* uvtw__core_start without the catch-up, for a core that does not lag. */
static inline uint64_t uvtw__core_place(uvtw__core_t* core,
                                        uvtw_timer_t* t,
                                        uint64_t deadline_ms);

/* Makes `t` inactive (a user's or a task's); no-op on an inactive one. */
static inline void uvtw__core_stop(uvtw__core_t* core, uvtw_timer_t* t);

/* Non-zero if a restart of active `t` to deadline_ms may only rewrite its
 * deadline (it waits in a slot that comes due no later). */
static inline int uvtw__core_lazy_ok(const uvtw__core_t* core,
                                     const uvtw_timer_t* t,
                                     uint64_t deadline_ms);

/* The lazy re-arm: a new order and deadline, nothing else. */
static inline void uvtw__core_rearm_lazy(uvtw__core_t* core,
                                         uvtw_timer_t* t,
                                         uint64_t deadline_ms);

/* Sets t's ref flag, keeping active_ref exact. */
static inline void uvtw__core_set_ref(uvtw__core_t* core,
                                      uvtw_timer_t* t,
                                      int ref);

/* Takes the next timer of the running pass (NULL when it is over),
 * restarting a repeating one as libuv does; the caller runs its cb_. */
static inline uvtw_timer_t* uvtw__core_pop_due(uvtw__core_t* core,
                                               const uint64_t* now_ms);

/* The lateness of the timer uvtw__core_pop_due returned last, at now_ms,
 * the clock it was popped at: from its deadline rounded up to its tick,
 * the first moment the wheel could run it.  Never negative: a pass pops
 * only what is due.  With a tick above 1 ms, out of line in core.c. */
uint64_t uvtw__core_late_by_tick(const uvtw__core_t* core, uint64_t now_ms);

/* uvtw__core_late_by_tick, or the plain lateness with a 1 ms tick. */
static inline uint64_t uvtw__core_popped_lateness(const uvtw__core_t* core,
                                                  uint64_t now_ms);

/* The tick at which the wheel runs `t`: its deadline's tick, coalesced by
 * its leeway; UVTW__NO_TICK if never reached. */
static inline uint64_t uvtw__core_expiry(const uvtw__core_t* core,
                                         const uvtw_timer_t* t);

/* Non-zero if `t` may expire in the tick whose first ms is first_ms. */
static inline int uvtw__core_may_expire_in(const uvtw__core_t* core,
                                           const uvtw_timer_t* t,
                                           uint64_t first_ms);

/* The tick a pass at ms takes the wheel to (ms rounded down, capped). */
static inline uint64_t uvtw__core_tick_floor(const uvtw__core_t* core,
                                             uint64_t ms);

/* Tick to ms, UINT64_MAX past max_tick. */
static inline uint64_t uvtw__core_ms_of(const uvtw__core_t* core,
                                        uint64_t tick);

/* Runs uvtw__core_check after a pass in UVTW_CHECK_INVARIANTS builds. */
static inline void uvtw__core_validate(const uvtw__core_t* core);

/* 1 if the timer is referenced, else 0. */
static inline uint64_t uvtw__timer_ref(const uvtw_timer_t* t);

/* a + b, saturating at UINT64_MAX. */
static inline uint64_t uvtw__sat_add(uint64_t a, uint64_t b);

/* uv_hrtime()'s ns in ms, rounded down, or up if `up`. */
static inline uint64_t uvtw__hrtime_ms(uint64_t ns, int up);

/* The lateness bucket of `late` ms: its bit length. */
static inline size_t uvtw__late_slot(uint64_t late);

#include "core-inl.h"

#endif /* UVTW_CORE_H */
