/* SPDX-License-Identifier: MIT */
/* echo-load: the command line. */

#include "load.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

void usage(FILE* f) {
  /* clang-format off */
  fprintf(f,
"usage: echo-load --port N [options]\n"
"  --host ADDR            loopback address of the server (default 127.0.0.1)\n"
"  --port N               the server's port (required)\n"
"  --mode M               active, idle, mixed, rpc, slowloris or noread\n"
"                         (default active)\n"
"  --conns N              connections at once (default 10, max 20000)\n"
"  --idle-share F         mixed: share of idle connections (default 0.5)\n"
"  --duration-ms N        how long to send (default 5000, max 600000)\n"
"  --interval-ms N        active: one line per connection every N ms\n"
"                         (default 100)\n"
"  --line-size N          active: bytes per line, newline included\n"
"                         (default 32, max 4096)\n"
"  --max-msgs N           stop sending after N lines in all (default 1000000)\n"
"  --idle-ms N            the server's --idle-ms (default 15000)\n"
"  --heartbeat-ms N       the server's --heartbeat-ms; if given, an earlier\n"
"                         PING is a violation\n"
"  --slack-ms N           how late BYE idle or ERR line timeout may be\n"
"                         (default 500)\n"
"  --line-timeout-ms N    the server's --line-timeout-ms (default 10000)\n"
"  --noread-stats         noread: send STATS lines, whose replies are ~60\n"
"                         times their size, instead of echo lines\n"
"  --work-ms A[-B]        rpc: work per request, uniform (default 10-200)\n"
"  --deadline-ms A[-B]    rpc: deadline per request, uniform (default 10-200)\n"
"  --inflight N           rpc: requests in flight per connection (default 1)\n"
"  --margin-ms N          rpc: how close work and deadline may be before the\n"
"                         answer is not checked (default 50)\n"
"  --allow-shutdown       BYE shutdown is expected: not a violation, and the\n"
"                         run ends when every connection is closed\n"
"  --no-reconnect         idle connections closed for idleness stay closed\n"
"  --seed N               random seed (default 1)\n"
"  --quiet                only the RESULT line\n");
  /* clang-format on */
}


void parse_args(int argc, char** argv) {
  static const struct option opts[] = {
      {"host", required_argument, NULL, 'h'},
      {"port", required_argument, NULL, 'p'},
      {"mode", required_argument, NULL, 'm'},
      {"conns", required_argument, NULL, 'c'},
      {"idle-share", required_argument, NULL, 's'},
      {"duration-ms", required_argument, NULL, 'd'},
      {"interval-ms", required_argument, NULL, 'i'},
      {"line-size", required_argument, NULL, 'l'},
      {"max-msgs", required_argument, NULL, 'M'},
      {"idle-ms", required_argument, NULL, 'I'},
      {"heartbeat-ms", required_argument, NULL, 'H'},
      {"slack-ms", required_argument, NULL, 'S'},
      {"work-ms", required_argument, NULL, 'w'},
      {"deadline-ms", required_argument, NULL, 'D'},
      {"inflight", required_argument, NULL, 'n'},
      {"margin-ms", required_argument, NULL, 'g'},
      {"allow-shutdown", no_argument, NULL, 'A'},
      {"no-reconnect", no_argument, NULL, 'R'},
      {"seed", required_argument, NULL, 'e'},
      {"quiet", no_argument, NULL, 'q'},
      {"line-timeout-ms", required_argument, NULL, 'T'},
      {"noread-stats", no_argument, NULL, 'N'},
      {"help", no_argument, NULL, 'x'},
      {NULL, 0, NULL, 0}};
  int port_set = 0;
  char* end;
  int ch;

  g.host = "127.0.0.1";
  g.nconns = 10;
  g.mode = MODE_ACTIVE;
  g.idle_share = 0.5;
  g.duration_ms = 5000;
  g.interval_ms = 100;
  g.line_size = 32;
  g.max_msgs = 1000000;
  g.idle_ms = 15000;
  g.slack_ms = 500;
  g.work_min = 10;
  g.work_max = 200;
  g.deadline_min = 10;
  g.deadline_max = 200;
  g.inflight = 1;
  g.margin_ms = 50;
  g.seed = 1;
  g.line_timeout_ms = 10000;

  while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    switch (ch) {
    case 'h':
      g.host = optarg;
      break;
    case 'p':
      g.port = (int) opt_number("port", optarg, 1, 65535);
      port_set = 1;
      break;
    case 'm':
      if (strcmp(optarg, "active") == 0)
        g.mode = MODE_ACTIVE;
      else if (strcmp(optarg, "idle") == 0)
        g.mode = MODE_IDLE;
      else if (strcmp(optarg, "mixed") == 0)
        g.mode = MODE_MIXED;
      else if (strcmp(optarg, "rpc") == 0)
        g.mode = MODE_RPC;
      else if (strcmp(optarg, "slowloris") == 0)
        g.mode = MODE_SLOWLORIS;
      else if (strcmp(optarg, "noread") == 0)
        g.mode = MODE_NOREAD;
      else {
        fprintf(stderr,
                "echo-load: --mode is active, idle, mixed, rpc, "
                "slowloris or noread\n");
        exit(2);
      }
      break;
    case 'c':
      g.nconns = (int) opt_number("conns", optarg, 1, MAX_CONNS);
      break;
    case 's':
      g.idle_share = strtod(optarg, &end);
      if (*end != '\0' || !(g.idle_share >= 0 && g.idle_share <= 1)) {
        fprintf(stderr, "echo-load: --idle-share is in 0..1\n");
        exit(2);
      }
      break;
    case 'd':
      g.duration_ms = opt_number("duration-ms", optarg, 1, MAX_DURATION_MS);
      break;
    case 'i':
      g.interval_ms = opt_number("interval-ms", optarg, 1, 3600000);
      break;
    case 'l':
      g.line_size = (int) opt_number("line-size", optarg, 24, 4096);
      break;
    case 'M':
      g.max_msgs = opt_number("max-msgs", optarg, 0, 100000000);
      break;
    case 'I':
      g.idle_ms = opt_number("idle-ms", optarg, 1, 86400000);
      break;
    case 'H':
      g.heartbeat_ms = opt_number("heartbeat-ms", optarg, 1, 86400000);
      break;
    case 'S':
      g.slack_ms = opt_number("slack-ms", optarg, 0, 600000);
      break;
    case 'w':
      opt_range("work-ms", optarg, 3600000, &g.work_min, &g.work_max);
      break;
    case 'D':
      opt_range("deadline-ms", optarg, 3600000, &g.deadline_min,
                &g.deadline_max);
      break;
    case 'n':
      g.inflight = (unsigned) opt_number("inflight", optarg, 1, 1000);
      break;
    case 'g':
      g.margin_ms = opt_number("margin-ms", optarg, 0, 600000);
      break;
    case 'A':
      g.allow_shutdown = 1;
      break;
    case 'R':
      g.no_reconnect = 1;
      break;
    case 'e':
      g.seed = opt_number("seed", optarg, 0, UINT64_MAX);
      break;
    case 'T':
      g.line_timeout_ms = opt_number("line-timeout-ms", optarg, 1, 86400000);
      break;
    case 'N':
      g.noread_stats = 1;
      break;
    case 'q':
      g.quiet = 1;
      break;
    case 'x':
      usage(stdout);
      exit(0);
    default:
      usage(stderr);
      exit(2);
    }
  }
  if (!port_set || optind < argc) {
    usage(stderr);
    exit(2);
  }
}


/* Load goes to this machine only: the address must be loopback. */
int resolve(void) {
  struct sockaddr_in* in4 = (struct sockaddr_in*) &g.addr;
  struct sockaddr_in6* in6 = (struct sockaddr_in6*) &g.addr;

  if (parse_address(g.host, g.port, &g.addr) != 0)
    return -1;
  if (g.addr.ss_family == AF_INET)
    return (ntohl(in4->sin_addr.s_addr) >> 24) == 127 ? 0 : -1;
  return IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr) ? 0 : -1;
}
