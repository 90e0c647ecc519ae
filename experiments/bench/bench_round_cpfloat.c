/* CPFloat's cpfloat() / cpfloatf() behind a small C interface, for bench_round's
 * side-by-side table only (issue #30). Built only when CPFLOAT_DIR names a
 * checkout of CPFloat (bench_round.cmake); CPFloat's headers are C and define
 * their functions in the header, so they get this file of their own, compiled
 * -O3 -march=native as CPFloat's own Makefile does, and without OpenMP (one
 * thread, as rpsim's side). With CPFLOAT_DIR/deps/pcg-c present, CPFloat draws
 * its stochastic-rounding bits from PCG as its Makefile build does; otherwise
 * from its rand() fallback (the table says which). */
#include <stddef.h>
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

int rpsim_bench_cpfloat(double* out, const double* in, size_t n, void* o) {
  return cpfloat(out, in, n, (optstruct*)o);
}

int rpsim_bench_cpfloatf(float* out, const float* in, size_t n, void* o) {
  return cpfloatf(out, in, n, (optstruct*)o);
}

int rpsim_bench_cpfloat_pcg(void) {
#ifdef RPSIM_CPFLOAT_PCG
  return 1;
#else
  return 0;
#endif
}
