// The NumPy reader and writer (rpsim/io/npy.hpp): files numpy 1.24 wrote
// (tests/data/npy, made by /usr/bin/python3 with numpy.save / savez /
// savez_compressed), the shared cuBLAS dumps against elements numpy read, and
// malformed files, each rejected with a message naming the file.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "rpsim/io/npy.hpp"
#include "rpsim/io/results_io.hpp"
#include "shared_data.hpp"

namespace fs = std::filesystem;
using rpsim::io::ArrayFileError;
using rpsim::io::NumericArray;

namespace {

fs::path data(const std::string& name) {
  return rpsim::test::source_dir() / "tests" / "data" / "npy" / name;
}

std::vector<std::uint8_t> bytes_of(const std::string& s) {
  return {s.begin(), s.end()};
}

// An .npy image by hand: header text as given, data bytes appended.
std::string npy(const std::string& header, const std::string& payload = "", int major = 1) {
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  if (major > 1) out += std::string(2, '\0');
  return out + header + payload;
}

// The message of the ArrayFileError that parsing `image` throws ("" if none).
std::string npy_error(const std::string& image) {
  try {
    (void)rpsim::io::parse_npy(bytes_of(image), "x.npy");
  } catch (const ArrayFileError& e) {
    return e.what();
  }
  return "";
}

std::string npz_error(const std::string& image) {
  try {
    (void)rpsim::io::parse_npz(bytes_of(image), "x.npz");
  } catch (const ArrayFileError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("npy: files numpy wrote: float16, Fortran order, big-endian, scalar", "[npy]") {
  const auto h = rpsim::io::read_array_file(data("f2_c.npy")).at(0);
  CHECK(h.name == "f2_c");
  CHECK(h.dtype == "float16");
  CHECK(h.shape == std::vector<std::size_t>{2, 3});
  CHECK(h.values[0] == 1.5);
  CHECK((h.values[1] == 0 && std::signbit(h.values[1])));
  CHECK(h.values[2] == 65504.0);
  CHECK(h.values[3] == std::ldexp(1.0, -24));  // the smallest subnormal
  CHECK(std::isinf(h.values[4]));
  CHECK(h.values[5] == -3.25);

  const auto f = rpsim::io::read_array_file(data("f4_fortran.npy")).at(0);
  REQUIRE(f.shape == std::vector<std::size_t>{2, 3});
  for (int i = 0; i < 6; ++i) CHECK(f.values[std::size_t(i)] == double(float(i) / 3.0f));  // C order again

  const auto b = rpsim::io::read_array_file(data("f8_big.npy")).at(0);
  CHECK(b.values == std::vector<double>{0.1, -2.5, 1e300});
  const auto s = rpsim::io::read_array_file(data("f8_scalar.npy")).at(0);
  CHECK(s.shape.empty());
  CHECK(s.values == std::vector<double>{7.25});
}

TEST_CASE("npy: .npz stored (numpy.savez) and deflated (savez_compressed)", "[npy]") {
  const auto stored = rpsim::io::read_array_file(data("stored.npz"));
  REQUIRE(stored.size() == 2);
  CHECK(stored[0].name == "A");
  CHECK(stored[0].values == std::vector<double>(6, 1.0));
  CHECK(stored[1].name == "D");
  CHECK(stored[1].dtype == "float16");
  const auto deflated = rpsim::io::read_array_file(data("deflated.npz"));
  REQUIRE(deflated.size() == 2);
  CHECK(deflated[0].shape == std::vector<std::size_t>{3, 4});
  for (int i = 0; i < 12; ++i) CHECK(deflated[0].values[std::size_t(i)] == i);
  CHECK(deflated[1].values[5] == 1.0);
  CHECK(deflated[1].values[6] == 0.0);
}

TEST_CASE("npy: written images read back bit for bit", "[npy]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const NumericArray h{"A", {2, 2}, "float16", {1.0, -0.0, 6.103515625e-05, nan}};
  const NumericArray f{"B", {3}, "float32", {0.1f, -1e30f, 1e-45f}};
  const NumericArray d{"D", {1, 1}, "float64", {0.1}};
  for (const auto& a : {h, f, d}) {
    const auto back = rpsim::io::parse_npy(bytes_of(rpsim::io::npy_image(a)), "t");
    CHECK(back.shape == a.shape);
    CHECK(back.dtype == a.dtype);
    for (std::size_t i = 0; i < a.values.size(); ++i) {
      CHECK(std::signbit(back.values[i]) == std::signbit(a.values[i]));
      CHECK((back.values[i] == a.values[i] || (std::isnan(a.values[i]) && std::isnan(back.values[i]))));
    }
  }
  const auto z = rpsim::io::parse_npz(bytes_of(rpsim::io::npz_image({h, f, d})), "t.npz");
  REQUIRE(z.size() == 3);
  CHECK(z[1].name == "B");
  CHECK(z[2].values == d.values);
  // A value that is not of the dtype is refused.
  CHECK_THROWS_AS(rpsim::io::npy_image(NumericArray{"x", {1}, "float16", {0.1}}), std::invalid_argument);
}

TEST_CASE("npy: the shared cuBLAS dumps read as numpy reads them", "[npy][shared]") {
  const fs::path dir = rpsim::test::shared_dir() / "cublas-h100";
  if (!fs::is_directory(dir)) {
    RPSIM_SKIP("skipped: " << dir << " is absent");
  }
  std::ifstream in(data("shared_cublas_reference.json"));
  const auto ref = nlohmann::json::parse(in);
  std::size_t checked = 0;
  for (const auto& [file, arrays] : ref.items()) {
    const auto got = rpsim::io::read_array_file(dir / file);
    REQUIRE(got.size() == 3);
    for (const auto& a : got) {
      INFO(file << ": " << a.name);
      const auto& r = arrays.at(a.name);
      CHECK(a.dtype == r.at("dtype").get<std::string>());
      CHECK(a.shape == r.at("shape").get<std::vector<std::size_t>>());
      for (const auto& e : r.at("elements")) {
        const auto i = e[0].get<std::size_t>(), j = e[1].get<std::size_t>();
        CHECK(a.values[i * a.shape[1] + j] == std::strtod(e[2].get<std::string>().c_str(), nullptr));
        ++checked;
      }
    }
  }
  CHECK(checked == 24 * 3 * 4);
}

TEST_CASE("npy: malformed .npy images are errors naming the file", "[npy]") {
  const std::string ok = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  const std::string eight(8, '\0');
  CHECK(npy_error(npy(ok, eight)).empty());
  CHECK(npy_error(npy(ok, eight, 2)).empty());  // version 2.0: 4-byte header length
  CHECK(npy_error("PK\x03\x04 not npy").find("x.npy: not a .npy") == 0);
  CHECK(npy_error("\x93NUMPY").find("not a .npy") != std::string::npos);
  CHECK(npy_error(npy(ok, eight, 4)).find("version 4.0") != std::string::npos);
  CHECK(npy_error(npy(ok, eight).substr(0, 20)).find("truncated") != std::string::npos);
  CHECK(npy_error(npy(ok, std::string(7, '\0'))).find("data holds 7 bytes") != std::string::npos);
  CHECK(npy_error(npy(ok, std::string(9, '\0'))).find("data holds 9 bytes") != std::string::npos);
  CHECK(npy_error(npy("{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", eight)).find("'<i4'") !=
        std::string::npos);
  CHECK(npy_error(npy("{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", eight)).find("'|O'") !=
        std::string::npos);
  CHECK(npy_error(npy("{'descr': '<f4', 'shape': (2,), }", eight)).find("lacks") != std::string::npos);
  CHECK(
      npy_error(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", eight)).find("'x'") !=
      std::string::npos);
  CHECK(npy_error(npy("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", eight))
            .find("repeated") != std::string::npos);
  CHECK(npy_error(npy("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,), }", eight)).find("True") !=
        std::string::npos);
  CHECK(npy_error(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", eight)).find("shape") !=
        std::string::npos);
  CHECK(
      npy_error(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, 99999999999), }", eight))
          .find("large") != std::string::npos);
  CHECK(
      npy_error(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), } junk", eight)).find("after") !=
      std::string::npos);
  CHECK(npy_error(npy("{'descr': '<f4\xc3\xa9', 'fortran_order': False, 'shape': (2,), }", eight))
            .find("ASCII") != std::string::npos);
}

TEST_CASE("npy: malformed .npz archives are errors naming the file", "[npy]") {
  const NumericArray a{"A", {2}, "float32", {1.0, 2.0}};
  const std::string good = rpsim::io::npz_image({a});
  CHECK(npz_error(good).empty());
  CHECK(npz_error("not a zip at all, just some text of some length").find("x.npz: not a zip") == 0);
  CHECK(npz_error("").find("not a zip") != std::string::npos);
  CHECK(npz_error(good.substr(0, good.size() / 2)).find("x.npz") == 0);  // truncated
  std::string crc = good;
  crc[30 + 5 + 100] ^= 1;  // a byte of A.npy's data (after the local header and the name)
  CHECK(npz_error(crc).find("CRC") != std::string::npos);
  std::string method = good;
  method[8] = 12;  // local header: bzip2 ...
  const auto cd = good.find("PK\x01\x02");
  method[cd + 10] = 12;  // ... and the central directory says so too
  CHECK(npz_error(method).find("compression method 12") != std::string::npos);
  std::string encrypted = good;
  encrypted[cd + 8] = 1;
  CHECK(npz_error(encrypted).find("encrypted") != std::string::npos);
  std::string offset = good;
  offset[cd + 42] = 0x7f;  // the local header offset points nowhere
  CHECK(npz_error(offset).find("x.npz: A.npy") == 0);
  CHECK(npz_error(rpsim::io::npz_image({a, a})).find("twice") != std::string::npos);
  // A member that is not an .npy array.
  std::string other = rpsim::io::npz_image({a});
  const auto at = other.rfind("A.npy");
  other.replace(at, 5, "A.txt");
  CHECK(npz_error(other).find("not an .npy") != std::string::npos);
}

TEST_CASE("npy: unreadable files are I/O errors naming the path", "[npy]") {
  CHECK_THROWS_WITH(rpsim::io::read_array_file("/nonexistent/x.npz"), Catch::Contains("/nonexistent/x.npz"));
  CHECK_THROWS_AS(rpsim::io::read_array_file(rpsim::test::source_dir() / "tests"), rpsim::io::IoError);
}
