#include "common/fs.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/error.h"

namespace kernelrl {
namespace {

std::atomic<unsigned> g_temp_counter{0};

[[noreturn]] void throw_errno(const std::string& what, const fs::path& path) {
  throw std::runtime_error(what + " '" + path.string() + "': " + std::strerror(errno));
}

void fsync_dir(const fs::path& dir) {
  int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return;  // some filesystems refuse to open directories; rename is still atomic
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

void atomic_write(const fs::path& path, std::string_view content) {
  const fs::path dir = path.parent_path();
  if (!dir.empty()) fs::create_directories(dir);
  const fs::path tmp = path.string() + ".tmp." + std::to_string(::getpid()) + "." +
                       std::to_string(g_temp_counter.fetch_add(1));
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw_errno("cannot create", tmp);
  const char* p = content.data();
  size_t left = content.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      int saved = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      errno = saved;
      throw_errno("cannot write", tmp);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(tmp.c_str());
    throw_errno("cannot flush", tmp);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    throw_errno("cannot rename into place", path);
  }
  fsync_dir(dir);
}

std::string read_file(const fs::path& path, const std::string& what) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw UserError(what + " '" + path.string() + "' not found");
  if (fs::is_directory(path, ec))
    throw UserError(what + " '" + path.string() + "' is a directory, expected a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError("cannot read " + what + " '" + path.string() + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool is_atomic_temp(const fs::path& path) {
  return path.filename().string().find(".tmp.") != std::string::npos;
}

int remove_stale_temps(const fs::path& dir) {
  int removed = 0;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return 0;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.is_regular_file() && is_atomic_temp(e.path())) {
      fs::remove(e.path(), ec);
      if (!ec) ++removed;
    }
  }
  return removed;
}

}  // namespace kernelrl
