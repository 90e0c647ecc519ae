// Atomic result files (results_io.hpp).
#include "rpsim/io/results_io.hpp"

#include <cerrno>
#include <cstring>

namespace rpsim::io {

void write_atomic(const std::filesystem::path& path, const std::string& content) {
  const auto tmp = path.string() + ".tmp." + std::to_string(::getpid());
  // stdio rather than a stream: errno says why a write failed (ENOSPC, EFBIG).
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) throw IoError("cannot write '" + path.string() + "': " + std::strerror(errno));
  int err = std::fwrite(content.data(), 1, content.size(), f) == content.size() ? 0 : errno;
  if (std::fflush(f) != 0 && !err) err = errno;
  if (std::fclose(f) != 0 && !err) err = errno;
  std::error_code ec;
  if (err) {
    std::filesystem::remove(tmp, ec);
    throw IoError("cannot write '" + path.string() + "' (" + std::to_string(content.size()) +
                  " bytes): " + std::strerror(err));
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    throw IoError("cannot rename '" + tmp + "' to '" + path.string() + "'");
  }
}

}  // namespace rpsim::io
