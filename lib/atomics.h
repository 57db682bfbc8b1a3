/* SPDX-License-Identifier: MIT */
/* What the cross-thread code needs beyond <stdatomic.h>: the cache-line
 * size it lays its data out by, memory on lines of its own, the seq_cst
 * fence of its store-then-load handshakes (with the stand-in that
 * ThreadSanitizer needs), and the add of a counter with one writer. */

#ifndef UVTW_ATOMICS_H
#define UVTW_ATOMICS_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef _WIN32
# include <malloc.h> /* _aligned_malloc */
#endif

/* The cache line that data written by different threads is kept apart by:
 * 64 bytes on x86-64, most AArch64 and 32-bit ARM cores. */
#define UVTW__LINE 64

/* Padding that keeps the fields before it and after it on different lines
 * of a struct that is malloc()ed, and so not line-aligned: fields more
 * than a line apart never share one. */
#define UVTW__PAD(name) char name[UVTW__LINE]

/* Zeroed memory that starts on a line of its own, or NULL; freed with
 * uvtw__line_free.  posix_memalign rather than C11's aligned_alloc, which
 * glibc has only from 2.16: the Debian package promises libc6 >= 2.3
 * (cmake/Package.cmake).  Windows has neither, and what its _aligned_malloc
 * returns must go back through _aligned_free. */
static inline void* uvtw__line_alloc(size_t size) {
  void* p;

#ifdef _WIN32
  if ((p = _aligned_malloc(size, UVTW__LINE)) == NULL)
    return NULL;
#else
  if (posix_memalign(&p, UVTW__LINE, size) != 0)
    return NULL;
#endif
  memset(p, 0, size);
  return p;
}


static inline void uvtw__line_free(void* p) {
#ifdef _WIN32
  _aligned_free(p);
#else
  free(p);
#endif
}


/* A seq_cst fence, for the store-then-load handshakes (the wake-up, and
 * close waiting for the calls inside the wheel).  ThreadSanitizer does not
 * model fences, and GCC refuses them under -fsanitize=thread: there a
 * seq_cst read-modify-write of a thread-local word stands in (a full
 * barrier on the x86 machines TSan runs on), which synchronizes with no
 * other thread and so hides no race from it.  The happens-before edges
 * TSan checks are all release/acquire pairs on the words themselves. */
#if defined(__SANITIZE_THREAD__)
# define UVTW__TSAN 1
#elif defined(__has_feature)
# if __has_feature(thread_sanitizer)
#  define UVTW__TSAN 1
# endif
#endif

static inline void uvtw__fence(void) {
#ifdef UVTW__TSAN
  static _Thread_local _Atomic int fence_word;

  atomic_fetch_add_explicit(&fence_word, 1, memory_order_seq_cst);
#else
  atomic_thread_fence(memory_order_seq_cst);
#endif
}


/* Adds `delta` to a counter that only the calling thread writes: a load
 * and a store, no read-modify-write (readers on other threads see either
 * value); `order` is the store's. */
static inline void uvtw__own_add(_Atomic uint64_t* counter,
                                 uint64_t delta,
                                 memory_order order) {
  atomic_store_explicit(
      counter, atomic_load_explicit(counter, memory_order_relaxed) + delta,
      order);
}

#endif /* UVTW_ATOMICS_H */
