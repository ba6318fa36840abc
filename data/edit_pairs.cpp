#include "data/edit_pairs.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <cctype>

#include <unistd.h>

#include "common/error.h"
#include "common/fs.h"
#include "common/hash.h"
#include "data/tasks/task_suite.h"

namespace kernelrl {
namespace {

// Whether g++ compiles `source` (syntax and templates instantiated; no code generated).
bool gxx_compiles(const std::string& source, const std::filesystem::path& include_dir, const std::string& compiler) {
  static std::map<uint64_t, bool> seen;
  const uint64_t h = fnv1a(source, fnv1a(compiler + '\n' + include_dir.string()));
  if (auto it = seen.find(h); it != seen.end()) return it->second;
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("kernelrl_edit_pairs_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::filesystem::path src = dir / (std::to_string(h) + ".cpp");
  atomic_write(src, source);
  const std::string cmd = compiler + " -std=c++17 -fsyntax-only -I '" + include_dir.string() + "' '" +
                          src.string() + "' > /dev/null 2>&1";
  const bool ok = std::system(cmd.c_str()) == 0;
  std::filesystem::remove(src);
  return seen[h] = ok;
}

}  // namespace

std::vector<EditPair> measured_edit_pairs(const std::vector<MeasuredShape>& shapes, int64_t per_shape,
                                          uint64_t seed, const std::string& reference) {
  std::vector<EditPair> out;
  for (const MeasuredShape& s : shapes) {
    if (s.task.holdout) continue;
    std::vector<EditPair> here;
    std::map<std::string, std::vector<size_t>> by_family;  // indices into s.kernels, fastest first
    for (size_t i = 0; i < s.kernels.size(); ++i)
      if (!s.kernels[i].family.empty()) by_family[s.kernels[i].family].push_back(i);
    std::mt19937_64 rng(seed ^ fnv1a(s.device + s.task.name));
    const auto ref = s.baselines_us.find(reference);
    for (const auto& [family, idx] : by_family)
      for (size_t j = 1; j < idx.size(); ++j) {
        auto pair_to = [&](size_t to) {
          EditPair p;
          p.kind = "measured";
          p.task = s.task;
          p.device = s.device;
          p.timing = s.timing;
          p.from = s.kernels[idx[j]];
          p.to = s.kernels[to];
          p.from_rank = static_cast<int64_t>(idx[j]) + 1;
          p.ranked = static_cast<int64_t>(s.kernels.size());
          p.reference_us = ref == s.baselines_us.end() ? 0 : ref->second;
          return p;
        };
        if (s.kernels[idx[0]].device_us >= s.kernels[idx[j]].device_us) continue;  // a tie: no faster one
        here.push_back(pair_to(idx[0]));
        if (j >= 2) {  // a faster one in between: a smaller step
          const size_t k = 1 + rng() % (j - 1);
          if (s.kernels[idx[k]].device_us < s.kernels[idx[j]].device_us) here.push_back(pair_to(idx[k]));
        }
      }
    if (per_shape > 0 && static_cast<int64_t>(here.size()) > per_shape) {
      std::shuffle(here.begin(), here.end(), rng);
      here.resize(static_cast<size_t>(per_shape));
    }
    out.insert(out.end(), here.begin(), here.end());
  }
  return out;
}

std::string with_knob(const std::string& source, const std::string& knob, int64_t value) {
  const std::string key = "/*" + knob + "=*/";
  const size_t line = source.find("\nusing Cfg = ");
  if (line == std::string::npos) return "";
  const size_t line_end = source.find('\n', line + 1);
  size_t at = source.find(key, line + 1);
  if (at == std::string::npos || at > line_end) return "";
  at += key.size();
  size_t end = at;
  while (end < source.size() && (std::isdigit(static_cast<unsigned char>(source[end])) || source[end] == '-')) ++end;
  if (end == at) return "";  // not a number (true/false, a type)
  return source.substr(0, at) + std::to_string(value) + source.substr(end);
}

std::vector<EditPair> param_edit_pairs(const std::string& family, const std::vector<TaskSpec>& shapes, int64_t n,
                                       uint64_t seed, const std::filesystem::path& include_dir, int64_t* dropped,
                                       const std::string& compiler) {
  if (dropped) *dropped = 0;
  if (n <= 0 || shapes.empty()) return {};
  const std::vector<KernelVariant> variants = hgemm_family_variants(family);
  if (variants.empty()) throw UserError("edit pairs: no HGEMM family '" + family + "'");
  if (variants[0].backend != "host")
    throw UserError("edit pairs: parameter changes are compile-checked with g++, for host families only; '" +
                    family + "' is a " + variants[0].backend + " family");
  struct Candidate {
    const KernelVariant* from;
    std::string knob;
    int64_t value;
  };
  std::vector<Candidate> candidates;
  for (const KernelVariant& v : variants) {
    for (const auto& [knob, current] : v.params) {
      std::set<int64_t> listed;
      for (const KernelVariant& w : variants)
        if (w.layout == v.layout && w.acc == v.acc)
          for (const auto& [k, x] : w.params)
            if (k == knob) listed.insert(x);
      std::set<int64_t> values = listed;
      for (int64_t x : listed) {  // outside the list: half and double a listed value
        if (x >= 2) values.insert(x / 2);
        values.insert(x * 2);
      }
      values.erase(current);
      for (int64_t x : values) candidates.push_back({&v, knob, x});
    }
  }
  std::mt19937_64 rng(seed);
  std::shuffle(candidates.begin(), candidates.end(), rng);
  std::vector<EditPair> out;
  for (const Candidate& c : candidates) {
    if (static_cast<int64_t>(out.size()) >= n) break;
    const std::string changed = with_knob(c.from->source, c.knob, c.value);
    if (changed.empty()) continue;
    if (!gxx_compiles(changed, include_dir, compiler)) {
      if (dropped) ++*dropped;
      continue;
    }
    const TaskSpec& shape = shapes[rng() % shapes.size()];
    EditPair p;
    p.kind = "param";
    p.task = hgemm_task(shape.m, shape.n, shape.k, c.from->layout, c.from->acc);
    p.from = {c.from->name, c.from->family, c.from->source, 0, "family:" + c.from->name};
    p.to = {c.from->name + "_" + c.knob + std::to_string(c.value), c.from->family, changed, 0,
            "param:" + c.knob + "=" + std::to_string(c.value)};
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace kernelrl
