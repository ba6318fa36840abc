#include "catalog/export.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <regex>
#include <set>
#include <sstream>

#include "catalog/package_files.h"  // generated: kPackageFiles, the fixed files of catalog/package/
#include "common/error.h"
#include "common/fs.h"

namespace kernelrl {

namespace {

// A string as a C/C++ and CMake double-quoted literal body.
std::string c_literal(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

std::string num(double x) {
  char b[64];
  std::snprintf(b, sizeof b, "%.6g", x);
  return b;
}

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  atomic_write(p, text);
}

}  // namespace

std::string arch_for_device(const std::string& device) {
  // Hopper needs the "a" variant for wgmma/setmaxnreg, as the evaluator compiles for it.
  static const std::vector<std::pair<std::regex, std::string>> known = {
      {std::regex("H100|H200|H800|H20\\b|GH200"), "sm_90a"},
      {std::regex("A100|A800|A30\\b"), "sm_80"},
      {std::regex("A10\\b|A10G|A40|RTX A|RTX 30"), "sm_86"},
      {std::regex("L4\\b|L40|RTX 40|Ada"), "sm_89"},
      {std::regex("B200|B100|GB200"), "sm_100a"}};
  for (const auto& [re, arch] : known)
    if (std::regex_search(device, re)) return arch;
  return "";
}

namespace {

std::string quoted_list(const std::set<std::string>& names) {
  std::string out;
  for (const auto& d : names) out += (out.empty() ? "" : ", ") + ("\"" + d + "\"");
  return out.empty() ? "no GPU entries" : out;
}

}  // namespace

ExportSummary export_catalog(const Catalog& catalog, const ExportOptions& o) {
  ExportSummary s;
  // 1. The GPUs whose entries go into the package: each gets its own dispatch table, chosen at
  // run time by the name of the device the library runs on. One package compiles for one
  // architecture, so the devices must share it.
  std::set<std::string> devices;
  for (const auto& e : catalog.entries)
    if (e.backend == "gpu") devices.insert(e.device);
  int host_entries =
      static_cast<int>(std::count_if(catalog.entries.begin(), catalog.entries.end(),
                                     [](const auto& e) { return e.backend != "gpu"; }));
  if (host_entries)
    s.notes.push_back(std::to_string(host_entries) +
                      " host-backend entries left out (C++ kernels for the CPU)");
  std::set<std::string> chosen;
  for (const auto& d : o.devices) {
    if (!devices.count(d))
      throw UserError("--device: the catalog has no entries for \"" + d +
                      "\"; it has: " + quoted_list(devices));
    chosen.insert(d);
  }
  if (o.devices.empty()) chosen = devices;
  if (chosen.empty()) s.notes.push_back("no GPU entries: every shape goes to cuBLASLt");

  // 2. Architecture: --arch, else the one the chosen devices share.
  s.arch = o.arch;
  if (s.arch.empty()) {
    std::map<std::string, std::set<std::string>> by_arch;
    for (const auto& d : chosen) {
      const std::string a = arch_for_device(d);
      if (a.empty())
        throw UserError("--arch: cannot tell the architecture of \"" + d +
                        "\"; pass it, e.g. --arch sm_90a (or leave the device out with --device)");
      by_arch[a].insert(d);
    }
    if (by_arch.size() > 1) {
      std::string what;
      for (const auto& [a, ds] : by_arch) what += (what.empty() ? "" : "; ") + a + ": " + quoted_list(ds);
      throw UserError("the catalog's GPUs need different architectures (" + what +
                      "); a package compiles for one: pick its devices with --device");
    }
    s.arch = by_arch.empty() ? "sm_90a" : by_arch.begin()->first;  // nothing compiled if empty
  }
  static const std::regex arch_re(R"(^sm_(\d+[a-z]?)$)");
  std::smatch am;
  if (!std::regex_match(s.arch, am, arch_re))
    throw UserError("--arch: \"" + s.arch + "\" is not an SM architecture like sm_90a or sm_80");
  const std::string arch_num = am[1];
  s.devices.assign(chosen.begin(), chosen.end());
  std::map<std::string, int> device_index;
  for (const auto& d : s.devices) device_index.emplace(d, static_cast<int>(device_index.size()));

  // 3. Entries (fp32 accumulation: what hgemm promises) and their kernels, once each however
  // many devices' tables name them (the id is the source's content hash).
  std::vector<const CatalogEntry*> entries;
  int f16 = 0;
  for (const auto& e : catalog.entries) {
    if (e.backend != "gpu" || !chosen.count(e.device)) continue;
    if (e.acc != "f32") {
      ++f16;
      continue;
    }
    const bool wins = e.speedup > o.min_speedup;
    if (o.only_winners && !wins) continue;
    entries.push_back(&e);
  }
  if (f16)
    s.notes.push_back(std::to_string(f16) +
                      " fp16-accumulation entries left out (hgemm accumulates in fp32)");
  std::sort(entries.begin(), entries.end(), [&](const CatalogEntry* a, const CatalogEntry* b) {
    return std::make_tuple(device_index.at(a->device), a->m, a->n, a->k, a->layout) <
           std::make_tuple(device_index.at(b->device), b->m, b->n, b->k, b->layout);
  });
  std::vector<std::string> kernel_ids;
  std::map<std::string, size_t> kernel_index;
  std::map<std::string, std::vector<std::string>> kernel_shapes;
  for (const auto* e : entries) {
    if (kernel_index.emplace(e->kernel_id, kernel_ids.size()).second)
      kernel_ids.push_back(e->kernel_id);
    kernel_shapes[e->kernel_id].push_back(e->shape() + " " + e->layout +
                                          (s.devices.size() > 1 ? " on " + e->device : ""));
  }

  // 4. Write the package into a temp directory, then move it into place.
  if (fs::exists(o.out)) {
    const bool earlier = fs::exists(o.out / "catalog.cmake") && fs::exists(o.out / "catalog.json");
    if (!fs::is_directory(o.out) || (!fs::is_empty(o.out) && !earlier))
      throw UserError("--out: " + o.out.string() +
                      " exists and is not an earlier export; pick a new directory or remove it");
  }
  const fs::path out = fs::absolute(o.out);
  fs::path tmp =
      out.parent_path() / (out.filename().string() + ".tmp." + std::to_string(::getpid()));
  fs::remove_all(tmp);
  fs::create_directories(tmp);

  for (const auto& f : kPackageFiles) write(tmp / f.path, f.text);

  int wins = 0;
  std::ostringstream table;
  table << "// Generated by `kernelrl catalog export`: one dispatch table per GPU the catalog was\n"
        << "// measured on; the library picks the one named like the device it runs on\n"
        << "// (src/device_table.h), none (cuBLASLt) for any other device.\n"
        << "static const std::vector<const char*> kDeviceNames = {";
  for (size_t i = 0; i < s.devices.size(); ++i)
    table << (i ? ", " : "") << "\"" << c_literal(s.devices[i]) << "\"";
  table << "};\n"
        << "static const char kCatalogArch[] = \"" << s.arch << "\";\n"
        << "static const std::vector<const char*> kKernelIds = {";
  for (size_t i = 0; i < kernel_ids.size(); ++i)
    table << (i ? ", " : "") << "\"" << kernel_ids[i] << "\"";
  table << "};\n"
        << "// device, M, N, K, layout (0 nn, 1 tn), kernel, kernel device us, lt-auto device us, "
           "wins\n"
        << "static const std::vector<Entry> kEntries = {\n";
  Catalog exported;
  exported.created_at = catalog.created_at;
  exported.inputs = catalog.inputs;
  s.device_entries.assign(s.devices.size(), 0);
  s.device_wins.assign(s.devices.size(), 0);
  for (const auto* e : entries) {
    const bool w = e->speedup > o.min_speedup;
    const int d = device_index.at(e->device);
    wins += w;
    ++s.device_entries[d];
    s.device_wins[d] += w;
    double lt = e->baselines.count("lt-auto") ? e->baselines.at("lt-auto").device_us : 0;
    table << "    {" << d << ", " << e->m << ", " << e->n << ", " << e->k << ", "
          << (e->layout == "tn" ? 1 : 0) << ", " << kernel_index.at(e->kernel_id) << ", "
          << num(e->time.device_us) << ", " << num(lt) << ", " << (w ? "true" : "false") << "},\n";
    exported.entries.push_back(*e);
    exported.sources[e->kernel_id] = catalog.sources.at(e->kernel_id);
  }
  table << "};\n";
  write(tmp / "src" / "catalog_table.inc", table.str());

  for (const auto& id : kernel_ids) {
    std::ostringstream k;
    k << "// Catalog kernel " << id << " (`kernelrl catalog export`); best at:";
    const auto& shapes = kernel_shapes[id];
    for (size_t i = 0; i < shapes.size(); ++i) k << (i % 6 == 0 ? "\n//  " : ", ") << shapes[i];
    k << "\n// Built with -Dkernelrl_launch=kernelrl_catalog_" << id
      << ". Below: the source as the evaluator verified it.\n"
      << "#include \"kernel_abi.h\"\n#line 1 \"" << id << ".cu\"\n"
      << catalog.sources.at(id);
    write(tmp / "kernels" / (id + ".cu"), k.str());
  }

  std::ostringstream cm;
  cm << "# Generated by `kernelrl catalog export`: what this package holds.\n"
     << "set(KERNELRL_CATALOG_KERNELS";
  for (const auto& id : kernel_ids) cm << " " << id;
  cm << ")\nset(KERNELRL_CATALOG_KERNEL_COUNT " << kernel_ids.size() << ")\n"
     << "set(KERNELRL_CATALOG_ARCH_DEFAULT \"" << arch_num << "\")\n"
     << "set(KERNELRL_CATALOG_DEVICES \"";
  for (size_t i = 0; i < s.devices.size(); ++i) cm << (i ? ";" : "") << c_literal(s.devices[i]);
  cm << "\")\n"
     << "set(KERNELRL_CATALOG_CUTLASS_DEFAULT \"" << c_literal(o.cutlass_include) << "\")\n";
  write(tmp / "catalog.cmake", cm.str());
  write_catalog(tmp / "catalog.json", exported);

  if (fs::exists(out)) fs::remove_all(out);
  fs::rename(tmp, out);
  s.entries = static_cast<int>(entries.size());
  s.wins = wins;
  s.kernels = static_cast<int>(kernel_ids.size());
  return s;
}

}  // namespace kernelrl
