// The .npy layer of npy.hpp: header parsing, the data of the three float
// dtypes, and the writer.
#include "rpsim/io/npy.hpp"

#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>
#include <sstream>

#include "rpsim/io/results_io.hpp"

namespace rpsim::io {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr std::size_t kMagicSize = 6;
// numpy refuses headers above this length too (its _MAX_HEADER_SIZE).
constexpr std::size_t kMaxHeader = 10000;
constexpr std::size_t kMaxDims = 32;

[[noreturn]] void fail(const std::string& what, const std::string& why) {
  throw ArrayFileError(what + ": " + why);
}

std::uint64_t read_le(const std::uint8_t* p, int bytes) {
  std::uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// binary16 bits to the exact double (IEEE 754 binary16; NaN keeps its sign).
double half_to_double(std::uint16_t h) {
  const bool neg = (h >> 15) != 0;
  const int e = (h >> 10) & 0x1f;
  const int f = h & 0x3ff;
  double v;
  if (e == 0x1f) {
    v = f ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else if (e == 0) {
    v = std::ldexp(static_cast<double>(f), -24);
  } else {
    v = std::ldexp(static_cast<double>(f | 0x400), e - 25);
  }
  return neg ? -v : v;
}

// The exact binary16 encoding of v; nullopt when v is not a binary16 value.
std::optional<std::uint16_t> double_to_half(double v) {
  const std::uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  if (std::isnan(v)) return static_cast<std::uint16_t>(sign | 0x7e00);
  if (std::isinf(v)) return static_cast<std::uint16_t>(sign | 0x7c00);
  const double a = std::fabs(v);
  if (a == 0) return sign;
  int e = 0;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  const int exp = e - 1;
  if (exp > 15) return std::nullopt;
  const int q = exp < -14 ? -24 : exp - 10;  // the quantum at a's binade
  const double m = std::ldexp(a, -q);
  if (m != std::floor(m)) return std::nullopt;
  const auto mi = static_cast<std::uint32_t>(m);
  if (exp < -14) return static_cast<std::uint16_t>(sign | mi);
  return static_cast<std::uint16_t>(sign | ((exp + 15) << 10) | (mi & 0x3ff));
}

// ---- the header: a Python dict literal ----

struct Header {
  std::string descr;
  bool fortran = false;
  std::vector<std::size_t> shape;
};

class HeaderParser {
 public:
  HeaderParser(const std::string& text, const std::string& what) : s_(text), what_(what) {}

  Header parse() {
    Header h;
    bool have_descr = false, have_order = false, have_shape = false;
    expect('{');
    while (!peek('}')) {
      const std::string key = string();
      expect(':');
      if (key == "descr" && !have_descr) {
        h.descr = string();
        have_descr = true;
      } else if (key == "fortran_order" && !have_order) {
        h.fortran = boolean();
        have_order = true;
      } else if (key == "shape" && !have_shape) {
        h.shape = tuple();
        have_shape = true;
      } else {
        fail(what_, "header key '" + key + "' is unknown or repeated (descr, fortran_order, shape)");
      }
      if (!peek('}')) expect(',');
    }
    expect('}');
    skip();
    if (pos_ != s_.size()) fail(what_, "text after the header's closing brace");
    if (!have_descr || !have_order || !have_shape)
      fail(what_, "header lacks one of 'descr', 'fortran_order', 'shape'");
    return h;
  }

 private:
  void skip() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\t')) ++pos_;
  }
  bool peek(char c) {
    skip();
    return pos_ < s_.size() && s_[pos_] == c;
  }
  void expect(char c) {
    if (!peek(c))
      fail(what_, std::string("malformed header: expected '") + c + "' at offset " + std::to_string(pos_) +
                      " of '" + s_ + "'");
    ++pos_;
  }
  std::string string() {
    skip();
    if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"'))
      fail(what_, "malformed header: expected a quoted string at offset " + std::to_string(pos_));
    const char q = s_[pos_++];
    const std::size_t end = s_.find(q, pos_);
    if (end == std::string::npos || end - pos_ > 64) fail(what_, "malformed header: unterminated string");
    std::string r = s_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return r;
  }
  bool boolean() {
    skip();
    if (s_.compare(pos_, 4, "True") == 0) {
      pos_ += 4;
      return true;
    }
    if (s_.compare(pos_, 5, "False") == 0) {
      pos_ += 5;
      return false;
    }
    fail(what_, "malformed header: fortran_order is not True or False");
  }
  std::size_t integer() {
    skip();
    std::size_t v = 0, digits = 0;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      if (v > (std::numeric_limits<std::size_t>::max() - 9) / 10) fail(what_, "shape dimension too large");
      v = v * 10 + static_cast<std::size_t>(s_[pos_++] - '0');
      ++digits;
    }
    if (s_.compare(pos_, 1, "L") == 0) ++pos_;  // Python 2's long suffix
    if (digits == 0) fail(what_, "malformed header: a shape entry is not a non-negative integer");
    return v;
  }
  std::vector<std::size_t> tuple() {
    std::vector<std::size_t> dims;
    expect('(');
    while (!peek(')')) {
      dims.push_back(integer());
      if (dims.size() > kMaxDims) fail(what_, "more than 32 dimensions");
      if (!peek(')')) expect(',');
    }
    expect(')');
    return dims;
  }

  const std::string& s_;
  const std::string& what_;
  std::size_t pos_ = 0;
};

struct Dtype {
  const char* name;
  char code;  // the 'f2' in '<f2'
  int bytes;
};
constexpr Dtype kDtypes[] = {{"float16", '2', 2}, {"float32", '4', 4}, {"float64", '8', 8}};

const Dtype& parse_descr(const std::string& descr, const std::string& what) {
  // '<' little, '>' big, '=' native (little on every host rpsim builds on).
  if (descr.size() == 3 && (descr[0] == '<' || descr[0] == '>' || descr[0] == '=') && descr[1] == 'f')
    for (const auto& d : kDtypes)
      if (descr[2] == d.code) return d;
  fail(what, "dtype '" + descr + "' is not float16, float32 or float64 ('<f2', '<f4', '<f8')");
}

double decode_value(const std::uint8_t* p, const Dtype& d, bool big) {
  std::uint8_t b[8];
  for (int i = 0; i < d.bytes; ++i) b[i] = big ? p[d.bytes - 1 - i] : p[i];
  const std::uint64_t bits = read_le(b, d.bytes);
  if (d.bytes == 2) return half_to_double(static_cast<std::uint16_t>(bits));
  if (d.bytes == 4) return static_cast<double>(std::bit_cast<float>(static_cast<std::uint32_t>(bits)));
  return std::bit_cast<double>(bits);
}

}  // namespace

NumericArray parse_npy(std::span<const std::uint8_t> bytes, const std::string& what) {
  if (bytes.size() < kMagicSize + 4 || std::memcmp(bytes.data(), kMagic, kMagicSize) != 0)
    fail(what, "not a .npy array (no \\x93NUMPY magic)");
  const int major = bytes[6];
  if (major < 1 || major > 3 || bytes[7] != 0)
    fail(what, "unsupported .npy version " + std::to_string(major) + "." + std::to_string(bytes[7]));
  const int len_bytes = major == 1 ? 2 : 4;
  if (bytes.size() < kMagicSize + 2 + static_cast<std::size_t>(len_bytes)) fail(what, "truncated header");
  const std::size_t hlen = read_le(bytes.data() + 8, len_bytes);
  const std::size_t start = 8 + static_cast<std::size_t>(len_bytes);
  if (hlen > kMaxHeader || start + hlen > bytes.size()) fail(what, "truncated or oversized header");
  const std::string text(reinterpret_cast<const char*>(bytes.data() + start), hlen);
  for (const char c : text)
    if (static_cast<unsigned char>(c) >= 0x80 || (c < ' ' && c != '\n' && c != '\t'))
      fail(what, "header is not printable ASCII");
  const Header h = HeaderParser(text, what).parse();
  const Dtype& d = parse_descr(h.descr, what);
  std::size_t count = 1;
  for (const std::size_t n : h.shape) {
    if (n != 0 && count > std::numeric_limits<std::size_t>::max() / 8 / n) fail(what, "shape too large");
    count *= n;
  }
  const std::size_t data = start + hlen;
  const std::size_t want = count * static_cast<std::size_t>(d.bytes);
  if (bytes.size() - data != want)
    fail(what, "data holds " + std::to_string(bytes.size() - data) + " bytes, the header's shape needs " +
                   std::to_string(want));
  NumericArray a;
  a.shape = h.shape;
  a.dtype = d.name;
  a.values.resize(count);
  const bool big = h.descr[0] == '>';
  for (std::size_t i = 0; i < count; ++i)
    a.values[i] = decode_value(bytes.data() + data + i * static_cast<std::size_t>(d.bytes), d, big);
  if (h.fortran && h.shape.size() > 1) {
    // Column-major on disk: the first index varies fastest. Reorder to C order.
    std::vector<double> c(count);
    std::vector<std::size_t> idx(h.shape.size(), 0);
    for (std::size_t f = 0; f < count; ++f) {
      std::size_t lin = 0;
      for (std::size_t k = 0; k < h.shape.size(); ++k) lin = lin * h.shape[k] + idx[k];
      c[lin] = a.values[f];
      for (std::size_t k = 0; k < h.shape.size() && ++idx[k] == h.shape[k]; ++k) idx[k] = 0;
    }
    a.values = std::move(c);
  }
  return a;
}

std::vector<NumericArray> read_array_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw IoError("'" + path.string() + "' is a folder, not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError("cannot open '" + path.string() + "'");
  const std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                        std::istreambuf_iterator<char>());
  if (in.bad()) throw IoError("cannot read '" + path.string() + "'");
  if (path.extension() == ".npz") return parse_npz(bytes, path.string());
  NumericArray a = parse_npy(bytes, path.string());
  a.name = path.stem().string();
  return {a};
}

std::string npy_image(const NumericArray& array) {
  const Dtype* d = nullptr;
  for (const auto& t : kDtypes)
    if (array.dtype == t.name) d = &t;
  if (!d) throw std::invalid_argument("npy: dtype '" + array.dtype + "' is not float16, float32 or float64");
  std::size_t count = 1;
  std::string shape = "(";
  for (std::size_t i = 0; i < array.shape.size(); ++i) {
    count *= array.shape[i];
    shape += std::to_string(array.shape[i]);
    if (array.shape.size() == 1) shape += ",";  // Python's one-element tuple
    if (i + 1 < array.shape.size()) shape += ", ";
  }
  shape += ")";
  if (count != array.values.size())
    throw std::invalid_argument("npy: array '" + array.name + "' has " + std::to_string(array.values.size()) +
                                " values for shape " + shape);
  std::string header =
      std::string("{'descr': '<f") + d->code + "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Padded with spaces and a newline so that the data starts on a 64-byte boundary.
  const std::size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out(kMagic, kMagicSize);
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  for (const double v : array.values) {
    std::uint64_t bits = 0;
    if (d->bytes == 2) {
      const auto h = double_to_half(v);
      if (!h) throw std::invalid_argument("npy: " + std::to_string(v) + " is not a float16 value");
      bits = *h;
    } else if (d->bytes == 4) {
      const auto f = static_cast<float>(v);
      if (static_cast<double>(f) != v && !std::isnan(v))
        throw std::invalid_argument("npy: " + std::to_string(v) + " is not a float32 value");
      bits = std::bit_cast<std::uint32_t>(f);
    } else {
      bits = std::bit_cast<std::uint64_t>(v);
    }
    for (int i = 0; i < d->bytes; ++i) out += static_cast<char>((bits >> (8 * i)) & 0xff);
  }
  return out;
}

}  // namespace rpsim::io
