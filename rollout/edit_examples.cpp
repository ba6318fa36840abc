#include "rollout/edit_examples.h"

#include "data/tasks/hgemm_split.h"
#include "data/tasks/task_ops.h"
#include "rollout/edit_blocks.h"
#include "rollout/prompt.h"

namespace kernelrl {

std::optional<Triplet> edit_triplet(const EditPair& pair, const std::string& backend,
                                    const std::string& reference) {
  const std::vector<EditBlock> blocks = diff_edit_blocks(pair.from.source, pair.to.source);
  if (blocks.empty()) return std::nullopt;
  PromptParts parts;
  parts.backend = backend;
  parts.device = pair.device;
  parts.completion = "edit";
  Triplet t;
  t.id = "edit:" + pair.kind + ":" + pair.device + ":" + hgemm_split_key(pair.task) + ":" + pair.from.name +
         "->" + pair.to.name;
  t.instruction = task_instruction(pair.task, parts);
  // As build_prompt lays out an edit-mode context: the aim, then the kernel to edit (unscored, as
  // pretraining shows earlier kernels); a measured pair says where the shown kernel ranks.
  std::string context = pair.device.empty() ? "" : speed_aim(pair.device) + "\n";
  if (pair.kind == "measured" && pair.from.device_us > 0)
    context += speed_annotation(pair.from_rank, pair.ranked, pair.device, pair.from.device_us, pair.timing,
                                reference, pair.reference_us) +
               "\n";
  context += edit_base_block(pair.from.source, /*score=*/-1);
  context.pop_back();  // the triplet template adds the newline before the code marker
  t.context = std::move(context);
  t.code = format_edit_blocks(blocks);
  t.source = pair.kind + ":" + pair.from.origin;
  t.tags = {"edit", "edit_" + pair.kind, backend == "host" ? "host" : "cuda", hgemm_op().name,
            "layout_" + pair.task.layout, "acc_" + pair.task.acc};
  return t;
}

}  // namespace kernelrl
