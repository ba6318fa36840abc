#include "rollout/exemplar_store.h"

#include <sqlite3.h>

#include <stdexcept>

#include "common/error.h"

namespace kernelrl {
namespace {

struct Stmt {
  sqlite3_stmt* s = nullptr;
  Stmt(sqlite3* db, const char* sql) {
    if (sqlite3_prepare_v2(db, sql, -1, &s, nullptr) != SQLITE_OK)
      throw std::runtime_error(std::string("exemplar store: ") + sqlite3_errmsg(db));
  }
  ~Stmt() { sqlite3_finalize(s); }
  void text(int i, const std::string& v) { sqlite3_bind_text(s, i, v.c_str(), -1, SQLITE_TRANSIENT); }
  void i64(int i, int64_t v) { sqlite3_bind_int64(s, i, v); }
  void real(int i, double v) { sqlite3_bind_double(s, i, v); }
};

}  // namespace

ExemplarStore::ExemplarStore(const std::filesystem::path& db_path, std::string scope)
    : scope_(std::move(scope)) {
  if (!db_path.parent_path().empty()) std::filesystem::create_directories(db_path.parent_path());
  if (sqlite3_open(db_path.c_str(), &db_) != SQLITE_OK)
    throw UserError("cannot open results store '" + db_path.string() + "': " + sqlite3_errmsg(db_));
  sqlite3_busy_timeout(db_, 10000);
  exec("PRAGMA journal_mode=WAL");
  exec("CREATE TABLE IF NOT EXISTS exemplars (scope TEXT NOT NULL, task TEXT NOT NULL, "
       "id TEXT NOT NULL, source TEXT NOT NULL, score REAL NOT NULL, step INTEGER NOT NULL, "
       "PRIMARY KEY (scope, task, id))");
}

ExemplarStore::~ExemplarStore() { sqlite3_close(db_); }

void ExemplarStore::exec(const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown";
    sqlite3_free(err);
    throw std::runtime_error("exemplar store: " + msg);
  }
}

void ExemplarStore::add(const std::string& task, const Exemplar& e, int64_t step) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt st(db_, "INSERT OR IGNORE INTO exemplars (scope, task, id, source, score, step) "
               "VALUES (?, ?, ?, ?, ?, ?)");
  st.text(1, scope_);
  st.text(2, task);
  st.text(3, e.id);
  st.text(4, e.source);
  st.real(5, e.score);
  st.i64(6, step);
  if (sqlite3_step(st.s) != SQLITE_DONE)
    throw std::runtime_error(std::string("exemplar store: ") + sqlite3_errmsg(db_));
}

std::vector<Exemplar> ExemplarStore::pool(const std::string& task, int64_t step, int64_t limit) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt st(db_, "SELECT id, source, score FROM exemplars WHERE scope = ? AND task = ? AND step <= ? "
               "ORDER BY score DESC, id LIMIT ?");
  st.text(1, scope_);
  st.text(2, task);
  st.i64(3, step);
  st.i64(4, limit);
  std::vector<Exemplar> out;
  while (sqlite3_step(st.s) == SQLITE_ROW) {
    Exemplar e;
    e.id = reinterpret_cast<const char*>(sqlite3_column_text(st.s, 0));
    e.source = reinterpret_cast<const char*>(sqlite3_column_text(st.s, 1));
    e.score = sqlite3_column_double(st.s, 2);
    out.push_back(std::move(e));
  }
  return out;
}

void ExemplarStore::truncate_after(int64_t step) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt st(db_, "DELETE FROM exemplars WHERE scope = ? AND step > ?");
  st.text(1, scope_);
  st.i64(2, step);
  sqlite3_step(st.s);
}

int64_t ExemplarStore::size(const std::string& task) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt st(db_, "SELECT COUNT(*) FROM exemplars WHERE scope = ? AND task = ?");
  st.text(1, scope_);
  st.text(2, task);
  return sqlite3_step(st.s) == SQLITE_ROW ? sqlite3_column_int64(st.s, 0) : 0;
}

std::map<std::string, PolicyOrigin> ExemplarStore::policy_origins(const std::filesystem::path& db_path) {
  std::map<std::string, PolicyOrigin> out;
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    sqlite3_close(db);
    throw UserError("cannot open results store '" + db_path.string() + "'");
  }
  sqlite3_busy_timeout(db, 10000);
  sqlite3_stmt* st = nullptr;
  // A seed (step 0: a family variant) that a policy also wrote is still a family variant. No
  // exemplar table: a store no RL stage wrote to.
  if (sqlite3_prepare_v2(db, "SELECT id, scope, task, step FROM exemplars WHERE step >= 1 AND id NOT IN "
                         "(SELECT id FROM exemplars WHERE step = 0) ORDER BY step",
                         -1, &st, nullptr) == SQLITE_OK) {
    while (sqlite3_step(st) == SQLITE_ROW) {
      PolicyOrigin o;
      const std::string id = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
      o.scope = reinterpret_cast<const char*>(sqlite3_column_text(st, 1));
      o.task = reinterpret_cast<const char*>(sqlite3_column_text(st, 2));
      o.step = sqlite3_column_int64(st, 3);
      out.emplace(id, o);  // ordered by step: the first one stays
    }
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return out;
}

}  // namespace kernelrl
