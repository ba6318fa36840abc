#include "common/log.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <mutex>

#include "common/error.h"

namespace kernelrl::log {
namespace {

Level g_level = Level::info;
std::mutex g_mutex;
std::ofstream g_file;

const char* tag(Level l) {
  switch (l) {
    case Level::debug: return "D";
    case Level::info: return "I";
    case Level::warn: return "W";
    case Level::error: return "E";
  }
  return "?";
}

const char* colour(Level l) {
  switch (l) {
    case Level::debug: return "\033[2m";
    case Level::warn: return "\033[33m";
    case Level::error: return "\033[31m";
    default: return "";
  }
}

std::string timestamp() {
  auto now = std::chrono::system_clock::now();
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()) % 1000;
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  char out[48];
  std::snprintf(out, sizeof out, "%s.%03d", buf, static_cast<int>(ms.count()));
  return out;
}

}  // namespace

void set_level(Level level) { g_level = level; }
Level level() { return g_level; }

Level parse_level(const std::string& name) {
  if (name == "debug") return Level::debug;
  if (name == "info") return Level::info;
  if (name == "warn") return Level::warn;
  if (name == "error") return Level::error;
  throw UserError("--log-level: expected one of debug, info, warn, error, got \"" + name + "\"");
}

void add_file(const std::filesystem::path& path) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_file.is_open()) g_file.close();
  g_file.open(path, std::ios::app);
}

void close_file() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_file.is_open()) g_file.close();
}

void write(Level level, const std::string& message) {
  static const bool tty = ::isatty(STDERR_FILENO);
  const std::string ts = timestamp();
  std::lock_guard<std::mutex> lock(g_mutex);
  if (tty && *colour(level))
    std::fprintf(stderr, "%s%s %s %s\033[0m\n", colour(level), ts.c_str(), tag(level),
                 message.c_str());
  else
    std::fprintf(stderr, "%s %s %s\n", ts.c_str(), tag(level), message.c_str());
  if (g_file.is_open()) {
    g_file << ts << ' ' << tag(level) << ' ' << message << '\n';
    g_file.flush();
  }
}

}  // namespace kernelrl::log
