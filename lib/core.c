/* SPDX-License-Identifier: MIT */
/* The hierarchical timing wheel.
 *
 * Six levels: level 0 has 1024 slots, levels 1 to 5 have 64.  Times
 * inside are ticks: a deadline in ms is rounded UP to a tick
 * (e = ceil(deadline / tick_ms)), so nothing fires early.  With tick_ms = 1:
 *
 *   level  slots  slot granularity   level range
 *     0     1024        1 ms            1.0 s
 *     1       64      1.0 s            65.5 s
 *     2       64     65.5 s            69.9 min
 *     3       64     69.9 min           3.1 days
 *     4       64      3.1 days        199 days
 *     5       64    199 days           34.8 years   (2^40 ticks)
 *   overflow list: anything later, up to UINT64_MAX
 *
 * (multiply by tick_ms for other ticks: with 100 ms, level 0 spans 102 s.)
 * Level 0 is wide because it is where timers expire from: RPC deadlines
 * and heartbeats of up to a second never cascade, and a pass collects them
 * without touching any other level.
 *
 * Placement.  With n = now_tick, a timer expiring at tick e > n goes to the
 * level of the highest bit in which e and n differ (bits 0-9: level 0;
 * bits 10-15: level 1; ...), in the slot given by e's digit at that level.
 * So e and n agree above that level, and e's digit there is greater than
 * n's.  Consequences, which are the invariants uvtw__core_check()
 * verifies:
 *   - an occupied slot at level l has a digit greater than n's, so the
 *     lowest set bit of level l's bitmap is the level's earliest slot, and
 *     the lowest occupied level holds the wheel's earliest timers;
 *   - a slot's block (the ticks it covers) starts after n, and the slot must
 *     be collected when n enters that block; then each of its timers either
 *     expires or is re-filed at a lower level ("cascade").  A timer moves at
 *     most LEVELS times;
 *   - advancing n over any gap visits each level's occupied slots once at
 *     most: the work is bounded by the 21 bitmap words and the occupied
 *     lists, not by the length of the gap.
 *
 * Lazy re-arm.  Restarting a timer that waits in a slot to a later deadline
 * only rewrites its deadline: its slot's block starts at or before the old
 * expiry, hence before the new one, so the slot is collected in time and the
 * timer re-filed then.  The idle-timeout pattern (push the deadline on every
 * read) thus touches only the timer.  Invariant: every timer in a slot has
 * e > n and e >= the first tick of its slot's block.
 *
 * Order.  A pass collects every expired timer into `due` and sorts it by
 * (deadline, start_id), libuv's heap order, with a natural merge sort: the
 * collected lists are almost always one or a few sorted runs, so this is one
 * linear scan in the common case.  Lazy re-arms and cascades may leave
 * slots out of order; the sort is what makes the order exact.
 */

#include "core.h"

#include <string.h>



void uvtw__core_init(uvtw__core_t* core, uint64_t tick_ms, uint64_t now_ms) {
  unsigned s;

  memset(core, 0, sizeof(*core));
  core->tick_ms = tick_ms;
  core->now_tick = now_ms / tick_ms;
  core->collected_ms = core->now_tick * tick_ms;
  for (s = 0; s < UVTW__NSLOTS; s++)
    uvtw__list_init(&core->slots[s]);
  uvtw__list_init(&core->overflow);
  uvtw__list_init(&core->ready);
  uvtw__list_init(&core->due);
}


/* The earliest occupied slot of `level`, or UVTW__NSLOTS if none. */
static unsigned first_slot(const uvtw__core_t* core, unsigned level) {
  unsigned w;

  if (level == 0) {
    if (core->l0_words == 0)
      return UVTW__NSLOTS;
    w = __builtin_ctz(core->l0_words);
  } else {
    w = uvtw__slot_base(level) / 64;
    if (core->occupied[w] == 0)
      return UVTW__NSLOTS;
  }
  return w * 64 + __builtin_ctzll(core->occupied[w]);
}


uint64_t uvtw__core_next_tick(const uvtw__core_t* core) {
  uint64_t top_block;
  unsigned level;
  unsigned s;

  if (!uvtw__list_empty(&core->ready) || !uvtw__list_empty(&core->due))
    return core->now_tick;
  /* Every slot of level l lies before every slot of level l + 1. */
  for (level = 0; level < UVTW__LEVELS; level++) {
    s = first_slot(core, level);
    if (s != UVTW__NSLOTS)
      return core->slot_min[s];
  }
  if (uvtw__list_empty(&core->overflow))
    return UINT64_MAX;
  /* Overflow timers are re-filed when n enters the next top-level block.
   * No overflow timer exists while n is in the last block, so no wrap. */
  top_block = core->now_tick >> UVTW__WHEEL_BITS;
  return (top_block + 1) << UVTW__WHEEL_BITS;
}


void uvtw__core_tighten(uvtw__core_t* core) {
  struct uvtw__link* head;
  struct uvtw__link* link;
  struct uvtw__link* next;
  uvtw_timer_t* t;
  uint64_t block_end;
  uint64_t min_e;
  uint64_t e;
  unsigned level;
  unsigned budget;
  unsigned count;
  unsigned s;

  for (budget = UVTW__TIGHTEN_MAX;;) {
    for (level = 0; level < UVTW__LEVELS; level++) {
      s = first_slot(core, level);
      if (s != UVTW__NSLOTS)
        break;
    }
    if (level == UVTW__LEVELS)
      return;
    head = &core->slots[s];
    count = 0;
    for (link = head->next; link != head; link = link->next)
      if (++count > budget)
        return; /* a large slot keeps its early minimum */
    budget -= count;
    /* A timer lazily re-armed past the slot's block would make the wheel
     * wake at this block only to re-file it: re-file it now instead. */
    block_end =
        core->slot_min[s] | (((uint64_t) 1 << uvtw__level_shift(level)) - 1);
    min_e = UINT64_MAX;
    for (link = head->next; link != head; link = next) {
      next = link->next;
      t = uvtw__timer_of(link);
      e = uvtw__core_tick_of(core, t->deadline_);
      if (e > block_end) {
        uvtw__core_unlink(core, t);
        uvtw__core_file(core, t, e);
        core->cascades++;
      } else if (e < min_e) {
        min_e = e;
      }
    }
    if (min_e != UINT64_MAX) {
      core->slot_min[s] = min_e;
      return;
    }
    /* The slot emptied: look at the next one, within the budget. */
  }
}


/* Natural merge sort of a NULL-terminated singly linked list by
 * (deadline, start_id).  Start ids are unique, so stability is moot. */
static int before(const struct uvtw__link* a, const struct uvtw__link* b) {
  const uvtw_timer_t* ta = uvtw__container_of(a, uvtw_timer_t, link_);
  const uvtw_timer_t* tb = uvtw__container_of(b, uvtw_timer_t, link_);

  if (ta->deadline_ != tb->deadline_)
    return ta->deadline_ < tb->deadline_;
  return ta->start_id_ < tb->start_id_;
}


static struct uvtw__link* cut_run(struct uvtw__link* run,
                                  struct uvtw__link** rest) {
  struct uvtw__link* p;

  p = run;
  while (p->next != NULL && !before(p->next, p))
    p = p->next;
  *rest = p->next;
  p->next = NULL;
  return run;
}


static struct uvtw__link* merge(struct uvtw__link* a,
                                struct uvtw__link* b,
                                struct uvtw__link*** tail) {
  struct uvtw__link* head;
  struct uvtw__link** link;

  link = &head;
  while (a != NULL && b != NULL) {
    if (before(b, a)) {
      *link = b;
      b = b->next;
    } else {
      *link = a;
      a = a->next;
    }
    link = &(*link)->next;
  }
  *link = a != NULL ? a : b;
  while (*link != NULL)
    link = &(*link)->next;
  *tail = link;
  return head;
}


static void sort_due(uvtw__core_t* core) {
  struct uvtw__link* head;
  struct uvtw__link* list;
  struct uvtw__link* rest;
  struct uvtw__link* a;
  struct uvtw__link* b;
  struct uvtw__link** tail;
  struct uvtw__link** next_tail;
  struct uvtw__link* p;
  struct uvtw__link* prev;
  int runs;

  head = &core->due;
  for (p = head->next; p != head && p->next != head; p = p->next)
    if (before(p->next, p))
      break;
  if (p == head || p->next == head)
    return; /* already sorted: the common case */

  head->prev->next = NULL;
  list = head->next;
  do {
    struct uvtw__link* merged = NULL;
    tail = &merged;
    runs = 0;
    while (list != NULL) {
      a = cut_run(list, &rest);
      b = rest != NULL ? cut_run(rest, &list) : (list = NULL);
      *tail = merge(a, b, &next_tail);
      tail = next_tail;
      runs++;
    }
    list = merged;
  } while (runs > 1);

  prev = head;
  for (p = list; p != NULL; p = p->next) {
    p->prev = prev;
    prev->next = p;
    prev = p;
  }
  prev->next = head;
  head->prev = prev;
}


/* Moves the occupied slots with flat index lo..hi (one level's) to todo,
 * in index order, which is time order. */
static void take_slots(uvtw__core_t* core,
                       struct uvtw__link* todo,
                       unsigned lo,
                       unsigned hi) {
  uint64_t mask;
  uint64_t take;
  unsigned w;

  for (w = lo / 64; w <= hi / 64; w++) {
    mask = ~(uint64_t) 0;
    if (w == lo / 64)
      mask &= ~(uint64_t) 0 << (lo % 64);
    if (w == hi / 64)
      mask &= ~(uint64_t) 0 >> (63 - hi % 64);
    take = core->occupied[w] & mask;
    for (; take != 0; take &= take - 1) {
      uvtw__core_clear_bit(core, w * 64 + __builtin_ctzll(take));
      uvtw__list_splice(todo, &core->slots[w * 64 + __builtin_ctzll(take)]);
    }
  }
}


void uvtw__core_expire(uvtw__core_t* core, uint64_t now_ms) {
  struct uvtw__link todo;
  struct uvtw__link* link;
  uvtw_timer_t* t;
  uint64_t n;
  uint64_t n2;
  uint64_t old_block;
  uint64_t new_block;
  unsigned level;
  unsigned shift;
  unsigned bits;
  unsigned base;
  unsigned d0;
  unsigned d1;

  uvtw__list_init(&todo);
  /* Timers found ready earlier fire first: their expiry is <= n, before
   * anything in a slot. */
  uvtw__list_splice(&core->due, &core->ready);
  n = core->now_tick;
  n2 = now_ms / core->tick_ms;
  if (n2 > n) {
    for (level = 0; level < UVTW__LEVELS; level++) {
      shift = uvtw__level_shift(level);
      bits = uvtw__level_bits(level);
      base = uvtw__slot_base(level);
      old_block = n >> shift;
      new_block = n2 >> shift;
      if (old_block == new_block)
        break; /* so do all higher levels */
      if ((old_block >> bits) != (new_block >> bits)) {
        /* The level went round: all its slots are due for collection. */
        take_slots(core, level == 0 ? &core->due : &todo, base,
                   base + (1u << bits) - 1);
      } else {
        d0 = (unsigned) (old_block & ((1u << bits) - 1));
        d1 = (unsigned) (new_block & ((1u << bits) - 1));
        take_slots(core, level == 0 ? &core->due : &todo, base + d0 + 1,
                   base + d1);
      }
    }
    if ((n >> UVTW__WHEEL_BITS) != (n2 >> UVTW__WHEEL_BITS))
      uvtw__list_splice(&todo, &core->overflow);
    core->now_tick = n2;
    core->collected_ms = n2 * core->tick_ms;
  }

  /* A level-0 slot holds one tick, so its timers went straight to `due`
   * (one walk less over them), bar lazily re-armed ones, peeled off below.
   * Higher levels cascade: each timer expires or moves down. */
  while (!uvtw__list_empty(&todo)) {
    link = todo.next;
    uvtw__list_remove(link);
    t = uvtw__timer_of(link);
    if (uvtw__core_tick_of(core, t->deadline_) <= core->now_tick) {
      uvtw__list_append(&core->due, link);
    } else {
      uvtw__core_file(core, t, uvtw__core_tick_of(core, t->deadline_));
      core->cascades++;
    }
  }
  sort_due(core);
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
      uvtw__core_file(core, t, uvtw__core_tick_of(core, t->deadline_));
      core->cascades++;
    }
  }
}


uvtw_timer_t* uvtw__core_pop_due(uvtw__core_t* core, uint64_t now_ms) {
  uvtw_timer_t* t;
  uint64_t deadline;

  if (uvtw__list_empty(&core->due))
    return NULL;
  t = uvtw__timer_of(core->due.next);
  uvtw__list_remove(&t->link_);
  if (t->repeat_ != 0) {
    /* libuv's rule: the next deadline counts from the loop time at
     * dispatch, so an overdue timer fires once, not once per period. */
    deadline = uvtw__sat_add(now_ms, t->repeat_);
    t->start_id_ = core->next_start_id++;
    t->deadline_ = deadline;
    uvtw__core_file(core, t, uvtw__core_tick_of(core, deadline));
  } else {
    uvtw__core_count(core, t, -1);
  }
  return t;
}


void uvtw__core_defer(uvtw__core_t* core, uint64_t first_id) {
  struct uvtw__link* link;
  struct uvtw__link* next;

  for (link = core->due.next; link != &core->due; link = next) {
    next = link->next;
    if (uvtw__timer_of(link)->start_id_ >= first_id) {
      uvtw__list_remove(link);
      uvtw__list_append(&core->ready, link);
    }
  }
}


static void walk_list(struct uvtw__link* head,
                      uint64_t limit,
                      void (*fn)(uvtw_timer_t*, void*),
                      void* arg) {
  struct uvtw__link* link;
  struct uvtw__link* next;
  uvtw_timer_t* t;

  for (link = head->next; link != head; link = next) {
    next = link->next; /* fn may move or stop this timer, and only it */
    t = uvtw__timer_of(link);
    if (t->start_id_ < limit)
      fn(t, arg);
  }
}


void uvtw__core_walk(uvtw__core_t* core,
                     void (*fn)(uvtw_timer_t* timer, void* arg),
                     void* arg) {
  uint64_t limit;
  unsigned s;

  /* A timer that fn restarts gets a start_id >= limit, so wherever it is
   * re-filed, the walk does not visit it again. */
  limit = core->next_start_id;
  for (s = 0; s < UVTW__NSLOTS; s++)
    walk_list(&core->slots[s], limit, fn, arg);
  walk_list(&core->overflow, limit, fn, arg);
  walk_list(&core->ready, limit, fn, arg);
  walk_list(&core->due, limit, fn, arg);
}


static void clear_list(struct uvtw__link* head) {
  while (!uvtw__list_empty(head))
    uvtw__list_remove(head->next);
}


void uvtw__core_clear(uvtw__core_t* core) {
  unsigned s;

  for (s = 0; s < UVTW__NSLOTS; s++)
    clear_list(&core->slots[s]);
  memset(core->occupied, 0, sizeof(core->occupied));
  core->l0_words = 0;
  clear_list(&core->overflow);
  clear_list(&core->ready);
  clear_list(&core->due);
  atomic_store_explicit(&core->active, 0, memory_order_relaxed);
  core->tasks_filed = 0;
  core->active_ref = 0;
}


/* ---- uvtw__core_check ------------------------------------------------ */

#define CHECK(cond, ...)                                                      \
  do {                                                                        \
    if (!(cond)) {                                                            \
      if (out != NULL) {                                                      \
        fprintf(out, "uvtw__core_check: %s: ", #cond);                       \
        fprintf(out, __VA_ARGS__);                                            \
        fputc('\n', out);                                                     \
      }                                                                       \
      return -1;                                                              \
    }                                                                         \
  } while (0)

typedef struct {
  uint64_t count;
  uint64_t tasks;
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
    e = uvtw__core_tick_of(core, t->deadline_);
    CHECK(e >= lo && e <= hi,
          "%s: expiry %llu outside [%llu, %llu] (now_tick %llu)", name,
          (unsigned long long) e, (unsigned long long) lo,
          (unsigned long long) hi, (unsigned long long) core->now_tick);
    CHECK(t->start_id_ < core->next_start_id, "%s: start_id", name);
    if (t->task_)
      tally->tasks++;
    else
      tally->count++;
    tally->refs += !t->unref_;
  }
  return 0;
}


int uvtw__core_check(const uvtw__core_t* core, FILE* out) {
  const struct uvtw__link* head;
  const struct uvtw__link* link;
  const uvtw_timer_t* t;
  tally_t tally;
  uint64_t n;
  uint64_t block;
  uint64_t e;
  uint64_t next;
  unsigned shift;
  unsigned bits;
  unsigned digit;
  unsigned d;
  unsigned s;
  unsigned w;
  int occupied;
  int l;

  n = core->now_tick;
  CHECK(core->collected_ms == n * core->tick_ms, "collected_ms %llu",
        (unsigned long long) core->collected_ms);
  memset(&tally, 0, sizeof(tally));
  tally.min_e = UINT64_MAX;

  for (w = 0; w < UVTW__L0_WORDS; w++)
    CHECK(((core->l0_words >> w) & 1) == (core->occupied[w] != 0),
          "level 0 word summary bit %u", w);
  for (l = 0; l < UVTW__LEVELS; l++) {
    shift = uvtw__level_shift(l);
    bits = uvtw__level_bits(l);
    digit = (n >> shift) & ((1u << bits) - 1);
    for (d = 0; d < (1u << bits); d++) {
      s = uvtw__slot_base(l) + d;
      head = &core->slots[s];
      occupied = (core->occupied[s / 64] >> (s % 64)) & 1;
      CHECK(occupied == !uvtw__list_empty(head),
            "bitmap bit of level %d slot %u is %d", l, d, occupied);
      if (!occupied)
        continue;
      CHECK(d > digit, "level %d slot %u is at or before now (digit %u)", l,
            d, digit);
      /* First tick of the slot's block: n's digits above level l, then d. */
      block = (n >> (shift + bits)) << (shift + bits);
      block |= (uint64_t) d << shift;
      CHECK(core->slot_min[s] >= block,
            "level %d slot %u: slot_min %llu before its block %llu", l, d,
            (unsigned long long) core->slot_min[s],
            (unsigned long long) block);
      CHECK(core->slot_min[s] <= (block | (((uint64_t) 1 << shift) - 1)),
            "level %d slot %u: slot_min %llu after its block", l, d,
            (unsigned long long) core->slot_min[s]);
      CHECK(check_list(core, head, core->slot_min[s], UINT64_MAX, "slot",
                       &tally, out) == 0,
            "level %d slot %u", l, d);
      for (link = head->next; link != head; link = link->next) {
        t = uvtw__container_of(link, uvtw_timer_t, link_);
        e = uvtw__core_tick_of(core, t->deadline_);
        if (e < tally.min_e)
          tally.min_e = e;
      }
    }
  }
  /* Overflow timers belong to a later top-level block than n. */
  block = ((n >> UVTW__WHEEL_BITS) + 1) << UVTW__WHEEL_BITS;
  CHECK(uvtw__list_empty(&core->overflow) || block != 0, "overflow at top");
  CHECK(check_list(core, &core->overflow, block, UINT64_MAX, "overflow",
                   &tally, out) == 0, "overflow");
  for (link = core->overflow.next; link != &core->overflow; link = link->next) {
    e = uvtw__core_tick_of(core, uvtw__container_of(link, uvtw_timer_t,
                                                    link_)->deadline_);
    if (e < tally.min_e)
      tally.min_e = e;
  }
  /* Nothing is due early: ready and due hold only expired timers. */
  CHECK(check_list(core, &core->ready, 0, n, "ready", &tally, out) == 0,
        "ready");
  CHECK(check_list(core, &core->due, 0, n, "due", &tally, out) == 0, "due");
  for (link = core->due.next; link != &core->due && link->next != &core->due;
       link = link->next)
    CHECK(before(link, link->next), "due list out of order");

  CHECK(tally.count == atomic_load_explicit(&core->active,
                                            memory_order_relaxed),
        "active %llu, counted %llu",
        (unsigned long long) atomic_load_explicit(&core->active,
                                                  memory_order_relaxed),
        (unsigned long long) tally.count);
  CHECK(tally.tasks == core->tasks_filed, "tasks_filed %llu, counted %llu",
        (unsigned long long) core->tasks_filed,
        (unsigned long long) tally.tasks);
  CHECK(tally.refs == core->active_ref, "active_ref %llu, counted %llu",
        (unsigned long long) core->active_ref,
        (unsigned long long) tally.refs);

  /* The next wake-up is never later than the true minimum. */
  next = uvtw__core_next_tick(core);
  if (!uvtw__list_empty(&core->ready) || !uvtw__list_empty(&core->due))
    CHECK(next <= n, "ready work but next wake-up %llu",
          (unsigned long long) next);
  CHECK(next <= tally.min_e, "next wake-up %llu after the minimum %llu",
        (unsigned long long) next, (unsigned long long) tally.min_e);
  CHECK(tally.count + tally.tasks != 0 || next == UINT64_MAX,
        "empty wheel wakes at %llu", (unsigned long long) next);
  return 0;
}
