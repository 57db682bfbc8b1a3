/* SPDX-License-Identifier: MIT */
/* Helpers shared by uvtw-echo-server and echo-load; see common.h. */

#include "common.h"

#include <getopt.h>
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
  uint64_t v = 0;
  unsigned digit;
  const char* p;

  /* Digits only, by hand: strtoull would take leading spaces, a sign (and
   * negate a "-1" into a huge number), and a "0x" prefix. */
  for (p = arg; *p != '\0'; p++) {
    if (*p < '0' || *p > '9')
      break;
    digit = (unsigned) (*p - '0');
    if (v > (UINT64_MAX - digit) / 10)
      break; /* overflow: out of every range */
    v = v * 10 + digit;
  }
  if (p == arg || *p != '\0' || v < min || v > max) {
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


/* getopt_long's value for specs[i]: above every char, so no short option
 * can collide; HELP_VAL for --help. */
#define SPEC_VAL(i) (256 + (i))
#define HELP_VAL 255


static void apply_option(const opt_spec_t* o, const char* arg) {
  switch (o->kind) {
  case OPT_FLAG:
    *(int*) o->target = 1;
    break;
  case OPT_STRING:
    *(const char**) o->target = arg;
    break;
  case OPT_INT:
    *(int*) o->target = (int) opt_number(o->name, arg, o->min, o->max);
    break;
  case OPT_UINT:
    *(unsigned*) o->target =
        (unsigned) opt_number(o->name, arg, o->min, o->max);
    break;
  case OPT_U64:
    *(uint64_t*) o->target = opt_number(o->name, arg, o->min, o->max);
    break;
  case OPT_RANGE:
    opt_range(o->name, arg, o->max, o->target, o->target2);
    break;
  case OPT_CALL:
    o->call(arg);
    break;
  }
}


void parse_options(int argc,
                   char** argv,
                   const opt_spec_t* specs,
                   void (*usage)(FILE* f)) {
  struct option* longopts;
  size_t n;
  size_t i;
  int ch;

  for (n = 0; specs[n].name != NULL; n++)
    ;
  longopts = xmalloc((n + 2) * sizeof(*longopts));
  for (i = 0; i < n; i++) {
    longopts[i].name = specs[i].name;
    longopts[i].has_arg =
        specs[i].kind == OPT_FLAG ? no_argument : required_argument;
    longopts[i].flag = NULL;
    longopts[i].val = SPEC_VAL((int) i);
  }
  longopts[n] = (struct option){"help", no_argument, NULL, HELP_VAL};
  longopts[n + 1] = (struct option){NULL, 0, NULL, 0};
  while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
    if (ch == HELP_VAL) {
      usage(stdout);
      exit(0);
    }
    if (ch < SPEC_VAL(0) || ch >= SPEC_VAL((int) n)) {
      usage(stderr);
      exit(2);
    }
    apply_option(&specs[ch - SPEC_VAL(0)], optarg);
  }
  free(longopts);
  if (optind < argc) {
    usage(stderr);
    exit(2);
  }
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
