#include "reward/task_json.h"

#include <regex>

#include "common/error.h"
#include "data/tasks/task_ops.h"

namespace kernelrl {

namespace {
nlohmann::json tensor_to_json(const TensorSpec& s) {
  return {{"name", s.name}, {"shape", s.shape}, {"dtype", s.dtype}, {"init", s.init}};
}
TensorSpec tensor_from_json(const nlohmann::json& j) {
  TensorSpec s;
  s.name = j.value("name", "");
  s.shape = j.value("shape", std::vector<int64_t>{});
  s.dtype = j.value("dtype", "f32");
  s.init = j.value("init", "normal");
  return s;
}
}  // namespace

nlohmann::json task_to_json(const TaskSpec& t) {
  nlohmann::json in = nlohmann::json::array(), out = nlohmann::json::array();
  for (const auto& s : t.inputs) in.push_back(tensor_to_json(s));
  for (const auto& s : t.outputs) out.push_back(tensor_to_json(s));
  return {{"name", t.name},     {"kind", task_kind_name(t.kind)},     {"description", t.description},
          {"m", t.m},           {"n", t.n},           {"k", t.k},
          {"layout", t.layout}, {"acc", t.acc},       {"op", t.op},
          {"inputs", in},       {"outputs", out},     {"params", t.params},
          {"atol", t.atol},     {"rtol", t.rtol},     {"holdout", t.holdout}};
}

TaskSpec task_from_json(const nlohmann::json& j) {
  TaskSpec t;
  t.name = j.value("name", "");
  t.kind = parse_task_kind(j.value("kind", task_kind_name(TaskKind::hgemm)));
  t.description = j.value("description", "");
  t.m = j.value("m", int64_t{0});
  t.n = j.value("n", int64_t{0});
  t.k = j.value("k", int64_t{0});
  t.layout = j.value("layout", "nn");
  t.acc = j.value("acc", "f32");
  t.op = j.value("op", "");
  if (j.contains("inputs"))
    for (const auto& s : j["inputs"]) t.inputs.push_back(tensor_from_json(s));
  if (j.contains("outputs"))
    for (const auto& s : j["outputs"]) t.outputs.push_back(tensor_from_json(s));
  t.params = j.value("params", std::vector<double>{});
  t.atol = j.value("atol", 1e-4);
  t.rtol = j.value("rtol", 1e-4);
  t.holdout = j.value("holdout", false);
  return t;
}

void parse_shape(const std::string& text, int64_t& m, int64_t& n, int64_t& k) {
  static const std::regex re(R"(^\s*(\d+)\s*[xX,]\s*(\d+)\s*[xX,]\s*(\d+)\s*$)");
  std::smatch mt;
  if (!std::regex_match(text, mt, re))
    throw UserError("shape \"" + text + "\": expected MxNxK with positive integers, e.g. 4096x4096x4096");
  m = std::stoll(mt[1]);
  n = std::stoll(mt[2]);
  k = std::stoll(mt[3]);
  if (m <= 0 || n <= 0 || k <= 0 || m > (1 << 20) || n > (1 << 20) || k > (1 << 20))
    throw UserError("shape \"" + text + "\": each of M, N, K must be in [1, 1048576]");
}

std::string task_shape(const TaskSpec& t) { return op_shape(t); }

}  // namespace kernelrl
