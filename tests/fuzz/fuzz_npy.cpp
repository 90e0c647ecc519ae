// The NumPy reader (rpsim/io/npy.hpp) on arbitrary bytes: it must reject bad
// input with ArrayFileError only, never crash, read out of bounds, allocate
// without bound or throw anything else; an array it accepts holds as many
// values as its shape says and reads back bit for bit once written.
//
// Input: byte 0 picks the layer (even: one .npy image, odd: an .npz
// archive); the rest is the file.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>

#include "rpsim/io/npy.hpp"

namespace {

bool same(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::memcmp(&a, &b, sizeof a) == 0;
}

void round_trip(const rpsim::io::NumericArray& a) {
  std::size_t n = 1;
  for (const std::size_t d : a.shape) n *= d;
  if (n != a.values.size()) std::abort();
  const std::string image = rpsim::io::npy_image(a);
  const auto back = rpsim::io::parse_npy(
      std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(image.data()), image.size()),
      "back");
  if (back.shape != a.shape || back.dtype != a.dtype || back.values.size() != n) std::abort();
  for (std::size_t i = 0; i < n; ++i)
    if (!same(back.values[i], a.values[i])) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::span<const std::uint8_t> rest(data + 1, size - 1);
  try {
    if (data[0] & 1) {
      for (const auto& a : rpsim::io::parse_npz(rest, "fuzz.npz")) round_trip(a);
    } else {
      round_trip(rpsim::io::parse_npy(rest, "fuzz.npy"));
    }
  } catch (const rpsim::io::ArrayFileError& e) {
    if (std::strncmp(e.what(), "fuzz.np", 7) != 0) std::abort();  // the message names the file
  }
  return 0;
}
