/* SPDX-License-Identifier: MIT */
/* uvtw-bench: shared declarations.
 *
 * Every scenario runs on uvtw and on a baseline in the same process.  A
 * scenario supplies one function that performs a single run on one side
 * and fills in a bench_sample_t; bench_cell_run() alternates the sides
 * (uvtw, baseline, uvtw, baseline, ...), takes medians and prints one
 * key=value line on stdout.  Everything else goes to stderr. */

#ifndef UVTW_BENCH_H
#define UVTW_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "uvtw.h"

#define BENCH_SIDE_UVTW 0
#define BENCH_SIDE_BASE 1

#define BENCH_MAX_METRICS 16
#define BENCH_MAX_RUNS 101

/* The ratio's direction: the ratio is always > 1 when uvtw is better. */
#define BENCH_LOWER_IS_BETTER 0  /* ratio = base / uvtw (time, bytes) */
#define BENCH_HIGHER_IS_BETTER 1 /* ratio = uvtw / base (throughput) */

/* --only: BENCH_SIDE_UVTW or BENCH_SIDE_BASE to run one side alone (for
 * profilers; the other side's keys and the ratios print as nan), else -1. */
extern int bench_only_side;

typedef struct bench_cfg_s {
  int quick;            /* --quick: small sizes, short real-time spans */
  int runs;             /* --runs K; 0 = the scenario's default */
  size_t n;             /* --n N; 0 = the scenario's default sizes */
  uint64_t ops;         /* --ops OPS; 0 = the scenario's default */
  const char* scenario; /* --scenario NAME; NULL = all */
} bench_cfg_t;

/* One run on one side.  v[0] is the primary metric (the one the ratio is
 * taken of); the others are extra keys.  A NaN leaves the key out. */
typedef struct bench_sample_s {
  double v[BENCH_MAX_METRICS];
} bench_sample_t;

typedef int (*bench_run_fn)(void* ctx, int side, bench_sample_t* out);

typedef struct bench_cell_s {
  const char* scenario;
  uint64_t n;
  const char* label;     /* NULL, or "key=value" printed after n= */
  int uvtw_only;         /* no baseline: base keys and ratios print nan */
  uint64_t ops;
  const char* base_name; /* the baseline's name, printed as base=NAME */
  int direction;         /* BENCH_LOWER_IS_BETTER or BENCH_HIGHER_IS_BETTER */
  int nmetrics;
  /* Key suffixes: "ns" gives uvtw_ns= and base_ns=.  Integer metrics are
   * printed without decimals when is_int[i] is set. */
  const char* metric[BENCH_MAX_METRICS];
  int is_int[BENCH_MAX_METRICS];
  int runs;
  bench_run_fn run;
  void* ctx;
} bench_cell_t;

/* Runs the cell and prints its line.  Returns 0, or -1 after a failed run
 * (the line is then not printed). */
int bench_cell_run(const bench_cell_t* cell);

/* The number of runs for a cell: --runs if given, else `dflt`, never fewer
 * than 5 unless --runs asks for fewer. */
int bench_runs(const bench_cfg_t* cfg, int dflt);

/* Marks the whole run as failed (exit status 1) without dropping the
 * cell's line: for correctness problems seen in a run that still measured
 * something, such as an early firing. */
void bench_fail_soft(void);
int bench_soft_failures(void);

/* A function the compiler neither inlines nor specializes, so that a
 * profile shows it: GCC's noipa; clang has no such attribute, and noinline
 * is the nearest. */
#ifdef __clang__
# define BENCH_NOIPA __attribute__((noinline))
#else
# define BENCH_NOIPA __attribute__((noipa))
#endif

/* Logging to stderr. */
void bench_log(const char* fmt, ...) __attribute__((format(printf, 1, 2)));


/* ---------------------------------------------------------------------- */
/* Clocks.                                                                  */

/* Real CLOCK_MONOTONIC in ns, never affected by the fake clock below. */
uint64_t bench_now_ns(void);

/* CPU time of the calling thread in ns. */
uint64_t bench_cpu_ns(void);

/* The fake clock.  uvtw-bench defines clock_gettime() itself, so libuv's
 * reads of CLOCK_MONOTONIC (uv_update_time, uv_hrtime) come here; the real
 * clock is reached through dlsym(RTLD_NEXT).  Normally the fake clock is
 * the real one plus an offset that only ever grows, so time stays monotonic
 * for libuv, for uvtw and for every other reader.  While frozen it stands
 * still and moves only by bench_clock_advance_ms(); thawing raises the
 * offset so that the clock carries on from where it stood. */
void bench_clock_freeze(void);
void bench_clock_advance_ms(uint64_t ms);
void bench_clock_thaw(void);

/* While on (and not frozen), the interposed clock_gettime() hands every
 * call straight to glibc's, without the offset: one load and a jump more
 * than a program without the interposer pays.  For the task scenarios,
 * whose submits read the clock once each on both sides; turn it on before
 * their loop exists and off after it is closed, since the clock it shows
 * is behind the offset one. */
void bench_clock_real(int on);

/* The fake poll (bench-util.c): while on and the clock is frozen, libuv's
 * epoll_wait with timeout 0 returns at once without the syscall, and with
 * a positive timeout moves the frozen clock by it: a loop step costs only
 * its own work, and a loop runs deadlines of seconds in no real time. */
void bench_poll_fake(int on);

/* Checks the fake poll on `loop` (which must have no I/O to wait for) and
 * logs the cost of a bare loop step.  Returns 0 or -1. */
int bench_poll_selftest(uv_loop_t* loop);

/* Checks that libuv really reads its time through the fake clock.  Returns
 * 0, or -1 if the interposition does not work on this system. */
int bench_clock_selftest(uv_loop_t* loop);


/* ---------------------------------------------------------------------- */
/* Memory and random numbers.                                               */

/* Anonymous mmap, zeroed and pre-faulted (every page written).  Aborts on
 * failure.  Timer arrays of both sides come from here, so both live in the
 * same kind of memory. */
void* bench_alloc(size_t bytes);
void bench_free(void* p, size_t bytes);

/* Resident set size in bytes, from /proc/self/statm. */
uint64_t bench_rss_bytes(void);

typedef struct bench_rng_s {
  uint64_t s;
} bench_rng_t;

void bench_rng_seed(bench_rng_t* rng, uint64_t seed);
uint64_t bench_rng_next(bench_rng_t* rng);
/* Uniform in [lo, hi]. */
uint64_t bench_rng_range(bench_rng_t* rng, uint64_t lo, uint64_t hi);

/* Median of `n` values (the array is left sorted). */
double bench_median(double* v, int n);

/* The fixed seed for all precomputed random numbers. */
#define BENCH_SEED 0x75767477u /* "uvtw" */


/* ---------------------------------------------------------------------- */
/* Scenario groups.  Each returns the number of failed cells.               */

int bench_timers_main(const bench_cfg_t* cfg);
int bench_tasks_main(const bench_cfg_t* cfg);
int bench_server_main(const bench_cfg_t* cfg);

/* Non-zero if the scenario `name` is selected by --scenario. */
int bench_selected(const bench_cfg_t* cfg, const char* name);

#endif /* UVTW_BENCH_H */
