// Kernel families: parameterized generators that write complete candidate kernels against the
// evaluator contract (kernels/kernel_abi.h: `extern "C" int kernelrl_launch(const kernelrl_args*,
// void* stream)`), each with an instruction stating the target and the choices made. Every
// family's kernels are real files in kernels/ (embedded at build time by kernels/CMakeLists.txt):
// a variant's source is the code of its family's file (which includes "kernel_abi.h", provided
// by the evaluator) that its Config uses, without comments (families_internal.h variant_source),
// followed by an instance block that sets the variant's knobs as a Config and defines
// kernelrl_launch (families_internal.h instance_block).
//   HGEMM (CUDA): hgemm_tiled (shared-memory SIMT), hgemm_wmma (WMMA 16x16x16), hgemm_mma
//   (mma.sync m16n8k16 + ldmatrix + multi-stage cp.async, XOR-swizzled shared memory, grouped
//   block rasterization, split-K, and a main loop with register-double-buffered fragments),
//   hgemm_small (latency-first mma.sync for small and skinny shapes: one wave, split-K reduced
//   in the kernel through a cluster's distributed shared memory), hgemm_wgmma (sm_90a only:
//   wgmma + TMA + mbarrier pipeline, warp-specialized, persistent), hgemm_cutlass (sm_90a only:
//   CUTLASS 3.x collective builders, cooperative / ping-pong / stream-K, compiled against the
//   evaluator's CUTLASS headers); HGEMM (host): hgemm_host. General (CUDA and host, one variant
//   set per general task op): elementwise, reduction, softmax, norm, transpose, gather_scatter,
//   matmul.
// Contract per task kind: HGEMM: inputs[0]=A (MxK row-major fp16), inputs[1]=B (KxN row-major
// for nn, column-major for tn), outputs[0]=C (MxN row-major fp16), dims={M,N,K}; general: inputs
// and outputs in the op's order (task_ops.h), dims = the op's sizes in order, params baked in as
// constants. Every HGEMM variant handles any M, N, K that are multiples of 64; it returns non-zero
// for other shapes. Host variants: plain C++17 for g++, the same entry point, stream ignored.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "data/corpus/triplet.h"
#include "data/tasks/task.h"

namespace kernelrl {

struct KernelVariant {
  std::string family;                      // e.g. hgemm_mma, softmax
  std::string name;                        // unique: family, backend, op/layout and parameters
  std::string backend;                     // cuda | host
  std::string op;                          // the op's name (data/tasks/task_ops.h)
  std::string layout = "nn", acc = "f32";  // HGEMM only
  std::vector<double> op_params;           // general only: the task params baked in
  std::vector<std::pair<std::string, int64_t>> params;  // generator choices
  std::string instruction;
  std::string source;  // complete .cu (cuda) or .cpp (host) file
  std::string arch;    // the device arch it needs ("sm_90a": wgmma/TMA/setmaxnreg); "" = any
};

struct FamilyInfo {
  std::string name;
  TaskKind kind;         // the kind of task it writes
  std::string backends;  // "cuda", "host" or "cuda,host"
  std::string summary;
  std::string arch;  // as KernelVariant::arch
};
const std::vector<FamilyInfo>& kernel_families();

// Whether a variant that needs `needed` runs on a device of `device_arch` ("sm_90a", "sm_80",
// "host"); arch-specific targets ("sm_90a") run only on that arch. "" for either side = any.
bool arch_runs(const std::string& needed, const std::string& device_arch);

// Every variant a HGEMM family offers (its whole parameter grid, both layouts and accumulators).
std::vector<KernelVariant> hgemm_family_variants(const std::string& family);
// The HGEMM family a variant name belongs to (its name starts with the family's and "_"; the
// longest such family); "" when none.
std::string hgemm_family_of(const std::string& variant_name);
// Variants of a general family for one op (with its params; empty = defaults in task_suite).
std::vector<KernelVariant> general_family_variants(const std::string& family,
                                                   const std::string& backend,
                                                   const std::string& op,
                                                   const std::vector<double>& op_params);
// The variants of `backend` written for a task (HGEMM: every family's variants with its layout
// and accumulation; general: its op and params) that run on `device_arch` (the evaluator's
// arch; "" = any: the pretraining corpus).
std::vector<KernelVariant> variants_for_task(const TaskSpec& task, const std::string& backend,
                                             const std::string& device_arch = "");

// Up to `n` variants drawn round-robin over `pools` (one per family, in the given order), each
// pool shuffled by `seed` first, in that order. With `wrap`, a pool that runs out starts over, so
// exactly n come back; without, it drops out and at most the pools' total comes back.
std::vector<KernelVariant> round_robin_variants(std::vector<std::vector<KernelVariant>> pools,
                                                int64_t n, uint64_t seed, bool wrap);

// `families` is "all" or comma-separated family names; `tasks` supply the general ops and their
// params. Returns `n` variants drawn round-robin over the families, each family's variants in a
// seeded shuffled order (wrapping around when a family has fewer than its share).
std::vector<KernelVariant> sample_variants(const std::string& families, int64_t n, uint64_t seed,
                                           const std::vector<TaskSpec>& tasks);

// The pretraining triplet of a variant, tagged: family, <family>, <cuda|host>, <op>, and for an
// op of kind hgemm layout_<nn|tn>, acc_<f32|f16>.
Triplet variant_triplet(const KernelVariant& v);

// What variant_triplet's tags say, read back; nullopt for a triplet that is not a family
// variant's. `kind` is the op's (general when the op is unknown).
struct FamilyTags {
  std::string family, backend, op;
  TaskKind kind = TaskKind::general;
  std::string layout = "nn", acc = "f32";
};
std::optional<FamilyTags> family_tags(const Triplet& t);

// A variant's source split at its instance block ("\n// ---- instance:"): {its kernels/ body,
// the instance block}. The body is the same text for every variant of a family (and op
// category), so several variants compile in one translation unit as the distinct bodies, then
// each instance (in a namespace of its own, with its entry point renamed). Throws
// std::invalid_argument when there is no instance block.
std::pair<std::string, std::string> split_instance(const std::string& source);

}  // namespace kernelrl
