#include "common/progress.h"

#include <unistd.h>

#include <cstdio>

#include "common/log.h"

namespace kernelrl {
namespace {

std::string hms(double s) {
  if (s < 0 || s > 1e7) return "--:--";
  int t = static_cast<int>(s + 0.5);
  char buf[32];
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%d:%02d:%02d", t / 3600, t / 60 % 60, t % 60);
  else
    std::snprintf(buf, sizeof buf, "%02d:%02d", t / 60, t % 60);
  return buf;
}

}  // namespace

Progress::Progress(std::string label, int64_t total, double interval_s)
    : label_(std::move(label)),
      total_(total),
      interval_s_(interval_s),
      // A bar only where info lines would show (not on the quiet ranks of a multi-process job).
      tty_(::isatty(STDERR_FILENO) && log::level() <= log::Level::info),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

Progress::~Progress() {
  if (!finished_) finish();
}

void Progress::update(int64_t done, const std::string& status) {
  done_ = done;
  status_ = status;
  auto now = std::chrono::steady_clock::now();
  double since = std::chrono::duration<double>(now - last_draw_).count();
  if (since >= (tty_ ? 0.1 : interval_s_)) {
    last_draw_ = now;
    draw(false);
  }
}

void Progress::finish(const std::string& status) {
  if (finished_) return;
  finished_ = true;
  if (!status.empty()) status_ = status;
  draw(true);
}

void Progress::draw(bool final) {
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  double rate = elapsed > 0 ? done_ / elapsed : 0;
  double eta = rate > 0 && total_ > 0 ? (total_ - done_) / rate : -1;
  char counts[96];
  std::snprintf(counts, sizeof counts, "%lld/%lld %.2f it/s %s<%s", static_cast<long long>(done_),
                static_cast<long long>(total_), rate, hms(elapsed).c_str(), hms(eta).c_str());
  if (tty_) {
    const int width = 30;
    int filled = total_ > 0 ? static_cast<int>(width * done_ / total_) : 0;
    if (filled > width) filled = width;
    std::string bar(filled, '#');
    bar += std::string(width - filled, '.');
    std::fprintf(stderr, "\r\033[K%s [%s] %s %s%s", label_.c_str(), bar.c_str(), counts,
                 status_.c_str(), final ? "\n" : "");
    std::fflush(stderr);
  } else {
    KRL_LOG(info) << label_ << ": " << counts << (status_.empty() ? "" : " ") << status_;
  }
}

}  // namespace kernelrl
