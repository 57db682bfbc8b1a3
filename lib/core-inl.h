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


static inline void uvtw__core_count(uvtw__core_t* core,
                                    uvtw_timer_t* t,
                                    int delta) {
  /* Only the loop thread writes `active`: a relaxed load and store (no
   * read-modify-write) suffice for readers on other threads. */
  if (t->task_)
    core->tasks_filed += delta;
  else
    atomic_store_explicit(
        &core->active,
        atomic_load_explicit(&core->active, memory_order_relaxed) + delta,
        memory_order_relaxed);
  if (!t->unref_)
    core->active_ref += delta;
}


/* Files a timer whose expiry tick is e, relative to now_tick. */
static inline void uvtw__core_file(uvtw__core_t* core,
                                   uvtw_timer_t* t,
                                   uint64_t e) {
  uint64_t n;
  uint64_t bit;
  unsigned level;
  unsigned s;

  n = core->now_tick;
  if (e <= n) {
    uvtw__list_append(&core->ready, &t->link_);
    return;
  }
  /* The level of the highest bit in which e and n differ. */
  level = 63 - __builtin_clzll(e ^ n);
  level = level < UVTW__L0_BITS
              ? 0
              : 1 + (level - UVTW__L0_BITS) / UVTW__LN_BITS;
  if (level >= UVTW__LEVELS) {
    uvtw__list_append(&core->overflow, &t->link_);
    return;
  }
  s = uvtw__slot_base(level) +
      (unsigned) ((e >> uvtw__level_shift(level)) &
                  ((1u << uvtw__level_bits(level)) - 1));
  bit = (uint64_t) 1 << (s % 64);
  if (!(core->occupied[s / 64] & bit)) {
    core->occupied[s / 64] |= bit;
    core->l0_words |= (uint32_t) (s < UVTW__L0_SLOTS) << (s / 64);
    core->slot_min[s] = e;
  } else if (e < core->slot_min[s]) {
    core->slot_min[s] = e;
  }
  uvtw__list_append(&core->slots[s], &t->link_);
}


/* Clears slot s's bit (it just became empty). */
static inline void uvtw__core_clear_bit(uvtw__core_t* core, unsigned s) {
  core->occupied[s / 64] &= ~((uint64_t) 1 << (s % 64));
  if (s < UVTW__L0_SLOTS && core->occupied[s / 64] == 0)
    core->l0_words &= ~((uint32_t) 1 << (s / 64));
}


/* Unlinks an active timer; returns non-zero if that emptied a slot. */
static inline int uvtw__core_unlink(uvtw__core_t* core, uvtw_timer_t* t) {
  struct uvtw__link* head;
  uintptr_t first;
  uintptr_t last;
  size_t index;

  head = uvtw__list_remove(&t->link_);
  if (head == NULL)
    return 0;
  first = (uintptr_t) &core->slots[0];
  last = (uintptr_t) &core->slots[UVTW__NSLOTS - 1];
  if ((uintptr_t) head < first || (uintptr_t) head > last)
    return 0; /* overflow, ready or due: no bitmap */
  index = ((uintptr_t) head - first) / sizeof(*head);
  uvtw__core_clear_bit(core, (unsigned) index);
  return 1;
}


/* (Re)starts `timer` for `deadline_ms`, giving it the next start_id, and
 * files it where that deadline belongs.  Returns its expiry tick: the
 * wheel's next wake-up may have moved there. */
static inline uint64_t uvtw__core_start(uvtw__core_t* core,
                                        uvtw_timer_t* t,
                                        uint64_t deadline_ms) {
  uint64_t e;

  t->start_id_ = core->next_start_id++;
  if (t->link_.next != NULL) {
    uvtw__core_unlink(core, t);
  } else {
    uvtw__core_count(core, t, 1);
  }
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


/* Makes `timer` inactive.  No-op on an inactive timer.  Returns non-zero if
 * this emptied a slot (the next wake-up may now be later). */
static inline int uvtw__core_stop(uvtw__core_t* core, uvtw_timer_t* t) {
  int emptied;

  if (t->link_.next == NULL)
    return 0;
  emptied = uvtw__core_unlink(core, t);
  uvtw__core_count(core, t, -1);
  return emptied;
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

#endif /* UVTW_CORE_INL_H */
