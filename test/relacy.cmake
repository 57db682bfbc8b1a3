# SPDX-License-Identifier: MIT
# The task protocol under the C11 memory model: test/task-protocol-relacy.cpp
# runs lib/task-shared.c's atomic steps, with the code's memory orders, in
# the Relacy Race Detector (Debian's relacy-dev, headers only).  C++ is
# enabled here, and only when a C++ compiler and <relacy/relacy.hpp> are
# there: the library itself is C and builds without either.
#   relacy-orders                     the model's orders are the code's
#   relacy-litmus                     the setup tells release/acquire from
#                                     seq_cst (store buffering)
#   relacy-task-protocol/<scenario>   the model passes
#   relacy-task-protocol-broken       its twin (the queue's acquire and
#                                     the submit's release relaxed) fails
#                                     with a data race
# Included from extra-tests.cmake, after Python3 is looked for.

# Host tools, in the native trees without sanitizers (as the SPIN model).
if(CMAKE_CROSSCOMPILING OR UVTW_SANITIZE)
  return()
endif()
# A check of the sources: it runs with or without C++ and Relacy.
if(Python3_Interpreter_FOUND)
  add_test(NAME relacy-orders
           COMMAND ${Python3_EXECUTABLE}
                   ${CMAKE_CURRENT_SOURCE_DIR}/relacy-orders.py
                   ${CMAKE_CURRENT_SOURCE_DIR}/task-protocol-relacy.cpp
                   ${PROJECT_SOURCE_DIR}/lib/task-shared.c
                   ${PROJECT_SOURCE_DIR}/lib/task.h)
else()
  message(STATUS "relacy-orders: skipped (no python3)")
endif()
include(CheckLanguage)
# check_language caches a compiler it did not find, and never looks again:
# a tree configured before g++ was installed (./run.sh demo, then
# ./run.sh test) would leave the models out for good.  Look again.
if(CMAKE_CXX_COMPILER STREQUAL "NOTFOUND")
  unset(CMAKE_CXX_COMPILER CACHE)
endif()
check_language(CXX)
if(NOT CMAKE_CXX_COMPILER)
  message(STATUS "relacy-task-protocol: skipped (no C++ compiler)")
  return()
endif()
enable_language(CXX)
include(CheckIncludeFileCXX)
check_include_file_cxx(relacy/relacy.hpp UVTW_HAVE_RELACY)
if(NOT UVTW_HAVE_RELACY)
  message(STATUS "relacy-task-protocol: skipped (no relacy/relacy.hpp: "
                 "apt-get install relacy-dev)")
  # Looked for again at the next configure: run.sh may install it later.
  unset(UVTW_HAVE_RELACY CACHE)
  return()
endif()

foreach(twin "" -broken)
  set(program task-protocol-relacy${twin})
  add_executable(${program} task-protocol-relacy.cpp)
  set_target_properties(${program} PROPERTIES CXX_STANDARD 11
                        CXX_STANDARD_REQUIRED ON CXX_EXTENSIONS OFF)
  target_compile_options(${program} PRIVATE ${UVTW_WARNINGS})
endforeach()
target_compile_definitions(task-protocol-relacy-broken PRIVATE
                           UVTW_RELACY_BROKEN)

# Random search: iterations per scenario (each seeded by its number, so a
# run is reproducible).  About 1-4 s each in a release build.
set(UVTW_RELACY_ITERATIONS 100000 CACHE STRING
    "Iterations of each Relacy scenario")
add_test(NAME relacy-litmus COMMAND task-protocol-relacy litmus)
foreach(scenario submit-cancel-reset close-races pool-cancel pool-close
                 takeover)
  add_test(NAME relacy-task-protocol/${scenario}
           COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/relacy-check.sh
                   $<TARGET_FILE:task-protocol-relacy> ${scenario}
                   ${UVTW_RELACY_ITERATIONS} pass)
  set_tests_properties(relacy-task-protocol/${scenario} PROPERTIES
                       TIMEOUT 300)
endforeach()
add_test(NAME relacy-task-protocol-broken
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/relacy-check.sh
                 $<TARGET_FILE:task-protocol-relacy-broken>
                 submit-cancel-reset ${UVTW_RELACY_ITERATIONS} "DATA RACE")
set_tests_properties(relacy-task-protocol-broken PROPERTIES TIMEOUT 300)
