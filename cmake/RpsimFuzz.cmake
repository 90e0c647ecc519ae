# libFuzzer targets (tests/fuzz). Needs clang: -fsanitize=fuzzer links
# libFuzzer's main; the code under test is compiled with coverage
# instrumentation (fuzzer-no-link) and with ASan + UBSan, so that a crash, an
# out-of-bounds access or undefined behaviour stops the run like a mismatch.
if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "RPSIM_FUZZ=ON needs clang++ (libFuzzer): configure with -DCMAKE_CXX_COMPILER=clang++")
endif()

set(RPSIM_FUZZ_SANITIZERS -fsanitize=address,undefined -fno-sanitize-recover=undefined
                          -fno-omit-frame-pointer)

# An instrumented static library from a glob of sources (a copy of a project
# library, so that the project's own targets stay uninstrumented).
function(rpsim_fuzz_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS;INCLUDES" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC ${ARG_INCLUDES})
  target_link_libraries(${name} PUBLIC ${ARG_LIBS})
  target_compile_options(${name} PRIVATE -fsanitize=fuzzer-no-link ${RPSIM_FUZZ_SANITIZERS})
  rpsim_unity(${name} ${ARG_SOURCES})
endfunction()

# rpsim_add_fuzzer(NAME SOURCES ... LIBS ...): one libFuzzer executable
# fuzz_<NAME>, its seed corpus in tests/fuzz/corpus/<NAME>.
function(rpsim_add_fuzzer name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(fuzz_${name} ${ARG_SOURCES})
  target_compile_options(fuzz_${name} PRIVATE -fsanitize=fuzzer ${RPSIM_FUZZ_SANITIZERS})
  target_link_options(fuzz_${name} PRIVATE -fsanitize=fuzzer ${RPSIM_FUZZ_SANITIZERS})
  target_link_libraries(fuzz_${name} PRIVATE ${ARG_LIBS} rpsim_warnings)
  target_include_directories(fuzz_${name} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  set_property(GLOBAL APPEND PROPERTY RPSIM_FUZZERS fuzz_${name})
endfunction()
