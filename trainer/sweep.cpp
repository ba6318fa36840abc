#include "trainer/sweep.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <sstream>

#include "common/error.h"
#include "common/fs.h"
#include "common/log.h"
#include "common/metrics.h"
#include "model/device.h"
#include "trainer/job_config.h"

namespace kernelrl {
namespace {

std::string scalar_text(const YAML::Node& n) {
  if (n.IsScalar()) return n.Scalar();
  YAML::Emitter e;
  e << YAML::Flow << n;
  return e.c_str();
}

// A point's directory name: its index and its values, filesystem-safe.
std::string dir_name(size_t index, const SweepPoint& p) {
  std::string s = std::to_string(index);
  for (const auto& o : p.overrides) {
    s += "_";
    for (char c : o) s += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-') ? c : '_';
  }
  return s.substr(0, 120);
}

}  // namespace

fs::path sweep_base(SweepConfig& sweep, const fs::path& sweep_file, bool gpu_visible,
                    std::string* note) {
  note->clear();
  const bool on_cpu = !gpu_visible && !sweep.cpu_base.empty();
  const std::string& name = on_cpu ? sweep.cpu_base : sweep.base;
  const char* key = on_cpu ? "cpu_base" : "base";
  if (name.empty()) throw ConfigError("base: the sweep needs a job YAML");
  const fs::path base = fs::path(name).is_absolute() ? fs::path(name) : sweep_file.parent_path() / name;
  if (!fs::exists(base)) throw ConfigError(std::string(key) + ": '" + base.string() + "' not found");
  if (on_cpu) {
    *note = "sweep: no GPU visible; running the points of " + base.string() + " (cpu_base) instead of " +
            sweep.base + ", one at a time";
    sweep.parallel = "sequential";
  }
  return base;
}

SweepConfig load_sweep(const fs::path& path, const std::vector<std::string>& overrides, bool gpu_visible,
                       fs::path* base_path, std::string* note) {
  SweepConfig s;
  cfg::load(path, overrides, s);
  *base_path = sweep_base(s, path, gpu_visible, note);
  if (!s.grid.IsDefined() || !s.grid.IsMap() || s.grid.size() == 0)
    throw ConfigError("grid: expected a mapping of key.path to a list of values");
  for (const auto& kv : s.grid) {
    const std::string key = kv.first.as<std::string>();
    if (!kv.second.IsSequence() || kv.second.size() == 0)
      throw ConfigError("grid." + key + ": expected a non-empty list of values");
  }
  // Every point must make a valid job: check them all before running anything.
  for (const auto& p : sweep_points(s)) {
    auto ov = s.overrides;
    ov.insert(ov.end(), p.overrides.begin(), p.overrides.end());
    try {
      load_job_config(*base_path, ov);
    } catch (const ConfigError& e) {
      throw ConfigError("grid point " + p.name + ": " + e.what());
    }
  }
  return s;
}

std::vector<SweepPoint> sweep_points(const SweepConfig& sweep) {
  std::vector<SweepPoint> points{{}};
  for (const auto& kv : sweep.grid) {
    const std::string key = kv.first.as<std::string>();
    std::vector<SweepPoint> next;
    for (const auto& p : points)
      for (const auto& v : kv.second) {
        SweepPoint q = p;
        q.overrides.push_back(key + "=" + scalar_text(v));
        next.push_back(q);
      }
    points = std::move(next);
  }
  for (auto& p : points) {
    for (const auto& o : p.overrides) p.name += (p.name.empty() ? "" : ",") + o;
  }
  return points;
}

int run_sweep(const SweepConfig& sweep, const fs::path& base_path, const std::string& bin,
              bool resume) {
  const auto points = sweep_points(sweep);
  const int gpus = cuda_device_count();
  const int k = static_cast<int>(sweep.ranks_per_point);  // GPUs (ranks) of one point
  if (sweep.parallel == "per-gpu" && gpus > 0 && gpus < k)
    throw ConfigError("ranks_per_point: " + std::to_string(k) + " GPUs per point, but this host shows " +
                      std::to_string(gpus));
  const int slots = sweep.parallel == "per-gpu" ? std::max(1, gpus / k) : 1;
  if (sweep.parallel == "per-gpu" && gpus == 0) {
    KRL_LOG(warn) << "parallel: per-gpu but no GPU is visible; running points one at a time";
  }
  fs::create_directories(sweep.dir);
  std::vector<fs::path> run_dirs;
  std::vector<int> exit_codes(points.size(), -1);
  std::map<pid_t, std::pair<size_t, int>> running;  // pid -> (point, slot)
  std::vector<bool> slot_busy(slots, false);
  size_t next = 0;
  auto wait_one = [&] {
    int status = 0;
    pid_t pid = ::wait(&status);
    if (pid <= 0) return;
    auto [idx, slot] = running[pid];
    running.erase(pid);
    slot_busy[slot] = false;
    exit_codes[idx] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    KRL_LOG(info) << "sweep point " << idx << " (" << points[idx].name << ") "
                  << (exit_codes[idx] == 0 ? "finished" : "failed with exit " + std::to_string(exit_codes[idx]));
  };
  for (size_t i = 0; i < points.size(); ++i) run_dirs.push_back(fs::path(sweep.dir) / dir_name(i, points[i]));
  while (next < points.size() || !running.empty()) {
    while (next < points.size() && static_cast<int>(running.size()) < slots) {
      int slot = 0;
      while (slot_busy[slot]) ++slot;
      std::vector<std::string> args = {bin, "train", base_path.string()};
      for (const auto& o : sweep.overrides) args.push_back(o);
      for (const auto& o : points[next].overrides) args.push_back(o);
      args.push_back("--run-dir");
      args.push_back(run_dirs[next].string());
      if (k > 1) {
        args.push_back("--nproc");
        args.push_back(std::to_string(k));
      }
      if (resume && fs::exists(run_dirs[next] / "config.yaml")) args.push_back("--resume");
      KRL_LOG(info) << "sweep point " << next << "/" << points.size() << ": " << points[next].name;
      pid_t pid = ::fork();
      if (pid == 0) {
        if (sweep.parallel == "per-gpu" && gpus > 0) {  // the slot's k GPUs
          std::string devices;
          for (int d = slot * k; d < (slot + 1) * k; ++d) devices += (devices.empty() ? "" : ",") + std::to_string(d);
          ::setenv("CUDA_VISIBLE_DEVICES", devices.c_str(), 1);
        }
        std::vector<char*> argv;
        for (auto& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        ::execv(bin.c_str(), argv.data());
        std::_Exit(127);
      }
      if (pid < 0) throw std::runtime_error("sweep: fork failed");
      slot_busy[slot] = true;
      running[pid] = {next, slot};
      ++next;
    }
    wait_one();
  }

  // Summary: the last value of each metric per stage, one row per point.
  std::vector<std::string> columns;
  std::vector<std::map<std::string, std::string>> rows;
  for (size_t i = 0; i < points.size(); ++i) {
    std::map<std::string, std::string> row;
    const fs::path m = run_dirs[i] / "metrics.jsonl";
    if (fs::exists(m)) {
      for (const auto& rec : MetricsWriter::read_all(m))
        for (const auto& name : sweep.metrics)
          if (rec.contains(name) && rec[name].is_number()) {
            const std::string col = rec.value("stage", std::string("-")) + "/" + name;
            if (std::find(columns.begin(), columns.end(), col) == columns.end()) columns.push_back(col);
            char buf[32];
            std::snprintf(buf, sizeof buf, "%.6g", rec[name].get<double>());
            row[col] = buf;
          }
    }
    rows.push_back(row);
  }
  std::ostringstream csv, md;
  csv << "point,exit_code,run_dir";
  md << "| point | exit | run dir |";
  for (const auto& c : columns) csv << "," << c, md << " " << c << " |";
  csv << "\n";
  md << "\n|---|---|---|";
  for (size_t c = 0; c < columns.size(); ++c) md << "---|";
  md << "\n";
  for (size_t i = 0; i < points.size(); ++i) {
    csv << "\"" << points[i].name << "\"," << exit_codes[i] << "," << run_dirs[i].string();
    md << "| " << points[i].name << " | " << exit_codes[i] << " | " << run_dirs[i].string() << " |";
    for (const auto& c : columns) {
      auto it = rows[i].find(c);
      csv << "," << (it == rows[i].end() ? "" : it->second);
      md << " " << (it == rows[i].end() ? "" : it->second) << " |";
    }
    csv << "\n";
    md << "\n";
  }
  atomic_write(fs::path(sweep.dir) / "summary.csv", csv.str());
  atomic_write(fs::path(sweep.dir) / "summary.md", md.str());
  std::printf("%s", md.str().c_str());
  int failed = 0;
  for (int c : exit_codes) failed += c != 0;
  return failed;
}

}  // namespace kernelrl
