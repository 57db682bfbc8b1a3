/* SPDX-License-Identifier: MIT */
/* uvtw__core_check: every invariant of the core, re-derived by brute force
 * (the true minimum, the occupancy bitmaps, each timer's slot, the counts),
 * for the tests, the fuzzer and UVTW_CHECK_INVARIANTS builds.  Apart from
 * core.c so that the wheel's own file holds only what a start, a stop and
 * a pass run. */

#include "check.h"
#include "core.h"

#include <string.h>

#define CHECK(cond, ...) UVTW__CHECK("uvtw__core_check", cond, __VA_ARGS__)

typedef struct {
  uint64_t count;
  uint64_t counted; /* the user's: no task flag */
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
    e = uvtw__core_expiry(core, t);
    CHECK(e >= lo && e <= hi,
          "%s: expiry %llu outside [%llu, %llu] (now_tick %llu)", name,
          (unsigned long long) e, (unsigned long long) lo,
          (unsigned long long) hi, (unsigned long long) core->now_tick);
    CHECK(t->order_ < core->next_order, "%s: order", name);
    tally->count++;
    tally->counted += uvtw__timer_counted(t);
    tally->refs += uvtw__timer_ref(t);
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
      if (!((core->occupied[s / UVTW__WORD_BITS] >> (s % UVTW__WORD_BITS)) & 1))
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
            "level %d slot %u: slot_min %llu outside its block [%llu, %llu]", l,
            r, (unsigned long long) core->slot_min[u],
            (unsigned long long) first, (unsigned long long) last);
      CHECK(check_list(core, head, core->slot_min[u], UVTW__NO_TICK, "slot",
                       &tally, out) == 0,
            "level %d slot %u", l, r);
      length = 0;
      for (link = head->next; link != head; link = link->next)
        length++;
      CHECK(core->count[u] >= length, "level %d slot %u: count %llu < %llu", l,
            r, (unsigned long long) core->count[u],
            (unsigned long long) length);
    }
  }
  /* Overflow timers belong to a later top-level block than n's. */
  block = (n >> UVTW__TOP_SHIFT) + 1;
  CHECK(uvtw__list_empty(&core->overflow) ||
            block < (uint64_t) 1 << (64 - UVTW__TOP_SHIFT),
        "overflow timers in the last top-level block");
  first = tally.min_e;
  tally.min_e = UVTW__NO_TICK;
  CHECK(check_list(core, &core->overflow, block << UVTW__TOP_SHIFT,
                   UVTW__NO_TICK, "overflow", &tally, out) == 0,
        "overflow");
  /* Its bound is never late, and beyond n's top-level block (core.h). */
  CHECK(core->overflow_min <= tally.min_e,
        "overflow bound %llu after its minimum %llu",
        (unsigned long long) core->overflow_min,
        (unsigned long long) tally.min_e);
  CHECK(core->overflow_min == UVTW__NO_TICK ||
            core->overflow_min >> UVTW__TOP_SHIFT > n >> UVTW__TOP_SHIFT,
        "overflow bound %llu in now's top-level block (now_tick %llu)",
        (unsigned long long) core->overflow_min, (unsigned long long) n);
  if (first < tally.min_e)
    tally.min_e = first;
  /* Nothing is due early: ready and due hold only expired timers. */
  first = tally.min_e;
  CHECK(check_list(core, &core->ready, 0, n, "ready", &tally, out) == 0,
        "ready");
  CHECK(check_list(core, &core->due, 0, n, "due", &tally, out) == 0, "due");
  tally.min_e = first;
  for (link = core->due.next; link != &core->due && link->next != &core->due;
       link = link->next)
    CHECK(uvtw__core_before(link, link->next), "due list out of order");

  CHECK(tally.counted ==
            atomic_load_explicit(&core->active, memory_order_relaxed),
        "active %llu, counted %llu (tasks' not)",
        (unsigned long long) atomic_load_explicit(&core->active,
                                                  memory_order_relaxed),
        (unsigned long long) tally.counted);
  CHECK(tally.refs == core->active_ref, "active_ref %llu, counted %llu",
        (unsigned long long) core->active_ref, (unsigned long long) tally.refs);

  /* The next wake-up is never later than the true minimum. */
  next = uvtw__core_next_tick(core);
  if (!uvtw__list_empty(&core->ready) || !uvtw__list_empty(&core->due))
    CHECK(next <= n, "ready work but next wake-up %llu",
          (unsigned long long) next);
  CHECK(next <= tally.min_e, "next wake-up %llu after the minimum %llu",
        (unsigned long long) next, (unsigned long long) tally.min_e);
  CHECK(tally.count != 0 || next == UVTW__NO_TICK, "empty wheel wakes at %llu",
        (unsigned long long) next);
  /* The virtual clock's next pass: never late, and ahead unless work is
   * ready. */
  next = uvtw__core_next_expiry(core);
  CHECK(next <= tally.min_e, "next expiry %llu after the minimum %llu",
        (unsigned long long) next, (unsigned long long) tally.min_e);
  CHECK(next > n || next == UVTW__NO_TICK || !uvtw__list_empty(&core->ready) ||
            !uvtw__list_empty(&core->due),
        "next expiry %llu not after now_tick %llu with nothing ready",
        (unsigned long long) next, (unsigned long long) n);
  return 0;
}
