/* SPDX-License-Identifier: MIT */
/* uvtw-bench: clocks (real and fake), memory, random numbers, and the cell
 * runner that alternates the two sides and prints the result line. */

#define _GNU_SOURCE /* RTLD_NEXT */

#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"


/* ---------------------------------------------------------------------- */
/* Clocks.                                                                  */

typedef int (*clock_gettime_fn)(clockid_t id, struct timespec* ts);

static void* _Atomic real_clock_gettime;

/* The fake clock's state.  Written only by the thread that runs the timer
 * scenarios, read by every thread that asks libuv for the time. */
static _Atomic uint64_t fake_offset_ns;
static _Atomic uint64_t fake_frozen_ns; /* 0 = not frozen */
/* glibc's clock_gettime while bench_clock_real is on, else NULL. */
static void* _Atomic pass_through;


/* The next definition of `name` after ours (glibc's), looked up once and
 * kept in *slot.  Every thread may race here: each finds the same one. */
static void* real_symbol(void* _Atomic* slot, const char* name) {
  void* fn;

  fn = atomic_load_explicit(slot, memory_order_acquire);
  if (fn == NULL) {
    fn = dlsym(RTLD_NEXT, name);
    if (fn == NULL) {
      fprintf(stderr, "uvtw-bench: dlsym(%s): %s\n", name, dlerror());
      abort();
    }
    atomic_store_explicit(slot, fn, memory_order_release);
  }
  return fn;
}


static clock_gettime_fn real_fn(void) {
  return (clock_gettime_fn) real_symbol(&real_clock_gettime, "clock_gettime");
}


static uint64_t real_ns(clockid_t id) {
  struct timespec ts;

  real_fn()(id, &ts);
  return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}


/* Interposes glibc's clock_gettime for the whole process: libuv's shared
 * library resolves the symbol to this definition because the executable
 * exports it (default visibility, against the project's hidden preset, plus
 * ENABLE_EXPORTS in CMakeLists.txt).  Only the monotonic clocks libuv reads
 * are faked. */
__attribute__((visibility("default"))) int clock_gettime(clockid_t id,
                                                         struct timespec* ts) {
  clock_gettime_fn pass;
  uint64_t t;

  if (id != CLOCK_MONOTONIC && id != CLOCK_MONOTONIC_COARSE)
    return real_fn()(id, ts);
  t = atomic_load_explicit(&fake_frozen_ns, memory_order_relaxed);
  if (t == 0) {
    /* Not frozen: the frozen clock's path (calls, idle) stays as it was. */
    pass = (clock_gettime_fn) atomic_load_explicit(&pass_through,
                                                   memory_order_relaxed);
    if (pass != NULL)
      return pass(id, ts);
    t = real_ns(id) +
        atomic_load_explicit(&fake_offset_ns, memory_order_relaxed);
  }
  ts->tv_sec = (time_t) (t / 1000000000u);
  ts->tv_nsec = (long) (t % 1000000000u);
  return 0;
}


uint64_t bench_now_ns(void) {
  return real_ns(CLOCK_MONOTONIC);
}


uint64_t bench_cpu_ns(void) {
  return real_ns(CLOCK_THREAD_CPUTIME_ID);
}


void bench_clock_freeze(void) {
  uint64_t t;

  t = real_ns(CLOCK_MONOTONIC) +
      atomic_load_explicit(&fake_offset_ns, memory_order_relaxed);
  atomic_store_explicit(&fake_frozen_ns, t, memory_order_relaxed);
}


void bench_clock_real(int on) {
  atomic_store_explicit(&pass_through, on ? (void*) real_fn() : NULL,
                        memory_order_relaxed);
}


void bench_clock_advance_ms(uint64_t ms) {
  atomic_fetch_add_explicit(&fake_frozen_ns, ms * 1000000u,
                            memory_order_relaxed);
}


void bench_clock_thaw(void) {
  uint64_t frozen;
  uint64_t real;
  uint64_t off;

  frozen = atomic_load_explicit(&fake_frozen_ns, memory_order_relaxed);
  if (frozen == 0)
    return;
  real = real_ns(CLOCK_MONOTONIC);
  off = atomic_load_explicit(&fake_offset_ns, memory_order_relaxed);
  /* Carry on from where the frozen clock stood: never backwards. */
  if (frozen > real + off)
    off = frozen - real;
  atomic_store_explicit(&fake_offset_ns, off, memory_order_relaxed);
  atomic_store_explicit(&fake_frozen_ns, 0, memory_order_relaxed);
}


/* The fake poll.  While it is on and the clock is frozen, libuv's
 * epoll_wait/epoll_pwait calls are answered here, without the syscall:
 * with timeout 0 at once, with a positive timeout by moving the frozen
 * clock by that many ms (the wait a real poll would have slept through),
 * and with -1 (block forever) by the real call.  No event is ever
 * reported, so only scenarios whose loop has no I/O to wait for use it:
 * the timer scenarios.  A bare UV_RUN_NOWAIT step then costs tens of ns
 * instead of the ~1 us of the syscall, which would otherwise dominate every
 * cell that runs the loop. */
static _Atomic int fake_poll_on;

typedef int (*epoll_wait_fn)(int, struct epoll_event*, int, int);
typedef int (*epoll_pwait_fn)(int,
                              struct epoll_event*,
                              int,
                              int,
                              const sigset_t*);


void bench_poll_fake(int on) {
  atomic_store_explicit(&fake_poll_on, on, memory_order_relaxed);
}


/* Returns 1 if the fake poll answered the call. */
static int fake_poll(int timeout) {
  if (!atomic_load_explicit(&fake_poll_on, memory_order_relaxed) ||
      atomic_load_explicit(&fake_frozen_ns, memory_order_relaxed) == 0 ||
      timeout < 0)
    return 0;
  if (timeout > 0)
    bench_clock_advance_ms((uint64_t) timeout);
  return 1;
}


__attribute__((visibility("default"))) int epoll_wait(
    int epfd, struct epoll_event* events, int maxevents, int timeout) {
  static void* _Atomic real;

  if (fake_poll(timeout))
    return 0;
  return ((epoll_wait_fn) real_symbol(&real, "epoll_wait"))(
      epfd, events, maxevents, timeout);
}


__attribute__((visibility("default"))) int epoll_pwait(
    int epfd,
    struct epoll_event* events,
    int maxevents,
    int timeout,
    const sigset_t* sigmask) {
  static void* _Atomic real;

  if (fake_poll(timeout))
    return 0;
  return ((epoll_pwait_fn) real_symbol(&real, "epoll_pwait"))(
      epfd, events, maxevents, timeout, sigmask);
}


int bench_poll_selftest(uv_loop_t* loop) {
  uint64_t t0;
  uint64_t a;
  uint64_t b;
  int k;

  bench_clock_freeze();
  bench_poll_fake(1);
  uv_update_time(loop);
  a = uv_now(loop);
  t0 = bench_now_ns();
  for (k = 0; k < 1000; k++)
    uv_run(loop, UV_RUN_NOWAIT);
  t0 = bench_now_ns() - t0;
  uv_update_time(loop);
  b = uv_now(loop);
  bench_poll_fake(0);
  bench_clock_thaw();
  bench_log("fake poll: a UV_RUN_NOWAIT step costs %.0f ns\n", t0 / 1000.0);
  if (b != a) {
    bench_log("fake poll: the clock moved %llu ms in NOWAIT steps\n",
              (unsigned long long) (b - a));
    return -1;
  }
  return 0;
}


int bench_clock_selftest(uv_loop_t* loop) {
  uint64_t a;
  uint64_t b;
  uint64_t h;

  bench_clock_freeze();
  uv_update_time(loop);
  a = uv_now(loop);
  h = uv_hrtime();
  bench_clock_advance_ms(5000);
  uv_update_time(loop);
  b = uv_now(loop);
  h = uv_hrtime() - h;
  bench_clock_thaw();
  if (b - a != 5000 || h != 5000000000u) {
    bench_log(
        "fake clock does not reach libuv: uv_now moved %llu ms, "
        "uv_hrtime %llu ns (want 5000 ms)\n",
        (unsigned long long) (b - a), (unsigned long long) h);
    return -1;
  }
  uv_update_time(loop);
  if (uv_now(loop) < b) {
    bench_log("fake clock went backwards after thaw\n");
    return -1;
  }
  return 0;
}


/* ---------------------------------------------------------------------- */
/* Memory and random numbers.                                               */

void* bench_alloc(size_t bytes) {
  void* p;
  size_t page;
  size_t i;

  if (bytes == 0)
    bytes = 1;
  p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
           0);
  if (p == MAP_FAILED) {
    perror("uvtw-bench: mmap");
    abort();
  }
  /* Pre-fault: write every page, so no page fault lands in a timed loop. */
  page = (size_t) sysconf(_SC_PAGESIZE);
  for (i = 0; i < bytes; i += page)
    ((volatile char*) p)[i] = 0;
  return p;
}


void bench_free(void* p, size_t bytes) {
  if (p != NULL)
    munmap(p, bytes == 0 ? 1 : bytes);
}


uint64_t bench_rss_bytes(void) {
  FILE* f;
  unsigned long size;
  unsigned long resident;

  f = fopen("/proc/self/statm", "r");
  if (f == NULL)
    return 0;
  if (fscanf(f, "%lu %lu", &size, &resident) != 2)
    resident = 0;
  fclose(f);
  return (uint64_t) resident * (uint64_t) sysconf(_SC_PAGESIZE);
}


void bench_rng_seed(bench_rng_t* rng, uint64_t seed) {
  rng->s = seed;
}


/* splitmix64: tiny, fast, and good enough for picking timers. */
uint64_t bench_rng_next(bench_rng_t* rng) {
  uint64_t z;

  z = (rng->s += 0x9e3779b97f4a7c15u);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return z ^ (z >> 31);
}


uint64_t bench_rng_range(bench_rng_t* rng, uint64_t lo, uint64_t hi) {
  /* The modulo bias is below 2^-40 for the spans used here. */
  return lo + bench_rng_next(rng) % (hi - lo + 1);
}


static int cmp_double(const void* a, const void* b) {
  double x;
  double y;

  x = *(const double*) a;
  y = *(const double*) b;
  return (x > y) - (x < y);
}


double bench_median(double* v, int n) {
  if (n <= 0)
    return NAN;
  qsort(v, (size_t) n, sizeof(*v), cmp_double);
  if (n % 2 == 1)
    return v[n / 2];
  return (v[n / 2 - 1] + v[n / 2]) / 2;
}


/* ---------------------------------------------------------------------- */
/* The cell runner.                                                         */

int bench_only_side = -1;

static int soft_failures;


void bench_fail_soft(void) {
  soft_failures++;
}


int bench_soft_failures(void) {
  return soft_failures;
}


void bench_log(const char* fmt, ...) {
  va_list ap;

  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fflush(stderr);
}


int bench_runs(const bench_cfg_t* cfg, int dflt) {
  int runs;

  runs = cfg->runs > 0 ? cfg->runs : dflt;
  if (runs > BENCH_MAX_RUNS)
    runs = BENCH_MAX_RUNS;
  return runs;
}


static void print_value(double v, int is_int) {
  if (isnan(v))
    printf("nan");
  else if (isinf(v))
    printf("inf");
  else if (is_int)
    printf("%.0f", v);
  else if (v >= 10)
    printf("%.1f", v);
  else
    printf("%.3g", v);
}


static double ratio_of(int direction, double uvtw, double base) {
  double num;
  double den;

  num = direction == BENCH_LOWER_IS_BETTER ? base : uvtw;
  den = direction == BENCH_LOWER_IS_BETTER ? uvtw : base;
  if (den == 0)
    return num == 0 ? 1 : INFINITY;
  return num / den;
}


int bench_cell_run(const bench_cell_t* c) {
  static bench_sample_t s[2][BENCH_MAX_RUNS];
  double col[BENCH_MAX_RUNS];
  double med[2][BENCH_MAX_METRICS];
  double rmin;
  double rmax;
  double r;
  double lo;
  double hi;
  uint64_t t0;
  int runs;
  int side;
  int k;
  int m;
  int cnt;

  runs = c->runs < 1 ? 1 : c->runs;
  if (runs > BENCH_MAX_RUNS)
    runs = BENCH_MAX_RUNS;
  t0 = bench_now_ns();
  for (k = 0; k < runs; k++) {
    /* A B A B ...: uvtw first in every pair. */
    for (side = 0; side < 2; side++) {
      for (m = 0; m < BENCH_MAX_METRICS; m++)
        s[side][k].v[m] = NAN;
      if ((bench_only_side >= 0 && side != bench_only_side) ||
          (c->uvtw_only && side != BENCH_SIDE_UVTW))
        continue;
      if (c->run(c->ctx, side, &s[side][k]) != 0) {
        bench_log("%s n=%llu: run %d on %s failed\n", c->scenario,
                  (unsigned long long) c->n, k + 1,
                  side == BENCH_SIDE_UVTW ? "uvtw" : c->base_name);
        return -1;
      }
    }
    bench_log("  %s n=%llu run %d/%d: uvtw_%s=%g base_%s=%g\n", c->scenario,
              (unsigned long long) c->n, k + 1, runs, c->metric[0],
              s[0][k].v[0], c->metric[0], s[1][k].v[0]);
  }

  rmin = INFINITY;
  rmax = -INFINITY;
  for (k = 0; k < runs; k++) {
    r = ratio_of(c->direction, s[0][k].v[0], s[1][k].v[0]);
    if (r < rmin)
      rmin = r;
    if (r > rmax)
      rmax = r;
  }
  for (side = 0; side < 2; side++) {
    for (m = 0; m < c->nmetrics; m++) {
      cnt = 0;
      for (k = 0; k < runs; k++)
        if (!isnan(s[side][k].v[m]))
          col[cnt++] = s[side][k].v[m];
      med[side][m] = bench_median(col, cnt);
    }
  }

  printf("scenario=%s n=%llu", c->scenario, (unsigned long long) c->n);
  if (c->label != NULL)
    printf(" %s", c->label);
  printf(" ops=%llu uvtw_%s=", (unsigned long long) c->ops, c->metric[0]);
  print_value(med[0][0], c->is_int[0]);
  printf(" base=%s base_%s=", c->base_name, c->metric[0]);
  print_value(med[1][0], c->is_int[0]);
  if (bench_only_side >= 0 || c->uvtw_only)
    rmin = rmax = NAN;
  printf(" ratio=%.2f ratio_min=%.2f ratio_max=%.2f",
         ratio_of(c->direction, med[0][0], med[1][0]), rmin, rmax);
  /* The primary metric's range over the runs, per side: the chart's
   * whiskers. */
  for (side = 0; side < 2; side++) {
    lo = INFINITY;
    hi = -INFINITY;
    for (k = 0; k < runs; k++) {
      if (isnan(s[side][k].v[0]))
        continue;
      if (s[side][k].v[0] < lo)
        lo = s[side][k].v[0];
      if (s[side][k].v[0] > hi)
        hi = s[side][k].v[0];
    }
    if (lo > hi)
      continue;
    printf(" %s_%s_min=", side == 0 ? "uvtw" : "base", c->metric[0]);
    print_value(lo, c->is_int[0]);
    printf(" %s_%s_max=", side == 0 ? "uvtw" : "base", c->metric[0]);
    print_value(hi, c->is_int[0]);
  }
  for (m = 1; m < c->nmetrics; m++) {
    for (side = 0; side < 2; side++) {
      if (isnan(med[side][m]))
        continue;
      printf(" %s_%s=", side == 0 ? "uvtw" : "base", c->metric[m]);
      print_value(med[side][m], c->is_int[m]);
    }
  }
  printf(" runs=%d\n", runs);
  fflush(stdout);
  bench_log("%s n=%llu done in %.1f s\n", c->scenario,
            (unsigned long long) c->n, (bench_now_ns() - t0) / 1e9);
  return 0;
}
