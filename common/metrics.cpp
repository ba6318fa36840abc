#include "common/metrics.h"

#include <chrono>
#include <fstream>
#include <sstream>

#include "common/error.h"
#include "common/fs.h"

namespace kernelrl {

MetricsWriter::MetricsWriter(const std::filesystem::path& path, int64_t keep_through_step)
    : path_(path) {
  if (path.empty()) return;
  if (keep_through_step < 0) {
    atomic_write(path, "");
  } else if (std::filesystem::exists(path)) {
    std::string kept;
    for (const auto& rec : read_all(path))
      if (rec.value("step", int64_t{0}) <= keep_through_step) kept += rec.dump() + "\n";
    atomic_write(path, kept);
  }
  file_ = std::fopen(path.c_str(), "a");
  if (!file_) throw UserError("cannot open metrics file '" + path.string() + "' for writing");
}

MetricsWriter::~MetricsWriter() {
  if (file_) std::fclose(file_);
}

void MetricsWriter::write(int64_t step, nlohmann::json record) {
  if (!file_) return;
  record["step"] = step;
  record["time"] = std::chrono::duration<double>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  const std::string line = record.dump() + "\n";
  std::fwrite(line.data(), 1, line.size(), file_);
  std::fflush(file_);
}

void MetricsWriter::drop_if(const std::function<bool(const nlohmann::json&)>& drop) {
  if (!file_) return;
  std::fclose(file_);
  std::string kept;
  for (const auto& rec : read_all(path_))
    if (!drop(rec)) kept += rec.dump() + "\n";
  atomic_write(path_, kept);
  file_ = std::fopen(path_.c_str(), "a");
  if (!file_) throw UserError("cannot reopen metrics file '" + path_.string() + "'");
}

std::vector<nlohmann::json> MetricsWriter::read_all(const std::filesystem::path& path) {
  std::istringstream in(read_file(path, "metrics file"));
  std::vector<nlohmann::json> out;
  std::string line;
  for (int lineno = 1; std::getline(in, line); ++lineno) {
    if (line.empty()) continue;
    try {
      out.push_back(nlohmann::json::parse(line));
    } catch (const nlohmann::json::exception&) {
      // A torn last line (killed mid-write) is dropped; a torn line elsewhere is corruption.
      if (in.peek() == EOF) break;
      throw UserError(path.string() + ":" + std::to_string(lineno) + ": malformed JSON line");
    }
  }
  return out;
}

}  // namespace kernelrl
