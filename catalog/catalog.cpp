#include "catalog/catalog.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <regex>
#include <set>
#include <sstream>
#include <tuple>

#include "common/error.h"
#include "common/fs.h"
#include "reward/compile.h"
#include "rollout/exemplar_store.h"

namespace kernelrl {

namespace {

constexpr const char* kFormat = "kernelrl-catalog";
constexpr int kVersion = 1;

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// "device/cold/g20" -> {"device", "cold", "g20"}; "device/cold/g20/rated" -> 4 parts
std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string part; std::getline(in, part, sep);) out.push_back(part);
  return out;
}

auto key_tuple(const CatalogEntry& e) {
  return std::make_tuple(e.backend, e.device, e.m, e.n, e.k, e.layout, e.acc);
}

std::string fmt(const char* f, double x) {
  char b[64];
  std::snprintf(b, sizeof b, f, x);
  return b;
}

}  // namespace

std::string CatalogEntry::shape() const {
  return std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
}

double CatalogEntry::speedup_over(const std::string& baseline) const {
  auto it = baselines.find(baseline);
  if (it == baselines.end() || it->second.device_us <= 0 || time.device_us <= 0) return 0;
  return it->second.device_us / time.device_us;
}

std::string Provenance::describe() const {
  if (!rl()) return "-";
  return "rl " + stage + "@" + std::to_string(step) + (reverified ? " (reverified)" : "");
}

std::string catalog_kernel_id(const std::string& source) {
  return "k" + content_hash(source).substr(0, 12);
}

std::string catalog_reference(const std::string& backend) {
  return backend == "gpu" ? "lt-auto" : "torch";
}

CatalogBuilder::CatalogBuilder(std::string l2) : l2_(std::move(l2)) {}

void CatalogBuilder::add(const StoredResult& s, const std::string& origin,
                         const Provenance& provenance) {
  const EvalResult& r = s.result;
  static const std::regex task_re(R"(^hgemm_(\d+)x(\d+)x(\d+)_(nn|tn)(_acc16)?$)");
  std::smatch m;
  if (!std::regex_match(r.task, m, task_re)) {
    ++skipped_["not an HGEMM task"];
    return;
  }
  if (!r.passed()) {
    ++skipped_[std::string("failed (") + status_name(r.status) + ")"];
    return;
  }
  if (r.cand.timing != "device") {
    ++skipped_[r.cand.timing.empty() ? "timing mode unknown (stored before device timing)"
                                     : r.cand.timing + "-mode timing (only device time counts)"];
    return;
  }
  auto mode = split(s.mode, '/');
  const std::string l2 = mode.size() > 1 ? mode[1] : "";
  if (l2 != l2_) {
    ++skipped_["L2 " + (l2.empty() ? std::string("unknown") : l2) + " (catalog: " + l2_ + ")"];
    return;
  }
  // "device/cold/g20/rated": times rescaled to the rated clock (reward.clock_basis); the catalog
  // holds times as run, what the exported library's callers get.
  if (mode.size() > 3 && mode[3] != "as_run") {
    ++skipped_[mode[3] + "-clock times (catalog: as run)"];
    return;
  }
  const std::string ref = catalog_reference(s.backend);
  auto it = r.baselines.find(ref);
  if (it == r.baselines.end() || !it->second.valid() || it->second.timing != "device") {
    ++skipped_["no " + ref + " device time beside it"];
    return;
  }
  if (s.source.empty()) {
    ++skipped_["no source stored"];
    return;
  }
  CatalogEntry key;
  key.backend = s.backend;
  key.device = s.gpu;
  key.m = std::stoll(m[1]);
  key.n = std::stoll(m[2]);
  key.k = std::stoll(m[3]);
  key.layout = m[4];
  key.acc = m[5].matched ? "f16" : "f32";
  key.reference = ref;
  std::ostringstream ks;
  ks << key.backend << '|' << key.device << '|' << key.m << '|' << key.n << '|' << key.k << '|'
     << key.layout << '|' << key.acc;
  const std::string id = catalog_kernel_id(s.source);
  keys_.emplace(ks.str(), key);
  sources_.emplace(id, s.source);
  if (!provenance.kind.empty()) provenance_[id] = provenance;
  Eval e{r, s.mode, s.created_at, origin};
  e.result.compile_log.clear();  // not needed; RL stores hold many
  e.result.metrics = nlohmann::json::object();
  seen_[ks.str()][id].push_back(std::move(e));
}

void CatalogBuilder::add_store(const fs::path& store) {
  if (!fs::is_regular_file(store)) throw UserError("--from: " + store.string() + " is not a file");
  inputs_.push_back(store.string());
  ResultStore rs(store);
  const auto origins = ExemplarStore::policy_origins(store);
  const std::string run = fs::absolute(store).parent_path().string();
  rs.for_each_result([&](const StoredResult& r) {
    Provenance p;
    if (auto it = origins.find(r.result.hash); it != origins.end())
      p = {"rl", run, it->second.scope, it->second.step, /*reverified=*/false};
    add(r, store.string(), p);
  });
}

Catalog CatalogBuilder::finish() const {
  Catalog c;
  c.created_at = utc_now();
  c.inputs = inputs_;
  c.skipped = skipped_;
  for (const auto& [key, kernels] : seen_) {
    std::vector<CatalogEntry> candidates;
    for (const auto& [id, evals] : kernels) {
      CatalogEntry e = keys_.at(key);
      e.kernel_id = id;
      std::vector<double> speedups, dev, call;
      std::map<std::string, std::vector<double>> bdev, bcall;
      for (const Eval& ev : evals) {
        const EvalResult& r = ev.result;
        speedups.push_back(r.baselines.at(e.reference).median_us / r.cand.median_us);
        dev.push_back(r.cand.median_us);
        if (r.cand.call_median_us > 0) call.push_back(r.cand.call_median_us);
        for (const auto& [name, t] : r.baselines) {
          if (!t.valid() || t.timing != "device") continue;
          bdev[name].push_back(t.median_us);
          if (t.call_median_us > 0) bcall[name].push_back(t.call_median_us);
        }
        e.measured_at = std::max(e.measured_at, ev.created_at);
      }
      const Eval& last = evals.back();
      e.hash = last.result.hash;
      e.origin = last.origin;
      e.cv = last.result.cand.cv;
      e.max_abs_dev = last.result.max_abs_dev;
      e.dev_bound = last.result.dev_bound;
      e.mode = last.mode;
      e.speedup = median(speedups);
      e.time = {median(dev), median(call)};
      for (const auto& [name, v] : bdev) e.baselines[name] = {median(v), median(bcall[name])};
      e.evaluations = static_cast<int64_t>(evals.size());
      e.competitors = static_cast<int64_t>(kernels.size());
      if (auto p = provenance_.find(id); p != provenance_.end()) e.provenance = p->second;
      candidates.push_back(std::move(e));
    }
    auto best =
        std::min_element(candidates.begin(), candidates.end(), [](const auto& a, const auto& b) {
          return std::make_tuple(-a.speedup, a.time.device_us, a.kernel_id) <
                 std::make_tuple(-b.speedup, b.time.device_us, b.kernel_id);
        });
    c.sources[best->kernel_id] = sources_.at(best->kernel_id);
    c.entries.push_back(std::move(*best));
  }
  std::sort(c.entries.begin(), c.entries.end(),
            [](const auto& a, const auto& b) { return key_tuple(a) < key_tuple(b); });
  return c;
}

nlohmann::json to_json(const CatalogEntry& e) {
  nlohmann::json b = nlohmann::json::object();
  for (const auto& [name, t] : e.baselines)
    b[name] = {{"device_us", t.device_us}, {"call_us", t.call_us}};
  nlohmann::json j = {{"backend", e.backend},
          {"device", e.device},
          {"m", e.m},
          {"n", e.n},
          {"k", e.k},
          {"layout", e.layout},
          {"acc", e.acc},
          {"kernel", e.kernel_id},
          {"hash", e.hash},
          {"origin", e.origin},
          {"device_us", e.time.device_us},
          {"call_us", e.time.call_us},
          {"cv", e.cv},
          {"baselines", b},
          {"reference", e.reference},
          {"speedup", e.speedup},
          {"max_abs_dev", e.max_abs_dev},
          {"dev_bound", e.dev_bound},
          {"evaluations", e.evaluations},
          {"competitors", e.competitors},
          {"mode", e.mode},
          {"measured_at", e.measured_at}};
  if (!e.provenance.kind.empty())
    j["provenance"] = {{"kind", e.provenance.kind},
                       {"run", e.provenance.run},
                       {"stage", e.provenance.stage},
                       {"step", e.provenance.step},
                       {"reverified", e.provenance.reverified}};
  return j;
}

CatalogEntry catalog_entry_from_json(const nlohmann::json& j) {
  CatalogEntry e;
  e.backend = j.at("backend").get<std::string>();
  e.device = j.at("device").get<std::string>();
  e.m = j.at("m").get<int64_t>();
  e.n = j.at("n").get<int64_t>();
  e.k = j.at("k").get<int64_t>();
  e.layout = j.at("layout").get<std::string>();
  e.acc = j.at("acc").get<std::string>();
  e.kernel_id = j.at("kernel").get<std::string>();
  e.hash = j.value("hash", "");
  e.origin = j.value("origin", "");
  e.time = {j.at("device_us").get<double>(), j.value("call_us", 0.0)};
  e.cv = j.value("cv", 0.0);
  if (j.contains("baselines"))
    for (auto it = j["baselines"].begin(); it != j["baselines"].end(); ++it)
      e.baselines[it.key()] = {it.value().value("device_us", 0.0),
                               it.value().value("call_us", 0.0)};
  e.reference = j.at("reference").get<std::string>();
  e.speedup = j.at("speedup").get<double>();
  e.max_abs_dev = j.value("max_abs_dev", 0.0);
  e.dev_bound = j.value("dev_bound", 0.0);
  e.evaluations = j.value("evaluations", int64_t{1});
  e.competitors = j.value("competitors", int64_t{1});
  e.mode = j.value("mode", "");
  e.measured_at = j.value("measured_at", "");
  if (j.contains("provenance")) {
    const auto& p = j["provenance"];
    e.provenance = {p.value("kind", ""), p.value("run", ""), p.value("stage", ""),
                    p.value("step", int64_t{0}), p.value("reverified", false)};
  }
  return e;
}

void write_catalog(const fs::path& path, const Catalog& c) {
  nlohmann::json entries = nlohmann::json::array();
  for (const auto& e : c.entries) entries.push_back(to_json(e));
  nlohmann::json j = {{"format", kFormat},   {"version", kVersion},  {"created_at", c.created_at},
                      {"inputs", c.inputs},  {"skipped", c.skipped}, {"entries", entries},
                      {"kernels", c.sources}};
  if (path.has_parent_path()) fs::create_directories(path.parent_path());
  atomic_write(path, j.dump(1) + "\n");
}

Catalog read_catalog(const fs::path& path) {
  const std::string text = read_file(path, "catalog");
  Catalog c;
  try {
    auto j = nlohmann::json::parse(text);
    if (j.value("format", "") != kFormat)
      throw UserError("catalog " + path.string() + ": not a KernelRL catalog (no \"format\": \"" +
                      kFormat + "\"); make one with `kernelrl catalog build`");
    if (j.value("version", 0) != kVersion)
      throw UserError("catalog " + path.string() + ": version " +
                      std::to_string(j.value("version", 0)) + ", this kernelrl reads version " +
                      std::to_string(kVersion));
    c.created_at = j.value("created_at", "");
    c.inputs = j.value("inputs", std::vector<std::string>{});
    c.skipped = j.value("skipped", std::map<std::string, int64_t>{});
    for (const auto& e : j.at("entries")) c.entries.push_back(catalog_entry_from_json(e));
    c.sources = j.at("kernels").get<std::map<std::string, std::string>>();
  } catch (const nlohmann::json::exception& e) {
    throw UserError("catalog " + path.string() + ": malformed (" + e.what() + ")");
  }
  for (const auto& e : c.entries)
    if (!c.sources.count(e.kernel_id))
      throw UserError("catalog " + path.string() + ": entry " + e.shape() + " names kernel " +
                      e.kernel_id + " whose source is missing");
  return c;
}

Catalog merge_catalogs(Catalog base, const Catalog& extra) {
  for (const auto& x : extra.entries) {
    auto it = std::find_if(base.entries.begin(), base.entries.end(),
                           [&](const CatalogEntry& e) { return key_tuple(e) == key_tuple(x); });
    if (it != base.entries.end() && it->speedup >= x.speedup) continue;
    if (it != base.entries.end())
      *it = x;
    else
      base.entries.push_back(x);
    base.sources[x.kernel_id] = extra.sources.at(x.kernel_id);
  }
  std::sort(base.entries.begin(), base.entries.end(),
            [](const auto& a, const auto& b) { return key_tuple(a) < key_tuple(b); });
  std::set<std::string> used;
  for (const auto& e : base.entries) used.insert(e.kernel_id);
  for (auto it = base.sources.begin(); it != base.sources.end();)
    it = used.count(it->first) ? std::next(it) : base.sources.erase(it);
  base.inputs.insert(base.inputs.end(), extra.inputs.begin(), extra.inputs.end());
  for (const auto& [why, n] : extra.skipped) base.skipped[why] += n;
  base.created_at = utc_now();
  return base;
}

std::map<std::string, int64_t> catalog_devices(const Catalog& c) {
  std::map<std::string, int64_t> out;
  for (const auto& e : c.entries) ++out[e.device];
  return out;
}

std::string resolve_catalog_device(const Catalog& c, const std::string& wanted) {
  const auto devices = catalog_devices(c);
  if (devices.count(wanted)) return wanted;
  auto lower = [](std::string s) {
    for (auto& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return s;
  };
  std::vector<std::string> hits;
  for (const auto& [d, n] : devices)
    if (!wanted.empty() && lower(d).find(lower(wanted)) != std::string::npos) hits.push_back(d);
  if (hits.size() == 1) return hits[0];
  std::string have;
  for (const auto& [d, n] : devices) have += (have.empty() ? "\"" : ", \"") + d + "\"";
  throw UserError("--device: \"" + wanted + "\" " +
                  (hits.empty() ? "names none" : "names several") + " of the catalog's devices (" +
                  (have.empty() ? "it has no entries" : have) + "); pass one of them");
}

std::string format_catalog(const Catalog& c, const std::string& device) {
  std::ostringstream out;
  const auto devices = catalog_devices(c);
  if (device.empty() && devices.size() > 1) {
    out << devices.size() << " devices, one table each (`--device NAME` shows one):\n";
    for (const auto& [d, n] : devices) out << "  " << d << ": " << n << " entries\n";
    out << "\n";
  }
  // One table per (backend, device); entries are sorted by key, so each group is contiguous.
  for (size_t i = 0; i < c.entries.size();) {
    size_t j = i;
    while (j < c.entries.size() && c.entries[j].backend == c.entries[i].backend &&
           c.entries[j].device == c.entries[i].device)
      ++j;
    if (!device.empty() && c.entries[i].device != device) {
      i = j;
      continue;
    }
    const CatalogEntry& first = c.entries[i];
    const std::string ref = first.reference;
    const bool gpu = first.backend == "gpu";
    out << first.device << " (" << first.backend
        << " backend), device time in us, medians over each kernel's "
        << "evaluations\n";
    char line[256];
    std::snprintf(line, sizeof line, "%-20s %-6s %-4s %-14s %11s %11s %9s %12s %6s  %s\n", "shape",
                  "layout", "acc", "kernel", "device_us", (ref + "_us").c_str(), "speedup",
                  gpu ? "x lt-auto-max" : "", "evals", "from");
    out << line;
    int wins = 0, from_rl = 0;
    double log_sum = 0, sum = 0;
    for (size_t e = i; e < j; ++e) {
      const CatalogEntry& x = c.entries[e];
      double ref_us = x.baselines.count(ref) ? x.baselines.at(ref).device_us : 0;
      double max_sp = x.speedup_over("lt-auto-max");
      std::snprintf(line, sizeof line, "%-20s %-6s %-4s %-14s %11.2f %11.2f %8.3fx %12s %6lld  %s\n",
                    x.shape().c_str(), x.layout.c_str(), x.acc.c_str(), x.kernel_id.c_str(),
                    x.time.device_us, ref_us, x.speedup,
                    gpu ? (max_sp > 0 ? fmt("%.3fx", max_sp).c_str() : "-") : "",
                    static_cast<long long>(x.evaluations), x.provenance.describe().c_str());
      out << line;
      from_rl += x.provenance.rl();
      wins += x.speedup > 1;
      sum += x.speedup;
      log_sum += std::log(x.speedup);
    }
    const double n = static_cast<double>(j - i);
    out << (j - i) << " entries; the kernel beats " << ref << " at " << wins << "; speedup over "
        << ref << ": mean " << fmt("%.3f", sum / n) << "x, geometric mean "
        << fmt("%.3f", std::exp(log_sum / n)) << "x; " << from_rl
        << " written by an RL policy (from: rl STAGE@STEP; the run's directory is in the JSON)\n\n";
    i = j;
  }
  if (c.entries.empty()) out << "the catalog has no entries\n";
  if (!c.skipped.empty()) {
    out << "evaluations left out:\n";
    for (const auto& [why, count] : c.skipped) out << "  " << count << "  " << why << "\n";
  }
  return out.str();
}

}  // namespace kernelrl
