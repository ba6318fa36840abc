// Data-parallel ranks for the trainer, on LibTorch's c10d: the torchrun launch convention
// (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, GROUP_WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT), a TCPStore rendezvous, ProcessGroupNCCL on GPUs and ProcessGroupGloo on CPUs, the
// few collectives the stages use, and a heartbeat watchdog that ends every rank within
// run.dist.heartbeat_s when one dies. It does not launch processes (launcher.h does) nor decide
// what is sharded (the stages do).
//
// Global rank 0 is the only writer of the run directory (checkpoints, metrics, the exemplar
// pool, config); the other ranks read it. One process per GPU: a rank's GPU is cuda:LOCAL_RANK,
// the GPU's index on the rank's own node (host); a job spans GROUP_WORLD_SIZE nodes.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "trainer/job_config.h"

namespace kernelrl::dist {

// The launch environment (torchrun's variables). world_size 1 (or no RANK at all) means one
// process without a process group.
struct LaunchEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  // The node (host) of this rank among the job's: GROUP_RANK / GROUP_WORLD_SIZE. Under torchrun's
  // c10d rendezvous the rendezvous assigns it (--node-rank is not used there: an agent started
  // with --node-rank 0 may get GROUP_RANK=1); without GROUP_RANK, rank / LOCAL_WORLD_SIZE.
  int node_rank = 0;
  int nnodes = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  bool agent_store = false;  // TORCHELASTIC_USE_AGENT_STORE=True: torchrun's agent hosts the store
  int restart_count = 0;     // TORCHELASTIC_RESTART_COUNT
  std::string run_id;        // TORCHELASTIC_RUN_ID (torchrun's --rdzv-id), "" without torchrun
  // TORCHELASTIC_ERROR_FILE: where torchrun's agent reads a failed rank's message (its summary
  // then shows the one-line error instead of "<N/A>"); "" without torchrun.
  std::string error_file;
};

// Reads the variables; throws UserError naming the variable when one is malformed or
// inconsistent (RANK >= WORLD_SIZE, a missing MASTER_PORT, ...).
LaunchEnv read_launch_env();

// A collective started without waiting for it (a gradient bucket in flight during backward).
class Pending {
 public:
  virtual ~Pending() = default;
  virtual void wait() = 0;
};

// The process group of this job. Every rank must issue the same collectives in the same order.
class Group {
 public:
  virtual ~Group() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual int local_rank() const = 0;
  virtual const std::string& backend() const = 0;  // "gloo" | "nccl"

  // Σ over ranks, in place. Tensors live on the group's device kind (CPU for gloo; CUDA for
  // NCCL; gloo also takes CUDA tensors by staging them through the host).
  virtual void all_reduce_sum(torch::Tensor& t) = 0;
  virtual std::unique_ptr<Pending> all_reduce_sum_async(torch::Tensor& t) = 0;
  // Concatenation of every rank's `t` (same shape on every rank) along a new dim 0: [W, ...].
  virtual torch::Tensor all_gather(const torch::Tensor& t) = 0;
  virtual void broadcast(torch::Tensor& t, int root) = 0;
  virtual void barrier() = 0;

  // Every rank's bytes, in rank order (sizes may differ).
  std::vector<std::string> all_gather_bytes(const std::string& bytes);
  // `bytes` of rank `root` on every rank.
  std::string broadcast_bytes(const std::string& bytes, int root);
  // Throws PeerFailure naming the ranks whose `value` differs from rank 0's ("what" says what
  // was compared: "parameters at step 6", ...).
  void check_same(const std::string& what, uint64_t value);
};

// The group of this process, or nullptr in a single-process run.
Group* group();
// Shortcuts that also hold without a group.
int rank();
int world_size();
int node_rank();  // this rank's node (GROUP_RANK), 0 without a group
int nnodes();     // nodes of the job (GROUP_WORLD_SIZE), 1 without a group
inline bool is_main() {
  return rank() == 0;
}

// A 64-bit hash of the bytes of every tensor (in order), to compare parameters across ranks.
uint64_t tensors_hash(const std::vector<torch::Tensor>& tensors);

// Owns the process group for the length of a job: binds the rank's GPU (cuda:LOCAL_RANK) when
// CUDA is used, connects to the store, creates the backend, starts the heartbeat watchdog.
// On destruction (the job finished on this rank) it tells the peers so that they do not take a
// finished rank for a dead one. With world_size 1 it does nothing.
class Session {
 public:
  Session(const LaunchEnv& env, const DistConfig& config, const std::string& run_device);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Tells the peers this rank failed with `message` (one line) before the process exits, so
  // theirs exit at once naming it instead of waiting for the heartbeat timeout.
  void report_failure(const std::string& message);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace kernelrl::dist
