/* CPFloat's cpfloat() / cpfloatf() behind a small C interface, for bench_round's
 * side-by-side table only (issue #30). Built only when CPFLOAT_DIR names a
 * checkout of CPFloat (bench_round.cmake); CPFloat's headers are C and define
 * their functions in the header, so they get this file of their own, compiled
 * as CPFloat's own Makefile compiles its header-only build: -O3 -march=native
 * -std=gnu99 -fopenmp (bench_round.cmake). Above its OPENMP_THRESHOLD (its
 * src/cpfloat_threshold_*.h; `make autotune` tunes it, 10^7 values are above
 * any) cpfloat() takes its OpenMP loop, here with a team of one thread, as
 * rpsim's side. With CPFLOAT_DIR/deps/pcg-c present, CPFloat draws its
 * stochastic-rounding bits from PCG as its Makefile build does; otherwise
 * from its rand() fallback (the table says which). */
#include <stddef.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#ifdef RPSIM_CPFLOAT_PCG
#include "pcg_variants.h"
#endif
#include "cpfloat_binary32.h"
#include "cpfloat_binary64.h"

/* mode: 0 round to nearest even, 1 toward zero, 2 stochastic (proportional). */
void* rpsim_bench_cpfloat_options(int precision, int emin, int emax, int has_inf, int saturate, int mode) {
  optstruct* o = init_optstruct();
  strcpy(o->format, "custom");
  o->precision = (cpfloat_precision_t)precision;
  o->emin = emin;
  o->emax = emax;
  o->explim = CPFLOAT_EXPRANGE_TARG;
  o->subnormal = CPFLOAT_SUBN_USE;
  o->infinity = has_inf ? CPFLOAT_INF_USE : CPFLOAT_INF_NO;
  o->saturation = saturate ? CPFLOAT_SAT_USE : CPFLOAT_SAT_NO;
  o->round = mode == 0 ? CPFLOAT_RND_NE : mode == 1 ? CPFLOAT_RND_TZ : CPFLOAT_RND_SP;
  o->flip = CPFLOAT_SOFTERR_NO;
  o->p = 0;
  return o;
}

void rpsim_bench_cpfloat_free(void* o) {
  free_optstruct((optstruct*)o);
}

/* One thread for CPFloat's call, the caller's thread count restored after
 * (rpsim's own benchmarks in the same process choose theirs). */
int rpsim_bench_cpfloat(double* out, const double* in, size_t n, void* o) {
#ifdef _OPENMP
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
#endif
  const int r = cpfloat(out, in, n, (optstruct*)o);
#ifdef _OPENMP
  omp_set_num_threads(saved);
#endif
  return r;
}

int rpsim_bench_cpfloatf(float* out, const float* in, size_t n, void* o) {
#ifdef _OPENMP
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
#endif
  const int r = cpfloatf(out, in, n, (optstruct*)o);
#ifdef _OPENMP
  omp_set_num_threads(saved);
#endif
  return r;
}

/* The element count from which cpfloat() takes its OpenMP loop, or -1 when
 * built without OpenMP (the sequential loop only). */
long rpsim_bench_cpfloat_openmp_threshold(void) {
#ifdef _OPENMP
  return (long)OPENMP_THRESHOLD_double;
#else
  return -1;
#endif
}

int rpsim_bench_cpfloat_pcg(void) {
#ifdef RPSIM_CPFLOAT_PCG
  return 1;
#else
  return 0;
#endif
}
