/* SPDX-License-Identifier: MIT */
/* The command line. */

#include "server.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------- */
/* Start-up.                                                                */

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
"  --threads N          libuv threadpool size (default 32, max 1024)\n");
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
      {"help", no_argument, NULL, 'x'},
      {NULL, 0, NULL, 0}};
  int ch;

  g.host = "127.0.0.1";
  g.port = 7000;
  g.heartbeat_ms = 5000;
  g.idle_ms = 15000;
  g.stats_ms = 0;
  g.max_conns = 10000;
  g.max_line = 4096;
  g.max_reqs = 1024;
  g.max_work_ms = 60000;
  g.max_deadline_ms = 3600000;
  g.threads = 32;
  g.kind = XBACKEND_WHEEL;

  while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    switch (ch) {
    case 'h':
      g.host = optarg;
      break;
    case 'p':
      g.port = (int) opt_number("port", optarg, 0, 65535);
      break;
    case 't':
      if (strcmp(optarg, "wheel") == 0) {
        g.kind = XBACKEND_WHEEL;
      } else if (strcmp(optarg, "uv") == 0) {
        g.kind = XBACKEND_UV;
      } else {
        fprintf(stderr, "uvtw-echo-server: --timers is wheel or uv\n");
        exit(2);
      }
      break;
    case 'H':
      g.heartbeat_ms = opt_number("heartbeat-ms", optarg, 1, 86400000);
      break;
    case 'I':
      g.idle_ms = opt_number("idle-ms", optarg, 1, 86400000);
      break;
    case 'S':
      g.stats_ms = opt_number("stats-ms", optarg, 0, 86400000);
      break;
    case 'C':
      g.max_conns = opt_number("max-conns", optarg, 0, 1000000);
      break;
    case 'L':
      g.max_line = opt_number("max-line", optarg, 1, 1 << 20);
      break;
    case 'R':
      g.max_reqs = opt_number("max-reqs", optarg, 0, 1000000);
      break;
    case 'W':
      g.max_work_ms = opt_number("max-work-ms", optarg, 0, 86400000);
      break;
    case 'D':
      g.max_deadline_ms = opt_number("max-deadline-ms", optarg, 0, 86400000);
      break;
    case 'T':
      g.threads = (unsigned) opt_number("threads", optarg, 1, 1024);
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
}
