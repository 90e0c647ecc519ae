# Every dependency is a Debian package; the README's set-up installs them.
find_package(fmt 9 REQUIRED)
find_package(Eigen3 3.4 REQUIRED NO_MODULE)
find_package(Boost 1.74 REQUIRED)  # header-only: erf_inv in sim/scaling
find_package(CLI11 REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
find_package(OpenMP REQUIRED COMPONENTS CXX)
# zlib inflates .npz archives (sim/io's NumPy reader).
find_package(ZLIB REQUIRED)
if(RPSIM_BUILD_TESTS)
  # MPFR is a test oracle only: nothing rpsim ships links it.
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(MPFR REQUIRED IMPORTED_TARGET mpfr)
  find_package(Catch2 2.13 REQUIRED)
endif()
if(RPSIM_BUILD_BENCHMARKS)
  find_package(benchmark REQUIRED)
endif()

# MPI is optional: `rpsim sweep` runs under mpirun when it is found.
find_package(MPI COMPONENTS CXX QUIET)
