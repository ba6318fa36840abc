// TaskSpec <-> JSON for the evaluator's worker protocol, plus the HGEMM task constructor the CLI
// and tests use. data/tasks/task.h stays the only definition of the task vocabulary.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "data/tasks/task.h"

namespace kernelrl {

nlohmann::json task_to_json(const TaskSpec& t);
TaskSpec task_from_json(const nlohmann::json& j);

// Parses "MxNxK" (throws UserError naming the text).
void parse_shape(const std::string& text, int64_t& m, int64_t& n, int64_t& k);
// "MxNxK" of an HGEMM task; the first input's shape ("4096x1024") of a general task.
std::string task_shape(const TaskSpec& t);

}  // namespace kernelrl
