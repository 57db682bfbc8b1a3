/* SPDX-License-Identifier: MIT */
/* The pure wheel against a reference model on a simulated clock: random
 * starts, stops, re-arms earlier and later, repeats, small steps and huge
 * jumps, deadlines from 0 to UINT64_MAX; several seeds and ticks of 1, 7 and
 * 100 ms.  The same timers must fire at the same time in the same order,
 * and uvtw__core_check() must pass after every step. */

#include "test.h"
#include "core-harness.h"
#include "test-cases.h"

static uint64_t rng_state;


static uint64_t splitmix64(void) {
  return test_splitmix64(&rng_state);
}


static uint64_t draw_prng(harness_t* h, uint64_t bound) {
  (void) h;
  if (bound == 0)
    return 0;
  return splitmix64() % bound;
}


static harness_t harness;
static uint64_t all_fired;
static const uint64_t ticks[] = {1, 7, 100};
static const uint64_t starts[] = {0, 123456789, (uint64_t) 1 << 52};


/* Steps per run: UVTW_MODEL_STEPS, default 10,000 (the run under valgrind
 * takes 2,000). */
static int steps(void) {
  const char* s;

  s = getenv("UVTW_MODEL_STEPS");
  if (s != NULL && atoi(s) > 0)
    return atoi(s);
  return 10000;
}


/* chunk != 0: the pre-cascade moves at most that many timers per step (and
 * wakes for every chunk), so the invariants are checked after each small
 * incremental step. */
static void run(
    uint64_t seed, uint64_t tick, uint64_t start, int steps, uint32_t chunk) {
  harness_t* h;
  int i;

  h = &harness;
  rng_state = seed;
  h->draw = draw_prng;
  h_init(h, tick, start, chunk);
  for (i = 0; i < steps; i++)
    h_step(h);
  all_fired += h->total_fired;
  fprintf(stderr,
          "seed %llu tick %llu start %llu chunk %u: %llu fired, %llu "
          "cascades\n",
          (unsigned long long) seed, (unsigned long long) tick,
          (unsigned long long) start, (unsigned) chunk,
          (unsigned long long) h->total_fired,
          (unsigned long long) h->core.cascades);
}


/* Restarting a waiting timer later must not move it (the lazy re-arm);
 * earlier must. */
static void lazy_rearm(void) {
  static const uvtw__driver_t idle = UVTW__DRIVER_IDLE;
  uvtw__core_t core;
  uvtw_timer_t a;
  struct uvtw__link* prev;

  memset(&a, 0, sizeof(a));
  uvtw__core_init(&core, 1, 1000);
  uvtw__core_start(&core, &a, 6000, core.collected_ms);
  prev = a.link_.prev;
  ASSERT_EQ(uvtw__driver_restart(&idle, &core, &a, 9000), UVTW__RESTART_LAZY);
  uvtw__core_rearm_lazy(&core, &a, 9000);
  ASSERT_PTR_EQ(a.link_.prev, prev);
  ASSERT_UEQ(a.deadline_, 9000);
  ASSERT_EQ(uvtw__core_check(&core, stderr), 0);
  /* Its old slot comes due: it is re-filed, not fired. */
  uvtw__core_expire(&core, 6500);
  ASSERT_PTR_EQ(uvtw__core_pop_due(&core, &(uint64_t){6500}), NULL);
  ASSERT(a.link_.next != NULL);
  ASSERT_EQ(uvtw__core_check(&core, stderr), 0);
  uvtw__core_expire(&core, 8999);
  ASSERT_PTR_EQ(uvtw__core_pop_due(&core, &(uint64_t){8999}), NULL);
  uvtw__core_expire(&core, 9000);
  ASSERT_PTR_EQ(uvtw__core_pop_due(&core, &(uint64_t){9000}), &a);
  ASSERT(a.link_.next == NULL);
  /* Earlier moves it at once. */
  uvtw__core_start(&core, &a, 50000, core.collected_ms);
  ASSERT_EQ(uvtw__driver_restart(&idle, &core, &a, 20000),
            UVTW__RESTART_REFILE);
  ASSERT_UEQ(uvtw__core_start(&core, &a, 20000, core.collected_ms), 20000);
  ASSERT_UEQ(uvtw__core_next_tick(&core), 20000);
  ASSERT_EQ(uvtw__core_check(&core, stderr), 0);
}


/* One pass over a gap of 2^40 ms (the whole wheel and more) fires all. */
static void long_gap(void) {
  static uvtw_timer_t t[1000];
  uvtw__core_t core;
  uint64_t fired;
  int i;

  memset(t, 0, sizeof(t));
  uvtw__core_init(&core, 1, 0);
  for (i = 0; i < 1000; i++)
    uvtw__core_start(&core, &t[i], (uint64_t) i * 7919 * 7919,
                     core.collected_ms);
  uvtw__core_expire(&core, (uint64_t) 1 << 40);
  for (fired = 0; uvtw__core_pop_due(&core, &(uint64_t){(uint64_t) 1 << 40});
       fired++)
    ;
  ASSERT_UEQ(fired, 1000);
  ASSERT_UEQ(uvtw__core_next_tick(&core), UINT64_MAX);
  ASSERT_EQ(uvtw__core_check(&core, stderr), 0);
}


/* A slot's count (core.h) reaches 2^32, so it stays an upper bound on
 * the slot's timers after that many filings (stops do not lower it), and
 * the pre-cascade paces so full a slot without overflow; its timers still
 * fire at their deadlines. */
static void huge_count(void) {
  static const uint64_t deadline[] = {5000, 5000, 5001};
  uvtw__core_t core;
  uvtw_timer_t t[3];
  uvtw_timer_t* popped;
  uint64_t now;
  size_t u;
  int fired;
  int i;

  memset(t, 0, sizeof(t));
  uvtw__core_init(&core, 1, 0);
  /* 5000 and 5001 ms: level 1 (from 2048 ticks on), one block of 1024. */
  u = uvtw__upper_index(uvtw__core_slot(1, 5000));
  ASSERT_UEQ(u, uvtw__upper_index(uvtw__core_slot(1, 5001)));
  uvtw__core_start(&core, &t[0], deadline[0], core.collected_ms);
  ASSERT_UEQ(core.count[u], 1);
  core.count[u] = UINT32_MAX - 1; /* as after that many filings and stops */
  for (i = 1; i < 3; i++) {
    uvtw__core_start(&core, &t[i], deadline[i], core.collected_ms);
    ASSERT_UEQ(core.count[u], (uint64_t) UINT32_MAX + (uint64_t) i - 1);
    ASSERT_EQ(uvtw__core_check(&core, stderr), 0);
  }
  fired = 0;
  for (now = 1; now <= 5001; now++) {
    /* Never later than the earliest timer left: deadline[fired]. */
    ASSERT_ULE(uvtw__core_ms_of(&core, uvtw__core_next_tick(&core)),
               deadline[fired]);
    uvtw__core_expire(&core, now);
    while ((popped = uvtw__core_pop_due(&core, &now)) != NULL) {
      ASSERT_UEQ(popped->deadline_, now);
      fired++;
    }
    ASSERT_EQ(uvtw__core_check(&core, stderr), 0);
  }
  ASSERT_EQ(fired, 3);
}


/* The overflow list's bound (core.h, overflow_min): exact while timers
 * are only filed there; early, never late, after a stop or a lazy re-arm
 * there, which uvtw__core_next_expiry then returns instead of walking the
 * list; exact again once the pass at it has re-filed the list. */
static void overflow_bound(void) {
  static const uvtw__driver_t idle = UVTW__DRIVER_IDLE;
  static uvtw_timer_t far_timers[1000];
  uvtw__core_t core;
  uvtw_timer_t a;
  uvtw_timer_t b;
  int i;

  memset(&a, 0, sizeof(a));
  memset(&b, 0, sizeof(b));
  memset(far_timers, 0, sizeof(far_timers));
  uvtw__core_init(&core, 1, 1000);
  for (i = 0; i < 1000; i++)
    uvtw__core_start(&core, &far_timers[i], UINT64_MAX - (uint64_t) i,
                     core.collected_ms);
  ASSERT_UEQ(uvtw__core_next_expiry(&core), UINT64_MAX - 999);
  uvtw__core_start(&core, &a, (uint64_t) 1 << 45, core.collected_ms);
  uvtw__core_start(&core, &b, (uint64_t) 1 << 46, core.collected_ms);
  ASSERT_UEQ(uvtw__core_next_expiry(&core), (uint64_t) 1 << 45);
  ASSERT_EQ(uvtw__core_check(&core, stderr), 0);
  /* a moves later, lazily: the bound stays at its old expiry. */
  ASSERT_EQ(uvtw__driver_restart(&idle, &core, &a, (uint64_t) 1 << 47),
            UVTW__RESTART_LAZY);
  uvtw__core_rearm_lazy(&core, &a, (uint64_t) 1 << 47);
  ASSERT_UEQ(uvtw__core_next_expiry(&core), (uint64_t) 1 << 45);
  ASSERT_EQ(uvtw__core_check(&core, stderr), 0);
  /* The pass at the bound fires nothing and re-files the list. */
  uvtw__core_expire(&core, (uint64_t) 1 << 45);
  ASSERT_PTR_EQ(uvtw__core_pop_due(&core, &(uint64_t){(uint64_t) 1 << 45}),
                NULL);
  ASSERT_EQ(uvtw__core_check(&core, stderr), 0);
  ASSERT_UEQ(uvtw__core_next_expiry(&core), (uint64_t) 1 << 46);
  /* A stop leaves the bound early too. */
  uvtw__core_stop(&core, &b);
  ASSERT_UEQ(uvtw__core_next_expiry(&core), (uint64_t) 1 << 46);
  ASSERT_EQ(uvtw__core_check(&core, stderr), 0);
  uvtw__core_expire(&core, (uint64_t) 1 << 46);
  ASSERT_PTR_EQ(uvtw__core_pop_due(&core, &(uint64_t){(uint64_t) 1 << 46}),
                NULL);
  ASSERT_UEQ(uvtw__core_next_expiry(&core), (uint64_t) 1 << 47);
  uvtw__core_expire(&core, (uint64_t) 1 << 47);
  ASSERT_PTR_EQ(uvtw__core_pop_due(&core, &(uint64_t){(uint64_t) 1 << 47}), &a);
  ASSERT_UEQ(uvtw__core_next_expiry(&core), UINT64_MAX - 999);
  ASSERT_EQ(uvtw__core_check(&core, stderr), 0);
  uvtw__core_clear(&core);
  ASSERT_UEQ(uvtw__core_next_expiry(&core), UVTW__NO_TICK);
  ASSERT_EQ(uvtw__core_check(&core, stderr), 0);
}


/* Seeds 1 to 4, every tick and start. */
static void random_ops(void) {
  uint64_t seed;
  int t;
  int s;

  all_fired = 0;
  for (seed = 1; seed <= 4; seed++)
    for (t = 0; t < 3; t++)
      for (s = 0; s < 3; s++)
        run(seed * 1000 + t * 10 + s, ticks[t], starts[s], steps(), 0);
  /* The runs did exercise firing, many times per timer. */
  ASSERT_UGE(all_fired, (uint64_t) steps() * 20);
}


/* The pre-cascade in steps of one and two timers. */
static void pre_cascade(void) {
  uint64_t seed;
  int t;

  for (seed = 5; seed <= 6; seed++)
    for (t = 0; t < 3; t++)
      run(seed * 1000 + t, ticks[t], starts[t], steps(), (uint32_t) seed - 4);
}


/* Near the end of time: deadlines saturate at UINT64_MAX. */
static void end_of_time(void) {
  run(99, 1, UINT64_MAX - ((uint64_t) 1 << 41), steps(), 0);
  run(98, 7, UINT64_MAX - 100000, steps() / 4, 1);
}


/* The tick a pass at ms reaches: ms / tick, at most the last tick the
 * clock reaches, (UINT64_MAX - 1) / tick. */
static uint64_t floor_of(uint64_t tick, uint64_t ms) {
  uint64_t last;

  last = (UINT64_MAX - 1) / tick;
  return ms / tick > last ? last : ms / tick;
}


/* A deadline's tick: ms / tick rounded up; UINT64_MAX (never) past the
 * last tick. */
static uint64_t ceil_of(uint64_t tick, uint64_t ms) {
  uint64_t t;

  t = ms / tick + (ms % tick != 0);
  return t > (UINT64_MAX - 1) / tick ? UINT64_MAX : t;
}


/* Ticks above 1 ms round by a reciprocal multiply, not a division: it
 * must agree with the division for every tick uvtw_wheel_new accepts, at
 * the edges of each tick, of 32 and 64 bits, and at random. */
static void tick_division(void) {
  static const uint64_t edges[] = {0,
                                   1,
                                   (uint64_t) 1 << 32,
                                   (uint64_t) 1 << 52,
                                   (uint64_t) 1 << 63,
                                   UINT64_MAX / 2,
                                   UINT64_MAX - 1000,
                                   UINT64_MAX};
  uvtw__core_t* core;
  uint64_t tick;
  uint64_t base;
  uint64_t ms;
  uint64_t d;
  size_t i;
  int k;

  core = malloc(sizeof(*core));
  ASSERT(core != NULL);
  rng_state = 7;
  for (tick = 1; tick <= UVTW_TICK_MS_MAX; tick++) {
    uvtw__core_init(core, tick, 0);
    for (i = 0; i < sizeof(edges) / sizeof(edges[0]); i++) {
      base = edges[i] - edges[i] % tick;
      for (d = 0; d < 6; d++) {
        ms = base + d - 3; /* wraps at 0 and UINT64_MAX: edges too */
        ASSERT_UEQ(uvtw__core_tick_floor(core, ms), floor_of(tick, ms));
        ASSERT_UEQ(uvtw__core_tick_of(core, ms), ceil_of(tick, ms));
      }
    }
    for (k = 0; k < 2000; k++) {
      ms = splitmix64() >> (splitmix64() % 64);
      ASSERT_UEQ(uvtw__core_tick_floor(core, ms), floor_of(tick, ms));
      ASSERT_UEQ(uvtw__core_tick_of(core, ms), ceil_of(tick, ms));
      ms = ms / tick; /* as a tick */
      ASSERT_UEQ(
          uvtw__core_ms_of(core, ms),
          tick > 1 && ms > (UINT64_MAX - 1) / tick ? UINT64_MAX : ms * tick);
    }
  }
  free(core);
}


/* clang-format off */
static const test_case_t cases[] = {
  TEST_CASE(lazy_rearm),
  TEST_CASE(tick_division),
  TEST_CASE(long_gap),
  TEST_CASE(huge_count),
  TEST_CASE(overflow_bound),
  TEST_CASE(random_ops),
  TEST_CASE(pre_cascade),
  TEST_CASE(end_of_time),
};
/* clang-format on */


int main(int argc, char** argv) {
  return run_cases(argc, argv, cases, TEST_CASE_COUNT(cases));
}
