// The results store: one SQLite file (WAL, so concurrent readers are fine and a crash loses at
// most the last transaction) with a row per evaluated candidate (keyed for reuse by source hash,
// task, backend, GPU and the reward settings' fingerprint), the baseline cache keyed by (GPU,
// driver, shape, layout, timing settings) and the best kernel per task. Also the query the rollout's
// contrastive exemplar store reads: a task's passing candidates with their scores.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "reward/eval_result.h"

struct sqlite3;

namespace kernelrl {

struct BaselineKey {
  std::string gpu, driver;   // device name and driver version ("host" on the host backend)
  int64_t m = 0, n = 0, k = 0;
  std::string layout;        // nn | tn (the task's layout; raw baselines name their own)
  std::string mode;          // "offline/cold", "server/hot", ...
};

struct BaselineRow {
  TimingStats stats;
  int64_t algo = -1;         // cuBLASLt autotuned: index into the heuristic list; else -1
  double max_abs_dev = 0;    // deviation on normal inputs, when measured
};

struct StoredCandidate {
  std::string hash, task, shape, source, status, check, reason;
  double reward = 0, speedup = 0, t_cand_us = 0, t_ref_us = 0, max_abs_dev = 0;
  std::string backend, gpu, created_at;
};

// One stored evaluation with the settings it ran under (for catalogs and reports).
struct StoredResult {
  EvalResult result;
  std::string source, backend, gpu, mode, settings, created_at;  // mode: "device/cold/g20", ...
};

class ResultStore {
 public:
  explicit ResultStore(const std::filesystem::path& path);  // creates tables if needed
  ~ResultStore();
  ResultStore(const ResultStore&) = delete;
  ResultStore& operator=(const ResultStore&) = delete;

  const std::filesystem::path& path() const { return path_; }

  // One row per evaluation; updates the task's best kernel when this one passed and is faster.
  // `mode`: the timing key (e.g. "device/cold/g20"); `settings`: the evaluator's settings
  // fingerprint, the cache key's last part.
  void add_result(const EvalResult& r, const std::string& source, const std::string& backend,
                  const std::string& gpu, const std::string& mode, const std::string& settings);
  // Latest stored result of (hash, task, backend, gpu, settings), if any.
  std::optional<EvalResult> find_result(const std::string& hash, const std::string& task,
                                        const std::string& backend, const std::string& gpu,
                                        const std::string& settings);

  std::map<std::string, BaselineRow> baselines(const BaselineKey& key);
  void put_baseline(const BaselineKey& key, const std::string& name, const BaselineRow& row);
  // Every stored baseline row, whatever its key.
  void for_each_baseline(
      const std::function<void(const BaselineKey&, const std::string& name, const BaselineRow&)>& fn);

  // Passing candidates of `task`, highest reward first (for contrastive exemplars).
  std::vector<StoredCandidate> successful(const std::string& task, int limit = 100);
  // The best passing kernel of `task` (highest speedup), if any.
  std::optional<StoredCandidate> best(const std::string& task);
  int64_t count_results();
  // Every stored evaluation, oldest first. StoredResult::source is empty for rows that did not
  // pass (an RL run's store is mostly failures; counting them needs no text).
  void for_each_result(const std::function<void(const StoredResult&)>& fn);

 private:
  void exec(const std::string& sql);
  std::filesystem::path path_;
  sqlite3* db_ = nullptr;
  std::mutex mu_;
};

}  // namespace kernelrl
