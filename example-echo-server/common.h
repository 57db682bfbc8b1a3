/* SPDX-License-Identifier: MIT */
/* What uvtw-echo-server and echo-load share: the program's name in
 * messages, allocation that cannot fail, the command-line parser, the
 * address parser and the descriptor limit.  One home, so that both programs
 * accept and reject options the same way. */

#ifndef ECHO_COMMON_H
#define ECHO_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <uv.h>

/* Set once by main, before anything is logged. */
extern const char* program_name;

/* "<program>: <message>\n" on stderr. */
void logf_(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
/* Out of memory is not a case this example handles: it aborts. */
void* xmalloc(size_t n);
void* xrealloc(void* p, size_t n);

/* A decimal option value in min..max, or a usage message and exit(2). */
uint64_t opt_number(const char* name,
                    const char* arg,
                    uint64_t min,
                    uint64_t max);
/* "A" or "A-B" with A <= B, each in 0..max; exit(2) otherwise. */
void opt_range(const char* name,
               const char* arg,
               uint64_t max,
               uint64_t* lo,
               uint64_t* hi);
/* One --name option of a program's table (see parse_options), made with the
 * OPTION_* macros below, which check the target's type. */
typedef enum {
  OPT_FLAG,   /* no value: *(int*) target = 1 */
  OPT_STRING, /* *(const char**) target = the value */
  OPT_INT,    /* *(int*) target = a number in min..max */
  OPT_UINT,   /* *(unsigned*) target = a number in min..max */
  OPT_U64,    /* *(uint64_t*) target = a number in min..max */
  OPT_RANGE,  /* "A" or "A-B" (opt_range) into target and target2 */
  OPT_CALL    /* call(value) */
} opt_kind_t;

typedef struct {
  const char* name; /* NULL ends the table */
  opt_kind_t kind;
  void* target;
  void* target2;
  uint64_t min;
  uint64_t max;
  void (*call)(const char* value);
} opt_spec_t;

#define OPTION_FLAG(name, p)                                                  \
  { (name), OPT_FLAG, (1 ? (p) : (int*) NULL), NULL, 0, 0, NULL }
#define OPTION_STRING(name, p)                                                \
  { (name), OPT_STRING, (1 ? (p) : (const char**) NULL), NULL, 0, 0, NULL }
#define OPTION_INT(name, p, min, max)                                         \
  { (name), OPT_INT, (1 ? (p) : (int*) NULL), NULL, (min), (max), NULL }
#define OPTION_UINT(name, p, min, max)                                        \
  { (name), OPT_UINT, (1 ? (p) : (unsigned*) NULL), NULL, (min), (max), NULL }
#define OPTION_U64(name, p, min, max)                                         \
  { (name), OPT_U64, (1 ? (p) : (uint64_t*) NULL), NULL, (min), (max), NULL }
#define OPTION_RANGE(name, lo, hi, max)                                       \
  { (name), OPT_RANGE, (1 ? (lo) : (uint64_t*) NULL),                         \
    (1 ? (hi) : (uint64_t*) NULL), 0, (max), NULL }
#define OPTION_CALL(name, fn) { (name), OPT_CALL, NULL, NULL, 0, 0, (fn) }
#define OPTION_END { NULL, OPT_FLAG, NULL, NULL, 0, 0, NULL }

/* Parses argv with getopt_long against specs, plus --help (usage(stdout),
 * exit 0).  An unknown option, a missing value or an argument that is not
 * an option: usage(stderr) and exit(2); a bad value: a message and
 * exit(2).  Options are applied in the order given. */
void parse_options(int argc,
                   char** argv,
                   const opt_spec_t* specs,
                   void (*usage)(FILE* f));
/* An IPv4 or IPv6 address and a port; 0 or UV_EINVAL. */
int parse_address(const char* host, int port, struct sockaddr_storage* out);
/* Raises the soft RLIMIT_NOFILE to the hard one; returns the soft limit
 * now in force. */
uint64_t raise_fd_limit(void);

#endif /* ECHO_COMMON_H */
