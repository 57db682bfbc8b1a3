/* SPDX-License-Identifier: MIT */
/* Tasks in a shared object loaded with dlopen(): the module
 * (task-dlopen-module.c, linked against the shared libuvtw) is loaded with
 * RTLD_NOW | RTLD_LOCAL and runs 2,000 tasks from two threads and the
 * threadpool; each runs once.  The library uses no thread-local storage of
 * a fixed model, so it loads wherever the loader's static TLS surplus is
 * used up (the task-no-static-tls test checks its dynamic section). */

#include <dlfcn.h>
#include <stdio.h>

#include "test.h"

int main(void) {
  int (*run)(void);
  void* module;

  module = dlopen(UVTW_TEST_MODULE, RTLD_NOW | RTLD_LOCAL);
  if (module == NULL)
    fprintf(stderr, "dlopen: %s\n", dlerror());
  ASSERT(module != NULL);
  *(void**) &run = dlsym(module, "module_run");
  ASSERT(run != NULL);
  ASSERT_EQ(2000, run());
  ASSERT_EQ(0, dlclose(module));
  return 0;
}
