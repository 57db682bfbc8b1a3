/* SPDX-License-Identifier: MIT */
/* The wheel's hot paths (start, stop, ref), inline so that the timer API
 * in timer.c compiles to one short function per call: a re-arm is a few
 * dozen instructions and, when lazy, touches only the timer's cache line.
 * Included by core.h only. */

#ifndef UVTW_CORE_INL_H
#define UVTW_CORE_INL_H

static inline uint64_t uvtw__sat_add(uint64_t a, uint64_t b) {
  return a + b < a ? UINT64_MAX : a + b;
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


/* The tick that ms falls in (rounded down); with a 1 ms tick, ms. */
static inline uint64_t uvtw__core_tick_floor(const uvtw__core_t* core,
                                             uint64_t ms) {
  if (core->tick_ms == 1)
    return ms;
  return uvtw__core_div(core, ms);
}


/* The timer's expiry tick: its deadline rounded up to a tick. */
static inline uint64_t uvtw__core_tick_of(const uvtw__core_t* core,
                                          uint64_t deadline_ms) {
  uint64_t q;

  if (core->tick_ms == 1)
    return deadline_ms;
  q = uvtw__core_div(core, deadline_ms);
  return q + (deadline_ms != q * core->tick_ms);
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


/* Non-zero if the loop's time now_ms is a tick or more ahead of the
 * wheel's (no pass since it moved on). */
static inline int uvtw__core_behind(const uvtw__core_t* core, uint64_t now_ms) {
  return now_ms >= core->behind_ms;
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
  /* Written as a shift, not a mask: a bit test (bt, bts) on x86. */
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


/* Non-zero if `link` is the head of one of the core's lists (not a timer). */
static inline int uvtw__core_is_head(const uvtw__core_t* core,
                                     const struct uvtw__link* link) {
  return (link >= &core->slots[0] && link <= &core->slots[UVTW__NSLOTS - 1]) ||
         link == &core->overflow || link == &core->ready || link == &core->due;
}


/* A neighbour of `t` in its list (NULL if it is alone there): another
 * timer in the same slot. */
static inline const uvtw_timer_t* uvtw__core_neighbour(const uvtw__core_t* core,
                                                       const uvtw_timer_t* t) {
  const struct uvtw__link* link;

  link = t->link_.next;
  if (uvtw__core_is_head(core, link))
    link = t->link_.prev;
  if (uvtw__core_is_head(core, link))
    return NULL;
  return uvtw__container_of(link, uvtw_timer_t, link_);
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


/* uvtw__core_start for a timer of the user's (`task` 0: counted in
 * `active`) or a task's (1); a constant in every caller. */
static inline uint64_t uvtw__core_start_as(uvtw__core_t* core,
                                           uvtw_timer_t* t,
                                           uint64_t deadline_ms,
                                           int task) {
  uint64_t ref;
  uint64_t e;

  /* Everything read first: the library builds with -fno-strict-aliasing,
   * so a store to the timer would make the compiler read the core's
   * fields again, and a store to the core the timer's. */
  ref = uvtw__timer_ref(t);
  e = uvtw__core_tick_of(core, deadline_ms);
  if (t->link_.next != NULL)
    uvtw__core_unlink(core, t);
  else
    uvtw__core_count(core, ref, !task, 1);
  t->order_ = core->next_order | ref | (task ? UVTW__ORDER_TASK : 0);
  core->next_order += UVTW__ORDER_STEP;
  t->deadline_ = deadline_ms;
  uvtw__core_file(core, t, e);
  return e;
}


/* (Re)starts `timer` for `deadline_ms`, giving it the next order, and
 * files it where that deadline belongs.  Returns its expiry tick: the
 * wheel's next wake-up may have moved there. */
static inline uint64_t uvtw__core_start(uvtw__core_t* core,
                                        uvtw_timer_t* t,
                                        uint64_t deadline_ms) {
  return uvtw__core_start_as(core, t, deadline_ms, 0);
}


/* uvtw__core_start for a task's timer: not counted in `active`. */
static inline uint64_t uvtw__core_start_task(uvtw__core_t* core,
                                             uvtw_timer_t* t,
                                             uint64_t deadline_ms) {
  return uvtw__core_start_as(core, t, deadline_ms, 1);
}


/* Non-zero if a re-arm of `t` to `deadline_ms` may be lazy as far as the
 * core is concerned: `t` is active, waits in a slot (its expiry is after
 * now_tick, i.e. its deadline after collected_ms: no division), and moves
 * to a deadline at or after its current one, so its slot comes due no
 * later than the old deadline, and re-files it then.  (The driver may
 * still want the re-arm done in full: timer.c.) */
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


/* The lazy re-arm if the core allows it (uvtw__core_lazy_ok); returns 0,
 * changing nothing, otherwise. */
static inline int uvtw__core_rearm_later(uvtw__core_t* core,
                                         uvtw_timer_t* t,
                                         uint64_t deadline_ms) {
  if (!uvtw__core_lazy_ok(core, t, deadline_ms))
    return 0;
  uvtw__core_rearm_lazy(core, t, deadline_ms);
  return 1;
}


/* Makes the user's `timer` inactive.  No-op on an inactive timer. */
static inline void uvtw__core_stop(uvtw__core_t* core, uvtw_timer_t* t) {
  if (t->link_.next == NULL)
    return;
  uvtw__core_unlink(core, t);
  uvtw__core_count(core, uvtw__timer_ref(t), 1, -1);
}


/* uvtw__core_stop for a task's timer (uvtw__core_start_task). */
static inline void uvtw__core_stop_task(uvtw__core_t* core, uvtw_timer_t* t) {
  if (t->link_.next == NULL)
    return;
  uvtw__core_unlink(core, t);
  uvtw__core_count(core, uvtw__timer_ref(t), 0, -1);
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


/* Takes the first timer of the running pass, or NULL when the pass is over.
 * A one-shot is made inactive; a repeating timer is restarted for *now_ms +
 * repeat, as libuv does before the callback; popped_late is *now_ms minus
 * the deadline it was due at.  The caller runs timer->cb_.
 * The time is read only for a repeating timer: the pass passes the loop's
 * clock, which a callback may move.  Inline: the pass calls it once per
 * timer. */
static inline uvtw_timer_t* uvtw__core_pop_due_at(uvtw__core_t* core,
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
     * dispatch, so an overdue timer fires once, not once per period. */
    deadline = uvtw__sat_add(*now_ms, t->repeat_);
    uvtw__core_order(core, t);
    t->deadline_ = deadline;
    uvtw__core_file(core, t, uvtw__core_tick_of(core, deadline));
  } else {
    uvtw__core_count(core, uvtw__timer_ref(t), uvtw__timer_counted(t), -1);
  }
  return t;
}


/* uvtw__core_pop_due_at for a time given by value. */
static inline uvtw_timer_t* uvtw__core_pop_due(uvtw__core_t* core,
                                               uint64_t now_ms) {
  return uvtw__core_pop_due_at(core, &now_ms);
}


/* a * b / d rounded up, for b < d <= 2^47 (so the result is <= a), in
 * 64-bit arithmetic: the pre-cascade's quota (core.c), which a jump of
 * more than 2^32 ticks needs; tested on its own (test-core-mul-div). */
static inline uint64_t uvtw__mul_div_ceil(uint32_t a, uint64_t b, uint64_t d) {
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


#endif /* UVTW_CORE_INL_H */
