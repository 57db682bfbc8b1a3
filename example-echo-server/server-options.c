/* SPDX-License-Identifier: MIT */
/* The command line. */

#include "server.h"

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
"  --max-work-per-conn N  requests of one connection queued or running on\n"
"                       the threadpool; more get BUSY (default: --threads\n"
"                       / 4, at least 1)\n"
"  --drain-ms N         on SIGTERM, wait up to N ms for requests in flight\n"
"                       (default 5000)\n"
"  --loops N            loop threads, each with its own wheel (default 1;\n"
"                       0: one per core)\n");
  /* clang-format on */
}


static void set_timers(const char* arg) {
  if (strcmp(arg, "wheel") == 0) {
    opt.kind = XBACKEND_WHEEL;
  } else if (strcmp(arg, "uv") == 0) {
    opt.kind = XBACKEND_UV;
  } else {
    logf_("--timers is wheel or uv, not '%s'", arg);
    exit(2);
  }
}


/* Checked here, not when the loops listen, so that a bad address is a
 * usage error (exit 2) like every other bad option. */
static void set_host(const char* arg) {
  struct sockaddr_storage addr;

  if (parse_address(arg, 0, &addr) != 0) {
    logf_("--host wants an IPv4 or IPv6 address, not '%s'", arg);
    exit(2);
  }
  opt.host = arg;
}


void parse_args(int argc, char** argv) {
  static const opt_spec_t specs[] = {
      OPTION_CALL("host", set_host),
      OPTION_INT("port", &opt.port, 0, 65535),
      OPTION_CALL("timers", set_timers),
      OPTION_U64("heartbeat-ms", &opt.heartbeat_ms, 1, 86400000),
      OPTION_U64("idle-ms", &opt.idle_ms, 1, 86400000),
      OPTION_U64("stats-ms", &opt.stats_ms, 0, 86400000),
      OPTION_U64("max-conns", &opt.max_conns, 0, 1000000),
      OPTION_U64("max-line", &opt.max_line, 1, 1 << 20),
      OPTION_U64("max-reqs", &opt.max_reqs, 0, 1000000),
      OPTION_U64("max-work-ms", &opt.max_work_ms, 0, 86400000),
      OPTION_U64("max-deadline-ms", &opt.max_deadline_ms, 0, 86400000),
      OPTION_UINT("threads", &opt.threads, 1, 1024),
      OPTION_U64("line-timeout-ms", &opt.line_timeout_ms, 1, 86400000),
      OPTION_U64("max-output-bytes", &opt.max_output_bytes, 4096,
                 UINT64_C(1) << 40),
      OPTION_U64("max-work-inflight", &opt.max_work_inflight, 1, 1000000),
      OPTION_U64("max-work-per-conn", &opt.max_work_per_conn, 1, 1000000),
      OPTION_U64("drain-ms", &opt.drain_ms, 0, 86400000),
      OPTION_UINT("loops", &opt.loops, 0, MAX_LOOPS),
      OPTION_END};

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
  opt.max_work_per_conn = 0;
  opt.drain_ms = 5000;
  opt.loops = 1;

  parse_options(argc, argv, specs, usage);
  if (opt.max_work_inflight == 0)
    opt.max_work_inflight = 2 * (uint64_t) opt.threads;
  /* A quarter of the threads: four clients at their share fill the pool,
   * and no one client can hold all of it. */
  if (opt.max_work_per_conn == 0)
    opt.max_work_per_conn = opt.threads >= 8 ? opt.threads / 4 : 1;
  if (opt.loops == 0) {
    opt.loops = uv_available_parallelism();
    if (opt.loops > MAX_LOOPS)
      opt.loops = MAX_LOOPS;
  }
}
