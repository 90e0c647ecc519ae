// The .npz layer of npy.hpp: a zip archive (PKWARE APPNOTE 6.3, the subset
// numpy writes: one disk, members stored or deflated, zip64 records) read from
// its central directory, every member checked against its size and CRC-32.
#include <zlib.h>

#include <cstring>
#include <limits>
#include <set>

#include "rpsim/io/npy.hpp"

namespace rpsim::io {

namespace {

constexpr std::uint32_t kLocalSig = 0x04034b50, kCentralSig = 0x02014b50, kEndSig = 0x06054b50;
constexpr std::uint32_t kZip64EndSig = 0x06064b50, kZip64LocatorSig = 0x07064b50;
constexpr std::uint64_t kMaxMember = std::uint64_t{1} << 32;  // 4 GiB of array data per member
constexpr std::uint64_t kMaxMembers = 1000;

[[noreturn]] void fail(const std::string& what, const std::string& why) {
  throw ArrayFileError(what + ": " + why);
}

// Bounds-checked little-endian reads from the archive image.
class Bytes {
 public:
  Bytes(std::span<const std::uint8_t> b, const std::string& what) : b_(b), what_(what) {}
  std::uint64_t le(std::uint64_t at, int n) const {
    need(at, static_cast<std::uint64_t>(n));
    std::uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = (v << 8) | b_[at + static_cast<std::uint64_t>(i)];
    return v;
  }
  void need(std::uint64_t at, std::uint64_t n) const {
    if (at > b_.size() || n > b_.size() - at)
      fail(what_, "truncated zip archive (a record runs past the end)");
  }
  std::span<const std::uint8_t> span(std::uint64_t at, std::uint64_t n) const {
    need(at, n);
    return b_.subspan(at, n);
  }
  std::size_t size() const { return b_.size(); }

 private:
  std::span<const std::uint8_t> b_;
  const std::string& what_;
};

struct Directory {
  std::uint64_t entries = 0, offset = 0, size = 0;
};

Directory find_directory(const Bytes& z, const std::string& what) {
  if (z.size() < 22) fail(what, "not a zip archive (too short for its end record)");
  // The end record is the last 22 bytes plus a comment of at most 65535.
  std::uint64_t end = z.size() - 22;
  const std::uint64_t lowest = z.size() > 22 + 65535 ? z.size() - 22 - 65535 : 0;
  while (z.le(end, 4) != kEndSig || end + 22 + z.le(end + 20, 2) != z.size()) {
    if (end == lowest) fail(what, "not a zip archive (no end-of-central-directory record)");
    --end;
  }
  if (z.le(end + 4, 2) != 0 || z.le(end + 6, 2) != 0) fail(what, "multi-disk zip archives are not supported");
  Directory d{z.le(end + 10, 2), z.le(end + 16, 4), z.le(end + 12, 4)};
  if (d.entries == 0xffff || d.offset == 0xffffffff || d.size == 0xffffffff) {
    if (end < 20 || z.le(end - 20, 4) != kZip64LocatorSig) fail(what, "zip64 end record without its locator");
    const std::uint64_t at = z.le(end - 20 + 8, 8);
    if (z.le(at, 4) != kZip64EndSig) fail(what, "zip64 locator points to no zip64 end record");
    if (z.le(at + 16, 4) != 0 || z.le(at + 20, 4) != 0)
      fail(what, "multi-disk zip archives are not supported");
    d = Directory{z.le(at + 32, 8), z.le(at + 48, 8), z.le(at + 40, 8)};
  }
  if (d.entries > kMaxMembers) fail(what, "more than 1000 members");
  z.need(d.offset, d.size);
  return d;
}

struct Member {
  std::string name;
  std::uint32_t flags = 0, method = 0, crc = 0;
  std::uint64_t csize = 0, usize = 0, local = 0;
};

// One central-directory record at `at`; returns the offset of the next.
std::uint64_t read_member(const Bytes& z, std::uint64_t at, Member& m, const std::string& what) {
  if (z.le(at, 4) != kCentralSig) fail(what, "corrupt central directory (bad record signature)");
  m.flags = static_cast<std::uint32_t>(z.le(at + 8, 2));
  m.method = static_cast<std::uint32_t>(z.le(at + 10, 2));
  m.crc = static_cast<std::uint32_t>(z.le(at + 16, 4));
  m.csize = z.le(at + 20, 4);
  m.usize = z.le(at + 24, 4);
  const std::uint64_t name_len = z.le(at + 28, 2), extra_len = z.le(at + 30, 2),
                      comment_len = z.le(at + 32, 2);
  m.local = z.le(at + 42, 4);
  const auto name = z.span(at + 46, name_len);
  m.name.assign(name.begin(), name.end());
  // The zip64 extra field (id 1) holds, in this order, the sizes and offset
  // whose 32-bit fields are all ones.
  std::uint64_t x = at + 46 + name_len;
  const std::uint64_t x_end = x + extra_len;
  while (x + 4 <= x_end) {
    const std::uint64_t id = z.le(x, 2), len = z.le(x + 2, 2);
    if (x + 4 + len > x_end) fail(what, "member '" + m.name + "': corrupt extra field");
    if (id == 1) {
      std::uint64_t p = x + 4;
      for (std::uint64_t* f : {&m.usize, &m.csize, &m.local}) {
        if (*f != 0xffffffff) continue;
        if (p + 8 > x + 4 + len) fail(what, "member '" + m.name + "': short zip64 extra field");
        *f = z.le(p, 8);
        p += 8;
      }
    }
    x += 4 + len;
  }
  return x_end + comment_len;
}

std::vector<std::uint8_t> inflate_member(std::span<const std::uint8_t> in, std::uint64_t usize,
                                         const std::string& where) {
  std::vector<std::uint8_t> out(static_cast<std::size_t>(usize));
  z_stream s{};
  if (inflateInit2(&s, -MAX_WBITS) != Z_OK) fail(where, "zlib could not start");
  s.next_in = const_cast<Bytef*>(in.data());
  s.avail_in = static_cast<uInt>(in.size());
  s.next_out = out.data();
  s.avail_out = static_cast<uInt>(out.size());
  const int r = inflate(&s, Z_FINISH);
  const bool ok = r == Z_STREAM_END && s.total_out == usize && s.avail_in == 0;
  inflateEnd(&s);
  if (!ok) fail(where, "deflated data is corrupt or does not match its stated size");
  return out;
}

std::vector<std::uint8_t> member_data(const Bytes& z, const Member& m, const std::string& where) {
  if (m.flags & 1) fail(where, "encrypted zip members are not supported");
  if (m.usize > kMaxMember || m.csize > kMaxMember) fail(where, "member larger than 4 GiB");
  if (z.le(m.local, 4) != kLocalSig) fail(where, "the central directory points to no local header");
  const std::uint64_t name_len = z.le(m.local + 26, 2), extra_len = z.le(m.local + 28, 2);
  const auto local_name = z.span(m.local + 30, name_len);
  if (std::string(local_name.begin(), local_name.end()) != m.name)
    fail(where, "local header names another member");
  const auto packed = z.span(m.local + 30 + name_len + extra_len, m.csize);
  std::vector<std::uint8_t> data;
  if (m.method == 0) {
    if (m.csize != m.usize) fail(where, "stored member whose sizes differ");
    data.assign(packed.begin(), packed.end());
  } else if (m.method == 8) {
    if (m.csize > std::numeric_limits<uInt>::max() || m.usize > std::numeric_limits<uInt>::max())
      fail(where, "deflated member too large");
    // Deflate expands by at most 1032:1 (zlib's technical details); a larger
    // stated size is a corrupt or hostile header, refused before allocating.
    if (m.usize > m.csize * 1032 + 1024) fail(where, "stated size is more than deflated data can hold");
    data = inflate_member(packed, m.usize, where);
  } else {
    fail(where, "compression method " + std::to_string(m.method) + " (only stored and deflated are read)");
  }
  const auto crc = static_cast<std::uint32_t>(crc32(0L, data.data(), static_cast<uInt>(data.size())));
  if (crc != m.crc) fail(where, "CRC-32 does not match (corrupt archive)");
  return data;
}

void put(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}

}  // namespace

std::vector<NumericArray> parse_npz(std::span<const std::uint8_t> bytes, const std::string& what) {
  const Bytes z(bytes, what);
  const Directory d = find_directory(z, what);
  std::vector<NumericArray> arrays;
  std::set<std::string> names;
  std::uint64_t at = d.offset;
  for (std::uint64_t e = 0; e < d.entries; ++e) {
    Member m;
    at = read_member(z, at, m, what);
    if (at > d.offset + d.size) fail(what, "central directory overruns its stated size");
    const std::string where = what + ": " + m.name;
    if (m.name.size() < 5 || m.name.compare(m.name.size() - 4, 4, ".npy") != 0)
      fail(where, "member is not an .npy array");
    const auto data = member_data(z, m, where);
    NumericArray a = parse_npy(data, where);
    a.name = m.name.substr(0, m.name.size() - 4);
    if (!names.insert(a.name).second) fail(where, "array '" + a.name + "' appears twice");
    arrays.push_back(std::move(a));
  }
  return arrays;
}

std::string npz_image(const std::vector<NumericArray>& arrays) {
  std::string out, central;
  for (const auto& a : arrays) {
    const std::string data = npy_image(a);
    const std::string name = a.name + ".npy";
    const auto crc = static_cast<std::uint32_t>(
        crc32(0L, reinterpret_cast<const Bytef*>(data.data()), static_cast<uInt>(data.size())));
    const std::uint64_t offset = out.size();
    if (offset + data.size() >= 0xffffffff) throw std::invalid_argument("npz: archive over 4 GiB");
    // Local header: version 2.0, no flags, stored, time and date 0.
    put(out, kLocalSig, 4);
    put(out, 20, 2);
    put(out, 0, 2);
    put(out, 0, 2);
    put(out, 0, 4);
    put(out, crc, 4);
    put(out, data.size(), 4);
    put(out, data.size(), 4);
    put(out, name.size(), 2);
    put(out, 0, 2);
    out += name;
    out += data;
    put(central, kCentralSig, 4);
    put(central, 20, 2);
    put(central, 20, 2);
    put(central, 0, 2);
    put(central, 0, 2);
    put(central, 0, 4);
    put(central, crc, 4);
    put(central, data.size(), 4);
    put(central, data.size(), 4);
    put(central, name.size(), 2);
    put(central, 0, 6);  // extra, comment, disk
    put(central, 0, 6);  // internal and external attributes
    put(central, offset, 4);
    central += name;
  }
  const std::uint64_t cd_offset = out.size();
  out += central;
  put(out, kEndSig, 4);
  put(out, 0, 4);
  put(out, arrays.size(), 2);
  put(out, arrays.size(), 2);
  put(out, central.size(), 4);
  put(out, cd_offset, 4);
  put(out, 0, 2);
  return out;
}

}  // namespace rpsim::io
