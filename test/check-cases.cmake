# SPDX-License-Identifier: MIT
# The <program>/--list test (test/CMakeLists.txt): the cases the program
# lists are exactly the CTest tests registered from its source, in the same
# order, so that no case can go unregistered; and an unknown case name
# fails, rather than running nothing and passing.
#   cmake -Dprogram=PATH -Dcases=a,b,c [-Demulator=CMD] -P check-cases.cmake
# A cross build passes its CMAKE_CROSSCOMPILING_EMULATOR as `emulator` (a
# list), through which the program runs.
execute_process(COMMAND ${emulator} ${program} --list
                OUTPUT_VARIABLE listed RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "${program} --list exited with ${result}")
endif()
string(REPLACE "\r" "" listed "${listed}") # Windows' text-mode stdout
string(STRIP "${listed}" listed)
string(REPLACE "\n" "," listed "${listed}")
if(NOT listed STREQUAL cases)
  message(FATAL_ERROR
          "${program} --list and the CTest tests disagree:\n"
          "  --list:     ${listed}\n"
          "  registered: ${cases}\n"
          "Each case must be a TEST_CASE(name) line of its own in the "
          "table (test-cases.h); re-run cmake after editing it.")
endif()
execute_process(COMMAND ${emulator} ${program} no-such-case
                ERROR_VARIABLE err RESULT_VARIABLE result)
if(result EQUAL 0 OR NOT err MATCHES "no case named")
  message(FATAL_ERROR "${program} no-such-case exited with ${result} "
                      "(expected a message and a non-zero exit): ${err}")
endif()
message(STATUS "${program}: ${cases}")
