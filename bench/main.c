/* SPDX-License-Identifier: MIT */
/* uvtw-bench: every scenario on uvtw and on a libuv baseline, in the same
 * process, alternating runs.  See bench/README.md. */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"

static const char* const scenarios[] = {
    "insert",         "churn",           "idle",         "idle-same",
    "idle-spread",    "rpc",             "rpc-random",   "expire-seq",
    "expire-rand",    "expire-seq-10s",  "expire-rand-10s", "memory",
    "idle-wakeups",   "lateness",        "stall-spread", "stall-same",
    "stall-early",    "calls",           "submit",       "submit-cancel",
    "submit-steady",  "idle-server",
    NULL};


static void usage(FILE* f) {
  int i;

  fprintf(f,
          "usage: uvtw-bench [--quick] [--scenario NAME] [--n N] [--only "
          "uvtw|base] "
          "[--runs K] [--ops OPS]\n"
          "  --quick     small sizes and short real-time spans (< 60 s)\n"
          "  --scenario  run one scenario only\n"
          "  --n         one size only (producer threads for submit*)\n"
          "  --runs      runs per side and cell (default 5 or more)\n"
          "  --ops       operations per run (insert, churn, idle, rpc), or\n"
          "              the cap on tasks per run (submit*)\n"
          "  --only      uvtw|base: run one side alone, for profilers\n"
          "scenarios:");
  for (i = 0; scenarios[i] != NULL; i++)
    fprintf(f, " %s", scenarios[i]);
  fprintf(f, "\n");
}


static int parse_u64(const char* s, uint64_t* out) {
  char* end;
  unsigned long long v;

  if (s == NULL || *s == '\0')
    return -1;
  v = strtoull(s, &end, 10);
  if (*end != '\0')
    return -1;
  *out = v;
  return 0;
}


int bench_selected(const bench_cfg_t* cfg, const char* name) {
  return cfg->scenario == NULL || strcmp(cfg->scenario, name) == 0;
}


int main(int argc, char** argv) {
  bench_cfg_t cfg;
  uint64_t v;
  uint64_t t0;
  int failed;
  int known;
  int i;

  memset(&cfg, 0, sizeof(cfg));
  for (i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--quick") == 0) {
      cfg.quick = 1;
    } else if (strcmp(argv[i], "--scenario") == 0 && i + 1 < argc) {
      cfg.scenario = argv[++i];
    } else if (strcmp(argv[i], "--n") == 0 && i + 1 < argc &&
               parse_u64(argv[i + 1], &v) == 0 && v > 0) {
      cfg.n = (size_t) v;
      i++;
    } else if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc &&
               parse_u64(argv[i + 1], &v) == 0 && v > 0 &&
               v <= BENCH_MAX_RUNS) {
      cfg.runs = (int) v;
      i++;
    } else if (strcmp(argv[i], "--ops") == 0 && i + 1 < argc &&
               parse_u64(argv[i + 1], &v) == 0 && v > 0) {
      cfg.ops = v;
      i++;
    } else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc &&
               (strcmp(argv[i + 1], "uvtw") == 0 ||
                strcmp(argv[i + 1], "base") == 0)) {
      bench_only_side =
          strcmp(argv[++i], "uvtw") == 0 ? BENCH_SIDE_UVTW : BENCH_SIDE_BASE;
    } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage(stdout);
      return 0;
    } else {
      fprintf(stderr, "uvtw-bench: bad argument: %s\n", argv[i]);
      usage(stderr);
      return 2;
    }
  }
  if (cfg.scenario != NULL) {
    known = 0;
    for (i = 0; scenarios[i] != NULL; i++)
      known |= strcmp(scenarios[i], cfg.scenario) == 0;
    if (!known) {
      fprintf(stderr, "uvtw-bench: unknown scenario: %s\n", cfg.scenario);
      usage(stderr);
      return 2;
    }
  }

  bench_log(
      "uvtw-bench: uvtw %d.%d.%d, libuv %s, %s run, "
      "sizeof(uvtw_timer_t)=%zu sizeof(uv_timer_t)=%zu\n",
      UVTW_VERSION_MAJOR, UVTW_VERSION_MINOR, UVTW_VERSION_PATCH,
      uv_version_string(), cfg.quick ? "quick" : "full", sizeof(uvtw_timer_t),
      sizeof(uv_timer_t));
  t0 = bench_now_ns();
  failed = bench_timers_main(&cfg);
  failed += bench_tasks_main(&cfg);
  failed += bench_server_main(&cfg);
  failed += bench_soft_failures();
  bench_log("uvtw-bench: %d failed cell(s), %.1f s in all\n", failed,
            (bench_now_ns() - t0) / 1e9);
  return failed == 0 ? 0 : 1;
}
