/* SPDX-License-Identifier: MIT */
/* Named cases for a test program that runs several scenarios, after the
 * idea of libuv's test/test-list.h (one name per scenario, each runnable on
 * its own), without its runner: no fork, no output capture.
 *
 *   static const test_case_t cases[] = {
 *     TEST_CASE(same_pass),
 *     TEST_CASE(id_zero),
 *   };
 *
 *   int main(int argc, char** argv) {
 *     return run_cases(argc, argv, cases, TEST_CASE_COUNT(cases));
 *   }
 *
 * Then:
 *   test-x              runs every case, in table order
 *   test-x --list       prints the case names, one a line, and runs nothing
 *   test-x NAME...      runs the named cases, in the order given; a name must
 *                       match exactly (no prefix, no pattern): an unknown
 *                       name prints a message and exits with 2, before any
 *                       case runs
 *
 * A case's name is its function's name.  test/CMakeLists.txt reads the
 * table out of the source (every line that is a TEST_CASE(name) entry, one
 * a line, as above) and registers one CTest test per case, test-x/NAME, plus
 * test-x/--list, which fails unless --list prints exactly the registered
 * names, in the same order, and an unknown name fails.  Write each entry on
 * a line of its own, so that both see the same table.
 *
 * Cases run in one process, one after the other, so a case must not rely on
 * what an earlier one left: each sets up and tears down its own loop (CTest
 * runs each alone).  A failed assertion aborts (test.h); a case that
 * returns passed. */

#ifndef UVTW_TEST_CASES_H
#define UVTW_TEST_CASES_H

#include <stddef.h>
#include <stdio.h>
#include <string.h>

typedef struct {
  const char* name;
  void (*run)(void);
} test_case_t;

#define TEST_CASE(fn)                                                          \
 { #fn, fn }
#define TEST_CASE_COUNT(table) (sizeof(table) / sizeof((table)[0]))


static const test_case_t* find_case(const test_case_t* cases,
                                    size_t n,
                                    const char* name) {
  size_t i;

  for (i = 0; i < n; i++)
    if (strcmp(cases[i].name, name) == 0)
      return &cases[i];
  return NULL;
}


static void run_case(const test_case_t* c) {
  fprintf(stderr, "case %s\n", c->name);
  c->run();
  fprintf(stderr, "case %s: ok\n", c->name);
}


static int run_cases(int argc,
                     char** argv,
                     const test_case_t* cases,
                     size_t n) {
  size_t i;
  int k;

  if (argc == 2 && strcmp(argv[1], "--list") == 0) {
    for (i = 0; i < n; i++)
      printf("%s\n", cases[i].name);
    return 0;
  }
  /* Every name is checked before the first case runs. */
  for (k = 1; k < argc; k++) {
    if (find_case(cases, n, argv[k]) == NULL) {
      fprintf(stderr,
              "%s: no case named \"%s\" (names must match exactly; "
              "--list prints the %zu cases)\n",
              argv[0], argv[k], n);
      return 2;
    }
  }
  if (argc < 2) {
    for (i = 0; i < n; i++)
      run_case(&cases[i]);
  } else {
    for (k = 1; k < argc; k++)
      run_case(find_case(cases, n, argv[k]));
  }
  return 0;
}

#endif /* UVTW_TEST_CASES_H */
