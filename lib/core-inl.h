/* SPDX-License-Identifier: MIT */
/* The core's inline functions: the hot paths (start, stop, lazy re-arm,
 * pop) and the arithmetic they share.  Included by core.h only, after the
 * types and contracts there. */

#ifndef UVTW_CORE_INL_H
#define UVTW_CORE_INL_H

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

/* 1 if the timer is referenced, else 0. */
static inline uint64_t uvtw__timer_ref(const uvtw_timer_t* t) {
  return t->order_ & UVTW__ORDER_REF;
}


/* 1 if the timer is counted in `active` (the user's), else 0. */
static inline uint64_t uvtw__timer_counted(const uvtw_timer_t* t) {
  return (t->order_ & UVTW__ORDER_USER) >> 1;
}

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


/* A tick or more of the loop's time has not been collected. */
static inline int uvtw__core_lags(const uvtw__core_t* core, uint64_t now_ms) {
  return now_ms - core->collected_ms >= core->tick_ms;
}


/* Files `t` for `deadline_ms` relative to now_tick, giving it the next
 * order (unlinking it first if active, counting it if not).  A user's
 * timer (UVTW__ORDER_USER) is counted in `active`, a task's is not; its
 * ref and leeway bits are the timer's own.  Returns its expiry tick. */
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


/* (Re)starts `t` for `deadline_ms`, filed where that deadline belongs
 * relative to now_ms, the loop's time (caught up to first).  Returns its
 * expiry tick: the wheel's next wake-up may have moved there. */
static inline uint64_t uvtw__core_start(uvtw__core_t* core,
                                        uvtw_timer_t* t,
                                        uint64_t deadline_ms,
                                        uint64_t now_ms) {
  if (uvtw__core_lags(core, now_ms))
    uvtw__core_catch_up(core, now_ms);
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
    if ((t->order_ & UVTW__ORDER_LEEWAY) != 0 && (t->order_ & UVTW__ORDER_USER))
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


/* uvtw__core_popped_lateness: with a tick above 1 ms, out of line in
 * core.c (uvtw__core_late_by_tick). */
static inline uint64_t uvtw__core_popped_lateness(const uvtw__core_t* core,
                                                  uint64_t now_ms) {
  if (core->tick_ms != 1)
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

#endif /* UVTW_CORE_INL_H */
