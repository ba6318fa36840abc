// Leveled logging to stderr (and optionally a run's log file), timestamped, coloured on a
// terminal. Not a metrics sink: per-step numbers go through MetricsWriter (metrics.h).
#pragma once

#include <filesystem>
#include <sstream>
#include <string>

namespace kernelrl::log {

enum class Level { debug = 0, info = 1, warn = 2, error = 3 };

void set_level(Level level);
Level level();
// Parses debug|info|warn|error; throws UserError naming the allowed values.
Level parse_level(const std::string& name);
// Also append every line to `path` (the run directory's logs/kernelrl.log).
void add_file(const std::filesystem::path& path);
void close_file();
void write(Level level, const std::string& message);

class Line {
 public:
  explicit Line(Level level) : level_(level) {}
  ~Line() { write(level_, stream_.str()); }
  template <class T>
  Line& operator<<(const T& x) {
    stream_ << x;
    return *this;
  }

 private:
  Level level_;
  std::ostringstream stream_;
};

}  // namespace kernelrl::log

// KRL_LOG(info) << "step " << step;   (the message is not built when the level is off)
#define KRL_LOG(lvl)                                                     \
  if (::kernelrl::log::Level::lvl < ::kernelrl::log::level()) {          \
  } else                                                                 \
    ::kernelrl::log::Line(::kernelrl::log::Level::lvl)
