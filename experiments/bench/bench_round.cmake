# bench_round's side-by-side comparison with CPFloat (issue #30), a
# benchmark-only dependency: Debian does not package CPFloat, so the benchmark
# builds against a checkout outside this repository named by the CMake or
# environment variable CPFLOAT_DIR, and says so when there is none.
if(NOT DEFINED CPFLOAT_DIR AND DEFINED ENV{CPFLOAT_DIR})
  set(CPFLOAT_DIR $ENV{CPFLOAT_DIR})
endif()
set(CPFLOAT_DIR "${CPFLOAT_DIR}" CACHE PATH "A CPFloat checkout for bench_round's comparison (optional)")
if(TARGET bench_round)
  if(CPFLOAT_DIR AND EXISTS ${CPFLOAT_DIR}/src/cpfloat_binary64.h)
    set(src ${CMAKE_CURRENT_LIST_DIR}/bench_round_cpfloat.c)
    target_sources(bench_round PRIVATE ${src})
    target_compile_definitions(bench_round PRIVATE RPSIM_HAVE_CPFLOAT=1 RPSIM_CPFLOAT_DIR="${CPFLOAT_DIR}")
    # CPFloat's own build flags; its warnings are not ours to fix (-w).
    set(opts -O3 -march=native -std=gnu99 -w)
    set(dirs ${CPFLOAT_DIR}/src)
    if(EXISTS ${CPFLOAT_DIR}/deps/pcg-c/include/pcg_variants.h)
      list(APPEND dirs ${CPFLOAT_DIR}/deps/pcg-c/include)
      set_source_files_properties(${src} PROPERTIES COMPILE_DEFINITIONS RPSIM_CPFLOAT_PCG=1)
    endif()
    set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "${opts}" INCLUDE_DIRECTORIES "${dirs}")
    message(STATUS "bench_round: comparing with CPFloat in ${CPFLOAT_DIR}")
  else()
    message(STATUS "bench_round: no CPFloat comparison (set CPFLOAT_DIR to a CPFloat checkout to add it)")
  endif()
endif()
