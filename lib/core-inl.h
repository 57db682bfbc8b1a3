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


/* The timer's expiry tick: its deadline rounded up to a tick. */
static inline uint64_t uvtw__core_tick_of(const uvtw__core_t* core,
                                          uint64_t deadline_ms) {
  if (core->tick_ms == 1)
    return deadline_ms;
  return deadline_ms / core->tick_ms + (deadline_ms % core->tick_ms != 0);
}


/* Tick to milliseconds, saturating at UINT64_MAX. */
static inline uint64_t uvtw__core_ms_of(const uvtw__core_t* core,
                                        uint64_t tick) {
  if (tick > UINT64_MAX / core->tick_ms)
    return UINT64_MAX;
  return tick * core->tick_ms;
}


static inline uvtw_timer_t* uvtw__timer_of(struct uvtw__link* link) {
  return uvtw__container_of(link, uvtw_timer_t, link_);
}


/* A timer becomes active (delta 1) or inactive (delta -1).  Only the loop
 * thread writes `active`: a relaxed load and store (no read-modify-write)
 * suffice for readers on other threads. */
static inline void uvtw__core_count(uvtw__core_t* core,
                                    const uvtw_timer_t* t,
                                    int delta) {
  atomic_store_explicit(
      &core->active,
      atomic_load_explicit(&core->active, memory_order_relaxed) + delta,
      memory_order_relaxed);
  if (delta > 0) /* a constant in every caller: one add, no mask */
    core->active_ref += !t->unref_;
  else
    core->active_ref -= !t->unref_;
}


/* Marks level-0 slot s occupied; the caller appends to it. */
static inline void uvtw__core_occupy_l0(uvtw__core_t* core, unsigned s) {
  core->occupied[s / UVTW__WORD_BITS] |= (uint64_t) 1 << (s % UVTW__WORD_BITS);
  core->l0_words |= (uint64_t) 1 << (s / UVTW__WORD_BITS);
}


/* Marks upper slot s occupied by a timer of expiry tick e, keeping its
 * minimum and count; the caller appends to it. */
static inline void uvtw__core_occupy_upper(uvtw__core_t* core,
                                           unsigned s,
                                           uint64_t e) {
  uint64_t bit;
  unsigned u;

  bit = (uint64_t) 1 << (s % UVTW__WORD_BITS);
  u = uvtw__upper_index(s);
  if (!(core->occupied[s / UVTW__WORD_BITS] & bit)) {
    core->occupied[s / UVTW__WORD_BITS] |= bit;
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
    uvtw__core_occupy_upper(core, s, e);
}


/* The slot of level `level` for expiry tick e. */
static inline unsigned uvtw__core_slot(unsigned level, uint64_t e) {
  return uvtw__slot_base(level) +
         (unsigned) ((e >> uvtw__level_shift(level)) &
                     uvtw__ring_mask(level));
}


/* Files a timer whose expiry tick is e, relative to now_tick: by the bit
 * length of e - now, so that anything due within UVTW__L0_SLOTS ticks goes
 * to level 0, where it expires without being moved. */
static inline void uvtw__core_file(uvtw__core_t* core,
                                   uvtw_timer_t* t,
                                   uint64_t e) {
  uint64_t d;
  unsigned level;
  unsigned len;
  unsigned s;

  if (e <= core->now_tick) {
    uvtw__list_append(&core->ready, &t->link_);
    return;
  }
  d = e - core->now_tick;
  if (d < UVTW__L0_SLOTS) {
    s = (unsigned) (e & (UVTW__L0_SLOTS - 1));
    uvtw__core_occupy_l0(core, s);
  } else {
    len = 64 - (unsigned) __builtin_clzll(d);
    if (len > UVTW__FILE_MAX_LEN) {
      uvtw__list_append(&core->overflow, &t->link_);
      return;
    }
    /* level >= 1: uvtw__core_slot() without its level-0 cases. */
    level = (len - UVTW__L0_BITS + UVTW__LN_BITS - 1) / UVTW__LN_BITS;
    s = UVTW__L0_SLOTS + UVTW__LN_SLOTS * (level - 1) +
        (unsigned) ((e >> (UVTW__L0_BITS + UVTW__LN_BITS * (level - 1))) &
                    (UVTW__LN_SLOTS - 1));
    uvtw__core_occupy_upper(core, s, e);
  }
  uvtw__list_append(&core->slots[s], &t->link_);
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
static inline const uvtw_timer_t* uvtw__core_neighbour(
    const uvtw__core_t* core, const uvtw_timer_t* t) {
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
                       (unsigned) (((uintptr_t) head - first) /
                                   sizeof(*head)));
}


/* (Re)starts `timer` for `deadline_ms`, giving it the next start_id, and
 * files it where that deadline belongs.  Returns its expiry tick: the
 * wheel's next wake-up may have moved there. */
static inline uint64_t uvtw__core_start(uvtw__core_t* core,
                                        uvtw_timer_t* t,
                                        uint64_t deadline_ms) {
  uint64_t e;

  t->start_id_ = core->next_start_id++;
  if (t->link_.next != NULL)
    uvtw__core_unlink(core, t);
  else
    uvtw__core_count(core, t, 1);
  t->deadline_ = deadline_ms;
  e = uvtw__core_tick_of(core, deadline_ms);
  uvtw__core_file(core, t, e);
  return e;
}


/* The lazy re-arm: if `t` is active, waits in a slot (its expiry is after
 * now_tick, i.e. its deadline after collected_ms: no division), and moves
 * to a deadline at or after its current one, only its deadline and
 * start_id are written: its slot comes due no later than the old deadline,
 * and re-files it then.  Returns 0, changing nothing, otherwise. */
static inline int uvtw__core_rearm_later(uvtw__core_t* core,
                                         uvtw_timer_t* t,
                                         uint64_t deadline_ms) {
  if (t->link_.next == NULL || deadline_ms < t->deadline_ ||
      t->deadline_ <= core->collected_ms)
    return 0;
  t->start_id_ = core->next_start_id++;
  t->deadline_ = deadline_ms;
  return 1;
}


/* Makes `timer` inactive.  No-op on an inactive timer. */
static inline void uvtw__core_stop(uvtw__core_t* core, uvtw_timer_t* t) {
  if (t->link_.next == NULL)
    return;
  uvtw__core_unlink(core, t);
  uvtw__core_count(core, t, -1);
}


/* Sets the timer's ref flag, keeping active_ref exact. */
static inline void uvtw__core_set_ref(uvtw__core_t* core,
                                      uvtw_timer_t* t,
                                      int ref) {
  if (t->unref_ == !ref)
    return;
  if (t->link_.next != NULL)
    core->active_ref += ref ? 1 : -1;
  t->unref_ = !ref;
}


/* libuv's timer order: (deadline, start_id).  Start ids are unique, so
 * no two timers are equal in it. */
static inline int uvtw__core_before(const struct uvtw__link* a,
                                    const struct uvtw__link* b) {
  const uvtw_timer_t* ta = uvtw__container_of(a, uvtw_timer_t, link_);
  const uvtw_timer_t* tb = uvtw__container_of(b, uvtw_timer_t, link_);

  if (ta->deadline_ != tb->deadline_)
    return ta->deadline_ < tb->deadline_;
  return ta->start_id_ < tb->start_id_;
}


#endif /* UVTW_CORE_INL_H */
