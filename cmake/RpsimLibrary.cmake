# rpsim_library(NAME FOLDER [PUBLIC libs...] [PRIVATE libs...]): one library by
# job, laid out as FOLDER/include/rpsim/<name>/*.hpp and FOLDER/src/*.cpp
# (include/ and src/ mirror each other). The target is rpsim_<NAME>, used as
# rpsim::<NAME> inside this build and by find_package(rpsim) outside it.
# A library links only the libraries below it (formats <- accumulation <-
# validation, scaling <- train <- config <- studies, sweep <- the CLI).
set(RPSIM_EXPORTED_TARGETS "" CACHE INTERNAL "")

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
