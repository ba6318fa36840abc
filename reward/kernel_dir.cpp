#include "reward/kernel_dir.h"

#include <algorithm>
#include <regex>

#include "common/error.h"
#include "common/fs.h"

namespace kernelrl {

namespace {

std::string shape_stem(const TaskSpec& t) {
  return std::to_string(t.m) + "_" + std::to_string(t.n) + "_" + std::to_string(t.k);
}

bool is_shape_name(const std::string& stem) {
  static const std::regex re(R"(^\d+_\d+_\d+$)");
  return std::regex_match(stem, re);
}

DirEvalItem make_item(const TaskSpec& task, const fs::path& file, const std::string& source) {
  DirEvalItem item;
  item.task = task;
  item.file = file;
  item.source = source;
  return item;
}

}  // namespace

std::optional<fs::path> shape_kernel_file(const fs::path& dir, const TaskSpec& task, bool gpu) {
  fs::path file = dir / (shape_stem(task) + ".cu");
  if (fs::exists(file)) return file;
  if (!gpu && fs::exists(dir / (shape_stem(task) + ".cpp")))
    return dir / (shape_stem(task) + ".cpp");
  return std::nullopt;
}

std::vector<fs::path> general_kernel_files(const fs::path& dir, bool gpu) {
  std::vector<fs::path> out;
  const std::string ext = gpu ? ".cu" : ".cpp";
  for (const auto& e : fs::directory_iterator(dir)) {
    if (!e.is_regular_file() || e.path().extension() != ext || is_atomic_temp(e.path())) continue;
    if (is_shape_name(e.path().stem().string())) continue;
    out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<DirEvalItem> evaluate_kernel_dir(Evaluator& ev, const fs::path& dir,
                                             const std::vector<TaskSpec>& tasks,
                                             const DirEvalOptions& o) {
  if (!fs::is_directory(dir)) throw UserError("--kernels: " + dir.string() + " is not a directory");
  const bool gpu = ev.backend() == "gpu";
  std::vector<std::pair<fs::path, std::string>> general;
  if (o.general)
    for (const auto& f : general_kernel_files(dir, gpu))
      general.emplace_back(f, read_file(f, "kernel"));

  // Per task: its kernels, in output order.
  std::vector<std::vector<DirEvalItem>> per_task(tasks.size());
  std::vector<std::string> to_compile;
  for (size_t i = 0; i < tasks.size(); ++i) {
    if (auto f = shape_kernel_file(dir, tasks[i], gpu))
      per_task[i].push_back(make_item(tasks[i], *f, read_file(*f, "kernel")));
    for (const auto& [f, src] : general) per_task[i].push_back(make_item(tasks[i], f, src));
    for (auto& item : per_task[i]) {
      if (!o.refresh) {
        if (auto r = ev.cached_result(item.task, item.source)) {
          item.result = *r;
          item.resumed = true;
          continue;
        }
      }
      to_compile.push_back(item.source);
    }
  }
  // One parallel compile of every distinct source; each task's batch then loads from the cache.
  if (!to_compile.empty()) ev.precompile(to_compile);

  std::vector<DirEvalItem> out;
  for (size_t i = 0; i < tasks.size(); ++i) {
    auto& items = per_task[i];
    std::vector<std::string> fresh;
    std::vector<size_t> index;
    for (size_t j = 0; j < items.size(); ++j)
      if (!items[j].resumed) {
        fresh.push_back(items[j].source);
        index.push_back(j);
      }
    if (!fresh.empty()) {
      auto rs = ev.evaluate(tasks[i], fresh);
      for (size_t j = 0; j < rs.size(); ++j) items[index[j]].result = std::move(rs[j]);
    }
    std::string status = "missing";
    if (!items.empty()) {
      int passed = 0;
      for (const auto& it : items) passed += it.result.passed();
      status = items.size() == 1
                   ? status_name(items[0].result.status)
                   : std::to_string(passed) + "/" + std::to_string(items.size()) + " ok";
    } else {
      items.push_back(make_item(tasks[i], {}, {}));
    }
    for (auto& it : items) out.push_back(std::move(it));
    if (o.progress) o.progress(i + 1, tasks.size(), tasks[i].name + " " + status);
  }
  return out;
}

}  // namespace kernelrl
