/* SPDX-License-Identifier: MIT */
/* Helpers shared by uvtw-echo-server and echo-load; see common.h. */

#include "common.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

const char* program_name = "echo";


void logf_(const char* fmt, ...) {
  va_list ap;

  fprintf(stderr, "%s: ", program_name);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}


void* xmalloc(size_t n) {
  return xrealloc(NULL, n);
}


void* xrealloc(void* p, size_t n) {
  p = realloc(p, n);
  if (p == NULL) {
    logf_("out of memory");
    abort();
  }
  return p;
}


uint64_t opt_number(const char* name,
                    const char* arg,
                    uint64_t min,
                    uint64_t max) {
  char* end;
  unsigned long long v;

  errno = 0;
  v = strtoull(arg, &end, 10);
  if (errno != 0 || end == arg || *end != '\0' || arg[0] == '-' || v < min ||
      v > max) {
    logf_("--%s wants a number in %" PRIu64 "..%" PRIu64 ", not '%s'", name,
          min, max, arg);
    exit(2);
  }
  return v;
}


void opt_range(const char* name,
               const char* arg,
               uint64_t max,
               uint64_t* lo,
               uint64_t* hi) {
  char buf[64];
  char* dash;

  snprintf(buf, sizeof(buf), "%s", arg);
  dash = strchr(buf, '-');
  if (dash != NULL)
    *dash = '\0';
  *lo = opt_number(name, buf, 0, max);
  *hi = dash != NULL ? opt_number(name, dash + 1, *lo, max) : *lo;
}


int parse_address(const char* host, int port, struct sockaddr_storage* out) {
  memset(out, 0, sizeof(*out));
  if (uv_ip4_addr(host, port, (struct sockaddr_in*) out) == 0)
    return 0;
  if (uv_ip6_addr(host, port, (struct sockaddr_in6*) out) == 0)
    return 0;
  return UV_EINVAL;
}


/* Each connection is a file descriptor; the default soft limit (often
 * 1024) is the first thing a load test hits. */
uint64_t raise_fd_limit(void) {
  struct rlimit rl;

  if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
    return 0;
  if (rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
      getrlimit(RLIMIT_NOFILE, &rl);
  }
  return (uint64_t) rl.rlim_cur;
}
