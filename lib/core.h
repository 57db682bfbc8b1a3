/* SPDX-License-Identifier: MIT */
/* The pure timing wheel: no libuv calls, no threads, no allocation.  Time is
 * passed in as loop milliseconds, so tests drive it on a simulated clock.
 * It files uvtw_timer_t's by their private fields (link_, deadline_,
 * order_, repeat_); the libuv layer (wheel.c, driver.c, timer.c, task.c)
 * owns everything else.  A task's timer differs only by a flag in order_
 * (UVTW__ORDER_TASK): it is not counted as an active user timer, and its
 * repeat counts from its dispatch, whatever its leeway.  See core.c for
 * the level table and the invariants. */

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

/* A timer's order_ word: its start order in the bits above bit 7; bit 0
 * holds its ref flag, bit 1 marks a task's timer, bits 2..7 its leeway
 * exponent g (uvtw__core_coalesce).  Orders step by 256, so comparing two
 * words compares the orders (no two timers share one; 2^56 starts), and a
 * start writes the new order and keeps the flags in one store.  A task's
 * timer is not counted in the core's `active`, which so counts the user's
 * timers alone (the wheel counts the tasks' apart).  g changes only while
 * the timer is inactive (a task's is the wheel's, fixed): a filed timer's
 * expiry (uvtw__core_expiry) never moves under it. */
#define UVTW__ORDER_STEP 256
#define UVTW__ORDER_REF 1
#define UVTW__ORDER_TASK 2
#define UVTW__ORDER_LEEWAY_SHIFT 2
#define UVTW__ORDER_LEEWAY ((uint64_t) 63 << UVTW__ORDER_LEEWAY_SHIFT)
#define UVTW__ORDER_FLAGS                                                      \
 (UVTW__ORDER_REF | UVTW__ORDER_TASK | UVTW__ORDER_LEEWAY)

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

/* uvtw__core_pop_due (below) takes the timers of the pass. */

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

/* The hot paths (start, stop, lazy re-arm, pop), inline so that the timer
 * API in timer.c compiles to one short function per call. */

static inline uint64_t uvtw__sat_add(uint64_t a, uint64_t b) {
  return a + b < a ? UINT64_MAX : a + b;
}


/* uv_hrtime()'s ns in ms: rounded down, as uv_now() counts the same clock
 * (or its coarse variant, never ahead of it); rounded up if `up`, so that a
 * deadline counted from it is never early in real time either. */
static inline uint64_t uvtw__hrtime_ms(uint64_t ns, int up) {
  return ns / 1000000 + (up && ns % 1000000 != 0);
}


/* The high 64 bits of a * b: one multiply where the compiler has a 128-bit
 * integer, four 32-bit ones on 32-bit targets, which have none. */
static inline uint64_t uvtw__mul_hi(uint64_t a, uint64_t b) {
#ifdef __SIZEOF_INT128__
  return (uint64_t) (((unsigned __int128) a * b) >> 64);
#else
  uint64_t ll;
  uint64_t lh;
  uint64_t hl;
  uint64_t mid;

  ll = (a & 0xffffffffu) * (b & 0xffffffffu);
  lh = (a & 0xffffffffu) * (b >> 32);
  hl = (a >> 32) * (b & 0xffffffffu);
  mid = (ll >> 32) + (lh & 0xffffffffu) + (hl & 0xffffffffu);
  return (a >> 32) * (b >> 32) + (lh >> 32) + (hl >> 32) + (mid >> 32);
#endif
}


/* ms / tick_ms, rounded down, for tick_ms > 1, without a division: the
 * round-up reciprocal method (Granlund and Montgomery, "Division by
 * invariant integers using multiplication", 1994, figure 4.1), exact for
 * every 64-bit ms. */
static inline uint64_t uvtw__core_div(const uvtw__core_t* core, uint64_t ms) {
  uint64_t t1;

  t1 = uvtw__mul_hi(core->tick_magic, ms);
  return (t1 + ((ms - t1) >> 1)) >> core->tick_shift;
}


/* The tick that ms falls in (rounded down), at most max_tick: the tick a
 * pass at ms takes the wheel to. */
static inline uint64_t uvtw__core_tick_floor(const uvtw__core_t* core,
                                             uint64_t ms) {
  uint64_t q;

  q = core->tick_ms == 1 ? ms : uvtw__core_div(core, ms);
  return q > core->max_tick ? core->max_tick : q;
}


/* The timer's expiry tick: its deadline rounded up to a tick;
 * UVTW__NO_TICK if that is past max_tick (never reached).  With a 1 ms
 * tick, the deadline itself (UINT64_MAX is UVTW__NO_TICK). */
static inline uint64_t uvtw__core_tick_of(const uvtw__core_t* core,
                                          uint64_t deadline_ms) {
  uint64_t q;

  if (core->tick_ms == 1)
    return deadline_ms;
  q = uvtw__core_div(core, deadline_ms);
  q += deadline_ms != q * core->tick_ms;
  return q > core->max_tick ? UVTW__NO_TICK : q;
}


/* Leeway: a timer with exponent g (order_ bits 2..7) expires at its tick
 * rounded up to a multiple of 2^g ticks, so that timers due within one
 * such block share one wake-up (the Linux wheel's batching, but never
 * early and never out of order: the pass still sorts by deadline).  It is
 * at most 2^g - 1 ticks after the deadline's tick.  Where rounding up
 * would pass UINT64_MAX, the tick itself, which keeps the result never
 * early and never falling as e grows. */
static inline uint64_t uvtw__core_coalesce(uint64_t e, uint64_t order) {
  uint64_t m;

  m = ((uint64_t) 1 << ((order & UVTW__ORDER_LEEWAY) >>
                        UVTW__ORDER_LEEWAY_SHIFT)) -
      1;
  return e + m < e ? e : (e + m) & ~m;
}


/* The tick at which the wheel runs `t`: its deadline's tick, coalesced
 * by its leeway, but no later than the last tick the wheel reaches (still
 * never early, and never falling as the deadline grows).  A deadline that
 * is never reached stays so. */
static inline uint64_t uvtw__core_expiry(const uvtw__core_t* core,
                                         const uvtw_timer_t* t) {
  uint64_t e;

  e = uvtw__core_tick_of(core, t->deadline_);
  if ((t->order_ & UVTW__ORDER_LEEWAY) && e <= core->max_tick) {
    e = uvtw__core_coalesce(e, t->order_);
    if (e > core->max_tick)
      e = core->max_tick;
  }
  return e;
}


/* Non-zero if `t` may expire in the tick whose first ms is first_ms: never
 * zero when it does.  One compare without the tick's rounding: t's
 * deadline falls in that tick; or t has leeway (its expiry lies past its
 * deadline's tick), so it always may.  With first_ms UINT64_MAX (no tick)
 * a saturated deadline or one below tick_ms passes too. */
static inline int uvtw__core_may_expire_in(const uvtw__core_t* core,
                                           const uvtw_timer_t* t,
                                           uint64_t first_ms) {
  return t->deadline_ - first_ms < core->tick_ms ||
         (t->order_ & UVTW__ORDER_LEEWAY) != 0;
}


/* Given that t's deadline passed (deadline_ <= collected_ms): non-zero if
 * its expiry did too, which only a timer with leeway may lack. */
static inline int uvtw__core_expired(const uvtw__core_t* core,
                                     const uvtw_timer_t* t) {
  return !(t->order_ & UVTW__ORDER_LEEWAY) ||
         uvtw__core_expiry(core, t) <= core->now_tick;
}


/* Tick to milliseconds, saturating at UINT64_MAX. */
static inline uint64_t uvtw__core_ms_of(const uvtw__core_t* core,
                                        uint64_t tick) {
  if (core->tick_ms == 1)
    return tick;
  if (tick > core->max_tick)
    return UINT64_MAX;
  return tick * core->tick_ms;
}


static inline uvtw_timer_t* uvtw__timer_of(struct uvtw__link* link) {
  return uvtw__container_of(link, uvtw_timer_t, link_);
}


/* A timer whose ref flag is `ref` (uvtw__timer_ref) becomes active (delta
 * 1) or inactive (delta -1); `counted` is uvtw__timer_counted (0 for a
 * task's).  Only the loop thread writes `active`: a relaxed load and store
 * (no read-modify-write) suffice for readers on other threads. */
static inline void uvtw__core_count(uvtw__core_t* core,
                                    uint64_t ref,
                                    uint64_t counted,
                                    int delta) {
  atomic_store_explicit(
      &core->active,
      atomic_load_explicit(&core->active, memory_order_relaxed) +
          (delta > 0 ? counted : -counted),
      memory_order_relaxed);
  if (delta > 0) /* a constant in every caller: one add, no mask */
    core->active_ref += ref;
  else
    core->active_ref -= ref;
}


/* Marks level-0 slot s occupied; the caller appends to it. */
static inline void uvtw__core_occupy_l0(uvtw__core_t* core, size_t s) {
  core->occupied[s / UVTW__WORD_BITS] |= (uint64_t) 1 << (s % UVTW__WORD_BITS);
  core->l0_words |= (uint64_t) 1 << (s / UVTW__WORD_BITS);
}


/* Moves now_tick to n and the times derived from it. */
static inline void uvtw__core_set_now(uvtw__core_t* core, uint64_t n) {
  core->now_tick = n;
  core->collected_ms = n * core->tick_ms;
}


/* Marks upper slot L0_SLOTS + u occupied by a timer of expiry tick e,
 * keeping its minimum and count; the caller appends to it.  By u, the
 * index among the upper slots: L0_SLOTS is a whole number of words. */
static inline void uvtw__core_occupy_upper(uvtw__core_t* core,
                                           size_t u,
                                           uint64_t e) {
  uint64_t* occupied;
  uint64_t word;

  occupied = &core->occupied[UVTW__L0_WORDS + u / UVTW__WORD_BITS];
  word = *occupied;
  if (!((word >> (u % UVTW__WORD_BITS)) & 1)) {
    *occupied = word | (uint64_t) 1 << (u % UVTW__WORD_BITS);
    core->slot_min[u] = e;
    core->count[u] = 1;
  } else {
    if (e < core->slot_min[u])
      core->slot_min[u] = e;
    if (++core->count[u] > core->precascade_chunk)
      core->big_levels |= 1u << (1 + u / UVTW__LN_SLOTS);
  }
}


/* Marks slot s occupied; the caller appends to it. */
static inline void uvtw__core_occupy(uvtw__core_t* core,
                                     unsigned s,
                                     uint64_t e) {
  if (s < UVTW__L0_SLOTS)
    uvtw__core_occupy_l0(core, s);
  else
    uvtw__core_occupy_upper(core, uvtw__upper_index(s), e);
}


/* The slot of level `level` for expiry tick e. */
static inline unsigned uvtw__core_slot(unsigned level, uint64_t e) {
  return uvtw__slot_base(level) +
         (unsigned) ((e >> uvtw__level_shift(level)) & uvtw__ring_mask(level));
}


/* Files a timer whose expiry tick is e, relative to now_tick: by the bit
 * length of e - now, so that anything due within UVTW__L0_SLOTS ticks goes
 * to level 0, where it expires without being moved. */
static inline void uvtw__core_file(uvtw__core_t* core,
                                   uvtw_timer_t* t,
                                   uint64_t e) {
  const uvtw__file_level_t* level;
  struct uvtw__link* head;
  uint64_t bit;
  uint64_t d;
  size_t s; /* size_t: index arithmetic without 32-bit extensions */
  size_t u;

  if (e <= core->now_tick) {
    uvtw__list_append(&core->ready, &t->link_);
    return;
  }
  d = e - core->now_tick;
  if (d < UVTW__L0_SLOTS) {
    s = (size_t) (e & (UVTW__L0_SLOTS - 1));
    uvtw__core_occupy_l0(core, s);
    head = &core->slots[s];
  } else {
    bit = 63 ^ (uint64_t) __builtin_clzll(d); /* bit length - 1 */
    if (bit >= UVTW__FILE_MAX_LEN) {
      if (e < core->overflow_min)
        core->overflow_min = e;
      uvtw__list_append(&core->overflow, &t->link_);
      return;
    }
    /* level >= 1: uvtw__core_slot() by the table. */
    level = &core->file_levels[bit];
    u = level->upper_base +
        (size_t) ((e >> level->shift) & (UVTW__LN_SLOTS - 1));
    uvtw__core_occupy_upper(core, u, e);
    head = &core->slots[UVTW__L0_SLOTS + u];
  }
  uvtw__list_append(head, &t->link_);
}


/* Clears slot s's bit (it just became empty). */
static inline void uvtw__core_clear_bit(uvtw__core_t* core, unsigned s) {
  core->occupied[s / UVTW__WORD_BITS] &=
      ~((uint64_t) 1 << (s % UVTW__WORD_BITS));
  if (s < UVTW__L0_SLOTS && core->occupied[s / UVTW__WORD_BITS] == 0)
    core->l0_words &= ~((uint64_t) 1 << (s / UVTW__WORD_BITS));
}


/* Unlinks an active timer. */
static inline void uvtw__core_unlink(uvtw__core_t* core, uvtw_timer_t* t) {
  struct uvtw__link* head;
  uintptr_t first;
  uintptr_t last;

  UVTW__ASSERT(t->link_.next != NULL && t->link_.next->prev == &t->link_);
  head = uvtw__list_remove(&t->link_);
  if (head == NULL)
    return;
  first = (uintptr_t) &core->slots[0];
  last = (uintptr_t) &core->slots[UVTW__NSLOTS - 1];
  if ((uintptr_t) head < first || (uintptr_t) head > last)
    return; /* overflow, ready or due: no bitmap */
  uvtw__core_clear_bit(core,
                       (unsigned) (((uintptr_t) head - first) / sizeof(*head)));
}


/* Gives `t` the next start order, keeping its flags. */
static inline void uvtw__core_order(uvtw__core_t* core, uvtw_timer_t* t) {
  t->order_ = core->next_order | (t->order_ & UVTW__ORDER_FLAGS);
  core->next_order += UVTW__ORDER_STEP;
}


/* Files `t` for `deadline_ms` relative to now_tick, giving it the next
 * order (unlinking it first if active, counting it if not).  A user's
 * timer is counted in `active`, a task's (UVTW__ORDER_TASK) is not; its ref
 * and leeway bits are the timer's own.  Returns its expiry tick. */
static inline uint64_t uvtw__core_place(uvtw__core_t* core,
                                        uvtw_timer_t* t,
                                        uint64_t deadline_ms) {
  uint64_t e;

  if (t->link_.next != NULL)
    uvtw__core_unlink(core, t);
  else
    uvtw__core_count(core, uvtw__timer_ref(t), uvtw__timer_counted(t), 1);
  uvtw__core_order(core, t);
  t->deadline_ = deadline_ms;
  e = uvtw__core_expiry(core, t);
  uvtw__core_file(core, t, e);
  return e;
}


/* uvtw__core_start when the loop's time is a tick or more ahead of the
 * wheel's: catches up (uvtw__core_catch_up), then places the timer.  Out of
 * line: a call inlined into every start makes each save registers (the
 * lazy re-arm 65 instructions where it takes 50, --scenario calls). */
uint64_t uvtw__core_start_behind(uvtw__core_t* core,
                                 uvtw_timer_t* t,
                                 uint64_t deadline_ms,
                                 uint64_t now_ms);

/* (Re)starts `t` for `deadline_ms`, filed where that deadline belongs
 * relative to now_ms, the loop's time (caught up to first).  Returns its
 * expiry tick: the wheel's next wake-up may have moved there. */
static inline uint64_t uvtw__core_start(uvtw__core_t* core,
                                        uvtw_timer_t* t,
                                        uint64_t deadline_ms,
                                        uint64_t now_ms) {
  if (now_ms - core->collected_ms >= core->tick_ms)
    return uvtw__core_start_behind(core, t, deadline_ms, now_ms);
  return uvtw__core_place(core, t, deadline_ms);
}


/* Non-zero if a re-arm of `t` to `deadline_ms` may be lazy as far as the
 * core is concerned: `t` is active, waits in a slot (its expiry is after
 * now_tick, i.e. its deadline after collected_ms: no division), and moves
 * to a deadline at or after its current one, so its slot comes due no
 * later than the old deadline, and re-files it then.  (Whether the
 * restart is lazy is uvtw__driver_restart's to say.) */
static inline int uvtw__core_lazy_ok(const uvtw__core_t* core,
                                     const uvtw_timer_t* t,
                                     uint64_t deadline_ms) {
  return t->link_.next != NULL && deadline_ms >= t->deadline_ &&
         t->deadline_ > core->collected_ms;
}


/* The lazy re-arm, once uvtw__core_lazy_ok said yes: only the timer's
 * order and deadline are written. */
static inline void uvtw__core_rearm_lazy(uvtw__core_t* core,
                                         uvtw_timer_t* t,
                                         uint64_t deadline_ms) {
  uvtw__core_order(core, t);
  t->deadline_ = deadline_ms;
}


/* Makes `t` inactive (a user's or a task's).  No-op on an inactive timer. */
static inline void uvtw__core_stop(uvtw__core_t* core, uvtw_timer_t* t) {
  if (t->link_.next == NULL)
    return;
  uvtw__core_unlink(core, t);
  uvtw__core_count(core, uvtw__timer_ref(t), uvtw__timer_counted(t), -1);
}


/* Sets the timer's ref flag, keeping active_ref exact. */
static inline void uvtw__core_set_ref(uvtw__core_t* core,
                                      uvtw_timer_t* t,
                                      int ref) {
  if (uvtw__timer_ref(t) == (uint64_t) !!ref)
    return;
  if (t->link_.next != NULL)
    core->active_ref += ref ? 1 : -1;
  t->order_ ^= UVTW__ORDER_REF;
}


/* libuv's timer order: (deadline, start order).  Orders are unique, so
 * no two timers are equal in it. */
static inline int uvtw__core_before(const struct uvtw__link* a,
                                    const struct uvtw__link* b) {
  const uvtw_timer_t* ta = uvtw__container_of(a, uvtw_timer_t, link_);
  const uvtw_timer_t* tb = uvtw__container_of(b, uvtw_timer_t, link_);

  if (ta->deadline_ != tb->deadline_)
    return ta->deadline_ < tb->deadline_;
  return ta->order_ < tb->order_;
}


/* A repeating timer with leeway: the first deadline + k * repeat (k >= 1)
 * after now, saturating.  The division only when the loop fell a whole
 * period behind. */
static inline uint64_t uvtw__core_grid_next(uint64_t deadline,
                                            uint64_t repeat,
                                            uint64_t now_ms) {
  uint64_t next;
  uint64_t skip;

  next = uvtw__sat_add(deadline, repeat);
  if (next <= now_ms && next != UINT64_MAX) {
    skip = ((now_ms - next) / repeat + 1);
    next =
        skip > (UINT64_MAX - next) / repeat ? UINT64_MAX : next + skip * repeat;
  }
  return next;
}


/* Takes the first timer of the running pass, or NULL when the pass is over.
 * A one-shot is made inactive; a repeating timer is restarted for *now_ms +
 * repeat, as libuv does before the callback; popped_late is *now_ms minus
 * the deadline it was due at.  The caller runs timer->cb_.
 * The clock is passed by address and read at each pop: a callback may
 * move the loop's clock, and the next pop must see it.  Inline: the pass
 * calls it once per timer. */
static inline uvtw_timer_t* uvtw__core_pop_due(uvtw__core_t* core,
                                               const uint64_t* now_ms) {
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
  core->popped_late = *now_ms - t->deadline_;
  if (t->repeat_ != 0) {
    /* libuv's rule: the next deadline counts from the loop time at
     * dispatch, so an overdue timer fires once, not once per period.  A
     * user's timer with leeway keeps to its grid instead (it would drift
     * by its lateness otherwise), skipping the periods that passed. */
    if ((t->order_ & UVTW__ORDER_LEEWAY) != 0 &&
        !(t->order_ & UVTW__ORDER_TASK))
      deadline = uvtw__core_grid_next(t->deadline_, t->repeat_, *now_ms);
    else
      deadline = uvtw__sat_add(*now_ms, t->repeat_);
    uvtw__core_order(core, t);
    t->deadline_ = deadline;
    uvtw__core_file(core, t, uvtw__core_expiry(core, t));
  } else {
    uvtw__core_count(core, uvtw__timer_ref(t), uvtw__timer_counted(t), -1);
  }
  return t;
}


/* The lateness of the timer uvtw__core_pop_due returned last, at now_ms,
 * the clock it was popped at: from its deadline rounded up to its tick,
 * the first moment the wheel could run it.  Never negative: a pass pops
 * only what is due.  With a tick above 1 ms, out of line in core.c. */
uint64_t uvtw__core_late_by_tick(const uvtw__core_t* core, uint64_t now_ms);

static inline uint64_t uvtw__core_popped_lateness(const uvtw__core_t* core,
                                                  uint64_t now_ms) {
  if (__builtin_expect(core->tick_ms != 1, 0))
    return uvtw__core_late_by_tick(core, now_ms);
  return core->popped_late;
}


/* The bucket of a lateness of `late` ms (the wheel's late_bits): its bit
 * length, 0 for 0.  2 * late + 1 is never 0 and its top bit's index is
 * late's bit length (a late of 2^63 ms or more, which real time never
 * reaches, lands in a wrong bucket, never outside 0..63). */
static inline size_t uvtw__late_slot(uint64_t late) {
  return (size_t) (__builtin_clzll(2 * late + 1) ^ 63);
}


#endif /* UVTW_CORE_H */
