add_library(rpsim_warnings INTERFACE)
# Exported with the static libraries (they link it privately); the flags are
# build-time only, so an installed rpsim_warnings is empty.
target_compile_options(rpsim_warnings INTERFACE $<BUILD_INTERFACE:-Wall -Wextra $<$<BOOL:${RPSIM_WERROR}>:-Werror>>)
if(RPSIM_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
  # clang's loop vectoriser does not run at the sanitizer build's -O1, so it
  # reports every `omp simd` hint as a failed transformation (-Wpass-failed).
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    add_compile_options(-Wno-pass-failed)
  endif()
endif()
