/* SPDX-License-Identifier: MIT */
/* The command line. */

#include "server.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

struct options_s opt;


void usage(FILE* f) {
  /* clang-format off */
  fprintf(f,
"usage: uvtw-echo-server [options]\n"
"  --host ADDR          address to listen on (default 127.0.0.1)\n"
"  --port N             port (default 7000; 0 picks a free one)\n"
"  --timers=wheel|uv    one uvtw wheel (default) or one uv_timer_t each\n"
"  --heartbeat-ms N     PING after N ms without input (default 5000)\n"
"  --idle-ms N          BYE idle after N ms without input (default 15000)\n"
"  --stats-ms N         log a STATS line to stderr every N ms (default 0: "
"off)\n"
"  --max-conns N        more connections get BYE busy (default 10000)\n"
"  --max-line N         longer lines get ERR and a close (default 4096)\n"
"  --max-reqs N         requests in flight per connection (default 1024)\n"
"  --max-work-ms N      largest work_ms a REQ may ask for (default 60000)\n"
"  --max-deadline-ms N  largest deadline_ms (default 3600000)\n"
"  --threads N          libuv threadpool size (default 32, max 1024)\n"
"  --line-timeout-ms N  a partial line must end within N ms (default 10000)\n"
"  --max-output-bytes N replies queued for writing, all connections\n"
"                       (default 67108864)\n"
"  --max-work-inflight N  requests queued or running on the threadpool;\n"
"                       more get BUSY (default: twice --threads)\n"
"  --drain-ms N         on SIGTERM, wait up to N ms for requests in flight\n"
"                       (default 5000)\n"
"  --loops N            loop threads, each with its own wheel (default 1;\n"
"                       0: one per core)\n");
  /* clang-format on */
}


void parse_args(int argc, char** argv) {
  static const struct option opts[] = {
      {"host", required_argument, NULL, 'h'},
      {"port", required_argument, NULL, 'p'},
      {"timers", required_argument, NULL, 't'},
      {"heartbeat-ms", required_argument, NULL, 'H'},
      {"idle-ms", required_argument, NULL, 'I'},
      {"stats-ms", required_argument, NULL, 'S'},
      {"max-conns", required_argument, NULL, 'C'},
      {"max-line", required_argument, NULL, 'L'},
      {"max-reqs", required_argument, NULL, 'R'},
      {"max-work-ms", required_argument, NULL, 'W'},
      {"max-deadline-ms", required_argument, NULL, 'D'},
      {"threads", required_argument, NULL, 'T'},
      {"line-timeout-ms", required_argument, NULL, 'l'},
      {"max-output-bytes", required_argument, NULL, 'O'},
      {"max-work-inflight", required_argument, NULL, 'w'},
      {"drain-ms", required_argument, NULL, 'd'},
      {"loops", required_argument, NULL, 'n'},
      {"help", no_argument, NULL, 'x'},
      {NULL, 0, NULL, 0}};
  int ch;

  opt.host = "127.0.0.1";
  opt.port = 7000;
  opt.heartbeat_ms = 5000;
  opt.idle_ms = 15000;
  opt.stats_ms = 0;
  opt.max_conns = 10000;
  opt.max_line = 4096;
  opt.max_reqs = 1024;
  opt.max_work_ms = 60000;
  opt.max_deadline_ms = 3600000;
  opt.threads = 32;
  opt.kind = XBACKEND_WHEEL;
  opt.line_timeout_ms = 10000;
  opt.max_output_bytes = 64 << 20;
  opt.max_work_inflight = 0;
  opt.drain_ms = 5000;
  opt.loops = 1;

  while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    switch (ch) {
    case 'h':
      opt.host = optarg;
      break;
    case 'p':
      opt.port = (int) opt_number("port", optarg, 0, 65535);
      break;
    case 't':
      if (strcmp(optarg, "wheel") == 0) {
        opt.kind = XBACKEND_WHEEL;
        opt.line_timeout_ms = 10000;
        opt.max_output_bytes = 64 << 20;
        opt.max_work_inflight = 0;
        opt.drain_ms = 5000;
        opt.loops = 1;
      } else if (strcmp(optarg, "uv") == 0) {
        opt.kind = XBACKEND_UV;
      } else {
        fprintf(stderr, "uvtw-echo-server: --timers is wheel or uv\n");
        exit(2);
      }
      break;
    case 'H':
      opt.heartbeat_ms = opt_number("heartbeat-ms", optarg, 1, 86400000);
      break;
    case 'I':
      opt.idle_ms = opt_number("idle-ms", optarg, 1, 86400000);
      break;
    case 'S':
      opt.stats_ms = opt_number("stats-ms", optarg, 0, 86400000);
      break;
    case 'C':
      opt.max_conns = opt_number("max-conns", optarg, 0, 1000000);
      break;
    case 'L':
      opt.max_line = opt_number("max-line", optarg, 1, 1 << 20);
      break;
    case 'R':
      opt.max_reqs = opt_number("max-reqs", optarg, 0, 1000000);
      break;
    case 'W':
      opt.max_work_ms = opt_number("max-work-ms", optarg, 0, 86400000);
      break;
    case 'D':
      opt.max_deadline_ms = opt_number("max-deadline-ms", optarg, 0, 86400000);
      break;
    case 'T':
      opt.threads = (unsigned) opt_number("threads", optarg, 1, 1024);
      break;
    case 'l':
      opt.line_timeout_ms = opt_number("line-timeout-ms", optarg, 1, 86400000);
      break;
    case 'O':
      opt.max_output_bytes =
          opt_number("max-output-bytes", optarg, 4096, UINT64_C(1) << 40);
      break;
    case 'w':
      opt.max_work_inflight =
          opt_number("max-work-inflight", optarg, 1, 1000000);
      break;
    case 'd':
      opt.drain_ms = opt_number("drain-ms", optarg, 0, 86400000);
      break;
    case 'n':
      opt.loops = (unsigned) opt_number("loops", optarg, 0, MAX_LOOPS);
      break;
    case 'x':
      usage(stdout);
      exit(0);
    default:
      usage(stderr);
      exit(2);
    }
  }
  if (optind < argc) {
    usage(stderr);
    exit(2);
  }
  if (opt.max_work_inflight == 0)
    opt.max_work_inflight = 2 * (uint64_t) opt.threads;
  if (opt.loops == 0) {
    opt.loops = uv_available_parallelism();
    if (opt.loops > MAX_LOOPS)
      opt.loops = MAX_LOOPS;
  }
}
