// Edit pairs, the raw material of the pretraining examples that teach edit completions
// (rollout.completion: edit): a kernel and the kernel an edit should turn it into, at an HGEMM
// shape. Two kinds:
//   measured  a family variant and a faster variant of the same family at a shape where both
//             were timed (data/speed_annotation.h's measured shapes: family-sweep and
//             per-variant CSVs); cross-family pairs are left out (their diff is a whole kernel)
//   param     a variant and the same variant with one knob of its `using Cfg = ...<...>` line
//             set to another value, the family's other listed values or one outside its list
//             (half or double a listed value), kept when g++ compiles it (host families only:
//             a CUDA family's nvcc compile takes seconds to minutes per variant, so none are
//             made for them here); no speed is claimed
// The example text (instruction, context, SEARCH/REPLACE blocks) is rollout/edit_examples.h's.
// Nothing here times a kernel.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "data/families.h"
#include "data/speed_annotation.h"

namespace kernelrl {

struct EditPair {
  std::string kind;      // measured | param
  TaskSpec task;         // the shape (measured: where both were timed)
  std::string device;    // measured: the machine; param: ""
  std::string timing;    // measured: how the times were taken
  MeasuredKernel from;   // the kernel shown (param: device_us 0)
  MeasuredKernel to;     // what the edit turns it into (measured: faster at the shape)
  int64_t from_rank = 0, ranked = 0;  // measured: rank of `from` among the shape's kernels
  double reference_us = 0;            // measured: the shape's reference time (0 = unknown)
};

// Measured pairs: at every shape not held out (task.holdout), for every kernel of a family but
// that family's fastest there, the pair (it, the family's fastest) and, when there is one in
// between, (it, a faster kernel drawn with `seed`); at most `per_shape` pairs per shape
// (drawn with `seed`; 0 = all). `reference` names the baseline whose time is kept.
std::vector<EditPair> measured_edit_pairs(const std::vector<MeasuredShape>& shapes, int64_t per_shape,
                                          uint64_t seed, const std::string& reference = "lt-auto");

// The values a knob takes across `family_variants` (those with the same layout and
// accumulation as `v`), and `v`'s Cfg line rewritten with `knob` set to `value` ("" when `v`
// has no such knob). Exposed for the tests.
std::string with_knob(const std::string& source, const std::string& knob, int64_t value);

// Parameter-change pairs of a host family's variants, up to `n` (drawn with `seed`), each at a
// shape drawn from `shapes`; the changed sources that g++ (`compiler`) does not compile are
// dropped (*dropped counts them). `include_dir` holds kernel_abi.h (the repository's kernels/).
std::vector<EditPair> param_edit_pairs(const std::string& family, const std::vector<TaskSpec>& shapes,
                                       int64_t n, uint64_t seed, const std::filesystem::path& include_dir,
                                       int64_t* dropped = nullptr, const std::string& compiler = "g++");

}  // namespace kernelrl
