// Array rounding: argument checks, the kernel parameters, the choice of
// kernel (an exact path, AVX-512, AVX2, portable or the scalar core itself),
// made once per call or once per ValueRounding, and the split over OpenMP
// threads. The kernels are in array_kernel.hpp.
#include <omp.h>
#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "array_dispatch.hpp"
#include "rpsim/formats/array.hpp"
#include "rpsim/formats/cpu_features.hpp"

namespace rpsim {
namespace array_detail {
namespace {

struct Portable {
  template <class Fixed, int Kind, class In, class Out>
  static void run(const KernelParams& kp, const In* in, Out* out, std::size_t n, std::uint64_t index0) {
    kernel_block<Fixed, Kind, In, Out>(kp, in, out, n, index0);
  }
};

}  // namespace

// The portable kernel reads the format at run time only (it is the fallback
// for CPUs without AVX2, so its build time matters more than its speed).
template <class In, class Out>
KernelFn<In, Out> pick_portable(const KernelParams& kp) {
  if (auto exact = pick_exact<Portable, In, Out>(kp)) return exact;
  if (auto fixed = pick_fixed_point<Portable, In, Out>(kp)) return fixed;
  return by_mode<Portable, RuntimeFormat, In, Out>(mode_kind(kp.mode));
}

namespace {

// Stochastic rounding with a bit count the kernels' 64-bit arithmetic takes.
bool stochastic_bits_supported(const Rounding& r) {
  return r.mode != RoundingMode::stochastic || (r.stochastic_bits >= 1 && r.stochastic_bits <= 62);
}

// Formats and modes the bit kernel reproduces; anything else (E8M0's missing
// zero and sign, formats without subnormals, exponent ranges beyond binary64's
// normal range, unusual stochastic bit counts, fixed point: see
// fixed_kernel_handles) runs on the scalar core.
bool kernel_handles(const Format& fmt, const Rounding& r, bool value_output) {
  if (fmt.is_fixed_point()) return false;
  if (!fmt.has_sign || !fmt.has_zero || !fmt.subnormals) return false;
  if (fmt.man_bits > 51 || fmt.emin < -1022 || fmt.emax > 1023) return false;
  if (!stochastic_bits_supported(r)) return false;
  if (value_output && fmt.emin - fmt.man_bits < -1022) return false;
  return true;
}

// Q formats the fixed-point kernel reproduces: word lengths up to 51 (its
// shift stays at least 1), without input or output flushing (the scalar core
// handles those flags and the rare formats beyond).
bool fixed_kernel_handles(const Format& fmt, const Rounding& r) {
  return fmt.is_fixed_point() && fmt.bits <= 51 && stochastic_bits_supported(r) &&
         !r.flush_subnormal_inputs && !r.flush_subnormal_outputs;
}

bool fits_binary32(const Format& fmt) {
  return fmt.man_bits <= 23 && fmt.emax <= 127 && fmt.emin - fmt.man_bits >= -149;
}

// Every value of the input type is a value of `fmt` (a finite input rounds
// to itself in every mode).
template <class In>
bool holds_every_value(const Format& fmt) {
  const int man = std::is_same_v<In, double> ? 52 : 23, emin = std::is_same_v<In, double> ? -1022 : -126;
  const int emax = std::is_same_v<In, double> ? 1023 : 127;
  return fmt.has_sign && fmt.has_zero && fmt.subnormals && fmt.man_bits >= man && fmt.emin <= emin &&
         fmt.emin - fmt.man_bits <= emin - man && fmt.emax >= emax;
}

// The call asks for IEEE binary64 -> binary32 under round to nearest even
// with subnormals and overflow to infinity, and this thread's MXCSR has the
// conversion instruction do exactly that (nearest, no FTZ, no DAZ).
bool hardware_binary32_applies(const Format& fmt, const Rounding& r) {
#if defined(__x86_64__) && defined(__GNUC__)
  if ((_mm_getcsr() & 0xE040) != 0) return false;  // RC bits 13-14, FTZ bit 15, DAZ bit 6
  return fmt == formats::binary32() && r.mode == RoundingMode::nearest_even && !r.flush_subnormal_inputs &&
         !r.flush_subnormal_outputs && r.overflow.value_or(fmt.overflow) == Overflow::infinity;
#else
  (void)fmt;
  (void)r;
  return false;
#endif
}

double value_of(const Format& fmt, std::uint64_t bits, bool binary32_output) {
  Flags f = 0;
  if (binary32_output) {
    return double(
        std::bit_cast<float>(std::uint32_t(convert(formats::binary32(), fmt, bits, Rounding{}, f))));
  }
  return std::bit_cast<double>(convert(formats::binary64(), fmt, bits, Rounding{}, f));
}

KernelParams make_params(const Format& fmt, const ArrayOptions& o, bool binary32_output) {
  KernelParams kp;
  kp.fmt = &fmt;
  kp.man_bits = fmt.man_bits;
  kp.emin = fmt.emin;
  kp.bits = fmt.bits;
  kp.max_code = fmt.max_finite_bits(false);
  kp.rounding = o.rounding;
  kp.mode = o.rounding.mode;
  kp.ftz = o.rounding.flush_subnormal_outputs;
  kp.stochastic_bits = o.rounding.stochastic_bits;
  kp.seed = o.seed;
  kp.stream = o.stream;
  kp.key = mix64(o.seed ^ mix64(o.stream));
  for (int s = 0; s < 2; ++s) {
    // The scalar core's own answers: an exact zero, and 2^2000 (beyond every
    // format the kernel takes, and exact, so no random bits are involved).
    Flags f = 0;
    kp.zero_bits[s] = round_pack(fmt, s != 0, 0, 0, false, o.rounding, f);
    kp.overflow_bits[s] = round_pack(fmt, s != 0, 2000, 1, false, o.rounding, f);
    kp.zero_value[s] = value_of(fmt, kp.zero_bits[s], binary32_output);
    kp.overflow_value[s] = value_of(fmt, kp.overflow_bits[s], binary32_output);
  }
  return kp;
}

bool cpu_has_avx512() {
  const CpuFeatures& c = cpu_features();
  return c.avx512f && c.avx512bw && c.avx512dq && c.avx512vl && c.bmi2 && c.fma;
}

bool cpu_has_avx2() {
  const CpuFeatures& c = cpu_features();
  return c.avx2 && c.bmi2 && c.fma;
}

ArrayIsa resolve(ArrayIsa requested) {
  static const bool avx512 = cpu_has_avx512(), avx2 = cpu_has_avx2();
  if ((requested == ArrayIsa::best || requested == ArrayIsa::avx512) && avx512) return ArrayIsa::avx512;
  if (requested != ArrayIsa::portable && avx2) return ArrayIsa::avx2;
  return ArrayIsa::portable;
}

template <class In, class Out>
KernelFn<In, Out> choose_kernel(const KernelParams& kp, ArrayIsa requested) {
  switch (resolve(requested)) {
    case ArrayIsa::avx512:
      if (auto fn = pick_avx512<In, Out>(kp)) return fn;
      [[fallthrough]];
    case ArrayIsa::avx2:
      if (auto fn = pick_avx2<In, Out>(kp)) return fn;
      [[fallthrough]];
    default: return pick_portable<In, Out>(kp);
  }
}

const char* type_name(double) {
  return "binary64";
}
const char* type_name(float) {
  return "binary32";
}

// Argument errors name the function, the format and the input type; the
// message is built only when one is thrown.
template <class In>
[[noreturn]] void fail(const char* function, const Format& fmt, const std::string& what) {
  throw std::invalid_argument(std::string(function) + "(" + fmt.name + ", " + type_name(In{}) +
                              " input): " + what);
}

template <class In, class Out>
void check_format(const char* function, const Format& fmt, const ArrayOptions& o) {
  if constexpr (!std::is_floating_point_v<Out>) {
    if (fmt.bits > int(8 * sizeof(Out))) {
      fail<In>(function, fmt,
               "a " + std::to_string(fmt.bits) + "-bit format does not fit " +
                   std::to_string(8 * sizeof(Out)) + "-bit output elements");
    }
  }
  if (std::is_same_v<Out, float> && !fits_binary32(fmt))
    fail<In>(function, fmt,
             "format " + fmt.name + " has values that binary32 cannot hold; use binary64 output");
  if (o.threads < 0) fail<In>(function, fmt, "threads = " + std::to_string(o.threads) + " < 0");
}

template <class In, class Out>
void check_sizes(const char* function, const Format& fmt, std::size_t in, std::size_t out) {
  if (in != out)
    fail<In>(function, fmt, "input has " + std::to_string(in) + " elements, output " + std::to_string(out));
}

}  // namespace

// The kernel parameters and the kernel (nullptr: the scalar core element by
// element), once per format and options; the caller has checked both.
template <class In, class Out>
Plan<In, Out> make_plan(const Format& fmt, const ArrayOptions& o) {
  constexpr bool value_output = std::is_floating_point_v<Out>;
  Plan<In, Out> plan;
  plan.kp = make_params(fmt, o, std::is_same_v<Out, float>);
  plan.kp.identity = std::is_same_v<In, Out> && holds_every_value<In>(fmt);
  plan.kp.hardware_binary32 =
      std::is_same_v<In, double> && std::is_same_v<Out, double> && hardware_binary32_applies(fmt, o.rounding);
  if (fixed_kernel_handles(fmt, o.rounding)) {
    plan.kp.fixed_point = true;
    plan.kp.fixed_frac_bits = fmt.frac_bits;
    plan.kp.fixed_grid = std::ldexp(1.0, -fmt.frac_bits);
  }
  if (plan.kp.identity || plan.kp.hardware_binary32 || plan.kp.fixed_point ||
      kernel_handles(fmt, o.rounding, value_output))
    plan.kernel = choose_kernel<In, Out>(plan.kp, o.isa);
  if (plan.kernel && resolve(o.isa) == ArrayIsa::avx512) {
    if (auto narrow = pick_narrow_avx512<In, Out>(plan.kp))
      plan.kernel = narrow;
    else if (auto sr = pick_sr_avx512<In, Out>(plan.kp))
      plan.kernel = sr;
    if constexpr (std::is_same_v<In, float> && std::is_same_v<Out, std::uint16_t>) {
      if (auto hardware = pick_hardware_avx512(plan.kp)) plan.kernel = hardware;
    }
  }
  if (plan.kernel && resolve(o.isa) == ArrayIsa::avx2) {
    if (auto narrow = pick_narrow_avx2<In, Out>(plan.kp)) plan.kernel = narrow;
  }
  plan.threads = o.threads;
  plan.parallel_threshold = o.parallel_threshold;
  return plan;
}

template <class In, class Out>
void run_plan(const Plan<In, Out>& plan, const In* src, Out* dst, std::size_t n, std::uint64_t first) {
  const KernelParams& kp = plan.kp;
  const KernelFn<In, Out> kernel = plan.kernel;
  // The identity reads each element before writing it: no copy in place.
  const bool in_place = static_cast<const void*>(src) == static_cast<const void*>(dst) && !kp.identity;
  auto run_range = [&](std::size_t begin, std::size_t end) {
    if (!kernel) {
      for (std::size_t i = begin; i < end; ++i) dst[i] = reference_element<In, Out>(kp, src[i], first + i);
      return;
    }
    alignas(64) In copy[block_elements];  // used by in-place calls only
    for (std::size_t b = begin; b < end; b += block_elements) {
      const std::size_t len = std::min(block_elements, end - b);
      const In* block = src + b;
      if (in_place) {
        std::memcpy(copy, block, len * sizeof(In));
        block = copy;
      }
      kernel(kp, block, dst + b, len, first + b);
    }
  };
  if (n < plan.parallel_threshold || plan.threads == 1) {
    run_range(0, n);
    return;
  }
  const int threads = plan.threads > 0 ? plan.threads : omp_get_max_threads();
  if (threads <= 1) {
    run_range(0, n);
    return;
  }
  // Whole blocks per thread, so each thread's kernel calls line up with the
  // single-threaded ones (results never depend on the split anyway: the
  // random bits follow the element index).
  const std::size_t blocks = (n + block_elements - 1) / block_elements;
#pragma omp parallel num_threads(threads)
  {
    const std::size_t t = std::size_t(omp_get_thread_num()), nt = std::size_t(omp_get_num_threads());
    const std::size_t b0 = blocks * t / nt, b1 = blocks * (t + 1) / nt;
    run_range(std::min(n, b0 * block_elements), std::min(n, b1 * block_elements));
  }
}

namespace {

template <class In, class Out>
void round_array(const char* function, const Format& fmt, std::span<const In> in, std::span<Out> out,
                 const ArrayOptions& o) {
  check_sizes<In, Out>(function, fmt, in.size(), out.size());
  check_format<In, Out>(function, fmt, o);
  run_plan(make_plan<In, Out>(fmt, o), in.data(), out.data(), in.size(), o.first_index);
}

}  // namespace

#define RPSIM_INSTANTIATE(In, Out) template KernelFn<In, Out> pick_portable<In, Out>(const KernelParams&);
RPSIM_ARRAY_FOR_EACH_PAIR(RPSIM_INSTANTIATE)
#undef RPSIM_INSTANTIATE

}  // namespace array_detail

using array_detail::round_array;

void round_to_bits(const Format& fmt, std::span<const double> in, std::span<std::uint8_t> out,
                   const ArrayOptions& o) {
  round_array("round_to_bits", fmt, in, out, o);
}
void round_to_bits(const Format& fmt, std::span<const double> in, std::span<std::uint16_t> out,
                   const ArrayOptions& o) {
  round_array("round_to_bits", fmt, in, out, o);
}
void round_to_bits(const Format& fmt, std::span<const double> in, std::span<std::uint32_t> out,
                   const ArrayOptions& o) {
  round_array("round_to_bits", fmt, in, out, o);
}
void round_to_bits(const Format& fmt, std::span<const double> in, std::span<std::uint64_t> out,
                   const ArrayOptions& o) {
  round_array("round_to_bits", fmt, in, out, o);
}
void round_to_bits(const Format& fmt, std::span<const float> in, std::span<std::uint8_t> out,
                   const ArrayOptions& o) {
  round_array("round_to_bits", fmt, in, out, o);
}
void round_to_bits(const Format& fmt, std::span<const float> in, std::span<std::uint16_t> out,
                   const ArrayOptions& o) {
  round_array("round_to_bits", fmt, in, out, o);
}
void round_to_bits(const Format& fmt, std::span<const float> in, std::span<std::uint32_t> out,
                   const ArrayOptions& o) {
  round_array("round_to_bits", fmt, in, out, o);
}
void round_to_bits(const Format& fmt, std::span<const float> in, std::span<std::uint64_t> out,
                   const ArrayOptions& o) {
  round_array("round_to_bits", fmt, in, out, o);
}
void round_values(const Format& fmt, std::span<const double> in, std::span<double> out,
                  const ArrayOptions& o) {
  round_array("round_values", fmt, in, out, o);
}
void round_values(const Format& fmt, std::span<const float> in, std::span<float> out, const ArrayOptions& o) {
  round_array("round_values", fmt, in, out, o);
}

struct ValueRounding::State {
  Format format;
  ArrayOptions options;
  array_detail::Plan<double, double> plan;
};

ValueRounding::ValueRounding(const Format& fmt, const ArrayOptions& options)
    : state_(std::make_unique<State>(State{fmt, options, {}})) {
  array_detail::check_format<double, double>("ValueRounding", fmt, options);
  // The plan points at this object's own copy of the format.
  state_->plan = array_detail::make_plan<double, double>(state_->format, options);
  if (state_->plan.kp.identity && !options.rounding.flush_subnormal_inputs &&
      !options.rounding.flush_subnormal_outputs)
    inline_path_ = InlinePath::identity;
  if (state_->plan.kp.hardware_binary32) inline_path_ = InlinePath::binary32;
}

ValueRounding::~ValueRounding() = default;
ValueRounding::ValueRounding(ValueRounding&&) noexcept = default;
ValueRounding& ValueRounding::operator=(ValueRounding&&) noexcept = default;

const Format& ValueRounding::format() const {
  return state_->format;
}
const ArrayOptions& ValueRounding::options() const {
  return state_->options;
}

double ValueRounding::round_one(double x, std::uint64_t index) const {
  double y;
  array_detail::run_plan(state_->plan, &x, &y, 1, state_->options.first_index + index);
  return y;
}

void ValueRounding::operator()(std::span<const double> in, std::span<double> out, std::uint64_t index) const {
  array_detail::check_sizes<double, double>("ValueRounding", state_->format, in.size(), out.size());
  array_detail::run_plan(state_->plan, in.data(), out.data(), in.size(), state_->options.first_index + index);
}

const char* array_kernel_isa(ArrayIsa requested) {
  switch (array_detail::resolve(requested)) {
    case ArrayIsa::avx512: return "avx512";
    case ArrayIsa::avx2: return "avx2";
    default: return "portable";
  }
}

}  // namespace rpsim
