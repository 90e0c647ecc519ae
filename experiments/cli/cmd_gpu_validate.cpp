// rpsim gpu-validate: run rpsim's CUDA kernels on the GPU at hand and check
// every output bit against the emulator; write the cases as new golden files.
#include <fmt/format.h>
#include <omp.h>

#include <bit>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "rpsim/formats/ops.hpp"
#include "rpsim/formats/random.hpp"
#include "rpsim/formats/unpacked.hpp"
#include "rpsim/validation/gpu_validation.hpp"
#include "rpsim/io/results_io.hpp"
#include "rpsim/accumulation/tensor_core.hpp"
#ifdef RPSIM_HAVE_CUDA
#include "rpsim/cuda/gpu.hpp"
#endif

namespace rpsim::cli {
namespace {

struct Options {
  std::string out = "results/gpu-validate";
  std::size_t cases = 100000;
  std::uint64_t seed = 1;
  std::string model;
  bool exhaustive = false;
};

#ifdef RPSIM_HAVE_CUDA
void report(const sim::BitCheck& c, nlohmann::json& json, std::size_t& passed, std::size_t& failed) {
  fmt::print("{}: {}/{} bit-exact\n", c.name, c.passed, c.total);
  for (const auto& m : c.first_mismatches) fmt::print("  mismatch {}\n", m);
  passed += c.passed;
  failed += c.total - c.passed;
  json["checks"].push_back({{"name", c.name}, {"passed", c.passed}, {"total", c.total}});
}

int validate(const Options& o, const cuda::DeviceInfo& dev) {
  io::ensure_writable_dir(o.out);
  const std::string preset =
      o.model.empty() ? sim::preset_for_device(dev.name, dev.major, dev.minor) : o.model;
  if (preset.empty())
    throw UsageError(fmt::format("no tensor-core preset for '{}' (cc {}.{}); choose one with --model",
                                 dev.name, dev.major, dev.minor));
  const int cc = dev.major * 10 + dev.minor;
  nlohmann::json json = {
      {"gpu", dev.name},
      {"compute_capability", fmt::format("{}.{}", dev.major, dev.minor)},
      {"driver_version", dev.driver_version},
      {"runtime_version", dev.runtime_version},
      {"preset", preset},
      {"cases", o.cases},
      {"seed", o.seed},
      {"nan_rule", "NaN results compare as NaN with any payload (CUDA returns its canonical NaN)"},
      {"checks", nlohmann::json::array()}};
  fmt::print("GPU {} (cc {}.{}, driver {}), preset {}\n", dev.name, dev.major, dev.minor, dev.driver_version,
             preset);
  std::size_t passed = 0, failed = 0;

  for (const cuda::ConversionInfo& ci : cuda::conversions()) {
    sim::ConversionSpec spec{ci.name, format(ci.from), format(ci.to), parse_rounding(ci.rounding),
                             ci.saturate};
    sim::BitCheck check;
    auto run_chunk = [&](const std::vector<std::uint32_t>& in) {
      std::vector<std::uint32_t> got(in.size());
      cuda::convert(ci.op, in.data(), got.data(), in.size());
      sim::check_conversion(spec, in, got, check);
    };
    if (o.exhaustive && spec.from.bits == 32) {
      std::vector<std::uint32_t> in(std::size_t(1) << 26);
      for (std::uint64_t base = 0; base < (std::uint64_t(1) << 32); base += in.size()) {
        for (std::size_t i = 0; i < in.size(); ++i) in[i] = std::uint32_t(base + i);
        run_chunk(in);
      }
    } else {
      run_chunk(sim::conversion_inputs(spec, o.cases, o.seed));
    }
    report(check, json, passed, failed);
  }

  for (const cuda::ArithmeticInfo& ai : cuda::arithmetics()) {
    const Format& f = format(ai.format);
    std::vector<std::uint32_t> a(o.cases), b(o.cases), c(o.cases), got(o.cases);
    for (std::size_t i = 0; i < o.cases; ++i) {
      a[i] = std::uint32_t(counter_random(o.seed, 11, i) & 0xFFFF);
      b[i] = std::uint32_t(counter_random(o.seed, 12, i) & 0xFFFF);
      c[i] = std::uint32_t(counter_random(o.seed, 13, i) & 0xFFFF);
    }
    cuda::arithmetic(ai.op, a.data(), b.data(), c.data(), got.data(), o.cases);
    sim::BitCheck check;
    check.name = ai.name;
    const std::string n = ai.name;
    for (std::size_t i = 0; i < o.cases; ++i) {
      Rounding r;
      Flags fl = 0;
      std::uint64_t want = n.starts_with("__hadd")   ? add(f, a[i], b[i], r, fl)
                           : n.starts_with("__hsub") ? sub(f, a[i], b[i], r, fl)
                           : n.starts_with("__hmul") ? mul(f, a[i], b[i], r, fl)
                                                     : fma(f, a[i], b[i], c[i], r, fl);
      const bool ok = want == got[i] || (is_nan(f, want) && is_nan(f, got[i]));
      ++check.total;
      if (ok)
        ++check.passed;
      else if (check.first_mismatches.size() < 5)
        check.first_mismatches.push_back(
            fmt::format("index {}: a 0x{:04X} b 0x{:04X} c 0x{:04X} expected 0x{:04X} got 0x{:04X}", i, a[i],
                        b[i], c[i], want, got[i]));
    }
    report(check, json, passed, failed);
  }

  for (const cuda::MmaInfo& mi : cuda::mmas()) {
    if (cc < mi.min_sm) {
      fmt::print("{}: skipped (needs sm_{})\n", mi.name, mi.min_sm);
      continue;
    }
    for (int chain : {1, 2}) {
      const std::size_t k = std::size_t(mi.k) * chain;
      sim::GoldenSet set = sim::generate_mma_cases(dev.name, format(mi.input), format(mi.output), k, o.cases,
                                                   o.seed + std::uint64_t(chain));
      std::vector<std::uint32_t> a, b, c, d(set.cases.size());
      for (const auto& g : set.cases) {
        for (double v : g.a) a.push_back(std::bit_cast<std::uint32_t>(float(v)));
        for (double v : g.b) b.push_back(std::bit_cast<std::uint32_t>(float(v)));
        c.push_back(g.c_bits);
      }
      cuda::mma(mi.op, int(k), a.data(), b.data(), c.data(), d.data(), set.cases.size());
      for (std::size_t i = 0; i < d.size(); ++i) set.cases[i].d_bits = d[i];
      const sim::TensorCoreModel model = sim::tensor_core_preset(preset, set.input, set.output, "mma.sync");
      const sim::GoldenCheck gc = sim::check_golden(set, model);
      sim::BitCheck check{fmt::format("{} K={}", mi.name, k), gc.passed, gc.total, gc.first_mismatches};
      report(check, json, passed, failed);
      if (chain == 1) sim::write_golden(o.out, {set});
    }
  }

  {
    // Tiled GEMM: the emulator chains 16-term k-blocks in increasing order.
    const int M = 64, N = 32, K = 256;
    const Format& h = formats::binary16();
    std::vector<std::uint16_t> A(std::size_t(M) * K), B(std::size_t(K) * N);
    std::vector<float> C(std::size_t(M) * N), D(C.size());
    std::vector<double> Ad(A.size()), Bd(B.size());
    for (std::size_t i = 0; i < A.size(); ++i) {
      A[i] = std::uint16_t(round_double(h, double(counter_random(o.seed, 21, i) % 2001) / 1000.0 - 1.0));
      Ad[i] = to_double(h, A[i]);
    }
    for (std::size_t i = 0; i < B.size(); ++i) {
      B[i] = std::uint16_t(round_double(h, double(counter_random(o.seed, 22, i) % 2001) / 1000.0 - 1.0));
      Bd[i] = to_double(h, B[i]);
    }
    for (std::size_t i = 0; i < C.size(); ++i) C[i] = float(counter_random(o.seed, 23, i) % 100) / 64.0f;
    cuda::gemm_f16_f32(M, N, K, A.data(), B.data(), C.data(), D.data());
    const sim::TensorCoreModel model = sim::tensor_core_preset(preset, h, formats::binary32(), "mma.sync");
    sim::BitCheck check;
    check.name = fmt::format("tiled GEMM mma.sync f16->f32 {}x{}x{}", M, N, K);
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j) {
        std::vector<double> row(Ad.begin() + std::ptrdiff_t(i) * K, Ad.begin() + std::ptrdiff_t(i + 1) * K);
        std::vector<double> col(Bd.begin() + std::ptrdiff_t(j) * K, Bd.begin() + std::ptrdiff_t(j + 1) * K);
        const std::uint64_t want = sim::tensor_core_dot_bits(model, row, col, C[std::size_t(i) * N + j]);
        const std::uint32_t got = std::bit_cast<std::uint32_t>(D[std::size_t(i) * N + j]);
        ++check.total;
        if (want == got)
          ++check.passed;
        else if (check.first_mismatches.size() < 5)
          check.first_mismatches.push_back(
              fmt::format("D[{}][{}]: expected 0x{:08X} got 0x{:08X}", i, j, want, got));
      }
    report(check, json, passed, failed);
  }

  json["passed"] = passed;
  json["failed"] = failed;
  io::write_atomic(std::filesystem::path(o.out) / "report.json", json.dump(2) + "\n");
  fmt::print("{} passed, {} failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
#endif

int run(const Options& o) {
  if (o.cases == 0) throw UsageError("--cases: must be at least 1");
#ifdef RPSIM_HAVE_CUDA
  const cuda::DeviceInfo dev = cuda::device_info();
  if (!dev.present) {
    fmt::print("skipped: no CUDA device ({})\n", dev.why_absent);
    return 0;
  }
  return validate(o, dev);
#else
  fmt::print("skipped: no CUDA device (rpsim was built without a CUDA compiler)\n");
  return 0;
#endif
}

void add_gpu_validate(CLI::App& app, Action& action) {
  auto* cmd =
      app.add_subcommand("gpu-validate", "Run rpsim's CUDA kernels and check every bit against the emulator");
  auto o = std::make_shared<Options>();
  cmd->add_option("--out", o->out, "folder for golden files and report.json")->capture_default_str();
  cmd->add_option("--cases", o->cases, "random cases per kernel (plus patterns)")->capture_default_str();
  cmd->add_option("--seed", o->seed, "seed of the case generator")->capture_default_str();
  cmd->add_option("--model", o->model, "tensor-core preset (default: from the device)");
  cmd->add_flag("--exhaustive-conversions", o->exhaustive,
                "all 2^32 binary32 inputs for each conversion intrinsic");
  cmd->callback([o, &action] { action = [o] { return run(*o); }; });
}

const Registrar registered("gpu-validate", add_gpu_validate);

}  // namespace
}  // namespace rpsim::cli
