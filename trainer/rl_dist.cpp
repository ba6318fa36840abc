#include "trainer/rl_dist.h"

#include <nlohmann/json.hpp>

#include "trainer/distributed.h"

namespace kernelrl {

namespace {

std::string to_bytes(const nlohmann::json& j) {
  const std::vector<uint8_t> b = nlohmann::json::to_cbor(j);
  return std::string(b.begin(), b.end());
}

nlohmann::json from_bytes(const std::string& s) {
  return nlohmann::json::from_cbor(std::vector<uint8_t>(s.begin(), s.end()));
}

}  // namespace

GroupRange my_groups(size_t n) {
  const size_t w = static_cast<size_t>(dist::world_size()), r = static_cast<size_t>(dist::rank());
  return {n * r / w, n * (r + 1) / w};
}

std::vector<Rollout> sample_groups_sharded(LlamaModel& model, const Tokenizer& tokenizer,
                                           const std::vector<PromptGroup>& groups,
                                           int64_t group_size, const SamplingConfig& sampling,
                                           const std::string& response_format, uint64_t seed,
                                           int64_t* generated) {
  dist::Group* g = dist::group();
  if (!g)
    return sample_groups(model, tokenizer, groups, group_size, sampling, response_format, seed,
                         generated);
  const GroupRange mine = my_groups(groups.size());
  const std::vector<PromptGroup> part(groups.begin() + mine.lo, groups.begin() + mine.hi);
  int64_t tokens = 0;
  std::vector<Rollout> rows =
      sample_groups(model, tokenizer, part, group_size, sampling, response_format, seed, &tokens,
                    nullptr, static_cast<int64_t>(mine.lo) * group_size);
  nlohmann::json j = {{"tokens", tokens}, {"rows", nlohmann::json::array()}};
  for (const auto& r : rows)
    j["rows"].push_back({{"group", r.group + mine.lo},
                         {"completion", r.completion},
                         {"sample_logprobs", r.sample_logprobs},
                         {"policy_logprobs", r.policy_logprobs},
                         {"text", r.text},
                         {"finish_reason", r.finish_reason}});
  std::vector<Rollout> out;
  int64_t total = 0;
  for (const std::string& bytes : g->all_gather_bytes(to_bytes(j))) {
    const nlohmann::json part_j = from_bytes(bytes);
    total += part_j.at("tokens").get<int64_t>();
    for (const auto& r : part_j.at("rows")) {
      Rollout x;
      x.group = r.at("group").get<size_t>();
      x.completion = r.at("completion").get<std::vector<int64_t>>();
      x.sample_logprobs = r.at("sample_logprobs").get<std::vector<float>>();
      x.policy_logprobs = r.at("policy_logprobs").get<std::vector<float>>();
      x.text = r.at("text").get<std::string>();
      x.finish_reason = r.at("finish_reason").get<std::string>();
      x.parsed = parse_response(x.text, response_format, groups.at(x.group).edit_base);
      out.push_back(std::move(x));
    }
  }
  if (generated) *generated = total;
  return out;
}

std::vector<std::pair<size_t, EvalResult>> gather_results(
    const std::vector<std::pair<size_t, EvalResult>>& mine) {
  dist::Group* g = dist::group();
  if (!g) return mine;
  nlohmann::json j = nlohmann::json::array();
  for (const auto& [i, r] : mine) j.push_back({{"row", i}, {"result", to_json(r)}});
  std::vector<std::pair<size_t, EvalResult>> out;
  for (const std::string& bytes : g->all_gather_bytes(to_bytes(j)))
    for (const auto& e : from_bytes(bytes))
      out.emplace_back(e.at("row").get<size_t>(), result_from_json(e.at("result")));
  return out;
}

}  // namespace kernelrl
