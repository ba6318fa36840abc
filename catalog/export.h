// `kernelrl catalog export`: turns a catalog into a self-contained CMake package (sources, not
// binaries) that builds libkernelrl_catalog.so (hgemm dispatch to the catalog kernel where it
// beat cuBLASLt on the device it runs on, else autotuned cuBLASLt; one table per GPU the
// catalog holds, none for any other GPU), one module per kernel (once, however many devices'
// tables name it) and, with LibTorch, the torch.ops.kernelrl operators. The package's fixed files are catalog/package/ (embedded by
// CMake); the table, the kernel files and catalog.cmake are generated here. It compiles nothing.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "catalog/catalog.h"

namespace kernelrl {

struct ExportOptions {
  std::filesystem::path out;    // package directory (replaced if it holds an earlier export)
  std::string arch;  // "sm_90a"; "" = the one the devices share (H100/H200 -> sm_90a, ...)
  std::vector<std::string> devices;  // which GPUs' tables; empty = every GPU of the catalog
  bool only_winners = false;    // compile only kernels that beat lt-auto somewhere
  double min_speedup = 1.0;     // a kernel is dispatched where speedup over lt-auto > this
  std::string cutlass_include;  // default CUTLASS include dir written into the package
};

struct ExportSummary {
  std::vector<std::string> devices;  // one dispatch table each, in the table's order
  std::string arch;
  int entries = 0;  // (device, shape, layout) entries in the dispatch tables
  int wins = 0;     // of which dispatch to their kernel
  std::vector<int> device_entries, device_wins;  // the same per device
  int kernels = 0;  // kernel modules in the package (each source once)
  std::vector<std::string> notes;  // what was left out and why
};

// The SM architecture of a GPU by name ("NVIDIA H100 80GB HBM3" -> "sm_90a"), "" if unknown.
std::string arch_for_device(const std::string& device);

ExportSummary export_catalog(const Catalog& catalog, const ExportOptions& options);

}  // namespace kernelrl
