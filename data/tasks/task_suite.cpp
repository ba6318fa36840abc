#include "data/tasks/task_suite.h"

#include <ATen/ATen.h>
#include <yaml-cpp/yaml.h>

#include <cstring>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "common/config.h"
#include "common/error.h"
#include "data/tasks/task_ops.h"

namespace kernelrl {
namespace {

std::string fmt_double(double x) {
  std::ostringstream s;
  s << x;
  return s.str();
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

// Sizes of the op that the first input's shape does not carry (passed as trailing params).
std::vector<std::string> extra_sizes(const OpInfo& op) {
  std::vector<std::string> out;
  for (const auto& s : op.sizes) {
    bool in_first = false;
    for (const auto& d : op.inputs[0].shape) in_first |= d == s;
    if (!in_first) out.push_back(s);
  }
  return out;
}

std::vector<int64_t> resolve(const std::vector<std::string>& shape,
                             const std::map<std::string, int64_t>& sizes) {
  std::vector<int64_t> out;
  for (const auto& d : shape) {
    if (!d.empty() && std::isdigit(static_cast<unsigned char>(d[0]))) {
      out.push_back(std::stoll(d));
    } else {
      out.push_back(sizes.at(d));
    }
  }
  return out;
}

// The sizes of a general task recovered from its tensors' shapes (the TaskSpec is all the
// evaluator's worker gets).
std::map<std::string, int64_t> sizes_of(const TaskSpec& t, const OpInfo& op) {
  std::map<std::string, int64_t> sizes;
  auto take = [&](const std::vector<OpTensor>& sym, const std::vector<TensorSpec>& real) {
    for (size_t i = 0; i < sym.size() && i < real.size(); ++i)
      for (size_t k = 0; k < sym[i].shape.size() && k < real[i].shape.size(); ++k)
        sizes[sym[i].shape[k]] = real[i].shape[k];
  };
  take(op.inputs, t.inputs);
  take(op.outputs, t.outputs);
  return sizes;
}

c10::ScalarType scalar_type(const std::string& dtype) {
  if (dtype == "f32") return at::kFloat;
  if (dtype == "f16") return at::kHalf;
  if (dtype == "bf16") return at::kBFloat16;
  if (dtype == "i32") return at::kInt;
  if (dtype == "i64") return at::kLong;
  throw UserError("unknown dtype \"" + dtype + "\" (allowed: f32, f16, bf16, i32, i64)");
}

std::string describe(const TaskSpec& t, const OpInfo& op, const std::string& extra) {
  std::ostringstream s;
  s << (extra.empty() ? op.formula : extra) << ". Inputs:";
  for (size_t i = 0; i < t.inputs.size(); ++i)
    s << (i ? "," : "") << " inputs[" << i << "] = " << t.inputs[i].name << " "
      << shape_text(t.inputs[i].shape) << " " << t.inputs[i].dtype;
  s << ". Output: outputs[0] = " << t.outputs[0].name << " " << shape_text(t.outputs[0].shape)
    << " " << t.outputs[0].dtype << ". dims = the shape of " << t.inputs[0].name;
  std::vector<std::string> extras = extra_sizes(op);
  for (size_t i = 0; i < t.params.size(); ++i) {
    std::string what = i < op.params.size() ? op.params[i] : "size " + extras[i - op.params.size()];
    s << ", then " << what << " = " << fmt_double(t.params[i]) << " (a double bit-cast to int64)";
  }
  s << ". Tolerance |out - ref| <= " << fmt_double(t.atol) << " + " << fmt_double(t.rtol)
    << " * |ref|.";
  return s.str();
}

}  // namespace

std::vector<TaskSpec> load_task_suite(const std::filesystem::path& file,
                                      const std::string& backend) {
  if (backend != "gpu" && backend != "host")
    throw UserError("task suite backend \"" + backend + "\": expected gpu or host");
  YAML::Node root;
  try {
    root = cfg::load_yaml_file(file);
  } catch (const UserError&) {
    throw;
  } catch (const std::exception& e) {
    throw UserError(file.string() + ": cannot read the task suite (" + e.what() + ")");
  }
  const std::string where = file.string() + ": ";
  if (!root.IsMap() || !root["tasks"] || !root["tasks"].IsSequence())
    throw ConfigError(where + "tasks: expected a list of tasks");
  for (auto it = root.begin(); it != root.end(); ++it)
    if (it->first.as<std::string>() != "tasks")
      throw ConfigError(where + it->first.as<std::string>() + ": unknown key (allowed: tasks)");
  std::vector<TaskSpec> out;
  std::set<std::string> names;
  const YAML::Node tasks = root["tasks"];
  for (size_t i = 0; i < tasks.size(); ++i) {
    const YAML::Node n = tasks[i];
    const std::string path = where + "tasks[" + std::to_string(i) + "]";
    if (!n.IsMap()) throw ConfigError(path + ": expected a mapping");
    static const std::set<std::string> kKeys = {
        "name", "op", "description", "sizes", "host_sizes", "params", "atol", "rtol", "holdout"};
    for (auto it = n.begin(); it != n.end(); ++it) {
      std::string k = it->first.as<std::string>();
      if (!kKeys.count(k))
        throw ConfigError(path + "." + k +
                          ": unknown key (allowed: name, op, description, sizes, host_sizes, "
                          "params, atol, rtol, holdout)");
    }
    auto str = [&](const char* key, bool required) -> std::string {
      if (!n[key]) {
        if (required) throw ConfigError(path + "." + key + ": missing");
        return "";
      }
      if (!n[key].IsScalar()) throw ConfigError(path + "." + key + ": expected a string");
      return n[key].as<std::string>();
    };
    TaskSpec t;
    t.kind = TaskKind::general;
    t.name = str("name", true);
    t.op = str("op", true);
    if (!names.insert(t.name).second)
      throw ConfigError(path + ".name: duplicate task name \"" + t.name + "\"");
    const OpInfo* op = find_op(t.op);
    if (!op || op->kind != TaskKind::general) {
      std::string all;
      for (const auto& o : all_ops())
        if (o.kind == TaskKind::general) all += (all.empty() ? "" : ", ") + o.name;
      throw ConfigError(path + ".op: unknown op \"" + t.op + "\" (known: " + all + ")");
    }
    auto read_map = [&](const char* key, const std::vector<std::string>& expected, bool integer) {
      std::map<std::string, double> m;
      const YAML::Node x = n[key];
      if (!x) {
        if (expected.empty()) return m;
        throw ConfigError(path + "." + key + ": missing (needs " + std::to_string(expected.size()) +
                          " values)");
      }
      if (!x.IsMap()) throw ConfigError(path + "." + key + ": expected a mapping name: value");
      for (auto it = x.begin(); it != x.end(); ++it) {
        std::string k = it->first.as<std::string>();
        if (std::find(expected.begin(), expected.end(), k) == expected.end()) {
          std::string all;
          for (const auto& e : expected) all += (all.empty() ? "" : ", ") + e;
          throw ConfigError(path + "." + key + "." + k + ": not a " + (integer ? "size" : "param") +
                            " of op " + t.op + " (expected: " + all + ")");
        }
        double v;
        try {
          v = it->second.as<double>();
        } catch (const YAML::Exception&) {
          throw ConfigError(path + "." + key + "." + k + ": expected a number");
        }
        if (integer && (v < 1 || v != static_cast<double>(static_cast<int64_t>(v))))
          throw ConfigError(path + "." + key + "." + k + ": expected a positive integer");
        m[k] = v;
      }
      for (const auto& e : expected)
        if (!m.count(e)) throw ConfigError(path + "." + key + "." + e + ": missing");
      return m;
    };
    auto gpu_sizes = read_map("sizes", op->sizes, true);
    auto host_sizes = read_map("host_sizes", op->sizes, true);
    auto params = read_map("params", op->params, false);
    std::map<std::string, int64_t> sizes;
    for (const auto& [k, v] : backend == "host" ? host_sizes : gpu_sizes)
      sizes[k] = static_cast<int64_t>(v);
    for (const auto& x : op->inputs)
      t.inputs.push_back({x.name, resolve(x.shape, sizes), x.dtype, x.init});
    for (const auto& x : op->outputs)
      t.outputs.push_back({x.name, resolve(x.shape, sizes), x.dtype, "normal"});
    for (const auto& p : op->params) t.params.push_back(params.at(p));
    for (const auto& s : extra_sizes(*op)) t.params.push_back(static_cast<double>(sizes.at(s)));
    t.atol = op->atol;
    t.rtol = op->rtol;
    for (const char* key : {"atol", "rtol"}) {
      if (!n[key]) continue;
      double v;
      try {
        v = n[key].as<double>();
      } catch (const YAML::Exception&) {
        throw ConfigError(path + "." + key + ": expected a number");
      }
      if (v < 0) throw ConfigError(path + "." + key + ": expected a number >= 0");
      (std::string(key) == "atol" ? t.atol : t.rtol) = v;
    }
    if (n["holdout"]) {
      try {
        t.holdout = n["holdout"].as<bool>();
      } catch (const YAML::Exception&) {
        throw ConfigError(path + ".holdout: expected true or false");
      }
    }
    if (2 + t.params.size() + t.inputs[0].shape.size() > 8)
      throw ConfigError(path + ": too many dims for kernelrl_args (8 at most)");
    t.description = describe(t, *op, str("description", false));
    out.push_back(std::move(t));
  }
  return out;
}

std::vector<TaskSpec> select_split(const std::vector<TaskSpec>& tasks, bool holdout) {
  std::vector<TaskSpec> out;
  for (const auto& t : tasks)
    if (t.holdout == holdout) out.push_back(t);
  return out;
}

TaskSpec hgemm_task(int64_t m, int64_t n, int64_t k, const std::string& layout,
                    const std::string& acc) {
  TaskSpec t;
  t.kind = TaskKind::hgemm;
  t.m = m;
  t.n = n;
  t.k = k;
  t.layout = layout;
  t.acc = acc;
  t.op = hgemm_op().name;
  t.name = t.op + "_" + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + "_" +
           layout + (acc == "f16" ? "_acc16" : "");
  t.inputs = hgemm_op().input_specs(t);
  t.outputs = {{"C", {m, n}, "f16", "normal"}};
  t.description = "C[M,N] = A[M,K] * B[K,N] in fp16 with " +
                  std::string(acc == "f32" ? "fp32" : "fp16") +
                  " accumulation, M=" + std::to_string(m) + ", N=" + std::to_string(n) +
                  ", K=" + std::to_string(k) + ", layout " + layout + " (B " +
                  (layout == "nn" ? "row-major KxN" : "column-major, i.e. NxK row-major") +
                  "); inputs[0]=A, inputs[1]=B, outputs[0]=C, dims={M,N,K}";
  return t;
}

std::vector<TaskSpec> hgemm_grid(const std::string& name_or_file) {
  std::vector<TaskSpec> out;
  if (name_or_file == "full" || name_or_file == "small") {
    std::vector<int64_t> v =
        name_or_file == "full"
            ? std::vector<int64_t>{64, 128, 256, 512, 1024, 2048, 4096, 8192, 12288, 16384}
            : std::vector<int64_t>{256, 4096, 16384};
    for (int64_t m : v)
      for (int64_t n : v)
        for (int64_t k : v) out.push_back(hgemm_task(m, n, k));
    return out;
  }
  if (name_or_file == "llm") {
    // (N, K) of the q/k/v, output, gate/up and down projections, one row per model.
    const int64_t layers[][2] = {
        {12288, 4096}, {4096, 4096},  {22016, 4096}, {4096, 11008},   // Llama-2-7B
        {6144, 4096},  {28672, 4096}, {4096, 14336},                  // Llama-3-8B (o as above)
        {10240, 8192}, {8192, 8192},  {57344, 8192}, {8192, 28672},   // Llama-3-70B
        {4608, 3584},  {3584, 3584},  {37888, 3584}, {3584, 18944}};  // Qwen2.5-7B
    for (int64_t m : {128, 4096})
      for (const auto& l : layers) out.push_back(hgemm_task(m, l[0], l[1]));
    return out;
  }
  std::ifstream in(name_or_file);
  if (!in)
    throw UserError("HGEMM grid \"" + name_or_file +
                    "\": not full, small or llm, and no such file of MxNxK lines");
  static const std::regex re(
      R"(^\s*(\d+)\s*x\s*(\d+)\s*x\s*(\d+)(?:\s+(nn|tn))?(?:\s+(f32|f16))?\s*$)");
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    std::string l = line.substr(0, line.find('#'));
    if (l.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (!l.empty() && l.back() == '\r') l.pop_back();
    std::smatch m;
    if (!std::regex_match(l, m, re))
      throw UserError(name_or_file + ":" + std::to_string(lineno) +
                      ": expected `MxNxK [nn|tn] [f32|f16]`, got \"" + line + "\"");
    int64_t mm = std::stoll(m[1]), nn = std::stoll(m[2]), kk = std::stoll(m[3]);
    if (mm <= 0 || nn <= 0 || kk <= 0)
      throw UserError(name_or_file + ":" + std::to_string(lineno) + ": sizes must be positive");
    out.push_back(hgemm_task(mm, nn, kk, m[4].matched ? m[4].str() : "nn",
                             m[5].matched ? m[5].str() : "f32"));
  }
  if (out.empty()) throw UserError("HGEMM grid file " + name_or_file + " has no shapes");
  return out;
}

std::vector<int64_t> general_task_dims(const TaskSpec& t) {
  std::vector<int64_t> d = t.inputs.at(0).shape;
  for (double p : t.params) {
    int64_t bits;
    std::memcpy(&bits, &p, sizeof bits);
    d.push_back(bits);
  }
  return d;
}

void refresh_inputs(const TaskSpec& t, std::vector<at::Tensor>& inputs) {
  const OpInfo& op = task_op(t);
  auto sizes = sizes_of(t, op);
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::string init = i < op.inputs.size() ? op.inputs[i].init : t.inputs.at(i).init;
    at::Tensor& x = inputs[i];
    if (init == "index")
      x.random_(0, sizes.at(op.inputs[i].index_of));
    else if (init == "positive")
      x.uniform_(0.5, 1.5);
    else
      x.normal_();
  }
}

std::vector<at::Tensor> make_inputs(const TaskSpec& t, uint64_t seed, c10::Device device) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  std::vector<at::Tensor> out;
  const OpInfo& op = task_op(t);
  auto sizes = sizes_of(t, op);
  const std::vector<TensorSpec> specs = op.input_specs ? op.input_specs(t) : t.inputs;
  for (size_t i = 0; i < specs.size(); ++i) {
    const TensorSpec& s = specs[i];
    std::string init = i < op.inputs.size() ? op.inputs[i].init : s.init;
    at::Tensor x;
    if (init == "index") {
      int64_t bound = sizes.at(op.inputs[i].index_of);
      x = at::randint(0, bound, s.shape, gen, at::TensorOptions().dtype(scalar_type(s.dtype)));
    } else if (init == "positive") {
      x = (at::rand(s.shape, gen, at::TensorOptions().dtype(at::kFloat)) + 0.5)
              .to(scalar_type(s.dtype));
    } else {
      x = at::randn(s.shape, gen, at::TensorOptions().dtype(at::kFloat)).to(scalar_type(s.dtype));
    }
    out.push_back(x.contiguous().to(device));
  }
  return out;
}

std::vector<at::Tensor> reference_outputs(const TaskSpec& t, const std::vector<at::Tensor>& in) {
  const OpInfo& op = task_op(t);
  TORCH_CHECK(in.size() == op.inputs.size(), "task ", t.name, ": expected ", op.inputs.size(),
              " inputs, got ", in.size());
  const std::map<std::string, int64_t> sizes = sizes_of(t, op);
  const at::Tensor y = op.reference(OpCall{t, in, sizes});
  return {y.contiguous().to(scalar_type(op.outputs.at(0).dtype))};
}

}  // namespace kernelrl
