// Rows sampled a step ahead (rollout.overlap) in a checkpoint: the next step's prompts and
// completions with π_old of every row under the policy that sampled them, so a resumed run
// trains on exactly the rows the uninterrupted one would have. Tasks are stored by name.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/tasks/task.h"
#include "trainer/step_batch.h"

namespace kernelrl {

// Tasks by name, prompt and completion ids, texts, finish reasons and π_old (unscored rows).
nlohmann::json pending_rows_json(const StepBatch& pending);

// The rows back, their tasks looked up in `tasks` (a UserError names a task the stage no longer
// has), prompts closed by `prompt_format`'s end-of-turn stop, responses parsed with
// `response_format`.
StepBatch pending_rows_from_json(const nlohmann::json& j, const std::vector<TaskSpec>& tasks,
                                 const std::string& prompt_format,
                                 const std::string& response_format);

}  // namespace kernelrl
