// rpsim gemm: a random (or file-given) GEMM under an accumulation model, its
// error against the exact product, and the classical and probabilistic bounds.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>

#include "commands.hpp"
#include "rpsim/accumulation/accumulation.hpp"
#include "rpsim/accumulation/accumulation_kinds.hpp"
#include "rpsim/accumulation/error_analysis.hpp"
#include "rpsim/accumulation/exact_accumulator.hpp"
#include "rpsim/accumulation/gemm.hpp"
#include "rpsim/accumulation/tensor_core_presets.hpp"
#include "rpsim/formats/block_scale.hpp"
#include "rpsim/io/npy.hpp"
#include "rpsim/io/process.hpp"
#include "rpsim/io/results_io.hpp"
#include "rpsim/io/text_matrix.hpp"

namespace rpsim::cli {

namespace {

// A text matrix (rpsim/io/text_matrix.hpp): finite values only, as the error
// against the exact product needs them.
sim::Matrix read_matrix(const std::string& path) {
  const io::NumericArray t = io::read_text_matrix(path, true);
  sim::Matrix m(static_cast<Eigen::Index>(t.shape[0]), static_cast<Eigen::Index>(t.shape[1]));
  for (Eigen::Index i = 0; i < m.rows(); ++i)
    for (Eigen::Index j = 0; j < m.cols(); ++j)
      m(i, j) = t.values[static_cast<std::size_t>(i * m.cols() + j)];
  return m;
}

sim::Matrix random_matrix(Eigen::Index r, Eigen::Index c, const std::string& dist, std::mt19937_64& rng) {
  sim::Matrix m(r, c);
  std::uniform_real_distribution<double> uni(-1, 1);
  std::normal_distribution<double> nd(0, 1);
  std::uniform_int_distribution<int> scale(-8, 8);
  for (Eigen::Index i = 0; i < m.size(); ++i) {
    if (dist == "uniform")
      m.data()[i] = uni(rng);
    else if (dist == "normal")
      m.data()[i] = nd(rng);
    else
      m.data()[i] = std::ldexp(nd(rng), scale(rng));  // wide: 2^-8 .. 2^8 spread of magnitudes
  }
  return m;
}

struct Opts {
  Eigen::Index m = 64, n = 64, k = 256;
  std::string input = "fp16", output, model = "h100", dist = "normal", a_file, b_file, dump;
  std::uint64_t seed = 1;
  int threads = 1;
  const CLI::App* cmd = nullptr;  // which options were given
};

sim::AccumulationModel model_of(const Opts& o) {
  // A bare preset name means the tensor-core model for --input/--output,
  // built directly (the tc: kind's instruction).
  const auto& names = sim::tensor_core_preset_names();
  if (std::find(names.begin(), names.end(), o.model) != names.end()) {
    const std::string out = o.output.empty() ? "fp32" : o.output;
    try {
      return sim::AccumulationModel(
          sim::tensor_core_preset(o.model, parse_format(o.input), parse_format(out)));
    } catch (const std::invalid_argument& e) {
      throw UsageError(
          fmt::format("--model {} (--input {}, --output {}): {}", o.model, o.input, out, e.what()));
    }
  }
  if (o.model.find(':') != std::string::npos && !o.output.empty())
    throw UsageError("--output applies to a bare preset name only; put the format in the model spec");
  try {
    return sim::AccumulationModel::parse(o.model);
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("--model: {}", e.what()));
  }
}

// The dtype numpy stores values of `f` exactly in.
std::string dtype_for(const Format& f) {
  if (f == formats::binary16()) return "float16";
  return f.bits <= 32 && f.exp_bits <= 8 && f.man_bits <= 23 ? "float32" : "float64";
}

io::NumericArray array_of(const char* name, const sim::Matrix& m, const Format& f) {
  io::NumericArray x{name, {std::size_t(m.rows()), std::size_t(m.cols())}, dtype_for(f), {}};
  for (Eigen::Index i = 0; i < m.rows(); ++i)
    for (Eigen::Index j = 0; j < m.cols(); ++j) x.values.push_back(m(i, j));
  return x;
}

// A, B and D (and block scales SFA, SFB) as an .npz (what `rpsim gemm-check`
// reads), written atomically.
void write_dump(const std::string& path, const sim::Matrix& a, const sim::Matrix& b, const sim::Matrix& d,
                const Format& input, const Format& output, const sim::GemmScales& scales) {
  const std::filesystem::path p(path);
  if (p.extension() != ".npz") throw UsageError(fmt::format("--dump '{}': the file must end in .npz", path));
  io::ensure_writable_dir(p.parent_path().empty() ? "." : p.parent_path());
  std::vector<io::NumericArray> arrays{array_of("A", a, input), array_of("B", b, input),
                                       array_of("D", d, output)};
  // Scale values (E8M0 2^-127 .. 2^127, E4M3) are exact in float32.
  if (scales.sfa) arrays.push_back(array_of("SFA", *scales.sfa, formats::binary32()));
  if (scales.sfb) arrays.push_back(array_of("SFB", *scales.sfb, formats::binary32()));
  io::write_atomic(p, io::npz_image(arrays));
}

// A block-scaled model's operands: the random A quantised along its rows and
// B along its columns in the model's blocks (OCP MX for ue8m0 scales, NVFP4's
// E4M3 block scales for ue4m3, its per-tensor scale left out), elements into
// a and b, scales into `scales`; returns A and B dequantised (exact), which
// the error is measured against.
std::pair<sim::Matrix, sim::Matrix> block_quantise(const sim::TensorCoreModel& m, sim::Matrix& a,
                                                   sim::Matrix& b, sim::GemmScales& scales) {
  const auto blk = static_cast<std::size_t>(m.scale_block);
  if (a.cols() % m.scale_block != 0)
    throw UsageError(fmt::format("--k {}: not a multiple of the block {} of '{}'", a.cols(), blk, m.name));
  const Eigen::Index kb = a.cols() / m.scale_block;
  scales.sfa = sim::Matrix(a.rows(), kb);
  scales.sfb = sim::Matrix(kb, b.cols());
  const bool mx = m.scale->exp_bits == 8;
  auto quantise = [&](std::vector<double> v, const Format& f) {
    return mx ? mx_quantize(f, v, blk) : nvfp4_quantize(v, blk);
  };
  sim::Matrix ad = a, bd = b;
  for (Eigen::Index i = 0; i < a.rows(); ++i) {
    const auto q = quantise(std::vector<double>(a.row(i).begin(), a.row(i).end()), m.input);
    for (Eigen::Index t = 0; t < a.cols(); ++t) {
      a(i, t) = q.elements[std::size_t(t)];
      ad(i, t) = a(i, t) * q.scales[std::size_t(t) / blk];
    }
    for (Eigen::Index t = 0; t < kb; ++t) (*scales.sfa)(i, t) = q.scales[std::size_t(t)];
  }
  for (Eigen::Index j = 0; j < b.cols(); ++j) {
    const auto q = quantise(std::vector<double>(b.col(j).begin(), b.col(j).end()), m.b_input());
    for (Eigen::Index t = 0; t < b.rows(); ++t) {
      b(t, j) = q.elements[std::size_t(t)];
      bd(t, j) = b(t, j) * q.scales[std::size_t(t) / blk];
    }
    for (Eigen::Index t = 0; t < kb; ++t) (*scales.sfb)(t, j) = q.scales[std::size_t(t)];
  }
  return {ad, bd};
}

void print_report(const Opts& o, const sim::AccumulationModel& model, const Format& input,
                  const sim::Matrix& a, const sim::Matrix& b, const sim::Matrix& d) {
  const sim::Matrix c = sim::Matrix::Zero(a.rows(), b.cols());
  const sim::GemmOptions opts{o.threads};
  const sim::Matrix exact = sim::gemm(sim::AccumulationModel(sim::Exact{}), a, b, c, opts);
  const Format& out = model.output_format();
  const auto stats = sim::compare(d, exact, out);
  // Bounds relative to sum |a||b| (componentwise): gamma_k u and sqrt(k) u.
  const std::size_t k = static_cast<std::size_t>(a.cols());
  const double u = model.unit_roundoff();
  double max_ratio = 0;  // max |d - exact| / sum|a||b|
  const sim::Matrix abs_prod =
      sim::gemm(sim::AccumulationModel(sim::Exact{}), a.cwiseAbs(), b.cwiseAbs(), c, opts);
  for (Eigen::Index i = 0; i < d.size(); ++i)
    if (abs_prod.data()[i] > 0)
      max_ratio = std::max(max_ratio, std::fabs(d.data()[i] - exact.data()[i]) / abs_prod.data()[i]);
  fmt::print("model: {}\n", model.spec());
  fmt::print("shape: M={} N={} K={}  input: {}  output: {}  dist: {}  seed: {}\n", a.rows(), b.cols(), k,
             input.name, out.name, o.a_file.empty() ? o.dist : "file", o.seed);
  fmt::print("max_abs_error: {:.6e}\nmean_abs_error: {:.6e}\n", stats.max_abs, stats.mean_abs);
  fmt::print("max_rel_error: {:.6e}\nmean_rel_error: {:.6e}\n", stats.max_rel, stats.mean_rel);
  fmt::print("max_error_ulps: {:.4f}\nmean_error_ulps: {:.4f}\n", stats.max_ulps, stats.mean_ulps);
  fmt::print("max_componentwise_error (|d-exact| / sum|a||b|): {:.6e}\n", max_ratio);
  fmt::print("unit_roundoff_u: {:.6e}\n", u);
  fmt::print("bound_gamma_k_u (deterministic, n=K): {:.6e}\n", sim::gamma_n(k, u));
  fmt::print("bound_sqrt_k_u (probabilistic, lambda=1): {:.6e}\n", sim::probabilistic_gamma_n(k, u));
}

// The shape options against the matrix files, the threads, and the memory
// the matrices need (A, B, their rounded copies, D, the exact product and
// |A||B|) against the machine's: a size that cannot fit is an error, not
// std::bad_alloc.
void check_gemm_args(const CLI::App& cmd, const Opts& o) {
  if (o.a_file.empty() != o.b_file.empty())
    throw UsageError(fmt::format("{} given without {}: give both matrix files or neither",
                                 o.a_file.empty() ? "--b" : "--a", o.a_file.empty() ? "--a" : "--b"));
  if (!o.a_file.empty())
    for (const char* dim : {"--m", "--n", "--k"})
      if (cmd.count(dim))
        throw UsageError(fmt::format("{} with --a/--b: the shape comes from the matrix files", dim));
  io::check_threads(o.threads, "--threads", false);
  const double m = double(o.m), n = double(o.n), k = double(o.k);
  const double bytes = 8.0 * (2.0 * (m * k + k * n) + 4.0 * m * n);
  const double memory = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGE_SIZE));
  if (o.a_file.empty() && bytes > memory / 2)
    throw UsageError(
        fmt::format("--m {} --n {} --k {}: the matrices need {:.3g} GB, more than half of this "
                    "machine's {:.3g} GB",
                    o.m, o.n, o.k, bytes / 1e9, memory / 1e9));
}

int run_gemm(const Opts& o) {
  if (o.dist != "uniform" && o.dist != "normal" && o.dist != "wide")
    throw UsageError(fmt::format("--dist '{}': use uniform, normal or wide", o.dist));
  if (o.m < 1 || o.n < 1 || o.k < 1)
    throw UsageError(fmt::format("--m --n --k must be positive (got {} {} {})", o.m, o.n, o.k));
  check_gemm_args(*o.cmd, o);
  Format input;
  try {
    input = parse_format(o.input);
  } catch (const std::exception& e) {
    throw UsageError(fmt::format("--input '{}': {}", o.input, e.what()));
  }
  const sim::AccumulationModel model = model_of(o);
  std::mt19937_64 rng(o.seed);
  sim::Matrix a = o.a_file.empty() ? random_matrix(o.m, o.k, o.dist, rng) : read_matrix(o.a_file);
  sim::Matrix b = o.b_file.empty() ? random_matrix(a.cols(), o.n, o.dist, rng) : read_matrix(o.b_file);
  if (a.cols() != b.rows())
    throw UsageError(fmt::format("A is {}x{} but B is {}x{}", a.rows(), a.cols(), b.rows(), b.cols()));
  const auto* tc = model.bare_instruction();
  if (tc && tc->scale_block > 0) {
    // Block-scaled: the model's operand formats, the scales from quantising.
    sim::GemmScales scales;
    const auto [ad, bd] = block_quantise(*tc, a, b, scales);
    const sim::Matrix c = sim::Matrix::Zero(a.rows(), b.cols());
    const sim::Matrix d = sim::gemm(model, a, b, c, scales, sim::GemmOptions{o.threads});
    if (!o.dump.empty()) write_dump(o.dump, a, b, d, tc->input, model.output_format(), scales);
    print_report(o, model, tc->input, ad, bd, d);
    return 0;
  }
  a = sim::round_to_format(a, input);
  b = sim::round_to_format(b, input);
  const sim::Matrix d = sim::gemm(model, a, b, sim::GemmOptions{o.threads});
  if (!o.dump.empty()) write_dump(o.dump, a, b, d, input, model.output_format(), {});
  print_report(o, model, input, a, b, d);
  return 0;
}

void add_gemm(CLI::App& app, Action& action) {
  auto* cmd =
      app.add_subcommand("gemm", "Random GEMM under an accumulation model: error against exact, and bounds");
  auto o = std::make_shared<Opts>();
  o->cmd = cmd;
  cmd->add_option("--m", o->m, "rows of A and D")->capture_default_str();
  cmd->add_option("--n", o->n, "columns of B and D")->capture_default_str();
  cmd->add_option("--k", o->k, "inner dimension")->capture_default_str();
  cmd->add_option("--input", o->input, "format A and B are rounded to (RNE)")->capture_default_str();
  cmd->add_option("--output", o->output, "tensor-core output format fp32|fp16 (default fp32)");
  cmd->add_option("--model", o->model,
                  "tensor-core preset (v100 ... b200) or an accumulation model spec: " +
                      sim::accumulation_kind_names() +
                      " (sequential:fp32:rne, blocked:32, tc:h100:bf16, "
                      "kernel:h100:fp16:fp32:split_k=3, cublas:h100:bf16:bf16; block-scaled: "
                      "tc:b200:e4m3:fp32:tcgen05.mma:scale=ue8m0 quantises A and B in MX blocks, "
                      "tc:b200:e2m1:fp32:tcgen05.mma:scale=ue4m3 in NVFP4 blocks)")
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "random seed")->check(non_negative())->capture_default_str();
  cmd->add_option("--dist", o->dist, "uniform | normal | wide")->capture_default_str();
  cmd->add_option("--a", o->a_file, "read A from a text file (rows of numbers) instead; needs --b");
  cmd->add_option("--b", o->b_file, "read B from a text file instead; needs --a");
  cmd->add_option("--dump", o->dump, "also write A, B and D to this .npz (what rpsim gemm-check reads)");
  cmd->add_option("--threads", o->threads, "OpenMP threads")->capture_default_str();
  cmd->callback([o, &action] { action = [o]() -> int { return run_gemm(*o); }; });
}

const Registrar registered("gemm", add_gemm);

}  // namespace

}  // namespace rpsim::cli
