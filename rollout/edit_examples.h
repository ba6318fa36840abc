// Pretraining examples that teach edit completions (rollout.completion: edit): an edit pair
// (data/edit_pairs.h) written as a triplet worded like the edit-mode RL prompt (rollout/
// prompt.h): the instruction is the task at the pair's shape asking for SEARCH/REPLACE blocks,
// the context shows the kernel to edit (for a measured pair after its speed annotation), and the
// code is the blocks that turn it into the pair's target (rollout/edit_blocks.h
// diff_edit_blocks). Writes text only.
#pragma once

#include <optional>
#include <string>

#include "data/corpus/triplet.h"
#include "data/edit_pairs.h"

namespace kernelrl {

// The triplet of `pair` (backend: gpu | host, the prompt's wording); nullopt when the two
// sources are equal. Tags: edit, edit_<kind>, cuda|host, hgemm, layout_*, acc_*.
std::optional<Triplet> edit_triplet(const EditPair& pair, const std::string& backend,
                                    const std::string& reference = "lt-auto");

}  // namespace kernelrl
