#include "trainer/rl_pending.h"

#include <algorithm>

#include "common/error.h"
#include "model/chat_format.h"

namespace kernelrl {

nlohmann::json pending_rows_json(const StepBatch& p) {
  nlohmann::json j = {{"generated", p.generated},
                      {"groups", nlohmann::json::array()},
                      {"rollouts", nlohmann::json::array()}};
  for (const auto& g : p.groups)
    j["groups"].push_back({{"task", g.task.name},
                           {"prompt", g.prompt},
                           {"prompt_ids", g.prompt_ids},
                           {"exemplars_used", g.exemplars_used},
                           {"edit_base", g.edit_base}});
  for (const auto& r : p.rollouts)
    j["rollouts"].push_back({{"group", r.group},
                             {"completion", r.completion},
                             {"text", r.text},
                             {"finish_reason", r.finish_reason},
                             {"policy_logprobs", r.policy_logprobs}});
  return j;
}

StepBatch pending_rows_from_json(const nlohmann::json& j, const std::vector<TaskSpec>& tasks,
                                 const std::string& prompt_format,
                                 const std::string& response_format) {
  StepBatch p;
  p.generated = j.at("generated").get<int64_t>();
  for (const auto& g : j.at("groups")) {
    const std::string name = g.at("task").get<std::string>();
    auto it =
        std::find_if(tasks.begin(), tasks.end(), [&](const TaskSpec& t) { return t.name == name; });
    if (it == tasks.end())
      throw UserError("checkpoint: rows sampled ahead are for task '" + name +
                      "', which this stage no longer has");
    p.groups.push_back({*it, g.at("prompt").get<std::string>(),
                        g.at("prompt_ids").get<std::vector<int64_t>>(),
                        g.at("exemplars_used").get<int64_t>(), turn_end(prompt_format),
                        g.value("edit_base", std::string())});
  }
  for (const auto& r : j.at("rollouts")) {
    Rollout x;
    x.group = r.at("group").get<size_t>();
    x.completion = r.at("completion").get<std::vector<int64_t>>();
    x.text = r.at("text").get<std::string>();
    x.finish_reason = r.at("finish_reason").get<std::string>();
    x.policy_logprobs = r.at("policy_logprobs").get<std::vector<float>>();
    x.parsed = parse_response(x.text, response_format, p.groups.at(x.group).edit_base);
    p.rollouts.push_back(std::move(x));
  }
  return p;
}

}  // namespace kernelrl
