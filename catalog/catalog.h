// The kernel catalog: the best verified HGEMM kernel per (device, shape, layout, accumulation)
// across results stores (RL runs, benches, family sweeps) and evaluated kernel directories, with
// its device time against every baseline measured beside it. Stored as one JSON file (entries
// plus each kernel's source once), written atomically. Building and printing live here; the
// CMake/C++/PyTorch package is export.h's. Nothing here runs a kernel.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "reward/result_store.h"

namespace kernelrl {

// A contender's medians over the evaluations behind an entry.
struct CatalogTime {
  double device_us = 0;  // device mode (CUDA-graph replay on a GPU)
  double call_us = 0;    // eager call time measured beside it (0 when not measured)
};

// Where a catalog kernel came from. kind "rl": a policy sampled it in an RL stage (the run
// directory, the stage and the 1-based step); reverified when a fresh evaluation (a new store,
// baselines re-measured) confirmed it beat every family variant measured at its shape
// (`kernelrl lift promote`). kind "": a family sweep, a bench or a kernel file.
struct Provenance {
  std::string kind;
  std::string run, stage;
  int64_t step = 0;
  bool reverified = false;
  bool rl() const { return kind == "rl"; }
  std::string describe() const;  // "rl hgemm_rl@12 (reverified)" or "-"
};

struct CatalogEntry {
  // Key.
  std::string backend;  // gpu | host
  std::string device;   // the evaluator's device name ("host" on the host backend)
  int64_t m = 0, n = 0, k = 0;
  std::string layout = "nn";  // nn | tn
  std::string acc = "f32";    // f32 | f16 accumulation
  // The kernel.
  std::string kernel_id;  // "k" + 12 hex digits of content_hash(source)
  std::string hash;       // the evaluator's compile hash (source + flags + arch)
  std::string origin;     // where its latest evaluation came from (store or file)
  CatalogTime time;       // its own times
  double cv = 0;          // spread of its latest evaluation
  std::map<std::string, CatalogTime> baselines;  // every baseline measured beside it
  std::string reference;  // the ranking baseline: lt-auto (gpu) | torch (host)
  double speedup = 0;     // median over evaluations of reference / kernel device time
  double max_abs_dev = 0, dev_bound = 0;  // of its latest evaluation
  int64_t evaluations = 0;                // evaluations of this kernel behind the medians
  int64_t competitors = 0;                // distinct verified kernels that competed for this key
  std::string mode;                       // timing key, e.g. "device/cold/g20"
  std::string measured_at;                // latest evaluation (UTC)
  Provenance provenance;                  // rl (run, stage, step) or not

  std::string shape() const;  // "MxNxK"
  // Speedup over a baseline measured beside it (0 when it was not).
  double speedup_over(const std::string& baseline) const;
};

struct Catalog {
  std::string created_at;                      // UTC
  std::vector<std::string> inputs;             // stores and kernel directories it came from
  std::map<std::string, int64_t> skipped;      // evaluations left out, by reason
  std::vector<CatalogEntry> entries;           // sorted by key
  std::map<std::string, std::string> sources;  // kernel_id -> source
};

// "k" + 12 hex digits of the source's content hash: a kernel's name in catalogs and exports.
std::string catalog_kernel_id(const std::string& source);
// The ranking baseline of a backend: lt-auto (cuBLASLt autotuned, the task's layout) on a GPU,
// torch on the host backend.
std::string catalog_reference(const std::string& backend);

// Collects evaluations and keeps, per key, the kernel with the highest median speedup over the
// reference (ties: lower median device time, then kernel id). Ranking by the speedup measured
// beside each evaluation, not by raw time, cancels clock and thermal differences between
// evaluations made at different times. Medians per kernel first: a kernel timed many times
// (RL groups re-evaluate winners) is not favoured by its luckiest draw.
class CatalogBuilder {
 public:
  explicit CatalogBuilder(std::string l2 = "cold");  // only evaluations with this L2 state
  // One evaluation; left out (counted by reason) unless it passed, is an HGEMM task and was
  // timed in device mode with its reference baseline beside it under the builder's L2 state.
  // A kernel's provenance is the last non-empty one it was added with.
  void add(const StoredResult& r, const std::string& origin, const Provenance& provenance = {});
  // Every evaluation of a results store. Throws UserError if it is not one. Kernels an RL
  // stage's policy sampled (the store's exemplar table, rollout/exemplar_store.h) get provenance
  // rl with the store's directory as the run.
  void add_store(const std::filesystem::path& store);
  void add_input(const std::string& what) { inputs_.push_back(what); }
  Catalog finish() const;

 private:
  struct Eval {  // what an entry needs of one evaluation
    EvalResult result;
    std::string mode, created_at, origin;
  };
  std::string l2_;
  std::vector<std::string> inputs_;
  std::map<std::string, int64_t> skipped_;
  std::map<std::string, CatalogEntry> keys_;  // key string -> the key's fields
  // key string -> kernel id -> its evaluations, in the order added
  std::map<std::string, std::map<std::string, std::vector<Eval>>> seen_;
  std::map<std::string, std::string> sources_;  // kernel id -> source
  std::map<std::string, Provenance> provenance_;  // kernel id -> where it came from
};

// `base` with `extra`'s entries merged in: per key the entry with the higher speedup (ties:
// base's), sources of the entries kept, inputs appended, skipped counts added.
Catalog merge_catalogs(Catalog base, const Catalog& extra);

// Writes atomically; reads with a UserError naming the file when it is not a catalog.
void write_catalog(const std::filesystem::path& path, const Catalog& c);
Catalog read_catalog(const std::filesystem::path& path);
nlohmann::json to_json(const CatalogEntry& e);
CatalogEntry catalog_entry_from_json(const nlohmann::json& j);

// The catalog's devices (the evaluator's names, "host" for the host backend) and their entries.
std::map<std::string, int64_t> catalog_devices(const Catalog& c);
// The device a `--device` argument names: an exact name, else the only one containing it
// (case-insensitive: "H200"). Throws UserError listing the devices when none or several match.
std::string resolve_catalog_device(const Catalog& c, const std::string& wanted);

// The `kernelrl catalog show` table: the devices it holds, then per device one row per entry
// (shape, layout, acc, kernel, device us, reference us, speedup, lt-auto-max speedup,
// evaluations, where it came from), wins and means, and how many entries an RL policy wrote.
// `device` non-empty: that device's table only (an exact name, see resolve_catalog_device).
std::string format_catalog(const Catalog& c, const std::string& device = "");

}  // namespace kernelrl
