// Data-parallel gradient all-reduce in buckets. The parameters, in reverse registration order
// (about the order backward produces their gradients), are grouped into buckets of at most
// run.dist.bucket_mb; during the last backward of an optimizer step, a bucket is flattened and
// its all-reduce started as soon as every gradient in it is accumulated (a post-accumulate-grad
// hook per parameter), so communication overlaps the rest of backward. Buckets start strictly in
// bucket order, so every rank issues the same collectives in the same order whatever order its
// hooks fire in. finish() waits and writes Σ over ranks back into each .grad.
//
// The sum (not the mean) is what the stages want: each rank scales its loss by the global
// denominator (targets of the whole batch over every rank), so Σ_ranks ∇ = ∇ of the
// single-process loss of the same global batch.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "trainer/distributed.h"

namespace kernelrl {

class GradSync {
 public:
  GradSync(dist::Group& group, const std::vector<torch::Tensor>& params, int64_t bucket_bytes);
  ~GradSync();
  GradSync(const GradSync&) = delete;
  GradSync& operator=(const GradSync&) = delete;

  // The next backward is the step's last: buckets start as their gradients complete.
  void arm();
  // Starts the buckets not started yet, waits for all, writes the sums into the gradients
  // (a parameter without a gradient gets a zero one when a peer's had one). Disarms.
  void finish();

  int64_t buckets() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace kernelrl
