// `rpsim grads --recipes`: what each block-scaled policy's gradient quantiser
// would do to a tensor (recipes.csv), on a .npy worked out by hand.
#include <unistd.h>
#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "run_cli.hpp"

namespace fs = std::filesystem;
using rpsim::test::run_cli;

namespace {

// A 1-D float64 .npy (format version 1.0).
void write_npy(const fs::path& p, const std::vector<double>& v) {
  std::string header =
      "{'descr': '<f8', 'fortran_order': False, 'shape': (" + std::to_string(v.size()) + ",), }";
  while ((10 + header.size() + 1) % 16 != 0) header += ' ';
  header += '\n';
  std::ofstream out(p, std::ios::binary);
  out.write("\x93NUMPY\x01\x00", 8);
  const auto len = static_cast<std::uint16_t>(header.size());
  out.put(char(len & 0xff));
  out.put(char(len >> 8));
  out << header;
  out.write(reinterpret_cast<const char*>(v.data()), std::streamsize(v.size() * sizeof(double)));
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("cli: rpsim grads --recipes counts the recipes' underflow, saturation and subnormals",
          "[cli][recipes]") {
  const fs::path dir = fs::temp_directory_path() / ("rpsim-grads-recipes-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  // 1, 1e-30 and 2^-14 in one block. mxfp8 (e5m2 gradients, blocks of 32,
  // floor): scale 2^-15, 1e-30 underflows, 2^-14 is 2. nvfp4 (e2m1, 16):
  // block scale 448 under ges 2688, encode 6: 1e-30 and 2^-14 (6 * 2^-14 <
  // 0.25) underflow. fp8-blockwise (e4m3, 128, power-of-two scale 256):
  // 1e-30 underflows, 2^-14 * 256 = 2^-6, e4m3's least normal.
  std::vector<double> v(32, 0.0);
  v[0] = 1.0;
  v[1] = 1e-30;
  v[2] = std::ldexp(1.0, -14);
  write_npy(dir / "g.npy", v);
  const auto r = run_cli("grads '" + (dir / "g.npy").string() + "' --out '" + (dir / "out").string() + "'");
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.output,
             Catch::Contains("recipes.csv") && Catch::Contains("nvfp4 (e2m1 gradients, blocks of 16)"));
  const std::string csv = slurp(dir / "out" / "recipes.csv");
  INFO(csv);
  CHECK_THAT(csv, Catch::StartsWith("tensor,recipe,element,block,entries,nonzero,underflow_fraction,"
                                    "saturated_fraction,subnormal_fraction\n"));
  CHECK_THAT(csv, Catch::Contains(",mxfp8,e5m2,32,32,3,0.333333333,0,0\n"));
  CHECK_THAT(csv, Catch::Contains(",nvfp4,e2m1,16,32,3,0.666666667,0,0\n"));
  CHECK_THAT(csv, Catch::Contains(",fp8-blockwise,e4m3,128,32,3,0.333333333,0,0\n"));
  // 1.9 under MX floor (e5m2): scale 2^-15, 1.9 * 2^15 > 57344 saturates.
  v.assign(32, 0.0);
  v[0] = 1.9;
  v[1] = 0.5;
  write_npy(dir / "s.npy", v);
  const auto s = run_cli("grads '" + (dir / "s.npy").string() + "' --recipes mxfp8 --out '" +
                         (dir / "s").string() + "'");
  CHECK(s.status == 0);
  CHECK_THAT(slurp(dir / "s" / "recipes.csv"), Catch::Contains(",mxfp8,e5m2,32,32,2,0,0.5,0\n"));
  const auto bad =
      run_cli("grads '" + (dir / "s.npy").string() + "' --recipes fp8 --out '" + (dir / "b").string() + "'");
  CHECK(bad.status == 2);
  CHECK_THAT(bad.output, Catch::Contains("--recipes: policy 'fp8' does not block-scale"));
  fs::remove_all(dir);
}
