/* SPDX-License-Identifier: MIT */
/* echo-load: the command line. */

#include "load.h"

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
"  --margin-ms N          rpc: OK for work longer than its deadline + N is\n"
"                         wrong whatever the server reports (default 50)\n"
"  --allow-shutdown       BYE shutdown is expected: not a violation, and the\n"
"                         run ends when every connection is closed\n"
"  --no-reconnect         idle connections closed for idleness stay closed\n"
"  --seed N               random seed (default 1)\n"
"  --quiet                only the RESULT line\n");
  /* clang-format on */
}


static void set_mode(const char* arg) {
  static const struct {
    const char* name;
    mode_t_ mode;
  } modes[] = {{"active", MODE_ACTIVE}, {"idle", MODE_IDLE},
               {"mixed", MODE_MIXED},   {"rpc", MODE_RPC},
               {"slowloris", MODE_SLOWLORIS}, {"noread", MODE_NOREAD}};
  size_t i;

  for (i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
    if (strcmp(arg, modes[i].name) == 0) {
      g.mode = modes[i].mode;
      return;
    }
  }
  fprintf(stderr,
          "echo-load: --mode is active, idle, mixed, rpc, "
          "slowloris or noread\n");
  exit(2);
}


/* A fraction in 0..1 written with digits and at most one point: strtod
 * alone would also take spaces, signs, exponents, hex and "inf". */
static void set_idle_share(const char* arg) {
  size_t digits = strspn(arg, "0123456789.");
  const char* point = strchr(arg, '.');
  char* end;

  g.idle_share = strtod(arg, &end);
  if (digits == 0 || arg[digits] != '\0' || *end != '\0' ||
      (point != NULL && strchr(point + 1, '.') != NULL) ||
      !(g.idle_share >= 0 && g.idle_share <= 1)) {
    logf_("--idle-share wants a number in 0..1, not '%s'", arg);
    exit(2);
  }
}


void parse_args(int argc, char** argv) {
  static const opt_spec_t specs[] = {
      OPTION_STRING("host", &g.host),
      OPTION_INT("port", &g.port, 1, 65535),
      OPTION_CALL("mode", set_mode),
      OPTION_INT("conns", &g.nconns, 1, MAX_CONNS),
      OPTION_CALL("idle-share", set_idle_share),
      OPTION_U64("duration-ms", &g.duration_ms, 1, MAX_DURATION_MS),
      OPTION_U64("interval-ms", &g.interval_ms, 1, 3600000),
      OPTION_INT("line-size", &g.line_size, 24, 4096),
      OPTION_U64("max-msgs", &g.max_msgs, 0, 100000000),
      OPTION_U64("idle-ms", &g.idle_ms, 1, 86400000),
      OPTION_U64("heartbeat-ms", &g.heartbeat_ms, 1, 86400000),
      OPTION_U64("slack-ms", &g.slack_ms, 0, 600000),
      OPTION_RANGE("work-ms", &g.work_min, &g.work_max, 3600000),
      OPTION_RANGE("deadline-ms", &g.deadline_min, &g.deadline_max, 3600000),
      OPTION_UINT("inflight", &g.inflight, 1, 1000),
      OPTION_U64("margin-ms", &g.margin_ms, 0, 600000),
      OPTION_FLAG("allow-shutdown", &g.allow_shutdown),
      OPTION_FLAG("no-reconnect", &g.no_reconnect),
      OPTION_U64("seed", &g.seed, 0, UINT64_MAX),
      OPTION_FLAG("quiet", &g.quiet),
      OPTION_U64("line-timeout-ms", &g.line_timeout_ms, 1, 86400000),
      OPTION_FLAG("noread-stats", &g.noread_stats),
      OPTION_END};

  g.host = "127.0.0.1";
  g.port = 0; /* required: --port is at least 1 */
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

  parse_options(argc, argv, specs, usage);
  if (g.port == 0) {
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
