// The contrastive exemplar store: a task's successful candidates with their scores, kept in a
// table of the run's SQLite results store (the evaluator's file) and tagged with the training
// step that produced them, so a resumed run can forget what came after its checkpoint and see
// exactly the pools an uninterrupted run saw. Seeds (kernel-family variants) carry step 0.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "rollout/exemplars.h"

struct sqlite3;

namespace kernelrl {

// A passing candidate that an RL stage's policy sampled (rows with step >= 1; seeds, the family
// variants, carry step 0): where a catalog says a kernel came from.
struct PolicyOrigin {
  std::string scope;  // the stage
  std::string task;
  int64_t step = 0;   // the first step that sampled it (1-based)
};

class ExemplarStore {
 public:
  // Opens (creating if needed) table `exemplars` in `db_path`, scoped to `scope` (the stage).
  ExemplarStore(const std::filesystem::path& db_path, std::string scope);
  ~ExemplarStore();
  ExemplarStore(const ExemplarStore&) = delete;
  ExemplarStore& operator=(const ExemplarStore&) = delete;

  // Adds a successful candidate (ignored when the same id is already in the task's pool).
  void add(const std::string& task, const Exemplar& e, int64_t step);
  // The task's pool as of `step` (rows with step <= step), at most `limit`, best first.
  std::vector<Exemplar> pool(const std::string& task, int64_t step, int64_t limit = 256);
  // Forgets rows written after `step` (on resume).
  void truncate_after(int64_t step);
  int64_t size(const std::string& task);

  // Exemplar id (the evaluator's hash) -> the first RL step that sampled it, over every scope of
  // the store at `db_path`; empty when the store has no exemplar table (a bench's store).
  static std::map<std::string, PolicyOrigin> policy_origins(const std::filesystem::path& db_path);

 private:
  void exec(const std::string& sql);
  sqlite3* db_ = nullptr;
  std::string scope_;
  std::mutex mu_;
};

}  // namespace kernelrl
