// gpu-validate's own golden files from a real H200 (tests/data/tc-h200): the
// signed-zero patterns settle the c = -0 rule that rpsim took from MMA-Sim
// (issue #29), for mma.sync and wgmma in every input format.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include "rpsim/validation/tensor_core_golden.hpp"
#include "shared_data.hpp"

namespace {

namespace fs = std::filesystem;
using namespace rpsim::sim;

fs::path h200_dir() {
  return rpsim::test::source_dir() / "tests" / "data" / "tc-h200";
}

}  // namespace

TEST_CASE("tc golden: H200 gpu-validate excerpt (tests/data/tc-h200), exact-zero sums are +0, bit-exact",
          "[tc][golden]") {
  // mma.sync: E4M3 and E5M2 to fp16 and fp32, bf16 to fp32, fp16 to fp16 and
  // fp32, tf32 to fp32; wgmma the same without tf32.
  for (const auto& [folder, expected_sets] :
       {std::pair<std::string, std::size_t>{"H200", 8}, {"H200-wgmma", 7}}) {
    const auto sets = load_golden_gpu(h200_dir() / folder);
    REQUIRE(sets.size() == expected_sets);
    for (const auto& set : sets) {
      const auto model = golden_model(set);
      INFO(folder << " " << set.input_folder << "->" << set.output.name << " model " << model.name);
      CHECK(set.instruction == (folder == "H200" ? "mma.sync" : "wgmma"));
      const auto r = check_golden(set, model, 3);
      for (const auto& m : r.first_mismatches) INFO(m);
      CHECK(r.total == 30);
      CHECK(r.passed == r.total);
      // The data themselves: every case with C = -0 and an exact-zero sum
      // came back +0 (3 per set: +0 products, -0 products, cancellation).
      std::size_t negative_c = 0;
      for (const auto& g : set.cases) {
        if (g.c_bits != 0x80000000u) continue;
        ++negative_c;
        CHECK(g.d_bits == 0u);
      }
      CHECK(negative_c == 3);
    }
  }
}
