# The native training steps built -march=native (native_steps.cpp), a shared
# library that bench_train and bench_train_gpt link and bench_train_torch.py
# loads with ctypes. Benchmark-only: never installed, never linked by rpsim.
set(flags -O3 -march=native -fvisibility=hidden -fvisibility-inlines-hidden)
add_library(bench_native_steps SHARED ${CMAKE_CURRENT_LIST_DIR}/native_steps.cpp)
target_link_libraries(bench_native_steps PRIVATE Eigen3::Eigen rpsim_warnings)
# GCC 12 warns inside its own avx512fintrin.h (an undefined __Y in
# _mm512_undefined_ps, reached through Eigen's AVX-512 packets): not our code.
target_compile_options(bench_native_steps PRIVATE ${flags} -Wno-maybe-uninitialized)
string(REPLACE ";" " " flags_text "${flags}")
target_compile_definitions(bench_native_steps PRIVATE RPSIM_NATIVE_FLAGS="${flags_text}")
# Not LTO: its code must stay its own (see native_steps.cpp).
set_target_properties(bench_native_steps PROPERTIES INTERPROCEDURAL_OPTIMIZATION OFF
                                                    LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bench)
foreach(bench bench_train bench_train_gpt)
  if(TARGET ${bench})
    target_link_libraries(${bench} PRIVATE bench_native_steps)
  endif()
endforeach()
