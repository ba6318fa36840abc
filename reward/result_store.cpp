#include "reward/result_store.h"

#include <tuple>

#include <sqlite3.h>

#include <stdexcept>

#include "common/error.h"

namespace kernelrl {

namespace {

class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql, -1, &s_, nullptr) != SQLITE_OK)
      throw std::runtime_error(std::string("results store: ") + sqlite3_errmsg(db));
  }
  ~Stmt() { sqlite3_finalize(s_); }
  Stmt& bind(int i, const std::string& v) {
    sqlite3_bind_text(s_, i, v.c_str(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& bind(int i, double v) {
    sqlite3_bind_double(s_, i, v);
    return *this;
  }
  Stmt& bind(int i, int64_t v) {
    sqlite3_bind_int64(s_, i, v);
    return *this;
  }
  bool step() {
    int rc = sqlite3_step(s_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    throw std::runtime_error(std::string("results store: ") + sqlite3_errmsg(db_));
  }
  std::string text(int c) {
    auto* p = sqlite3_column_text(s_, c);
    return p ? reinterpret_cast<const char*>(p) : "";
  }
  double real(int c) { return sqlite3_column_double(s_, c); }
  int64_t integer(int c) { return sqlite3_column_int64(s_, c); }

 private:
  sqlite3* db_;
  sqlite3_stmt* s_ = nullptr;
};

const char* kSchema = R"(
CREATE TABLE IF NOT EXISTS candidates (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  hash TEXT NOT NULL, task TEXT NOT NULL, shape TEXT, backend TEXT, gpu TEXT, mode TEXT,
  source TEXT, status TEXT, check_name TEXT, reason TEXT,
  reward REAL, reward_reason TEXT, speedup REAL, reference TEXT, t_ref_us REAL, t_cand_us REAL,
  times_json TEXT, max_abs_dev REAL, dev_bound REAL, compile_log TEXT, metrics_json TEXT,
  result_json TEXT, created_at TEXT DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ','now')));
CREATE INDEX IF NOT EXISTS candidates_task ON candidates(task, status);
CREATE INDEX IF NOT EXISTS candidates_hash ON candidates(hash, task);
CREATE TABLE IF NOT EXISTS baselines (
  gpu TEXT, driver TEXT, m INTEGER, n INTEGER, k INTEGER, layout TEXT, mode TEXT, name TEXT,
  median_us REAL, stats_json TEXT, algo INTEGER, max_abs_dev REAL,
  measured_at TEXT DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ','now')),
  PRIMARY KEY (gpu, driver, m, n, k, layout, mode, name));
CREATE TABLE IF NOT EXISTS best_kernels (
  task TEXT, backend TEXT, gpu TEXT, shape TEXT, hash TEXT, speedup REAL, reward REAL,
  t_cand_us REAL, candidate_id INTEGER,
  updated_at TEXT DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ','now')),
  PRIMARY KEY (task, backend, gpu));
)";

}  // namespace

ResultStore::ResultStore(const std::filesystem::path& path) : path_(path) {
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
  if (sqlite3_open(path.c_str(), &db_) != SQLITE_OK) {
    std::string msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    db_ = nullptr;
    throw UserError("results store " + path.string() + ": cannot open (" + msg + ")");
  }
  sqlite3_busy_timeout(db_, 30000);
  exec("PRAGMA journal_mode=WAL;");
  exec("PRAGMA synchronous=NORMAL;");
  exec(kSchema);
  // Stores written before the settings fingerprint existed get the column (their rows never
  // match a fingerprint, so they are never reused).
  bool has_settings = false;
  {
    Stmt s(db_, "PRAGMA table_info(candidates)");
    while (s.step()) has_settings = has_settings || s.text(1) == "settings";
  }
  if (!has_settings) exec("ALTER TABLE candidates ADD COLUMN settings TEXT;");
}

ResultStore::~ResultStore() {
  if (db_) sqlite3_close(db_);
}

void ResultStore::exec(const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "?";
    sqlite3_free(err);
    throw std::runtime_error("results store " + path_.string() + ": " + msg);
  }
}

void ResultStore::add_result(const EvalResult& r, const std::string& source,
                             const std::string& backend, const std::string& gpu,
                             const std::string& mode, const std::string& settings) {
  std::lock_guard<std::mutex> lock(mu_);
  nlohmann::json times = {{"candidate", to_json(r.cand)}};
  for (const auto& [k, v] : r.baselines) times["baselines"][k] = to_json(v);
  exec("BEGIN IMMEDIATE;");
  try {
    Stmt s(db_,
           "INSERT INTO candidates (hash, task, shape, backend, gpu, mode, source, status, "
           "check_name, reason, reward, reward_reason, speedup, reference, t_ref_us, t_cand_us, "
           "times_json, max_abs_dev, dev_bound, compile_log, metrics_json, result_json, settings) "
           "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
    s.bind(1, r.hash).bind(2, r.task).bind(3, r.shape).bind(4, backend).bind(5, gpu).bind(6, mode)
        .bind(7, source).bind(8, std::string(status_name(r.status))).bind(9, r.check)
        .bind(10, r.reason).bind(11, r.reward).bind(12, r.reward_reason).bind(13, r.speedup)
        .bind(14, r.reference).bind(15, r.t_ref_us).bind(16, r.cand.median_us)
        .bind(17, times.dump()).bind(18, r.max_abs_dev).bind(19, r.dev_bound)
        .bind(20, r.compile_log).bind(21, r.metrics.dump()).bind(22, to_json(r).dump())
        .bind(23, settings);
    s.step();
    int64_t id = sqlite3_last_insert_rowid(db_);
    if (r.passed() && r.speedup > 0) {
      Stmt b(db_,
             "INSERT INTO best_kernels (task, backend, gpu, shape, hash, speedup, reward, "
             "t_cand_us, candidate_id) VALUES (?,?,?,?,?,?,?,?,?) "
             "ON CONFLICT(task, backend, gpu) DO UPDATE SET shape=excluded.shape, "
             "hash=excluded.hash, speedup=excluded.speedup, reward=excluded.reward, "
             "t_cand_us=excluded.t_cand_us, candidate_id=excluded.candidate_id, "
             "updated_at=strftime('%Y-%m-%dT%H:%M:%SZ','now') "
             "WHERE excluded.speedup > best_kernels.speedup");
      b.bind(1, r.task).bind(2, backend).bind(3, gpu).bind(4, r.shape).bind(5, r.hash)
          .bind(6, r.speedup).bind(7, r.reward).bind(8, r.cand.median_us).bind(9, id);
      b.step();
    }
    exec("COMMIT;");
  } catch (...) {
    exec("ROLLBACK;");
    throw;
  }
}

std::optional<EvalResult> ResultStore::find_result(const std::string& hash, const std::string& task,
                                                   const std::string& backend,
                                                   const std::string& gpu,
                                                   const std::string& settings) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt s(db_,
         "SELECT result_json FROM candidates WHERE hash=? AND task=? AND backend=? AND gpu=? "
         "AND settings=? ORDER BY id DESC LIMIT 1");
  s.bind(1, hash).bind(2, task).bind(3, backend).bind(4, gpu).bind(5, settings);
  if (!s.step()) return std::nullopt;
  return result_from_json(nlohmann::json::parse(s.text(0)));
}

std::map<std::string, BaselineRow> ResultStore::baselines(const BaselineKey& key) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt s(db_,
         "SELECT name, stats_json, algo, max_abs_dev FROM baselines WHERE gpu=? AND driver=? AND "
         "m=? AND n=? AND k=? AND layout=? AND mode=?");
  s.bind(1, key.gpu).bind(2, key.driver).bind(3, key.m).bind(4, key.n).bind(5, key.k)
      .bind(6, key.layout).bind(7, key.mode);
  std::map<std::string, BaselineRow> out;
  while (s.step()) {
    BaselineRow row;
    row.stats = timing_from_json(nlohmann::json::parse(s.text(1)));
    row.algo = s.integer(2);
    row.max_abs_dev = s.real(3);
    out[s.text(0)] = row;
  }
  return out;
}

void ResultStore::for_each_baseline(
    const std::function<void(const BaselineKey&, const std::string&, const BaselineRow&)>& fn) {
  std::vector<std::tuple<BaselineKey, std::string, BaselineRow>> rows;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Stmt s(db_, "SELECT gpu, driver, m, n, k, layout, mode, name, stats_json, algo, max_abs_dev FROM baselines");
    while (s.step()) {
      BaselineKey key{s.text(0), s.text(1), s.integer(2), s.integer(3), s.integer(4), s.text(5), s.text(6)};
      BaselineRow row;
      row.stats = timing_from_json(nlohmann::json::parse(s.text(8)));
      row.algo = s.integer(9);
      row.max_abs_dev = s.real(10);
      rows.emplace_back(key, s.text(7), row);
    }
  }
  for (const auto& [key, name, row] : rows) fn(key, name, row);
}

void ResultStore::put_baseline(const BaselineKey& key, const std::string& name,
                               const BaselineRow& row) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt s(db_,
         "INSERT OR REPLACE INTO baselines (gpu, driver, m, n, k, layout, mode, name, median_us, "
         "stats_json, algo, max_abs_dev) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)");
  s.bind(1, key.gpu).bind(2, key.driver).bind(3, key.m).bind(4, key.n).bind(5, key.k)
      .bind(6, key.layout).bind(7, key.mode).bind(8, name).bind(9, row.stats.median_us)
      .bind(10, to_json(row.stats).dump()).bind(11, row.algo).bind(12, row.max_abs_dev);
  s.step();
}

namespace {
StoredCandidate read_candidate(Stmt& s) {
  StoredCandidate c;
  c.hash = s.text(0);
  c.task = s.text(1);
  c.shape = s.text(2);
  c.source = s.text(3);
  c.status = s.text(4);
  c.check = s.text(5);
  c.reason = s.text(6);
  c.reward = s.real(7);
  c.speedup = s.real(8);
  c.t_cand_us = s.real(9);
  c.t_ref_us = s.real(10);
  c.max_abs_dev = s.real(11);
  c.backend = s.text(12);
  c.gpu = s.text(13);
  c.created_at = s.text(14);
  return c;
}
constexpr const char* kCandidateColumns =
    "hash, task, shape, source, status, check_name, reason, reward, speedup, t_cand_us, "
    "t_ref_us, max_abs_dev, backend, gpu, created_at";
}  // namespace

std::vector<StoredCandidate> ResultStore::successful(const std::string& task, int limit) {
  std::lock_guard<std::mutex> lock(mu_);
  // One row per distinct kernel (its best evaluation), highest reward first.
  Stmt s(db_, (std::string("SELECT ") + kCandidateColumns +
               " FROM candidates WHERE task=? AND status='ok' AND id IN (SELECT id FROM "
               "candidates c2 WHERE c2.task=candidates.task AND c2.hash=candidates.hash AND "
               "c2.status='ok' ORDER BY reward DESC LIMIT 1) ORDER BY reward DESC LIMIT ?")
                  .c_str());
  s.bind(1, task).bind(2, static_cast<int64_t>(limit));
  std::vector<StoredCandidate> out;
  while (s.step()) out.push_back(read_candidate(s));
  return out;
}

std::optional<StoredCandidate> ResultStore::best(const std::string& task) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt s(db_, (std::string("SELECT ") + kCandidateColumns +
               " FROM candidates WHERE id = (SELECT candidate_id FROM best_kernels WHERE task=? "
               "ORDER BY speedup DESC LIMIT 1)")
                  .c_str());
  s.bind(1, task);
  if (!s.step()) return std::nullopt;
  return read_candidate(s);
}

int64_t ResultStore::count_results() {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt s(db_, "SELECT COUNT(*) FROM candidates");
  s.step();
  return s.integer(0);
}

void ResultStore::for_each_result(const std::function<void(const StoredResult&)>& fn) {
  std::vector<StoredResult> rows;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Failed rows' sources are not read: an RL run's store is mostly failures.
    Stmt s(db_,
           "SELECT result_json, CASE WHEN status='ok' THEN source ELSE '' END, backend, gpu, mode, "
           "settings, created_at FROM candidates ORDER BY id");
    while (s.step()) {
      StoredResult r;
      r.result = result_from_json(nlohmann::json::parse(s.text(0)));
      r.source = s.text(1);
      r.backend = s.text(2);
      r.gpu = s.text(3);
      r.mode = s.text(4);
      r.settings = s.text(5);
      r.created_at = s.text(6);
      rows.push_back(std::move(r));
    }
  }
  for (const auto& r : rows) fn(r);  // outside the lock: fn may use the store
}

}  // namespace kernelrl
