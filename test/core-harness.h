/* SPDX-License-Identifier: MIT */
/* Differential harness for the pure wheel: random operations on a simulated
 * clock, applied both to the wheel and to a reference model that is
 * obviously right (a flat array scanned in full), checking that the same
 * timers fire at the same simulated time in the same order, and calling
 * uvtw__core_check() after every step.  Shared by test-core-model.c (a
 * seeded PRNG draws the operations) and fuzz-core.c (libFuzzer's bytes
 * do). */

#ifndef UVTW_CORE_HARNESS_H
#define UVTW_CORE_HARNESS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"

#define H_TIMERS 96
#define H_MAX_FIRES H_TIMERS /* a timer fires at most once a pass */
#define H_MAX_OPS 3          /* per callback */

typedef struct {
  int active;
  uint64_t deadline;
  uint64_t repeat;
  uint64_t order; /* the model's own (re)start counter */
  unsigned g;     /* leeway: expiry rounded up to 2^g ticks */
} model_timer_t;

typedef struct {
  int kind; /* 0 start, 1 stop, 2 set the leeway (if inactive) */
  unsigned g;
  int lazy; /* a start may re-arm lazily */
  int index;
  uint64_t timeout;
  uint64_t repeat;
} h_op_t;

typedef struct harness_s harness_t;
struct harness_s {
  /* The source of decisions: returns a value in [0, bound). */
  uint64_t (*draw)(harness_t* h, uint64_t bound);
  void* source;
  uint64_t tick;
  uint64_t now;
  uvtw__core_t core;
  uvtw_timer_t timers[H_TIMERS];
  model_timer_t model[H_TIMERS];
  uint64_t model_order;
  /* What the wheel did in the current pass, for the model to replay. */
  int fired[H_MAX_FIRES];
  h_op_t ops[H_MAX_FIRES][H_MAX_OPS];
  int nops[H_MAX_FIRES];
  int nfired;
  int overflowed;
  uint64_t total_fired;
  const char* failure;
};

#define H_FAIL(h, msg)                                                         \
 do {                                                                          \
  fprintf(stderr, "%s:%d: %s (now %llu, tick %llu)\n", __FILE__, __LINE__,     \
          msg, (unsigned long long) (h)->now, (unsigned long long) (h)->tick); \
  abort();                                                                     \
 } while (0)


static void h_check_wheel(harness_t* h) {
  if (uvtw__core_check(&h->core, stderr) != 0)
    H_FAIL(h, "uvtw__core_check failed");
}


static uint64_t h_sat_add(uint64_t a, uint64_t b) {
  return a + b < a ? UINT64_MAX : a + b;
}


/* The last tick the clock reaches: it never reaches UINT64_MAX ms. */
static uint64_t h_model_last_tick(const harness_t* h) {
  return (UINT64_MAX - 1) / h->tick;
}


/* The model's own rounding: a deadline rounds UP to a whole tick;
 * UINT64_MAX (never) past the last tick. */
static uint64_t h_model_tick(const harness_t* h, uint64_t deadline) {
  uint64_t t;

  t = deadline / h->tick + (deadline % h->tick != 0);
  return t > h_model_last_tick(h) ? UINT64_MAX : t;
}


/* The model's expiry: the deadline's tick rounded up to a multiple of 2^g
 * ticks, or the tick itself where that passes UINT64_MAX, and no later
 * than the last tick; never stays never. */
static uint64_t h_model_expiry(const harness_t* h, const model_timer_t* m) {
  uint64_t e;
  uint64_t size;

  e = h_model_tick(h, m->deadline);
  size = (uint64_t) 1 << m->g;
  if (e > h_model_last_tick(h) || e % size == 0 || e > UINT64_MAX - (size - 1))
    return e;
  e = (e / size + 1) * size;
  return e > h_model_last_tick(h) ? h_model_last_tick(h) : e;
}


/* A leeway timer's next deadline: the first deadline + k * repeat past
 * now, saturating. */
static uint64_t h_model_grid(uint64_t d, uint64_t repeat, uint64_t now) {
  uint64_t k;

  if (d + repeat < d)
    return UINT64_MAX;
  if (d + repeat > now)
    return d + repeat;
  k = (now - d) / repeat + 1;
  if (k > (UINT64_MAX - d) / repeat)
    return UINT64_MAX;
  return d + k * repeat;
}


/* Outside a pass the model and the wheel must agree on every timer. */
static void h_check(harness_t* h) {
  uint64_t min_e;
  uint64_t e;
  int i;

  h_check_wheel(h);
  /* Cross-check with the model: the wheel's next wake-up is never after the
   * model's earliest expiry, and the active count agrees. */
  min_e = UINT64_MAX;
  for (i = 0; i < H_TIMERS; i++) {
    if (!!h->model[i].active != !!(h->timers[i].link_.next != NULL))
      H_FAIL(h, "active state differs from the model");
    if (!h->model[i].active)
      continue;
    e = h_model_expiry(h, &h->model[i]);
    if (e < min_e)
      min_e = e;
    if (h->timers[i].deadline_ != h->model[i].deadline)
      H_FAIL(h, "deadline differs from the model");
  }
  /* An expiry already past (a catch-up filed it in `ready`) wants a
   * wake-up now. */
  if (min_e < h->core.now_tick)
    min_e = h->core.now_tick;
  if (uvtw__core_next_tick(&h->core) > min_e)
    H_FAIL(h, "next wake-up later than the model's earliest expiry");
  if (uvtw__core_next_expiry(&h->core) > min_e)
    H_FAIL(h, "next expiry later than the model's earliest expiry");
}


/* The model's earliest expiry, now_tick if it passed (the timer waits in
 * `ready`), UINT64_MAX if no timer is active. */
static uint64_t h_model_next(const harness_t* h) {
  uint64_t min_e;
  uint64_t e;
  int i;

  min_e = UINT64_MAX;
  for (i = 0; i < H_TIMERS; i++)
    if (h->model[i].active && (e = h_model_expiry(h, &h->model[i])) < min_e)
      min_e = e;
  return min_e < h->core.now_tick ? h->core.now_tick : min_e;
}


/* A timeout from 0 to UINT64_MAX, most of them small. */
static uint64_t h_timeout(harness_t* h) {
  switch (h->draw(h, 8)) {
  case 0:
    return h->draw(h, 4);
  case 1:
  case 2:
    return h->draw(h, 300);
  case 3:
    return h->draw(h, 70000);
  case 4:
    return h->draw(h, (uint64_t) 1 << 30);
  case 5:
    return h->draw(h, (uint64_t) 1 << 45);
  case 6:
    return UINT64_MAX - h->draw(h, 3);
  default:
    return h->draw(h, UINT64_MAX);
  }
}


static void h_model_start(harness_t* h,
                          int i,
                          uint64_t timeout,
                          uint64_t repeat) {
  h->model[i].active = 1;
  h->model[i].deadline = h_sat_add(h->now, timeout);
  h->model[i].repeat = repeat;
  h->model[i].order = h->model_order++;
}


/* What the library's restart rule does with a timer of the core: against
 * a driver that was never armed, as a virtual wheel's.  An inactive timer
 * is re-filed as the rule says of every timer the core will not re-arm
 * lazily. */
static unsigned h_restart(harness_t* h,
                          const uvtw_timer_t* t,
                          uint64_t deadline) {
  static const uvtw__driver_t idle = UVTW__DRIVER_IDLE;

  (void) h;
  return uvtw__driver_restart(&idle, &h->core, t, deadline);
}


static void h_apply(harness_t* h, const h_op_t* op, int to_wheel) {
  uvtw_timer_t* t;

  t = &h->timers[op->index];
  if (op->kind == 2) {
    if (to_wheel && t->link_.next == NULL) {
      t->order_ = (t->order_ & ~UVTW__ORDER_LEEWAY) |
                  (uint64_t) op->g << UVTW__ORDER_LEEWAY_SHIFT;
      h->core.leeway_used |= op->g != 0; /* as uvtw_timer_set_leeway */
    } else if (!to_wheel && !h->model[op->index].active)
      h->model[op->index].g = op->g;
  } else if (op->kind == 0) {
    if (to_wheel) {
      t->repeat_ = op->repeat;
      if (op->lazy && !(h_restart(h, t, h_sat_add(h->now, op->timeout)) &
                        UVTW__RESTART_REFILE))
        uvtw__core_rearm_lazy(&h->core, t, h_sat_add(h->now, op->timeout));
      else
        uvtw__core_start(&h->core, t, h_sat_add(h->now, op->timeout), h->now);
    } else {
      h_model_start(h, op->index, op->timeout, op->repeat);
    }
  } else {
    if (to_wheel)
      uvtw__core_stop(&h->core, t);
    else
      h->model[op->index].active = 0;
  }
}


static void h_random_op(harness_t* h, h_op_t* op) {
  op->index = (int) h->draw(h, H_TIMERS);
  op->kind = h->draw(h, 4) == 0 ? 1 : 0;
  if (h->draw(h, 8) == 0) {
    op->kind = 2;
    switch (h->draw(h, 4)) {
    case 0:
      op->g = 0;
      break;
    case 1:
      op->g = (unsigned) h->draw(h, 64);
      break;
    default:
      op->g = 1 + (unsigned) h->draw(h, 12);
    }
  }
  op->lazy = h->draw(h, 4) != 0;
  op->timeout = h_timeout(h);
  /* Repeats are rarer, and sometimes huge. */
  switch (h->draw(h, 6)) {
  case 0:
    op->repeat = 1 + h->draw(h, 200);
    break;
  case 1:
    op->repeat = h->draw(h, 2) ? UINT64_MAX : (uint64_t) 1 << 50;
    break;
  default:
    op->repeat = 0;
  }
}


static void h_timer_cb(uvtw_timer_t* t) {
  harness_t* h;
  int k;
  int n;

  h = t->data;
  if (h->nfired == H_MAX_FIRES) {
    h->overflowed = 1;
    return;
  }
  k = h->nfired++;
  h->fired[k] = (int) (t - h->timers);
  n = (int) h->draw(h, H_MAX_OPS + 2);
  if (n > H_MAX_OPS)
    n = 0;
  h->nops[k] = n;
  for (int j = 0; j < n; j++) {
    h_random_op(h, &h->ops[k][j]);
    h_apply(h, &h->ops[k][j], 1);
    h_check_wheel(h);
  }
}


/* The model's pass: every timer due at the start (its expiry passed), in
 * (deadline, order) order; a timer stopped or restarted by an earlier
 * callback is skipped. */
static void h_model_pass(harness_t* h) {
  uint64_t now_tick;
  int due[H_TIMERS];
  uint64_t due_order[H_TIMERS];
  int ndue;
  int fired;
  int i;
  int j;
  int k;

  now_tick = h->now / h->tick;
  if (now_tick > h_model_last_tick(h))
    now_tick = h_model_last_tick(h);
  ndue = 0;
  for (i = 0; i < H_TIMERS; i++)
    if (h->model[i].active && h_model_expiry(h, &h->model[i]) <= now_tick)
      due[ndue++] = i;
  /* Insertion sort: obviously right. */
  for (i = 1; i < ndue; i++)
    for (j = i; j > 0; j--) {
      model_timer_t* a = &h->model[due[j - 1]];
      model_timer_t* b = &h->model[due[j]];
      if (a->deadline < b->deadline ||
          (a->deadline == b->deadline && a->order < b->order))
        break;
      k = due[j];
      due[j] = due[j - 1];
      due[j - 1] = k;
    }
  for (i = 0; i < ndue; i++)
    due_order[i] = h->model[due[i]].order;

  fired = 0;
  for (i = 0; i < ndue; i++) {
    model_timer_t* m = &h->model[due[i]];
    if (!m->active || m->order != due_order[i])
      continue; /* stopped or restarted earlier in this pass */
    if (fired >= h->nfired)
      H_FAIL(h, "the model fires a timer the wheel did not");
    if (h->fired[fired] != due[i]) {
      fprintf(stderr, "pass fire #%d: wheel fired timer %d, model %d\n", fired,
              h->fired[fired], due[i]);
      H_FAIL(h, "firing order differs from the model");
    }
    if (m->deadline > h->now)
      H_FAIL(h, "fired before its deadline");
    if (m->repeat != 0 && m->g != 0) {
      m->deadline = h_model_grid(m->deadline, m->repeat, h->now);
      m->order = h->model_order++;
    } else if (m->repeat != 0) {
      m->deadline = h_sat_add(h->now, m->repeat);
      m->order = h->model_order++;
    } else {
      m->active = 0;
    }
    for (k = 0; k < h->nops[fired]; k++)
      h_apply(h, &h->ops[fired][k], 0);
    fired++;
  }
  if (fired != h->nfired)
    H_FAIL(h, "the wheel fired a timer the model did not");
}


static void h_pass(harness_t* h) {
  uvtw_timer_t* t;

  h->nfired = 0;
  h->overflowed = 0;
  uvtw__core_expire(&h->core, h->now);
  h_check_wheel(h);
  while ((t = uvtw__core_pop_due(&h->core, &h->now)) != NULL) {
    t->cb_(t);
    h_check_wheel(h);
  }
  if (h->overflowed)
    H_FAIL(h, "too many fires in one pass for the harness");
  h_model_pass(h);
  h->total_fired += h->nfired;
  h_check(h);
}


/* chunk: the pre-cascade's chunk; 0 keeps the library's. */
static void h_init(harness_t* h,
                   uint64_t tick,
                   uint64_t start_ms,
                   uint32_t chunk) {
  int i;

  h->tick = tick;
  h->now = start_ms;
  h->model_order = 0;
  h->total_fired = 0;
  uvtw__core_init(&h->core, tick, start_ms);
  if (chunk != 0)
    h->core.precascade_chunk = chunk;
  for (i = 0; i < H_TIMERS; i++) {
    memset(&h->timers[i], 0, sizeof(h->timers[i]));
    h->timers[i].data = h;
    h->timers[i].cb_ = h_timer_cb;
    h->timers[i].order_ = UVTW__ORDER_USER; /* a user's, unreferenced */
    memset(&h->model[i], 0, sizeof(h->model[i]));
  }
}


/* One step: an operation, or an advance of the clock and a pass. */
static void h_step(harness_t* h) {
  h_op_t op;
  uint64_t next;
  uint64_t step;

  switch (h->draw(h, 12)) {
  case 10:
    /* tighten returns the next wake-up it leaves, by a shorter way. */
    next = uvtw__core_tighten(&h->core);
    if (next != uvtw__core_next_tick(&h->core))
      H_FAIL(h, "tighten returned another next wake-up than next_tick");
    /* next_due is the model's earliest expiry, exactly. */
    if (h->draw(h, 2) && uvtw__core_next_due(&h->core) != h_model_next(h))
      H_FAIL(h, "next_due differs from the model's earliest expiry");
    break;
  case 11:
    /* The loop's clock moves on with no pass: the next start catches the
     * wheel's now up to it, as far as nothing is due in between. */
    h->now = h_sat_add(h->now, h->draw(h, 3000));
    break;
  case 0:
  case 1:
  case 2:
  case 3:
  case 4:
    h_random_op(h, &op);
    h_apply(h, &op, 1);
    h_apply(h, &op, 0);
    break;
  case 5:
    /* Straight to the wheel's next wake-up, as the driver does, or to its
     * next possible expiry, as the virtual clock does: past the overflow
     * list's re-examinations, to its bound (an early one after a stop or
     * a lazy re-arm there, which this pass then tightens). */
    if (h->draw(h, 2))
      next = uvtw__core_next_tick(&h->core);
    else
      next = uvtw__core_next_expiry(&h->core);
    if (next != UINT64_MAX)
      next = uvtw__core_ms_of(&h->core, next);
    if (next > h->now && next != UINT64_MAX)
      h->now = next;
    h_pass(h);
    break;
  default:
    switch (h->draw(h, 8)) {
    case 0:
      step = 0;
      break;
    case 1:
      step = h->draw(h, (uint64_t) 1 << 40); /* a huge jump */
      break;
    case 2:
      step = h->draw(h, 100000);
      break;
    default:
      step = h->draw(h, 150);
    }
    h->now = h_sat_add(h->now, step);
    h_pass(h);
  }
  h_check(h);
}

#endif /* UVTW_CORE_HARNESS_H */
