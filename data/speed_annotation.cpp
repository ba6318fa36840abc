#include "data/speed_annotation.h"

#include <algorithm>
#include <fstream>
#include <initializer_list>
#include <set>
#include <sstream>

#include "common/error.h"
#include "data/families.h"
#include "data/tasks/task_suite.h"

namespace kernelrl {
namespace {

std::vector<std::string> split_csv(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, ',');) out.push_back(x);
  if (!s.empty() && s.back() == ',') out.push_back("");
  return out;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() > suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string key_of(const MeasuredShape& s) {
  return s.device + "|" + std::to_string(s.task.m) + "x" + std::to_string(s.task.n) + "x" +
         std::to_string(s.task.k) + "|" + s.task.layout + "|" + s.task.acc;
}

// A CSV with a header line: the columns a reader needs are checked when it opens; rows come back
// split, with "file:line" for error messages (blank lines skipped, CRLF accepted).
class CsvRows {
 public:
  CsvRows(const std::filesystem::path& csv, const std::string& what,
          std::initializer_list<const char*> required, const std::string& expected)
      : path_(csv), in_(csv) {
    if (!in_) throw UserError(what + " '" + csv.string() + "': cannot read it");
    std::string line;
    std::getline(in_, line);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    header_ = split_csv(line);
    for (const char* c : required)
      if (col(c) < 0)
        throw UserError(what + " '" + csv.string() + "': no column " + c + " (expected " + expected + ")");
  }
  const std::vector<std::string>& header() const { return header_; }
  long col(const std::string& name) const {
    auto it = std::find(header_.begin(), header_.end(), name);
    return it == header_.end() ? -1 : static_cast<long>(it - header_.begin());
  }
  // The next row's fields; false at the end. Throws when a row's field count is not the header's.
  bool next(std::vector<std::string>& fields) {
    std::string line;
    while (std::getline(in_, line)) {
      ++lineno_;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.find_first_not_of(" \t") == std::string::npos) continue;
      fields = split_csv(line);
      if (fields.size() != header_.size())
        throw UserError(where() + ": " + std::to_string(fields.size()) + " fields, expected " +
                        std::to_string(header_.size()));
      return true;
    }
    return false;
  }
  std::string where() const { return path_.string() + ":" + std::to_string(lineno_); }

 private:
  std::filesystem::path path_;
  std::ifstream in_;
  std::vector<std::string> header_;
  int64_t lineno_ = 1;
};

// Variant name -> source, generated once per family on first use.
class VariantSources {
 public:
  const KernelVariant* find(const std::string& family, const std::string& name) {
    auto it = by_family_.find(family);
    if (it == by_family_.end()) {
      std::map<std::string, KernelVariant> m;
      for (auto& v : hgemm_family_variants(family)) m.emplace(v.name, std::move(v));
      it = by_family_.emplace(family, std::move(m)).first;
    }
    auto v = it->second.find(name);
    return v == it->second.end() ? nullptr : &v->second;
  }

 private:
  std::map<std::string, std::map<std::string, KernelVariant>> by_family_;
};

}  // namespace

std::vector<MeasuredShape> read_family_grid_csv(const std::filesystem::path& csv,
                                                const std::string& device) {
  CsvRows rows(csv, "family grid", {"M", "N", "K", "layout", "acc"},
               "the CSV of `kernelrl bench --families`");
  const std::vector<std::string>& header = rows.header();
  auto col = [&](const std::string& name) { return rows.col(name); };
  std::vector<std::string> families, baselines;
  for (const auto& h : header)
    if (ends_with(h, "_variant") && h != "best_variant") families.push_back(h.substr(0, h.size() - 8));
  for (const auto& h : header) {
    if (!ends_with(h, "_us") || h == "best_us") continue;
    const std::string b = h.substr(0, h.size() - 3);
    if (std::find(families.begin(), families.end(), b) == families.end()) baselines.push_back(b);
  }
  if (families.empty())
    throw UserError("family grid '" + csv.string() + "': no <family>_variant columns");
  VariantSources sources;
  std::vector<MeasuredShape> out;
  std::vector<std::string> f;
  while (rows.next(f)) {
    const std::string where = rows.where();
    MeasuredShape s;
    try {
      s.task = hgemm_task(std::stoll(f[col("M")]), std::stoll(f[col("N")]), std::stoll(f[col("K")]),
                          f[col("layout")], f[col("acc")]);
    } catch (const std::logic_error&) {
      throw UserError(where + ": M, N and K must be integers");
    }
    s.device = device;
    for (const auto& b : baselines) {
      const std::string& v = f[col(b + "_us")];
      if (!v.empty()) s.baselines_us[b] = std::stod(v);
    }
    for (const auto& fam : families) {
      const std::string& name = f[col(fam + "_variant")];
      const std::string& us = f[col(fam + "_us")];
      if (name.empty() || us.empty()) continue;  // the family had no passing variant there
      const KernelVariant* v = sources.find(fam, name);
      if (!v)
        throw UserError(where + ": family " + fam + " generates no variant named " + name +
                        " (is this CSV from another version of data/families?)");
      add_measured(out, s, {name, fam, v->source, std::stod(us), csv.string()});
    }
  }
  rank_measured(out);
  return out;
}

std::vector<MeasuredShape> read_variant_times_csv(const std::filesystem::path& csv,
                                                  const std::string& device) {
  CsvRows rows(csv, "variant times", {"M", "N", "K", "layout", "acc", "variant", "device_us"},
               "M,N,K,layout,acc,variant,device_us[,<baseline>_us...]");
  auto col = [&](const std::string& name) { return rows.col(name); };
  std::vector<std::string> baselines;
  for (const auto& h : rows.header())
    if (ends_with(h, "_us") && h != "device_us") baselines.push_back(h.substr(0, h.size() - 3));
  VariantSources sources;
  std::vector<MeasuredShape> out;
  std::vector<std::string> f;
  while (rows.next(f)) {
    const std::string where = rows.where();
    const std::string& us = f[col("device_us")];
    if (us.empty()) continue;  // no passing result
    MeasuredShape s;
    double t = 0;
    try {
      s.task = hgemm_task(std::stoll(f[col("M")]), std::stoll(f[col("N")]), std::stoll(f[col("K")]),
                          f[col("layout")], f[col("acc")]);
      t = std::stod(us);
      for (const auto& b : baselines) {
        const std::string& v = f[col(b + "_us")];
        if (!v.empty()) s.baselines_us[b] = std::stod(v);
      }
    } catch (const std::logic_error&) {
      throw UserError(where + ": M, N, K and the times must be numbers");
    }
    if (!(t > 0)) throw UserError(where + ": device_us must be positive, got " + us);
    s.device = device;
    const std::string& name = f[col("variant")];
    const std::string family = hgemm_family_of(name);
    const KernelVariant* v = family.empty() ? nullptr : sources.find(family, name);
    if (!v)
      throw UserError(where + ": no HGEMM family generates a variant named '" + name +
                      "' (is this CSV from another version of data/families?)");
    add_measured(out, s, {name, family, v->source, t, csv.string()});
  }
  rank_measured(out);
  return out;
}

void add_measured(std::vector<MeasuredShape>& into, const MeasuredShape& shape_key,
                  const MeasuredKernel& k) {
  const std::string key = key_of(shape_key);
  auto it = std::find_if(into.begin(), into.end(), [&](const MeasuredShape& s) { return key_of(s) == key; });
  if (it == into.end()) {
    MeasuredShape s = shape_key;
    s.kernels.clear();
    into.push_back(std::move(s));
    it = into.end() - 1;
  } else {
    for (const auto& [b, us] : shape_key.baselines_us) it->baselines_us.emplace(b, us);
  }
  for (auto& have : it->kernels)
    if (have.source == k.source) {
      if (k.device_us < have.device_us) have = k;
      return;
    }
  it->kernels.push_back(k);
}

void rank_measured(std::vector<MeasuredShape>& shapes) {
  for (auto& s : shapes)
    std::stable_sort(s.kernels.begin(), s.kernels.end(),
                     [](const MeasuredKernel& a, const MeasuredKernel& b) { return a.device_us < b.device_us; });
}

}  // namespace kernelrl
