// Host backend: the candidate runs on the CPU; stream is null, marks are steady-clock stamps.
#include <cstring>
#include <functional>
#include <vector>

#include "reward/worker/backend.h"

namespace kernelrl::worker {

namespace {

class HostBackend final : public Backend {
 public:
  bool gpu() const override { return false; }
  void* stream() override { return nullptr; }
  void sync_device() override {}
  void wait_stream(double) override {}
  void check_launch() override {}
  void copy_on_stream(void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  void ensure_marks(size_t n) override {
    if (marks_.size() < n) marks_.resize(n);
  }
  void mark(size_t i) override { marks_[i] = std::chrono::steady_clock::now(); }
  double elapsed_us(size_t a, size_t b) override {
    return std::chrono::duration<double, std::micro>(marks_[b] - marks_[a]).count();
  }
  size_t capture(const std::function<void()>& issue) override {
    graphs_.push_back(issue);
    return graphs_.size() - 1;
  }
  void replay(size_t graph) override { graphs_.at(graph)(); }
  void clear_graphs() override { graphs_.clear(); }
  void flush_l2() override {
    // The host's last-level cache: write a buffer larger than a typical one.
    if (flush_.empty()) flush_.resize(16u << 20);
    std::memset(flush_.data(), ++flush_value_, flush_.size());
  }
  Info info() override {
    Info i;
    i.backend = "host";
    i.device = "host";
    i.driver = "host";
    i.arch = "host";
    i.l2_bytes = 32u << 20;  // rotation target for cold-cache runs on the CPU
    return i;
  }

 private:
  std::vector<std::chrono::steady_clock::time_point> marks_;
  std::vector<std::function<void()>> graphs_;
  std::vector<unsigned char> flush_;
  unsigned char flush_value_ = 0;
};

}  // namespace

std::unique_ptr<Backend> make_host_backend() { return std::make_unique<HostBackend>(); }

#ifndef KERNELRL_HAVE_CUDA
std::unique_ptr<Backend> make_gpu_backend(int) {
  throw std::runtime_error("this build has no CUDA: only the host backend is available");
}
int gpu_count() { return 0; }
#endif

}  // namespace kernelrl::worker
