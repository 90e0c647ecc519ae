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
    # CPFloat's own build flags (its Makefile: CFLAGS -march=native -std=gnu99,
    # COPTIM -O3, CLIBS -lm -fopenmp, as its header-only example cpfloat_test
    # is built, linked with the libpcg_random objects below); its warnings are
    # not ours to fix (-w). Without -fopenmp cpfloat() has only its
    # sequential loop: measured here (2026-11-28, one thread) 2.7-13x slower
    # than the OpenMP loop its users get from binary32 under RTZ (bfloat16
    # aside), a baseline that flattered rpsim there (issue #38). The wrapper
    # runs that loop with one thread, as rpsim's side.
    find_package(OpenMP REQUIRED COMPONENTS C)
    set(opts -O3 -march=native -std=gnu99 -w ${OpenMP_C_FLAGS})
    target_link_libraries(bench_round PRIVATE OpenMP::OpenMP_C)
    set(dirs ${CPFLOAT_DIR}/src)
    set(pcg ${CPFLOAT_DIR}/deps/pcg-c)
    if(EXISTS ${pcg}/include/pcg_variants.h)
      list(APPEND dirs ${pcg}/include)
      set_source_files_properties(${src} PROPERTIES COMPILE_DEFINITIONS RPSIM_CPFLOAT_PCG=1)
      # The objects CPFloat's Makefile links from libpcg_random (LIBPCG_OBJ):
      # its OpenMP loop advances each thread's PCG stream (pcg_advance_lcg_*).
      set(pcg_src ${pcg}/src/pcg-global-32.c ${pcg}/src/pcg-advance-64.c ${pcg}/src/pcg-global-64.c
                  ${pcg}/src/pcg-advance-128.c)
      target_sources(bench_round PRIVATE ${pcg_src})
      # pcg-c's own flags (src/Makefile: -O3 -std=c99).
      set_source_files_properties(${pcg_src} PROPERTIES COMPILE_OPTIONS "-O3;-std=c99;-w" INCLUDE_DIRECTORIES
                                                                                  "${pcg}/include")
    endif()
    set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "${opts}" INCLUDE_DIRECTORIES "${dirs}")
    message(STATUS "bench_round: comparing with CPFloat in ${CPFLOAT_DIR}")
  else()
    message(STATUS "bench_round: no CPFloat comparison (set CPFLOAT_DIR to a CPFloat checkout to add it)")
  endif()
endif()
