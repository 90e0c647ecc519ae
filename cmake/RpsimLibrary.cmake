# rpsim_library(NAME FOLDER [PUBLIC libs...] [PRIVATE libs...]): one library by
# job, laid out as FOLDER/include/rpsim/<name>/*.hpp and FOLDER/src/*.cpp
# (include/ and src/ mirror each other). The target is rpsim_<NAME>, used as
# rpsim::<NAME> inside this build and by find_package(rpsim) outside it.
# A library links only the libraries below it (formats <- accumulation <-
# validation, scaling <- train <- config <- studies, sweep <- the CLI).
set(RPSIM_EXPORTED_TARGETS "" CACHE INTERNAL "")

# Unity builds of the libraries, for the sanitizer and fuzz trees of CI
# (.ci/sanitize.sh, .ci/fuzz.sh): each library compiles its files in batches
# of 8 per translation unit, so the headers they share (nlohmann::json, Eigen,
# <regex>, the formats core) are parsed and their templates instantiated once
# per batch. Measured with the sanitizer flags: sim/config's 8 files 73.5 s of
# CPU one by one, 28.1 s as one unit. Off by default: the release tree
# (`make test`) and developers' builds compile every file alone, which keeps
# each file's own includes checked. The CLI and the test programs are never
# unity-built (their files repeat file-local names by design: every command's
# `registered`, every test's helpers).
option(RPSIM_UNITY_BUILD "Unity-build the rpsim libraries (CI's sanitizer and fuzz trees)" OFF)
# Files that define a file-local name another file of their library also
# defines (a unity batch would see both): compiled alone. npz.cpp and npy.cpp
# each have their own fail(). The array kernels are compiled alone anyway in
# rpsim_formats (their own flags, formats/CMakeLists.txt); so in the fuzz
# tree's copy too (their per-ISA helpers share names).
# kernel_simt_avx512.cpp instantiates kernel_simt_orders.hpp inside its
# AVX-512 target region, which a batch that included the header first would
# skip (#pragma once).
set(RPSIM_UNITY_ALONE ${PROJECT_SOURCE_DIR}/sim/io/src/npz.cpp
                      ${PROJECT_SOURCE_DIR}/sim/accumulation/src/kernel_simt_avx512.cpp)
foreach(kernel array_round array_round_avx2 array_round_avx512 array_narrow_avx512 array_sr_avx512)
  list(APPEND RPSIM_UNITY_ALONE ${PROJECT_SOURCE_DIR}/formats/src/${kernel}.cpp)
endforeach()

# rpsim_unity(TARGET SOURCES...): TARGET's sources in unity batches when
# RPSIM_UNITY_BUILD is on, the files of RPSIM_UNITY_ALONE left out.
function(rpsim_unity target)
  if(NOT RPSIM_UNITY_BUILD)
    return()
  endif()
  set_target_properties(${target} PROPERTIES UNITY_BUILD ON)
  foreach(source ${ARGN})
    if(source IN_LIST RPSIM_UNITY_ALONE)
      set_source_files_properties(${source} PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
    endif()
  endforeach()
endfunction()

function(rpsim_library name folder)
  cmake_parse_arguments(ARG "" "" "PUBLIC;PRIVATE" ${ARGN})
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS ${folder}/src/*.cpp)
  set(target rpsim_${name})
  if(sources)
    add_library(${target} ${sources})
    target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${folder}/include>
                                                $<INSTALL_INTERFACE:include>)
    target_link_libraries(${target} PUBLIC ${ARG_PUBLIC} PRIVATE ${ARG_PRIVATE} rpsim_warnings)
    # Emulation code spells out every rounding: never fuse a*b+c into an FMA
    # (GCC's ISO mode already does not, clang's default would once -march
    # offers FMA). The trainer's native binary32 matmul relies on it.
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-ffp-contract=off>)
    set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)
    rpsim_unity(${target} ${sources})
  else()
    add_library(${target} INTERFACE)
    target_include_directories(${target} INTERFACE $<BUILD_INTERFACE:${folder}/include>
                                                   $<INSTALL_INTERFACE:include>)
    target_link_libraries(${target} INTERFACE ${ARG_PUBLIC})
  endif()
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${name})
  add_library(rpsim::${name} ALIAS ${target})
  set(RPSIM_EXPORTED_TARGETS ${RPSIM_EXPORTED_TARGETS} ${target} CACHE INTERNAL "")
  install(DIRECTORY ${folder}/include/ DESTINATION include)
endfunction()
