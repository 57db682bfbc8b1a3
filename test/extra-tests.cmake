# SPDX-License-Identifier: MIT
# Tests that are not one plain test-*.c program.  A cross build (another
# target, cmake/toolchains/) has only the README's examples of them: the
# others run host tools (clang's fuzzer, valgrind, cmake, dpkg) on what the
# build made.

# The libFuzzer target, built with clang when it is present.  The core is
# pure C with no libuv calls, so it is compiled straight from lib/core*.c.
find_program(UVTW_CLANG NAMES clang clang-14)
if(UVTW_CLANG AND NOT UVTW_SANITIZE AND NOT CMAKE_CROSSCOMPILING)
  set(fuzz_bin ${CMAKE_CURRENT_BINARY_DIR}/fuzz-core)
  add_custom_command(
    OUTPUT ${fuzz_bin}
    COMMAND ${UVTW_CLANG} -std=gnu11 -g -O1 -Wall -Wextra -Werror
            -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
            ${UVTW_PRIVATE_FLAGS}
            -I${PROJECT_SOURCE_DIR}/include -I${PROJECT_SOURCE_DIR}/lib
            ${CMAKE_CURRENT_SOURCE_DIR}/fuzz-core.c
            ${PROJECT_SOURCE_DIR}/lib/core.c
            ${PROJECT_SOURCE_DIR}/lib/core-init.c
            ${PROJECT_SOURCE_DIR}/lib/core-tighten.c
            ${PROJECT_SOURCE_DIR}/lib/core-sort.c
            ${PROJECT_SOURCE_DIR}/lib/core-walk.c
            ${PROJECT_SOURCE_DIR}/lib/core-check.c -o ${fuzz_bin}
    DEPENDS fuzz-core.c core-harness.h ${PROJECT_SOURCE_DIR}/lib/core.c
            ${PROJECT_SOURCE_DIR}/lib/core-init.c
            ${PROJECT_SOURCE_DIR}/lib/core-tighten.c
            ${PROJECT_SOURCE_DIR}/lib/core-sort.c
            ${PROJECT_SOURCE_DIR}/lib/core-walk.c
            ${PROJECT_SOURCE_DIR}/lib/core-check.c
            ${PROJECT_SOURCE_DIR}/lib/core.h ${PROJECT_SOURCE_DIR}/lib/core-inl.h
            ${PROJECT_SOURCE_DIR}/lib/list.h
            ${PROJECT_SOURCE_DIR}/include/uvtw.h
    COMMENT "Building fuzz-core with clang")
  add_custom_target(fuzz-core-build ALL DEPENDS ${fuzz_bin})
  set(UVTW_FUZZ_SECONDS 30 CACHE STRING "How long CTest runs fuzz-core")
  add_test(NAME fuzz-core
           COMMAND ${fuzz_bin} -max_total_time=${UVTW_FUZZ_SECONDS}
                   -max_len=4096 -rss_limit_mb=1024
                   -artifact_prefix=${CMAKE_CURRENT_BINARY_DIR}/)
  set_tests_properties(fuzz-core PROPERTIES
      TIMEOUT 300 ENVIRONMENT "UBSAN_OPTIONS=halt_on_error=1")
endif()

# The layout of lib/, include/ and test/ is .clang-format's.  Formatting
# differs between clang-format releases: the check runs with Debian 12's,
# clang-format 14, and says it is skipped with any other.
find_program(UVTW_CLANG_FORMAT NAMES clang-format-14 clang-format)
if(UVTW_CLANG_FORMAT AND NOT CMAKE_CROSSCOMPILING AND NOT UVTW_SANITIZE)
  execute_process(COMMAND ${UVTW_CLANG_FORMAT} --version
                  OUTPUT_VARIABLE fmt_version ERROR_QUIET)
  if(fmt_version MATCHES "version 14\\.")
    add_test(NAME format
             COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/check-format.sh
                     ${UVTW_CLANG_FORMAT})
  else()
    message(STATUS "format: skipped (the check needs clang-format 14, "
                   "found: ${fmt_version})")
  endif()
else()
  message(STATUS "format: skipped (no clang-format)")
endif()

# Valgrind on the core tests: no leaks, no invalid accesses.  Not on a
# clang build: Debian 12's valgrind 3.19 cannot read the DWARF 5 that
# clang 14 writes (the GCC tree runs it).
find_program(UVTW_VALGRIND valgrind)
if(UVTW_VALGRIND AND CMAKE_C_COMPILER_ID MATCHES "Clang")
  message(STATUS "valgrind-core-model: skipped with clang (valgrind 3.19 "
                 "cannot read clang's DWARF 5; the GCC tree runs it)")
elseif(UVTW_VALGRIND AND NOT UVTW_SANITIZE AND NOT CMAKE_CROSSCOMPILING)
  add_test(NAME valgrind-core-model
           COMMAND ${UVTW_VALGRIND} --error-exitcode=1 --leak-check=full
                   --errors-for-leak-kinds=all $<TARGET_FILE:test-core-model>)
  set_tests_properties(valgrind-core-model PROPERTIES
      TIMEOUT 600 ENVIRONMENT "UVTW_MODEL_STEPS=2000")
endif()

# The installed tree works for a consumer, through find_package(uvtw) and
# through pkg-config, and exports nothing but uvtw_*.
if(NOT UVTW_SANITIZE AND UVTW_INSTALL AND NOT CMAKE_CROSSCOMPILING)
  add_test(NAME install-consumer
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/install-consumer.sh
                   ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR})
  set_tests_properties(install-consumer PROPERTIES TIMEOUT 300)
endif()

# Packaging and consumption, in the release tree only: the Debian packages
# (built, unpacked with dpkg -x, used by a consumer), and uvtw as a
# subproject of another CMake project, both ways.
if(NOT UVTW_SANITIZE AND NOT CMAKE_CROSSCOMPILING)
  find_program(UVTW_DPKG dpkg)
  find_program(UVTW_DPKG_SHLIBDEPS dpkg-shlibdeps)
  if(UVTW_DPKG AND UVTW_DPKG_SHLIBDEPS)
    add_test(NAME package-deb
             COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/package-deb.sh
                     ${PROJECT_SOURCE_DIR})
    set_tests_properties(package-deb PROPERTIES TIMEOUT 300)
  else()
    message(STATUS "no dpkg and dpkg-shlibdeps (dpkg-dev): "
                   "the package-deb test is skipped")
  endif()
  # The timer half alone (-DUVTW_TASKS=OFF) builds, holds no task code,
  # and passes its tests.
  add_test(NAME timer-only
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/timer-only.sh
                   ${PROJECT_SOURCE_DIR}
                   -DCMAKE_C_COMPILER=${CMAKE_C_COMPILER}
                   "-DCMAKE_PREFIX_PATH=${CMAKE_PREFIX_PATH}")
  set_tests_properties(timer-only PROPERTIES TIMEOUT 900)
  # The project configures and builds with Ninja as well as with Make.
  find_program(UVTW_NINJA NAMES ninja ninja-build)
  if(UVTW_NINJA)
    add_test(NAME ninja-tree
             COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ninja-tree.sh
                     ${PROJECT_SOURCE_DIR} ${UVTW_NINJA}
                     -DCMAKE_C_COMPILER=${CMAKE_C_COMPILER}
                     "-DCMAKE_PREFIX_PATH=${CMAKE_PREFIX_PATH}")
    set_tests_properties(ninja-tree PROPERTIES TIMEOUT 600)
  else()
    message(STATUS "ninja-tree: skipped (no ninja)")
  endif()
  foreach(how add_subdirectory FetchContent)
    add_test(NAME subproject-${how}
             COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/subproject.sh
                     ${PROJECT_SOURCE_DIR} ${how})
    set_tests_properties(subproject-${how} PROPERTIES TIMEOUT 300)
  endforeach()
endif()

# Every C example of README.md and docs/*.md is a program that compiles
# without warnings and runs: readme-examples.py writes each section's ```c
# blocks out as one program, readme-<section> or docs-<page>-<section>, at
# configure time (again whenever one of the pages changes).  They run in
# every tree, sanitizers included.
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  file(GLOB doc_pages CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/docs/*.md)
  set(readme ${PROJECT_SOURCE_DIR}/README.md ${doc_pages})
  set(readme_dir ${CMAKE_CURRENT_BINARY_DIR}/readme-examples)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
               ${readme} ${CMAKE_CURRENT_SOURCE_DIR}/readme-examples.py)
  execute_process(
      COMMAND ${Python3_EXECUTABLE}
              ${CMAKE_CURRENT_SOURCE_DIR}/readme-examples.py
              ${readme_dir} ${readme}
      OUTPUT_VARIABLE readme_programs
      RESULT_VARIABLE readme_result)
  if(NOT readme_result EQUAL 0)
    message(FATAL_ERROR "readme-examples.py failed on README.md or docs/")
  endif()
  string(REPLACE "\n" ";" readme_programs "${readme_programs}")
  foreach(name ${readme_programs})
    if(name)
      add_executable(${name} ${readme_dir}/${name}.c)
      target_compile_options(${name} PRIVATE ${UVTW_WARNINGS})
      target_link_libraries(${name} PRIVATE uvtw_static Threads::Threads)
      add_test(NAME ${name} COMMAND ${name})
      set_tests_properties(${name} PROPERTIES TIMEOUT 60)
      if(NOT readme_shared)
        # The first example once more, linked with the shared library: on
        # Windows, the DLL, through dllimport (UVTW_EXTERN).
        set(readme_shared ${name}-shared)
        add_executable(${readme_shared} ${readme_dir}/${name}.c)
        target_compile_options(${readme_shared} PRIVATE ${UVTW_WARNINGS})
        target_link_libraries(${readme_shared} PRIVATE uvtw Threads::Threads)
        add_test(NAME ${readme_shared} COMMAND ${readme_shared})
        set_tests_properties(${readme_shared} PROPERTIES TIMEOUT 60)
        if(WIN32)
          # Windows looks for a program's DLLs in its own directory first:
          # uvtw's and libuv's are copied there, so that the program runs
          # without a search path (on Windows, or under wine without the
          # emulator's WINEPATH).
          add_custom_command(
              TARGET ${readme_shared} POST_BUILD
              COMMAND ${CMAKE_COMMAND} -E copy_if_different
                      $<TARGET_FILE:uvtw>
                      $<TARGET_RUNTIME_DLLS:${readme_shared}>
                      $<TARGET_FILE_DIR:${readme_shared}>
              COMMAND_EXPAND_LISTS)
        endif()
      endif()
    endif()
  endforeach()
else()
  message(STATUS "no python3: the README examples are not tested")
endif()

# docs/api.md has an entry for every UVTW_EXTERN function of uvtw.h, with
# the header's declaration, and none for a function it does not declare.
if(Python3_Interpreter_FOUND AND NOT CMAKE_CROSSCOMPILING)
  add_test(NAME docs-api-complete
           COMMAND ${Python3_EXECUTABLE}
                   ${CMAKE_CURRENT_SOURCE_DIR}/api-doc-check.py
                   ${PROJECT_SOURCE_DIR}/include/uvtw.h
                   ${PROJECT_SOURCE_DIR}/docs/api.md)
endif()

# No circle of calls between the files of lib/ (from their objects' symbol
# tables; the graph is printed in the test's output).
if(CMAKE_NM AND NOT CMAKE_CROSSCOMPILING AND NOT WIN32)
  add_test(NAME lib-calls
           COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/lib-calls.sh ${CMAKE_NM}
                   $<TARGET_OBJECTS:uvtw_objects>
           COMMAND_EXPAND_LISTS)
endif()

# Every atomic step of the tasks lives in lib/task-shared.c: lib/task.c
# has none.
if(UVTW_TASKS)
  add_test(NAME task-no-atomics
           COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/task-no-atomics.sh
                   ${PROJECT_SOURCE_DIR})
endif()

# The task protocol's Promela model (test/task-protocol.pml) is checked
# exhaustively by SPIN in each of its configurations, and each of its
# broken twins (-DBROKEN, -DBROKEN_PUBLISH, -DBROKEN_WAKE) must yield a
# counterexample.
# Host tools only: spin and a C compiler for pan.c.
find_program(UVTW_SPIN spin)
if(UVTW_SPIN AND NOT CMAKE_CROSSCOMPILING AND NOT UVTW_SANITIZE)
  foreach(config task-protocol:pass:
                 task-protocol-nodes:pass:-DNODES
                 task-protocol-resetters:pass:-DRESETTERS
                 task-protocol-broken:fail:-DBROKEN
                 task-protocol-broken-publish:fail:-DBROKEN_PUBLISH
                 task-protocol-broken-wake:fail:-DBROKEN_WAKE)
    string(REPLACE ":" ";" parts ${config})
    list(GET parts 0 name)
    list(GET parts 1 expect)
    list(LENGTH parts nparts)
    set(define)
    if(nparts GREATER 2)
      list(GET parts 2 define)
    endif()
    add_test(NAME spin-${name}
             COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/spin-check.sh
                     ${UVTW_SPIN} ${CMAKE_C_COMPILER}
                     ${CMAKE_CURRENT_SOURCE_DIR}/task-protocol.pml
                     ${CMAKE_CURRENT_BINARY_DIR}/spin-${name} ${expect}
                     ${define})
    set_tests_properties(spin-${name} PROPERTIES TIMEOUT 900)
  endforeach()
elseif(NOT UVTW_SANITIZE AND NOT CMAKE_CROSSCOMPILING)
  message(STATUS "spin-task-protocol: skipped (no spin)")
endif()

# The same protocol under the C11 memory model, with Relacy (relacy.cmake).
include(${CMAKE_CURRENT_SOURCE_DIR}/relacy.cmake)
