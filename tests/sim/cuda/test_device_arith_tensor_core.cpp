// device-arith: the Tensor Core block FMA as nvcc compiles it (device_arith.cu:
// the step, the instruction with its interleaved steps and late C, the chain,
// the block scales, a schedule's plan) against the CPU's TensorCoreModel, on
// every preset row's datapath with random operands over the whole range, and
// against the oracles: the MMA-Sim vectors (tests/data/mma-sim always,
// ../shared/mma-sim when present) and the GPUs' tc-golden / tc-stress sets.
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "device_arith.hpp"
#include "rpsim/accumulation/schedule_plan.hpp"
#include "rpsim/accumulation/tensor_core_operands.hpp"
#include "rpsim/accumulation/tensor_core_presets.hpp"
#include "rpsim/formats/ops.hpp"
#include "rpsim/formats/unpacked.hpp"
#include "rpsim/validation/mma_sim_vectors.hpp"
#include "rpsim/validation/tensor_core_golden.hpp"
#include "shared_data.hpp"

using namespace rpsim;
using namespace rpsim::sim;

namespace {

bool same(double x, double y) {
  return std::bit_cast<std::uint64_t>(x) == std::bit_cast<std::uint64_t>(y);
}

// A random value of f: a random encoding (the whole range: zeros, subnormals,
// the largest values, infinities) or, half the time, one near 1 (tc-golden's
// mix), NaN left out unless `nan`.
double random_value(const Format& f, std::mt19937_64& gen, bool nan) {
  for (;;) {
    std::uint64_t bits = gen() & f.bit_mask();
    if (gen() % 2 && f.exp_bits > 2) {
      const std::uint64_t field = std::uint64_t(f.bias) + gen() % 3 - 1;
      bits = (bits & (f.sign_bit() | f.man_mask())) | (field << f.man_bits);
    }
    const double v = to_double(f, bits);
    if (nan || !std::isnan(v)) return v;
  }
}

Format by_bit(std::uint8_t bit) {
  for (const auto& c : tensor_core_operand_classes())
    if (c.input_bit == bit) return parse_format(c.format);
  return formats::binary32();
}

std::string instruction_of(std::uint8_t bits) {
  for (const auto& [bit, name] : {std::pair<std::uint8_t, const char*>{tc_mma_sync, "mma.sync"},
                                  {tc_wgmma, "wgmma"},
                                  {tc_tcgen05, "tcgen05.mma"},
                                  {tc_mfma, "mfma"},
                                  {tc_mfma_1k, "mfma.1k"}})
    if (bits & bit) return name;
  return "";
}

// Every preset row's block-FMA datapath, one model per input class (A = B)
// and output it takes; block-scaled rows with each scale format and block.
std::vector<TensorCoreModel> block_fma_models() {
  std::vector<TensorCoreModel> out;
  for (const auto& row : tensor_core_preset_rows()) {
    if (row.datapath != Datapath::block_fma) continue;
    for (std::uint8_t in_bit = 1; in_bit; in_bit <<= 1) {
      if (!(row.inputs & in_bit)) continue;
      for (const auto& [out_bit, out_name] :
           {std::pair<std::uint8_t, const char*>{tc_out_fp32, "binary32"}, {tc_out_fp16, "binary16"}}) {
        if (!(row.outputs & out_bit)) continue;
        const Format in = by_bit(in_bit), o = parse_format(out_name);
        const std::string gpu(row.gpus), instr = instruction_of(row.instructions);
        if (!row.scales) {
          out.push_back(tensor_core_preset(gpu, in, o, instr));
          continue;
        }
        for (const auto& [sbit, sname] :
             {std::pair<std::uint8_t, const char*>{tc_scale_ue8m0, "e8m0"}, {tc_scale_ue4m3, "e4m3"}})
          for (int block : {16, 32})
            if ((row.scales & sbit) && (row.scale_blocks & block)) {
              const Format sf = parse_format(sname);
              out.push_back(tensor_core_preset(gpu, in, o, instr, in, &sf, block));
            }
      }
    }
  }
  return out;
}

}  // namespace

TEST_CASE("device-arith: every preset's block FMA, chained over K, equals the CPU model", "[device-arith]") {
  std::mt19937_64 gen(2024);
  std::size_t cases = 0, mismatches = 0, models = 0;
  std::string first;
  for (const TensorCoreModel& m : block_fma_models()) {
    ++models;
    const TcStep p = tc_step_of(m);
    const int per = m.instruction_terms();
    for (int t = 0; t < 600; ++t) {
      const int k = m.scale_block > 0 ? m.scale_block * (1 + t % (2 * per / m.scale_block + 1))
                                      : 1 + int(gen() % std::uint64_t(3 * per + 5));
      std::vector<double> a(static_cast<std::size_t>(k)), b(static_cast<std::size_t>(k)), sa, sb;
      const bool nan = t % 50 == 0;
      for (int i = 0; i < k; ++i) {
        a[std::size_t(i)] = random_value(m.input, gen, nan);
        b[std::size_t(i)] = random_value(m.b_input(), gen, nan);
      }
      const double c = random_value(m.output, gen, nan);
      double cpu, dev;
      if (m.scale_block > 0) {
        for (int j = 0; j < k / m.scale_block; ++j) {
          sa.push_back(std::fabs(random_value(*m.scale, gen, false)));
          sb.push_back(std::fabs(random_value(*m.scale, gen, false)));
        }
        cpu = tensor_core_dot_other(m, a, b, c, sa, sb);
        dev = device_arith::tc_block_scaled_chain(p, a.data(), b.data(), k, c, sa.data(), sb.data());
      } else {
        cpu = tensor_core_dot(m, a, b, c);
        dev = device_arith::tc_chain(p, a.data(), b.data(), k, c);
        // The same chain through the schedule's plan (the CUDA GEMM kernel's order).
        const auto plan = schedule_plan(KernelSchedule::of_instruction(m), k);
        const tc_detail::PlanView view{plan.order.data(), plan.begin.data(), plan.first.data(),
                                       plan.last.data()};
        const double via_plan = device_arith::tc_plan_steps(p, view, 0, plan.steps(), a.data(), b.data(), c);
        if (!same(via_plan, cpu) && mismatches++ == 0) first = m.name + " K=" + std::to_string(k) + " (plan)";
      }
      ++cases;
      if (!same(cpu, dev) && mismatches++ == 0)
        first = m.name + " K=" + std::to_string(k) + ": cpu " + std::to_string(cpu) + " nvcc " +
                std::to_string(dev);
    }
  }
  INFO("first mismatch: " << first);
  CHECK(models >= 40);
  CHECK(mismatches == 0);
  std::cout << "device-arith tensor core: " << models << " preset datapaths, " << cases << " chains, "
            << mismatches << " mismatches" << std::endl;
}

namespace {

struct OracleCount {
  std::size_t files = 0, cases = 0, passed = 0, other_datapath = 0;
  std::string first;
};

// nvcc's result for one MMA-Sim case, compared with the file's D as the CPU's
// check_mma_sim compares it (output bits, NVIDIA's NaN; "is NaN" where the
// header says so).
void check_mma_sim_file(const std::filesystem::path& path, OracleCount& n) {
  const MmaSimFile file = load_mma_sim_file(path);
  std::string why;
  const auto model = mma_sim_model(file, why);
  if (!model) return;
  if (model->datapath != Datapath::block_fma) {
    ++n.other_datapath;  // AMD and FP64 paths: fma chains on the device, not this shared code
    return;
  }
  ++n.files;
  const TcStep p = tc_step_of(*model);
  const Format& out = model->output;
  for (const MmaSimCase& c : file.cases) {
    const int k = int(c.a.size());
    const double d = model->scale_block > 0 ? device_arith::tc_block_scaled_chain(
                                                  p, c.a.data(), c.b.data(), k, c.c, c.sa.data(), c.sb.data())
                                            : device_arith::tc_chain(p, c.a.data(), c.b.data(), k, c.c);
    const std::uint64_t bits = std::isnan(d) ? out.bit_mask() >> 1 : round_double(out, d);
    const bool ok = bits == c.d_bits || (file.nan_any && is_nan(out, bits) && is_nan(out, c.d_bits));
    ++n.cases;
    if (ok)
      ++n.passed;
    else if (n.first.empty())
      n.first = path.filename().string() + " line " + std::to_string(c.line);
  }
}

}  // namespace

TEST_CASE("device-arith: the MMA-Sim excerpt in tests/data, every case", "[device-arith]") {
  OracleCount n;
  for (const auto& path : mma_sim_files(test::source_dir() / "tests/data/mma-sim"))
    check_mma_sim_file(path, n);
  INFO("first miss: " << n.first);
  CHECK(n.files >= 5);
  CHECK(n.passed == n.cases);
}

TEST_CASE("device-arith: every shared MMA-Sim file the block FMA models", "[device-arith]") {
  const auto dir = test::shared_dir() / "mma-sim";
  if (!std::filesystem::exists(dir)) RPSIM_SKIP("no " << dir << " (../shared/mma-sim)");
  OracleCount n;
  for (const auto& path : mma_sim_files(dir)) check_mma_sim_file(path, n);
  INFO("first miss: " << n.first);
  CHECK(n.files >= 100);
  CHECK(n.passed == n.cases);
  std::cout << "device-arith MMA-Sim: " << n.files << " files, " << n.passed << "/" << n.cases
            << " bit-exact (" << n.other_datapath << " files on AMD / FP64 datapaths left to the CPU tests)"
            << std::endl;
}

TEST_CASE("device-arith: every tc-golden and tc-stress set measured on GPUs", "[device-arith]") {
  std::size_t sets = 0, cases = 0, passed = 0;
  std::string first;
  for (const char* root : {"tc-golden", "tc-stress"}) {
    const auto dir = test::shared_dir() / root;
    if (!std::filesystem::exists(dir)) continue;
    for (const auto& gpu : std::filesystem::directory_iterator(dir)) {
      if (!gpu.is_directory()) continue;
      for (const GoldenSet& set : load_golden_gpu(gpu.path())) {
        const TensorCoreModel m = golden_model(set);
        const TcStep p = tc_step_of(m);
        ++sets;
        for (const GoldenCase& c : set.cases) {
          const double d =
              device_arith::tc_chain(p, c.a.data(), c.b.data(), int(c.a.size()), golden_c(set, c));
          const std::uint32_t bits = std::bit_cast<std::uint32_t>(static_cast<float>(d));
          const bool ok = bits == c.d_bits || (std::isnan(d) && std::isnan(std::bit_cast<float>(c.d_bits)));
          ++cases;
          if (ok)
            ++passed;
          else if (first.empty())
            first = set.gpu + "/" + set.input_folder + " line " + std::to_string(c.line);
        }
      }
    }
  }
  if (sets == 0)
    RPSIM_SKIP("no " << test::shared_dir() / "tc-golden"
                     << " or tc-stress (../shared)");
  INFO("first miss: " << first);
  CHECK(passed == cases);
  std::cout << "device-arith tc-golden/tc-stress: " << sets << " sets, " << passed << "/" << cases
            << " bit-exact" << std::endl;
}
