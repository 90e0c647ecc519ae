// NumPy's array files: `.npy` (one array) and `.npz` (a zip archive of .npy
// members, stored or deflated, what numpy.save / numpy.savez[_compressed]
// write), read strictly into doubles, and written (stored, uncompressed).
//
// Why our own reader: Debian has no maintained C++ .npy library (cnpy and
// xtensor-io are not packaged), and the format is small: a magic string, a
// Python-literal header {'descr': '<f4', 'fortran_order': False, 'shape': (M, N), }
// and the raw little- or big-endian data (numpy's NEP 1 format description,
// versions 1.0, 2.0 and 3.0). The zip layer reads the central directory
// (zip64 included: numpy forces zip64 records on every member) and inflates
// with zlib. Anything else (another dtype, an object array, an encrypted or
// multi-disk archive, a size or CRC that does not match, trailing bytes) is
// an error naming the file and the array.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace rpsim::io {

// A malformed or unsupported array file; the message names the file (and the
// member of an .npz).
class ArrayFileError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

struct NumericArray {
  std::string name;                // "A": the .npz member or file stem without ".npy"
  std::vector<std::size_t> shape;  // () for a scalar
  std::string dtype;               // "float16", "float32" or "float64"
  std::vector<double> values;      // C (row-major) order, exact
  std::size_t size() const { return values.size(); }
};

// One .npy image; `what` names it in messages ("run.npz: A.npy").
NumericArray parse_npy(std::span<const std::uint8_t> bytes, const std::string& what);
// Every array of an .npz image, in archive order.
std::vector<NumericArray> parse_npz(std::span<const std::uint8_t> bytes, const std::string& what);

// The arrays in a file: every member of an .npz, or the one array of a .npy
// (named by the file's stem). Throws ArrayFileError, or IoError when the file
// cannot be read.
std::vector<NumericArray> read_array_file(const std::filesystem::path& path);

// The .npy image of an array (format 1.0, little-endian, C order). Its values
// must be exact in its dtype; throws std::invalid_argument otherwise.
std::string npy_image(const NumericArray& array);
// An .npz image (stored members NAME.npy), as numpy.savez writes.
std::string npz_image(const std::vector<NumericArray>& arrays);

}  // namespace rpsim::io
