/* SPDX-License-Identifier: MIT */
/* What uvtw-echo-server and echo-load share: the program's name in
 * messages, allocation that cannot fail, number options, the address
 * parser and the descriptor limit.  One home, so that both programs
 * accept and reject options the same way. */

#ifndef ECHO_COMMON_H
#define ECHO_COMMON_H

#include <stddef.h>
#include <stdint.h>

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
/* An IPv4 or IPv6 address and a port; 0 or UV_EINVAL. */
int parse_address(const char* host, int port, struct sockaddr_storage* out);
/* Raises the soft RLIMIT_NOFILE to the hard one; returns the soft limit
 * now in force. */
uint64_t raise_fd_limit(void);

#endif /* ECHO_COMMON_H */
