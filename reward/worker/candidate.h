// The candidate as the harness calls it (reward integrity, docs/sandbox.md). Its host code runs
// only in the runner (runner_client.h); here a call is what that code enqueued:
//   - GPU: the runner captures the call into a graph and describes it; this side checks the
//     description against the call's buffers (memset/memcpy writes only into its outputs and
//     workspace; a parameter word or copy source inside another call's buffer is recorded as a
//     peer word, which the harness then tests by running the call alone), rebuilds it from the candidate's
//     own device code (graph_cuda.h), and launches it on the backend's stream, or adds it to
//     the stream's capture (the timing engine's graphs). Calls with the same arguments reuse
//     the first capture, so once every call has been prepared the runner can be stopped for
//     good: nothing of the candidate runs while the harness times.
//   - host: the runner runs the calls on the arena's buffers, one round trip per batch.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "reward/kernel_abi.h"
#include "reward/worker/backend.h"
#include "reward/worker/runner_client.h"

namespace kernelrl::worker {

using Range = std::pair<uint64_t, uint64_t>;  // [begin, end) device or arena addresses

// What one call may touch.
struct CallBuffers {
  std::vector<Range> inputs, outputs;
  Range workspace{0, 0};
};

// A parameter word or copy source of a call's captured work that lies inside another call's
// buffer. Not a verdict by itself: a parameter struct's padding or a descriptor's packed field
// can hold such a value by chance (the 20 timing sets at 512x16384x16384 span ~10 GiB of
// addresses), so the harness runs a call that has one alone and checks that it leaves every
// other call's outputs untouched and computes its own (harness.cpp, verify_peer_words).
struct PeerWord {
  std::string kernel;   // the node's kernel name, or "memcpy" (a copy's source)
  size_t node = 0;
  int64_t offset = -1;  // byte offset in the kernel's parameters (-1: a copy's source)
  uint64_t word = 0;
  size_t peer = 0;      // index into set_peers' list
};

// An address as verdicts name it ("0x7f1e00000000").
std::string hex_address(uint64_t a);

class Candidate {
 public:
  // `so`: the compiled candidate. Starts the runner and loads it there (its static initializers
  // run in the runner); on a GPU also loads its device code here, without its host code.
  Candidate(Backend& be, Runner& runner, const std::string& so, double timeout_s);
  ~Candidate();
  Candidate(const Candidate&) = delete;
  Candidate& operator=(const Candidate&) = delete;

  // Buffers of other calls that a call must not reach (the timing sets of one replay).
  void set_peers(std::vector<Range> peers) { peers_ = std::move(peers); }
  // GPU: captures, checks and rebuilds the call now, if not done yet (host: nothing to do).
  void prepare(const kernelrl_args& a, const CallBuffers& b);
  // The peer words found when the call was prepared (none for an unprepared one).
  std::vector<PeerWord> peer_words(const kernelrl_args& a) const;
  // One call on the backend's stream (GPU: launched, or added to the stream's capture).
  void call(const kernelrl_args& a, const CallBuffers& b);
  // Host: these calls in one runner round trip (GPU: one call each).
  void call_many(const std::vector<kernelrl_args>& as, const std::vector<CallBuffers>& bs);
  // Stops the runner for good (GPU); a later call of unprepared arguments is an internal error.
  void release_runner();
  size_t captures() const { return captures_; }

 private:
  struct Prepared;
  Prepared& prepared(const kernelrl_args& a, const CallBuffers& b);
  std::vector<PeerWord> check_image(const GraphImage& g, const CallBuffers& b) const;
  Backend& be_;
  Runner& runner_;
  double timeout_s_;
  bool released_ = false;
  size_t captures_ = 0;
  std::vector<Range> peers_;
  struct Module;
  std::unique_ptr<Module> module_;
  std::map<std::string, std::unique_ptr<Prepared>> prepared_;  // by the argument block's bytes
  std::map<std::string, std::vector<PeerWord>> peer_words_;    // likewise, where there are any
};

}  // namespace kernelrl::worker
