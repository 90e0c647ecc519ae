// Array rounding: argument checks, the per-call kernel parameters, the choice
// of kernel (AVX-512, AVX2, portable or the scalar core itself) and the split
// over OpenMP threads. The kernels are in array_kernel.hpp.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "array_kernel.hpp"
#include "rpsim/formats/array.hpp"

namespace rpsim {
namespace array_detail {
namespace {

struct Portable {
  template <class Fixed, int Kind, class In, class Out>
  static void run(const KernelParams& kp, const In* in, Out* out, std::size_t n, std::uint64_t index0) {
    round_block<Fixed, Kind, In, Out>(kp, in, out, n, index0);
  }
};

}  // namespace

// The portable kernel reads the format at run time only (it is the fallback
// for CPUs without AVX2, so its build time matters more than its speed).
template <class In, class Out>
KernelFn<In, Out> pick_portable(const KernelParams& kp) {
  return by_mode<Portable, RuntimeFormat, In, Out>(mode_kind(kp.mode));
}

namespace {

// Elements per kernel call: small enough that an in-place call's copy of the
// input stays in L1, large enough that the call costs nothing.
constexpr std::size_t block_elements = 2048;

// Formats and modes the bit kernel reproduces; anything else (E8M0's missing
// zero and sign, formats without subnormals, exponent ranges beyond binary64's
// normal range, unusual stochastic bit counts) runs on the scalar core.
bool kernel_handles(const Format& fmt, const Rounding& r, bool value_output) {
  if (!fmt.has_sign || !fmt.has_zero || !fmt.subnormals) return false;
  if (fmt.man_bits > 51 || fmt.emin < -1022 || fmt.emax > 1023) return false;
  if (r.mode == RoundingMode::stochastic && (r.stochastic_bits < 1 || r.stochastic_bits > 62)) return false;
  if (value_output && fmt.emin - fmt.man_bits < -1022) return false;
  return true;
}

bool fits_binary32(const Format& fmt) {
  return fmt.man_bits <= 23 && fmt.emax <= 127 && fmt.emin - fmt.man_bits >= -149;
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
#if defined(__x86_64__) && defined(__GNUC__)
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

bool cpu_has_avx2() {
#if defined(__x86_64__) && defined(__GNUC__)
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
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

template <class In, class Out>
void round_array(const char* function, const Format& fmt, std::span<const In> in, std::span<Out> out,
                 const ArrayOptions& o) {
  const std::string who = std::string(function) + "(" + fmt.name + ", " + type_name(In{}) + " input): ";
  if (in.size() != out.size()) {
    throw std::invalid_argument(who + "input has " + std::to_string(in.size()) + " elements, output " +
                                std::to_string(out.size()));
  }
  constexpr bool value_output = std::is_floating_point_v<Out>;
  if constexpr (!value_output) {
    if (fmt.bits > int(8 * sizeof(Out))) {
      throw std::invalid_argument(who + "a " + std::to_string(fmt.bits) + "-bit format does not fit " +
                                  std::to_string(8 * sizeof(Out)) + "-bit output elements");
    }
  }
  constexpr bool binary32_output = std::is_same_v<Out, float>;
  if (binary32_output && !fits_binary32(fmt)) {
    throw std::invalid_argument(who + "format " + fmt.name +
                                " has values that binary32 cannot hold; use binary64 output");
  }
  if (o.threads < 0) throw std::invalid_argument(who + "threads = " + std::to_string(o.threads) + " < 0");

  const KernelParams kp = make_params(fmt, o, binary32_output);
  KernelFn<In, Out> kernel =
      kernel_handles(fmt, o.rounding, value_output) ? choose_kernel<In, Out>(kp, o.isa) : nullptr;
  if constexpr (std::is_same_v<In, float> && std::is_same_v<Out, std::uint16_t>) {
    if (kernel && resolve(o.isa) == ArrayIsa::avx512) {
      if (auto hardware = pick_hardware_avx512(kp)) kernel = hardware;
    }
  }
  const In* src = in.data();
  Out* dst = out.data();
  const bool in_place = static_cast<const void*>(src) == static_cast<const void*>(dst);
  const std::uint64_t first = o.first_index;

  auto run_range = [&](std::size_t begin, std::size_t end) {
    if (!kernel) {
      for (std::size_t i = begin; i < end; ++i) dst[i] = reference_element<In, Out>(kp, src[i], first + i);
      return;
    }
    alignas(64) In copy[block_elements];  // used by in-place calls only
    for (std::size_t b = begin; b < end; b += block_elements) {
      const std::size_t n = std::min(block_elements, end - b);
      const In* block = src + b;
      if (in_place) {
        std::memcpy(copy, block, n * sizeof(In));
        block = copy;
      }
      kernel(kp, block, dst + b, n, first + b);
    }
  };

  const std::size_t n = in.size();
  const int threads = o.threads > 0 ? o.threads : omp_get_max_threads();
  if (threads <= 1 || n < o.parallel_threshold) {
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

const char* array_kernel_isa(ArrayIsa requested) {
  switch (array_detail::resolve(requested)) {
    case ArrayIsa::avx512: return "avx512";
    case ArrayIsa::avx2: return "avx2";
    default: return "portable";
  }
}

}  // namespace rpsim
