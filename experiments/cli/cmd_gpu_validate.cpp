// rpsim gpu-validate: run rpsim's CUDA kernels on the GPU at hand and check
// every output bit against the emulator; write the cases as new golden files.
#include <fmt/format.h>
#include <unistd.h>

#include <bit>
#include <map>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "rpsim/accumulation/tensor_core_presets.hpp"
#include "rpsim/formats/ops.hpp"
#include "rpsim/formats/random.hpp"
#include "rpsim/formats/unpacked.hpp"
#include "rpsim/io/results_io.hpp"
#include "rpsim/validation/gpu_validation.hpp"
#ifdef RPSIM_HAVE_CUDA
#include "rpsim/cuda/gpu.hpp"
#endif

namespace rpsim::cli {
namespace {

// Exit status when nothing was checked (no device, or built without CUDA):
// Automake's "skipped", which ctest's SKIP_RETURN_CODE reads too.
constexpr int kNothingChecked = 77;

struct Options {
  std::string out = "results/gpu-validate";
  std::size_t cases = 100000;
  std::uint64_t seed = 1;
  std::string model;
  bool exhaustive = false;
};

#ifdef RPSIM_HAVE_CUDA
// What was checked so far, for the summary and report.json.
struct Report {
  nlohmann::json json;
  std::size_t passed = 0, failed = 0;
  void add(const sim::BitCheck& c) {
    fmt::print("{}: {}/{} bit-exact\n", c.name, c.passed, c.total);
    for (const auto& m : c.first_mismatches) fmt::print("  mismatch {}\n", m);
    passed += c.passed;
    failed += c.total - c.passed;
    json["checks"].push_back({{"name", c.name}, {"passed", c.passed}, {"total", c.total}});
    std::fflush(stdout);
  }
};

void check_conversions(const Options& o, Report& report) {
  for (const cuda::ConversionInfo& ci : cuda::conversions()) {
    const sim::ConversionSpec spec{ci.name,     format(ci.from), format(ci.to), parse_rounding(ci.rounding),
                                   ci.saturate, ci.nan_result};
    sim::BitCheck check;
    check.name = spec.name;
    if (o.exhaustive && spec.from.bits == 32) {
      // All 2^32 inputs, made on the device; the emulator's side runs on all
      // cores through the array path (check_conversion_range).
      constexpr std::size_t chunk = std::size_t(1) << 26;
      std::vector<std::uint32_t> got(chunk);
      for (std::uint64_t first = 0; first < (std::uint64_t(1) << 32); first += chunk) {
        cuda::convert_range(ci.op, std::uint32_t(first), got.data(), chunk);
        sim::check_conversion_range(spec, std::uint32_t(first), got, check);
      }
    } else {
      const auto in = sim::conversion_inputs(spec, o.cases, o.seed);
      std::vector<std::uint32_t> got(in.size());
      cuda::convert(ci.op, in.data(), got.data(), in.size());
      sim::check_conversion(spec, in, got, check);
    }
    report.add(check);
  }
}

void check_arithmetic(const Options& o, Report& report) {
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
      const std::uint64_t want = n.starts_with("__hadd")   ? add(f, a[i], b[i], r, fl)
                                 : n.starts_with("__hsub") ? sub(f, a[i], b[i], r, fl)
                                 : n.starts_with("__hmul") ? mul(f, a[i], b[i], r, fl)
                                                           : fma(f, a[i], b[i], c[i], r, fl);
      ++check.total;
      if (want == got[i] || (is_nan(f, want) && is_nan(f, got[i])))
        ++check.passed;
      else if (check.first_mismatches.size() < 5)
        check.first_mismatches.push_back(
            fmt::format("index {}: a 0x{:04X} b 0x{:04X} c 0x{:04X} expected 0x{:04X} got 0x{:04X}", i, a[i],
                        b[i], c[i], want, got[i]));
    }
    report.add(check);
  }
}

// One instruction's cases through the device, checked against the preset of
// its instruction; returns the set with the GPU's results.
sim::GoldenSet run_mma(const cuda::MmaInfo& mi, sim::GoldenSet set, const std::string& preset,
                       Report& report) {
  std::vector<std::uint32_t> a, b, c, d(set.cases.size());
  for (const auto& g : set.cases) {
    for (double v : g.a) a.push_back(std::bit_cast<std::uint32_t>(float(v)));
    for (double v : g.b) b.push_back(std::bit_cast<std::uint32_t>(float(v)));
    c.push_back(g.c_bits);
  }
  cuda::mma(mi.op, int(set.k), a.data(), b.data(), c.data(), d.data(), set.cases.size());
  for (std::size_t i = 0; i < d.size(); ++i) set.cases[i].d_bits = d[i];
  set.output = format(mi.output);
  set.instruction = mi.instruction;
  set.c_loaded = true;
  const sim::GoldenCheck gc = sim::check_golden(set, sim::golden_model(set, preset));
  report.add({fmt::format("{} K={}", mi.name, set.k), gc.passed, gc.total, gc.first_mismatches});
  return set;
}

// Every instruction the device has, one and two instructions long; the
// one-instruction sets are returned by instruction for the golden files.
std::map<std::string, std::vector<sim::GoldenSet>> check_mmas(const Options& o, const cuda::DeviceInfo& dev,
                                                              const std::string& preset, Report& report) {
  const int cc = dev.major * 10 + dev.minor;
  const std::string tag = sim::gpu_folder_for_preset(preset);
  std::map<std::string, std::vector<sim::GoldenSet>> golden;
  for (const cuda::MmaInfo& mi : cuda::mmas()) {
    if (cc < mi.min_sm || (mi.max_sm && cc > mi.max_sm)) {
      fmt::print("{}: skipped (needs sm_{}{})\n", mi.name, mi.min_sm, mi.max_sm ? "a" : "");
      continue;
    }
    for (int chain : {1, 2}) {
      // The same cases for every output of an input (generate_mma_cases does
      // not read the output), so that they share a, b and c in the files.
      const sim::GoldenSet cases =
          sim::generate_mma_cases(tag, format(mi.input), format(mi.output), std::size_t(mi.k) * chain,
                                  o.cases, o.seed + std::uint64_t(chain));
      sim::GoldenSet set = run_mma(mi, cases, preset, report);
      if (chain == 1) golden[mi.instruction].push_back(std::move(set));
    }
  }
  return golden;
}

void check_tiled_gemm(const Options& o, const std::string& preset, Report& report) {
  // The emulator chains 16-term k-blocks in increasing order.
  const int M = 64, N = 32, K = 256;
  const Format& h = formats::binary16();
  std::vector<std::uint16_t> A(std::size_t(M) * K), B(std::size_t(K) * N);
  std::vector<float> C(std::size_t(M) * N), D(C.size());
  std::vector<double> Ad(A.size()), Bd(B.size());
  auto fill = [&](std::vector<std::uint16_t>& x, std::vector<double>& xd, std::uint64_t stream) {
    for (std::size_t i = 0; i < x.size(); ++i) {
      x[i] = std::uint16_t(round_double(h, double(counter_random(o.seed, stream, i) % 2001) / 1000.0 - 1.0));
      xd[i] = to_double(h, x[i]);
    }
  };
  fill(A, Ad, 21);
  fill(B, Bd, 22);
  for (std::size_t i = 0; i < C.size(); ++i) C[i] = float(counter_random(o.seed, 23, i) % 100) / 64.0f;
  cuda::gemm_f16_f32(M, N, K, A.data(), B.data(), C.data(), D.data());
  const sim::TensorCoreModel model = sim::tensor_core_preset(preset, h, formats::binary32(), "mma.sync");
  sim::BitCheck check;
  check.name = fmt::format("tiled GEMM mma.sync f16->f32 {}x{}x{}", M, N, K);
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      const std::span<const double> row(Ad.data() + std::ptrdiff_t(i) * K, K);
      const std::span<const double> col(Bd.data() + std::ptrdiff_t(j) * K, K);
      const std::uint64_t want = sim::tensor_core_dot_bits(model, row, col, C[std::size_t(i) * N + j]);
      const std::uint32_t got = std::bit_cast<std::uint32_t>(D[std::size_t(i) * N + j]);
      ++check.total;
      if (want == got)
        ++check.passed;
      else if (check.first_mismatches.size() < 5)
        check.first_mismatches.push_back(
            fmt::format("D[{}][{}]: expected 0x{:08X} got 0x{:08X}", i, j, want, got));
    }
  report.add(check);
}

// <out>/<GPU> holds the mma.sync sets, <out>/<GPU>-wgmma the wgmma ones; each
// has a conventions.json, so `rpsim tc-validate <out>/<GPU>` reads them back
// with the right preset and instruction.
void write_goldens(const Options& o, const std::map<std::string, std::vector<sim::GoldenSet>>& golden,
                   const std::string& tag) {
  for (const auto& [instruction, sets] : golden) {
    const std::string folder =
        sim::parse_tensor_core_instruction(instruction) == sim::tc_mma_sync ? tag : tag + "-" + instruction;
    sim::write_golden_gpu(std::filesystem::path(o.out) / folder, sets);
    fmt::print("golden files: {} (rpsim tc-validate {})\n", (std::filesystem::path(o.out) / folder).string(),
               (std::filesystem::path(o.out) / folder).string());
  }
}

int validate(const Options& o, const cuda::DeviceInfo& dev) {
  io::ensure_writable_dir(o.out);
  const std::string preset =
      o.model.empty() ? sim::preset_for_device(dev.name, dev.major, dev.minor) : o.model;
  if (preset.empty())
    throw UsageError(fmt::format("no tensor-core preset for '{}' (cc {}.{}); choose one with --model ({})",
                                 dev.name, dev.major, dev.minor,
                                 fmt::join(sim::tensor_core_preset_names(), " ")));
  Report report;
  report.json = {{"gpu", dev.name},
                 {"gpu_short_name", sim::gpu_folder_for_preset(preset)},
                 {"compute_capability", fmt::format("{}.{}", dev.major, dev.minor)},
                 {"driver_version", dev.driver_version},
                 {"runtime_version", dev.runtime_version},
                 {"preset", preset},
                 {"cases", o.cases},
                 {"seed", o.seed},
                 {"exhaustive_conversions", o.exhaustive},
                 {"nan_rule", "NaN results compare as NaN with any payload (CUDA returns its canonical NaN)"},
                 {"checks", nlohmann::json::array()}};
  fmt::print("GPU {} (cc {}.{}, driver {}), preset {}\n", dev.name, dev.major, dev.minor, dev.driver_version,
             preset);
  check_conversions(o, report);
  check_arithmetic(o, report);
  const auto golden = check_mmas(o, dev, preset, report);
  check_tiled_gemm(o, preset, report);
  write_goldens(o, golden, sim::gpu_folder_for_preset(preset));
  report.json["passed"] = report.passed;
  report.json["failed"] = report.failed;
  io::write_atomic(std::filesystem::path(o.out) / "report.json", report.json.dump(2) + "\n");
  fmt::print("{} passed, {} failed\n", report.passed, report.failed);
  return report.failed == 0 ? 0 : 1;
}
#endif

int run(const Options& o) {
  if (o.cases == 0) throw UsageError("--cases: must be at least 1");
  // A case set is held whole while its kernel runs; the widest (two
  // m16n8k32 instructions, K = 64) keeps A and B as doubles, about 1.1 KB a
  // case. A count that cannot fit is refused before the device starts, not
  // std::bad_alloc after the sets before it ran.
  constexpr double kBytesPerCase = 2 * 64 * 8 + 80;
  const double memory = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGE_SIZE));
  if (double(o.cases) * kBytesPerCase > memory / 2)
    throw UsageError(
        fmt::format("--cases {}: the widest case set needs {:.3g} GB, more than half of this "
                    "machine's {:.3g} GB",
                    o.cases, double(o.cases) * kBytesPerCase / 1e9, memory / 1e9));
  const auto& names = sim::tensor_core_preset_names();
  if (!o.model.empty() && std::find(names.begin(), names.end(), o.model) == names.end())
    throw UsageError(
        fmt::format("--model '{}' is not a tensor core preset (known: {})", o.model, fmt::join(names, " ")));
#ifdef RPSIM_HAVE_CUDA
  const cuda::DeviceInfo dev = cuda::device_info();
  if (dev.present) return validate(o, dev);
  const std::string why = dev.why_absent;
#else
  const std::string why = "rpsim was built without a CUDA compiler";
#endif
  fmt::print(stderr, "gpu-validate: nothing was checked: no CUDA device ({}); exit status {}\n", why,
             kNothingChecked);
  return kNothingChecked;
}

void add_gpu_validate(CLI::App& app, Action& action) {
  auto* cmd =
      app.add_subcommand("gpu-validate", "Run rpsim's CUDA kernels and check every bit against the emulator");
  auto o = std::make_shared<Options>();
  cmd->add_option("--out", o->out, "folder for golden files and report.json")->capture_default_str();
  cmd->add_option("--cases", o->cases, "random cases per kernel (plus patterns)")->capture_default_str();
  cmd->add_option("--seed", o->seed, "seed of the case generator")->capture_default_str();
  cmd->add_option("--model", o->model,
                  "tensor-core preset (default: from the device):\n" + sim::tensor_core_preset_help());
  cmd->add_flag("--exhaustive-conversions", o->exhaustive,
                "all 2^32 binary32 inputs for each conversion intrinsic with binary32 input");
  cmd->footer(fmt::format(
      "Exit status: 0 every check bit-exact; 1 a mismatch; 2 bad input; {} nothing was checked (no CUDA "
      "device, or rpsim built without a CUDA compiler).",
      kNothingChecked));
  cmd->callback([o, &action] { action = [o] { return run(*o); }; });
}

const Registrar registered("gpu-validate", add_gpu_validate);

}  // namespace
}  // namespace rpsim::cli
