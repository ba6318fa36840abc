#include "trainer/grad_sync.h"

#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/torch.h>

#include <mutex>
#include <unordered_set>

namespace kernelrl {

struct GradSync::Impl {
  struct Bucket {
    std::vector<size_t> params;  // indices into Impl::params
    int64_t ready = 0;           // gradients accumulated in the armed backward
    torch::Tensor flat;
    std::unique_ptr<dist::Pending> pending;
  };
  dist::Group& group;
  std::vector<torch::Tensor> params;
  std::vector<size_t> bucket_of;
  std::vector<Bucket> buckets;
  size_t next = 0;  // the next bucket to start
  bool armed = false;
  std::mutex mu;  // hooks run on autograd's threads

  explicit Impl(dist::Group& g) : group(g) {}

  void start(Bucket& b) {
    std::vector<torch::Tensor> flat;
    for (size_t i : b.params) {
      const auto& p = params[i];
      flat.push_back(p.grad().defined() ? p.grad().reshape({-1})
                                        : torch::zeros({p.numel()}, p.options()));
    }
    b.flat = torch::cat(flat);
    b.pending = group.all_reduce_sum_async(b.flat);
  }

  // Called with the lock held after a gradient of bucket `bi` completed.
  void start_ready() {
    while (next < buckets.size() &&
           buckets[next].ready == static_cast<int64_t>(buckets[next].params.size()))
      start(buckets[next++]);
  }

  void on_grad(size_t index) {
    std::lock_guard<std::mutex> lock(mu);
    if (!armed) return;
    ++buckets[bucket_of[index]].ready;
    start_ready();
  }
};

namespace {

struct ReadyHook final : torch::autograd::PostAccumulateGradHook {
  GradSync::Impl* impl;
  size_t index;
  ReadyHook(GradSync::Impl* i, size_t k) : impl(i), index(k) {}
  void operator()(const torch::autograd::Variable&) override { impl->on_grad(index); }
};

}  // namespace

GradSync::GradSync(dist::Group& group, const std::vector<torch::Tensor>& params,
                   int64_t bucket_bytes)
    : impl_(std::make_unique<Impl>(group)) {
  auto& m = *impl_;
  std::unordered_set<const void*> seen;  // a tied weight is one parameter
  for (auto it = params.rbegin(); it != params.rend(); ++it)
    if (it->requires_grad() && seen.insert(it->unsafeGetTensorImpl()).second)
      m.params.push_back(*it);
  int64_t bytes = bucket_bytes;  // forces a new bucket for the first parameter
  for (size_t i = 0; i < m.params.size(); ++i) {
    const int64_t b = m.params[i].numel() * m.params[i].element_size();
    // One dtype per bucket (a flat buffer has one).
    const bool same_dtype =
        !m.buckets.empty() &&
        m.params[m.buckets.back().params.front()].scalar_type() == m.params[i].scalar_type();
    if (m.buckets.empty() || bytes + b > bucket_bytes || !same_dtype) {
      m.buckets.emplace_back();
      bytes = 0;
    }
    m.buckets.back().params.push_back(i);
    m.bucket_of.push_back(m.buckets.size() - 1);
    bytes += b;
  }
  for (size_t i = 0; i < m.params.size(); ++i)
    torch::autograd::impl::set_post_acc_grad_hooks(m.params[i], std::make_unique<ReadyHook>(&m, i));
}

GradSync::~GradSync() {
  for (auto& p : impl_->params) torch::autograd::impl::set_post_acc_grad_hooks(p, nullptr);
}

void GradSync::arm() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->armed = true;
  impl_->next = 0;
  for (auto& b : impl_->buckets) b.ready = 0;
}

void GradSync::finish() {
  auto& m = *impl_;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    m.armed = false;
    while (m.next < m.buckets.size()) m.start(m.buckets[m.next++]);
  }
  torch::NoGradGuard ng;
  for (auto& b : m.buckets) {
    b.pending->wait();
    b.pending.reset();
    int64_t offset = 0;
    for (size_t i : b.params) {
      auto& p = m.params[i];
      auto sum = b.flat.slice(0, offset, offset + p.numel()).view(p.sizes());
      offset += p.numel();
      if (p.grad().defined())
        p.mutable_grad().copy_(sum);
      else
        p.mutable_grad() = sum.clone();
    }
    b.flat = torch::Tensor();
  }
  // Ready for a step whose backward is never armed (a rank without rows starts every bucket here).
  std::lock_guard<std::mutex> lock(m.mu);
  m.next = 0;
  for (auto& b : m.buckets) b.ready = 0;
}

int64_t GradSync::buckets() const {
  return static_cast<int64_t>(impl_->buckets.size());
}

}  // namespace kernelrl
