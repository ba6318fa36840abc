#include "model/checkpoint.h"

#include <unistd.h>

#include <atomic>
#include <cstring>
#include <set>
#include <sstream>

#include "common/error.h"
#include "common/fs.h"

namespace kernelrl {
namespace {

using json = nlohmann::json;

constexpr uint64_t kMaxHeaderBytes = 100u << 20;  // the safetensors spec's own limit

struct DtypeInfo {
  const char* name;
  torch::Dtype dtype;
  int64_t bytes;
};
const std::vector<DtypeInfo>& dtype_table() {
  static const std::vector<DtypeInfo> t = {
      {"F64", torch::kFloat64, 8},   {"F32", torch::kFloat32, 4}, {"F16", torch::kFloat16, 2},
      {"BF16", torch::kBFloat16, 2}, {"I64", torch::kInt64, 8},   {"I32", torch::kInt32, 4},
      {"I16", torch::kInt16, 2},     {"I8", torch::kInt8, 1},     {"U8", torch::kUInt8, 1},
      {"BOOL", torch::kBool, 1}};
  return t;
}
const DtypeInfo* dtype_by_name(const std::string& name) {
  for (const auto& d : dtype_table())
    if (name == d.name) return &d;
  return nullptr;
}
const DtypeInfo& dtype_by_torch(torch::Dtype dt) {
  for (const auto& d : dtype_table())
    if (d.dtype == dt) return d;
  throw std::runtime_error(std::string("safetensors: unsupported tensor dtype ") +
                           c10::toString(dt));
}

std::string dtype_name(torch::Dtype dt) {
  if (dt == torch::kBFloat16) return "bf16";
  if (dt == torch::kFloat32) return "fp32";
  if (dt == torch::kFloat16) return "fp16";
  throw UserError(std::string("unsupported model dtype ") + c10::toString(dt));
}
[[noreturn]] void bad_file(const fs::path& path, const std::string& why) {
  throw UserError("safetensors file " + path.string() + ": " + why);
}

struct ParsedFile {
  std::string bytes;
  json header;
  uint64_t data_start = 0;
};

ParsedFile parse_safetensors(const fs::path& path) {
  ParsedFile f;
  if (!fs::is_regular_file(path)) throw UserError("safetensors file not found: " + path.string());
  f.bytes = read_file(path, "safetensors file");
  if (f.bytes.size() < 8) bad_file(path, "shorter than its 8-byte header length (truncated?)");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(f.bytes[i]);  // LE
  if (n > kMaxHeaderBytes || n > f.bytes.size() - 8)
    bad_file(path,
             "header length " + std::to_string(n) + " exceeds the file (truncated or corrupt)");
  f.header =
      json::parse(f.bytes.begin() + 8, f.bytes.begin() + 8 + static_cast<int64_t>(n), nullptr,
                  /*allow_exceptions=*/false);
  if (f.header.is_discarded() || !f.header.is_object())
    bad_file(path, "header is not a JSON object (corrupt file?)");
  f.data_start = 8 + n;
  return f;
}

}  // namespace

// ---- safetensors -------------------------------------------------------------------------

std::map<std::string, torch::Tensor> read_safetensors(const fs::path& path) {
  ParsedFile f = parse_safetensors(path);
  const uint64_t data_size = f.bytes.size() - f.data_start;
  std::map<std::string, torch::Tensor> out;
  for (const auto& [name, e] : f.header.items()) {
    if (name == "__metadata__") continue;
    if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") ||
        !e.contains("data_offsets") || !e["dtype"].is_string() || !e["shape"].is_array() ||
        !e["data_offsets"].is_array() || e["data_offsets"].size() != 2)
      bad_file(path, "entry \"" + name + "\" needs dtype, shape and data_offsets [begin, end]");
    const DtypeInfo* dt = dtype_by_name(e["dtype"].get<std::string>());
    if (!dt) bad_file(path, "entry \"" + name + "\" has unsupported dtype " + e["dtype"].dump());
    std::vector<int64_t> shape;
    int64_t numel = 1;
    for (const auto& d : e["shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0)
        bad_file(path, "entry \"" + name + "\" has a bad shape " + e["shape"].dump());
      shape.push_back(d.get<int64_t>());
      numel *= shape.back();
    }
    const auto& off = e["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      bad_file(path, "entry \"" + name + "\" has non-integer data_offsets");
    const uint64_t b = off[0].get<uint64_t>(), en = off[1].get<uint64_t>();
    if (b > en || en > data_size)
      bad_file(path, "entry \"" + name + "\" data_offsets [" + std::to_string(b) + ", " +
                         std::to_string(en) + "] lie outside the " + std::to_string(data_size) +
                         "-byte data section (truncated?)");
    if (en - b != static_cast<uint64_t>(numel * dt->bytes))
      bad_file(path, "entry \"" + name + "\" holds " + std::to_string(en - b) +
                         " bytes but shape " + e["shape"].dump() + " of " + dt->name + " needs " +
                         std::to_string(numel * dt->bytes));
    auto t = torch::empty(shape, torch::TensorOptions().dtype(dt->dtype));
    if (numel > 0) std::memcpy(t.data_ptr(), f.bytes.data() + f.data_start + b, en - b);
    out.emplace(name, std::move(t));
  }
  return out;
}

std::map<std::string, std::string> read_safetensors_metadata(const fs::path& path) {
  ParsedFile f = parse_safetensors(path);
  std::map<std::string, std::string> out;
  if (f.header.contains("__metadata__") && f.header["__metadata__"].is_object())
    for (const auto& [k, v] : f.header["__metadata__"].items())
      if (v.is_string()) out[k] = v.get<std::string>();
  return out;
}

void write_safetensors(const fs::path& path,
                       const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  json meta = json::object();
  for (const auto& [k, v] : metadata) meta[k] = v;
  meta["format"] = "pt";
  header["__metadata__"] = meta;
  std::vector<torch::Tensor> cpu;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (header.contains(name)) throw std::runtime_error("safetensors: duplicate tensor " + name);
    auto c = t.detach().to(torch::kCPU).contiguous();
    const DtypeInfo& dt = dtype_by_torch(c.scalar_type());
    const uint64_t nbytes = static_cast<uint64_t>(c.numel()) * dt.bytes;
    header[name] = {{"dtype", dt.name},
                    {"shape", c.sizes().vec()},
                    {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
    cpu.push_back(c);
  }
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');  // align the data section to 8 bytes
  std::string out;
  out.reserve(8 + h.size() + offset);
  uint64_t n = h.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  out += h;
  for (const auto& c : cpu)
    out.append(static_cast<const char*>(c.data_ptr()),
               static_cast<size_t>(c.numel()) * dtype_by_torch(c.scalar_type()).bytes);
  atomic_write(path, out);
}

void load_parameters(LlamaModel& model, const std::map<std::string, torch::Tensor>& tensors,
                     const std::string& prefix, const std::string& origin) {
  auto params = model->named_parameters(/*recurse=*/true);
  std::set<std::string> seen;
  torch::NoGradGuard no_grad;
  for (const auto& [file_name, t] : tensors) {
    if (file_name.find("rotary_emb.inv_freq") != std::string::npos) continue;
    std::string name = file_name;
    if (!prefix.empty() && name.rfind(prefix, 0) == 0) name = name.substr(prefix.size());
    // HF files of tied models may still carry lm_head.weight; it equals the embedding.
    if (name == "lm_head.weight" && model->shape().tie_embeddings) continue;
    auto* p = params.find(name);
    if (!p) {
      throw UserError(origin + ": unexpected tensor \"" + file_name +
                      "\" (not a parameter of this model shape: " + model->shape().describe() +
                      ")");
    }
    if (!t.is_floating_point()) {
      throw UserError(origin + ": tensor \"" + file_name + "\" has dtype " +
                      c10::toString(t.scalar_type()) + "; weights must be F32, F16 or BF16");
    }
    if (t.sizes() != p->sizes()) {
      std::ostringstream msg;
      msg << origin << ": tensor \"" << file_name << "\" has shape " << t.sizes() << ", expected "
          << p->sizes();
      throw UserError(msg.str());
    }
    p->copy_(t);
    seen.insert(name);
  }
  for (const auto& p : params) {
    if (!seen.count(p.key()))
      throw UserError(origin + ": missing tensor \"" + prefix + p.key() + "\"");
  }
}

// ---- shapes as JSON ----------------------------------------------------------------------

json shape_to_json(const ModelShape& s) {
  const RopeScaling& r = s.rope_scaling;
  return {{"arch", s.arch},
          {"vocab_size", s.vocab_size},
          {"d_model", s.d_model},
          {"n_layers", s.n_layers},
          {"n_heads", s.n_heads},
          {"n_kv_heads", s.n_kv_heads},
          {"d_ff", s.d_ff},
          {"max_seq_len", s.max_seq_len},
          {"rope_theta", s.rope_theta},
          {"norm_eps", s.norm_eps},
          {"tie_embeddings", s.tie_embeddings},
          {"head_dim", s.head_dim()},
          {"qkv_bias", s.qkv_bias},
          {"o_bias", s.o_bias},
          {"qk_norm", s.qk_norm},
          {"rope_scaling",
           {{"type", r.type},
            {"factor", r.factor},
            {"low_freq_factor", r.low_freq_factor},
            {"high_freq_factor", r.high_freq_factor},
            {"original_max_position", r.original_max_position}}}};
}

ModelShape shape_from_json(const json& j, const std::string& origin) {
  ModelShape s;
  try {
    s.vocab_size = j.at("vocab_size").get<int64_t>();
    s.d_model = j.at("d_model").get<int64_t>();
    s.n_layers = j.at("n_layers").get<int64_t>();
    s.n_heads = j.at("n_heads").get<int64_t>();
    s.n_kv_heads = j.at("n_kv_heads").get<int64_t>();
    s.d_ff = j.at("d_ff").get<int64_t>();
    s.max_seq_len = j.at("max_seq_len").get<int64_t>();
    s.rope_theta = j.at("rope_theta").get<double>();
    s.norm_eps = j.at("norm_eps").get<double>();
    s.tie_embeddings = j.at("tie_embeddings").get<bool>();
    // Keys added with format_version 2 (HF families); version 1 files are Llama shapes.
    s.arch = j.value("arch", s.arch);
    const int64_t hd = j.value("head_dim", int64_t{0});
    if (hd > 0 && (s.n_heads <= 0 || hd * s.n_heads != s.d_model)) s.head_size = hd;
    s.qkv_bias = j.value("qkv_bias", false);
    s.o_bias = j.value("o_bias", false);
    s.qk_norm = j.value("qk_norm", false);
    if (j.contains("rope_scaling")) {
      const json& r = j.at("rope_scaling");
      s.rope_scaling.type = r.at("type").get<std::string>();
      s.rope_scaling.factor = r.at("factor").get<double>();
      s.rope_scaling.low_freq_factor = r.at("low_freq_factor").get<double>();
      s.rope_scaling.high_freq_factor = r.at("high_freq_factor").get<double>();
      s.rope_scaling.original_max_position = r.at("original_max_position").get<int64_t>();
    }
  } catch (const json::exception& e) {
    throw UserError(origin + ": bad model shape (" + e.what() + ")");
  }
  s.validate();
  return s;
}

// ---- native checkpoints ------------------------------------------------------------------

namespace {

json read_json_file(const fs::path& path, const std::string& what) {
  auto j = json::parse(read_file(path, what), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    throw UserError(what + " " + path.string() + " is not a JSON object (corrupt file?)");
  return j;
}

// The model's parameters under `prefix` (lm_head never prefixed). With `merged`, LoRA
// adapters are folded into their weights (W + (α/r) B A) and not listed themselves: the
// plain model an HF export holds.
std::vector<std::pair<std::string, torch::Tensor>> parameter_list(LlamaModel& model,
                                                                  const std::string& prefix,
                                                                  bool merged = false) {
  std::map<std::string, torch::Tensor> merged_weights;
  if (merged && model->has_lora())
    for (const auto& m : model->named_modules())
      if (auto* p = m.value()->as<ProjectionImpl>(); p && p->has_lora())
        merged_weights[m.key() + ".weight"] = p->merged_weight();
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& p : model->named_parameters(/*recurse=*/true)) {
    if (merged && p.key().find(".lora_") != std::string::npos) continue;
    const bool head = p.key() == "lm_head.weight";
    auto it = merged_weights.find(p.key());
    out.emplace_back((head ? "" : prefix) + p.key(),
                     it == merged_weights.end() ? p.value() : it->second);
  }
  return out;
}

json lora_to_json(const LoraConfig& c) {
  return {{"rank", c.rank}, {"alpha", c.alpha}, {"dropout", c.dropout}, {"targets", c.targets}};
}

LoraConfig lora_from_json(const json& j, const std::string& origin) {
  LoraConfig c;
  try {
    c.rank = j.at("rank").get<int64_t>();
    c.alpha = j.at("alpha").get<double>();
    c.dropout = j.at("dropout").get<double>();
    c.targets = j.at("targets").get<std::vector<std::string>>();
  } catch (const json::exception& e) {
    throw UserError(origin + ": bad \"lora\" (" + std::string(e.what()) + ")");
  }
  return c;
}

// Adapters stay fp32 whatever the base's dtype (their updates are small against the weights).
void adapters_to_fp32(LlamaModel& model) {
  torch::NoGradGuard ng;
  for (auto& [name, p] : model->lora_parameters()) p.set_data(p.to(torch::kFloat32));
}

// Copies an adapter file's tensors into the model's adapters: every adapter present, nothing
// else, shapes equal.
void load_adapters(LlamaModel& model, const std::map<std::string, torch::Tensor>& tensors,
                   const std::string& origin) {
  std::map<std::string, torch::Tensor> params;
  for (auto& [name, p] : model->lora_parameters()) params[name] = p;
  torch::NoGradGuard ng;
  for (const auto& [name, t] : tensors) {
    auto it = params.find(name);
    if (it == params.end())
      throw UserError(origin + ": unexpected tensor \"" + name +
                      "\" (not an adapter of this model)");
    if (t.sizes() != it->second.sizes() || !t.is_floating_point())
      throw UserError(origin + ": adapter \"" + name + "\" has the wrong shape or dtype");
    it->second.copy_(t);
  }
  if (tensors.size() != params.size())
    throw UserError(origin + ": holds " + std::to_string(tensors.size()) +
                    " adapter tensors, the model has " + std::to_string(params.size()));
}

std::atomic<unsigned> g_dir_counter{0};

// The files that carry a tokenizer into a checkpoint or export, (name, bytes), the tokenizer's
// own first: a SentencePiece model as tokenizer.model; an HF tokenizer.json as itself plus the
// tokenizer_config.json beside it (eos and pad live there). None for an empty path.
std::vector<std::pair<std::string, std::string>> tokenizer_files(const fs::path& tokenizer_path) {
  if (tokenizer_path.empty()) return {};
  if (tokenizer_path.extension() != ".json")
    return {{"tokenizer.model", read_file(tokenizer_path, "tokenizer model")}};
  std::vector<std::pair<std::string, std::string>> out = {
      {"tokenizer.json", read_file(tokenizer_path, "tokenizer.json")}};
  const fs::path config = tokenizer_path.parent_path() / "tokenizer_config.json";
  if (fs::is_regular_file(config))
    out.emplace_back("tokenizer_config.json", read_file(config, "tokenizer_config.json"));
  return out;
}

// Writes a directory's files into a temp sibling with `fill`, then swaps it into place.
template <class Fill>
void write_dir_atomically(const fs::path& dir, Fill fill) {
  const fs::path target = fs::absolute(dir).lexically_normal();
  const std::string tag = std::to_string(::getpid()) + "." + std::to_string(g_dir_counter++);
  const fs::path tmp = target.string() + ".tmp." + tag;
  fs::create_directories(target.parent_path());
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  try {
    fill(tmp);
  } catch (...) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    throw;
  }
  if (fs::exists(target)) {
    const fs::path old = target.string() + ".old." + tag;
    fs::rename(target, old);
    fs::rename(tmp, target);
    fs::remove_all(old);
  } else {
    fs::rename(tmp, target);
  }
}

}  // namespace

std::string save_checkpoint(const fs::path& dir, LlamaModel& model, const ModelShape& shape,
                            const fs::path& tokenizer_path, const json& extra) {
  if (!(model->shape() == shape))
    throw std::runtime_error("save_checkpoint: shape differs from the model's own shape");
  const auto tok_files = tokenizer_files(tokenizer_path);
  // A LoRA policy over a base read from a directory saves its adapters only.
  const bool adapters_only = model->has_lora() && !model->lora_base_dir().empty();
  write_dir_atomically(dir, [&](const fs::path& tmp) {
    if (adapters_only)
      write_safetensors(tmp / "adapter_model.safetensors", model->lora_parameters(),
                        {{"kernelrl", "lora-adapters"}});
    else
      write_safetensors(tmp / "model.safetensors", parameter_list(model, ""),
                        {{"kernelrl", "checkpoint"}});
    json meta = {{"format", "kernelrl-checkpoint"},
                 {"format_version", 2},
                 {"shape", shape_to_json(shape)},
                 {"dtype", dtype_name(model->dtype())},
                 {"tokenizer", tok_files.empty() ? json(nullptr) : json(tok_files[0].first)},
                 {"tokenizer_origin", tokenizer_path.string()},
                 {"extra", extra.is_null() ? json::object() : extra}};
    if (model->has_lora()) meta["lora"] = lora_to_json(model->lora());
    if (adapters_only)
      meta["base"] = fs::absolute(model->lora_base_dir()).lexically_normal().string();
    for (const auto& [name, bytes] : tok_files) atomic_write(tmp / name, bytes);
    atomic_write(tmp / "checkpoint.json", meta.dump(2) + "\n");
  });
  return tok_files.empty() ? std::string() : tok_files[0].first;
}

Checkpoint load_checkpoint(const fs::path& dir, torch::Device device,
                           std::optional<torch::Dtype> dtype) {
  if (!fs::is_directory(dir)) throw UserError("checkpoint directory not found: " + dir.string());
  if (!fs::exists(dir / "checkpoint.json")) {
    if (fs::exists(dir / "config.json")) return import_hf(dir, device, dtype);
    throw UserError("not a checkpoint: " + dir.string() +
                    " has no checkpoint.json (nor an HF config.json)");
  }
  const std::string origin = (dir / "checkpoint.json").string();
  json meta = read_json_file(dir / "checkpoint.json", "checkpoint metadata");
  if (meta.value("format", "") != "kernelrl-checkpoint")
    throw UserError(origin + ": format is not \"kernelrl-checkpoint\"");
  // Version 2 added the HF-family keys to "shape" (version 1 shapes read as Llama).
  const json version = meta.value("format_version", json(0));
  if (version != 1 && version != 2)
    throw UserError(origin + ": unsupported format_version " + version.dump() +
                    " (this build reads 1 and 2)");
  if (!meta.contains("shape")) throw UserError(origin + ": no \"shape\"");
  Checkpoint c;
  c.dir = dir;
  c.shape = shape_from_json(meta["shape"], origin);
  c.extra = meta.value("extra", json::object());
  if (meta.contains("tokenizer") && meta["tokenizer"].is_string()) {
    c.tokenizer_path = dir / meta["tokenizer"].get<std::string>();
    if (!fs::exists(*c.tokenizer_path))
      throw UserError(origin + ": tokenizer file " + c.tokenizer_path->string() + " is missing");
  }
  if (meta.contains("base")) {  // adapters over a base checkpoint (native or HF)
    if (!meta.contains("lora") || !meta["base"].is_string())
      throw UserError(origin + ": \"base\" needs a path and a \"lora\" section");
    const fs::path base_dir = meta["base"].get<std::string>();
    if (!fs::is_directory(base_dir))
      throw UserError(origin + ": its base checkpoint " + base_dir.string() +
                      " is gone (a LoRA checkpoint holds adapters only)");
    Checkpoint base = load_checkpoint(base_dir, device, dtype);
    if (!(base.shape == c.shape))
      throw UserError(origin + ": its base " + base_dir.string() + " has another shape (" +
                      base.shape.describe() + ")");
    c.model = base.model;
    c.model->add_lora(lora_from_json(meta["lora"], origin), /*seed=*/0, base_dir.string());
    load_adapters(c.model, read_safetensors(dir / "adapter_model.safetensors"),
                  (dir / "adapter_model.safetensors").string());
    return c;
  }
  c.model = LlamaModel(c.shape);
  if (meta.contains("lora")) c.model->add_lora(lora_from_json(meta["lora"], origin), /*seed=*/0);
  auto tensors = read_safetensors(dir / "model.safetensors");
  load_parameters(c.model, tensors, "", (dir / "model.safetensors").string());
  c.model->to(device, dtype.value_or(resolve_dtype("auto", device)));
  adapters_to_fp32(c.model);
  return c;
}

void add_lora_adapters(LlamaModel& model, const LoraConfig& config, uint64_t seed,
                       const std::string& base_dir) {
  model->add_lora(config, seed, base_dir);
  adapters_to_fp32(model);
}

// ---- Hugging Face ------------------------------------------------------------------------

namespace {

ModelShape shape_from_hf_config_unchecked(const json& j, const std::string& origin) {
  // Every refusal names the config.json key, so a user can see what this build lacks.
  auto refuse = [&](const std::string& key, const std::string& why) {
    throw UserError(origin + ": \"" + key + "\" " + why);
  };
  auto need_int = [&](const char* key) -> int64_t {
    if (!j.contains(key) || !j[key].is_number_integer())
      throw UserError(origin + ": HF config needs an integer \"" + key + "\"");
    return j[key].get<int64_t>();
  };
  auto is_set = [&](const char* key) { return j.contains(key) && !j[key].is_null(); };
  if (!j.contains("model_type") || !j["model_type"].is_string())
    refuse("model_type", "is missing (expected llama, qwen2 or qwen3)");
  ModelShape s;
  s.arch = j["model_type"].get<std::string>();
  if (s.arch != "llama" && s.arch != "qwen2" && s.arch != "qwen3")
    refuse("model_type",
           "is " + j["model_type"].dump() + "; supported model types are llama, qwen2 and qwen3");
  s.vocab_size = need_int("vocab_size");
  s.d_model = need_int("hidden_size");
  s.n_layers = need_int("num_hidden_layers");
  s.n_heads = need_int("num_attention_heads");
  s.n_kv_heads = is_set("num_key_value_heads") ? need_int("num_key_value_heads") : s.n_heads;
  s.d_ff = need_int("intermediate_size");
  // transformers' defaults where a key is absent (LlamaConfig, Qwen2Config, Qwen3Config).
  s.max_seq_len = is_set("max_position_embeddings") ? need_int("max_position_embeddings")
                  : s.arch == "llama"               ? 2048
                                                    : 32768;
  s.norm_eps = j.value("rms_norm_eps", 1e-6);
  s.tie_embeddings = j.value("tie_word_embeddings", false);
  if (is_set("head_dim")) {
    const int64_t hd = need_int("head_dim");
    if (s.n_heads <= 0 || hd * s.n_heads != s.d_model) s.head_size = hd;
  } else if (s.arch == "qwen3") {
    s.head_size = 128;  // Qwen3Config's default head_dim
    if (s.n_heads > 0 && s.head_size * s.n_heads == s.d_model) s.head_size = 0;
  }
  if (j.value("hidden_act", std::string("silu")) != "silu")
    refuse("hidden_act", "is " + j["hidden_act"].dump() + "; only silu (SwiGLU) is implemented");
  if (j.value("mlp_bias", false)) refuse("mlp_bias", "is true; MLP biases are not implemented");
  if (s.arch == "qwen2") {
    s.qkv_bias = true;  // Qwen2's q/k/v projections always carry biases, o_proj never
  } else {
    s.qkv_bias = s.o_bias = j.value("attention_bias", false);
  }
  s.qk_norm = s.arch == "qwen3";
  // Sliding-window attention is not implemented: only configs where it is off load.
  if (j.value("use_sliding_window", false))
    refuse("use_sliding_window", "is true; sliding-window attention is not implemented");
  if (is_set("layer_types")) {
    for (const auto& t : j["layer_types"])
      if (t != "full_attention")
        refuse("layer_types", "holds " + t.dump() + "; only full_attention layers are implemented");
  }
  // RoPE: transformers >= 5 writes rope_parameters {rope_theta, rope_type, ...}; older versions
  // rope_theta and rope_scaling {type|rope_type, ...} at the top level (null when unscaled).
  s.rope_theta = 10000.0;
  std::string rope_key = "rope_parameters";
  json rope = json::object();
  if (is_set("rope_parameters")) {
    if (!j["rope_parameters"].is_object()) refuse("rope_parameters", "must be an object");
    rope = j["rope_parameters"];
  }
  if (is_set("rope_scaling")) {
    if (!j["rope_scaling"].is_object()) refuse("rope_scaling", "must be an object or null");
    rope_key = "rope_scaling";
    for (const auto& [k, v] : j["rope_scaling"].items()) rope[k] = v;
  }
  if (j.contains("rope_theta") && j["rope_theta"].is_number())
    s.rope_theta = j["rope_theta"].get<double>();
  if (rope.contains("rope_theta") && rope["rope_theta"].is_number())
    s.rope_theta = rope["rope_theta"].get<double>();
  const std::string type_key = rope.contains("rope_type") ? "rope_type" : "type";
  const std::string rope_type = rope.value(type_key, std::string("default"));
  for (const char* key : {"partial_rotary_factor"}) {
    const json& holder = rope.contains(key) ? rope : j;
    if (holder.contains(key) && holder[key].is_number() && holder[key].get<double>() != 1.0)
      refuse(key, "is " + holder[key].dump() + "; partial rotary embeddings are not implemented");
  }
  if (rope_type == "llama3") {
    auto num = [&](const char* key) -> double {
      if (!rope.contains(key) || !rope[key].is_number())
        refuse(rope_key + "." + key, "must be a number for rope_type llama3");
      return rope[key].get<double>();
    };
    s.rope_scaling.type = "llama3";
    s.rope_scaling.factor = num("factor");
    s.rope_scaling.low_freq_factor = num("low_freq_factor");
    s.rope_scaling.high_freq_factor = num("high_freq_factor");
    s.rope_scaling.original_max_position =
        static_cast<int64_t>(num("original_max_position_embeddings"));
  } else if (rope_type != "default") {
    refuse(rope_key + "." + type_key,
           "is \"" + rope_type + "\"; supported rope types are default and llama3");
  }
  s.validate();
  return s;
}

}  // namespace

ModelShape shape_from_hf_config(const json& j, const std::string& origin) {
  try {
    return shape_from_hf_config_unchecked(j, origin);
  } catch (const json::exception& e) {  // a key of the wrong JSON type (null eps, ...)
    throw UserError(origin + ": HF config has a key of the wrong type (" + e.what() + ")");
  }
}

ModelShape shape_from_hf_config_file(const fs::path& path) {
  return shape_from_hf_config(read_json_file(path, "HF config"), path.string());
}

json hf_config(const ModelShape& s, torch::Dtype dtype, int64_t bos_id, int64_t eos_id) {
  std::string dt = dtype == torch::kBFloat16  ? "bfloat16"
                   : dtype == torch::kFloat16 ? "float16"
                                              : "float32";
  json rope = {{"rope_theta", s.rope_theta}, {"rope_type", s.rope_scaling.type}};
  if (s.rope_scaling.type == "llama3") {
    rope["factor"] = s.rope_scaling.factor;
    rope["low_freq_factor"] = s.rope_scaling.low_freq_factor;
    rope["high_freq_factor"] = s.rope_scaling.high_freq_factor;
    rope["original_max_position_embeddings"] = s.rope_scaling.original_max_position;
  }
  const char* architecture = s.arch == "qwen2"   ? "Qwen2ForCausalLM"
                             : s.arch == "qwen3" ? "Qwen3ForCausalLM"
                                                 : "LlamaForCausalLM";
  json c = {{"architectures", {architecture}},
            {"model_type", s.arch},
            {"vocab_size", s.vocab_size},
            {"hidden_size", s.d_model},
            {"intermediate_size", s.d_ff},
            {"num_hidden_layers", s.n_layers},
            {"num_attention_heads", s.n_heads},
            {"num_key_value_heads", s.n_kv_heads},
            {"head_dim", s.head_dim()},
            {"max_position_embeddings", s.max_seq_len},
            {"rms_norm_eps", s.norm_eps},
            {"rope_theta", s.rope_theta},
            {"rope_parameters", rope},
            {"tie_word_embeddings", s.tie_embeddings},
            {"hidden_act", "silu"},
            {"bos_token_id", bos_id},
            {"eos_token_id", eos_id},
            {"torch_dtype", dt},
            {"dtype", dt}};
  if (s.arch == "qwen2") {
    c["use_sliding_window"] = false;
    c["sliding_window"] = nullptr;
    c["max_window_layers"] = s.n_layers;
  } else {
    c["attention_bias"] = s.qkv_bias;
    if (s.arch == "llama") c["mlp_bias"] = false;
    if (s.arch == "qwen3") c["use_sliding_window"] = false;
  }
  return c;
}

void export_hf(const fs::path& dir, LlamaModel& model, const fs::path& tokenizer_path,
               int64_t max_shard_bytes) {
  auto params = parameter_list(model, "model.", /*merged=*/true);
  const auto tok_files = tokenizer_files(tokenizer_path);
  write_dir_atomically(dir, [&](const fs::path& tmp) {
    atomic_write(tmp / "config.json", hf_config(model->shape(), model->dtype()).dump(2) + "\n");
    for (const auto& [name, bytes] : tok_files) atomic_write(tmp / name, bytes);
    if (max_shard_bytes <= 0) {
      write_safetensors(tmp / "model.safetensors", params);
      return;
    }
    std::vector<std::vector<std::pair<std::string, torch::Tensor>>> shards(1);
    int64_t in_shard = 0, total = 0;
    for (auto& p : params) {
      const int64_t bytes = p.second.numel() * p.second.element_size();
      if (in_shard > 0 && in_shard + bytes > max_shard_bytes) {
        shards.emplace_back();
        in_shard = 0;
      }
      shards.back().push_back(p);
      in_shard += bytes;
      total += bytes;
    }
    json weight_map = json::object();
    char name[64];
    for (size_t i = 0; i < shards.size(); ++i) {
      std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", i + 1, shards.size());
      write_safetensors(tmp / name, shards[i]);
      for (const auto& p : shards[i]) weight_map[p.first] = name;
    }
    json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
    atomic_write(tmp / "model.safetensors.index.json", index.dump(2) + "\n");
  });
}

Checkpoint import_hf(const fs::path& dir, torch::Device device, std::optional<torch::Dtype> dtype) {
  if (!fs::is_directory(dir)) throw UserError("HF checkpoint directory not found: " + dir.string());
  Checkpoint c;
  c.dir = dir;
  c.shape = shape_from_hf_config_file(dir / "config.json");
  c.model = LlamaModel(c.shape);
  std::map<std::string, torch::Tensor> tensors;
  const fs::path index_path = dir / "model.safetensors.index.json";
  if (fs::exists(dir / "model.safetensors")) {
    tensors = read_safetensors(dir / "model.safetensors");
  } else if (fs::exists(index_path)) {
    json index = read_json_file(index_path, "safetensors index");
    if (!index.contains("weight_map") || !index["weight_map"].is_object())
      throw UserError(index_path.string() + ": no weight_map object");
    std::set<std::string> files;
    for (const auto& [name, file] : index["weight_map"].items()) {
      if (!file.is_string())
        throw UserError(index_path.string() + ": weight_map[" + name + "] is not a file name");
      files.insert(file.get<std::string>());
    }
    for (const auto& file : files) {
      if (file.find('/') != std::string::npos)
        throw UserError(index_path.string() + ": shard name \"" + file +
                        "\" must be a plain file name");
      auto part = read_safetensors(dir / file);
      for (auto& [name, t] : part) {
        auto it = index["weight_map"].find(name);
        if (it == index["weight_map"].end() || *it != file)
          throw UserError(index_path.string() + ": tensor \"" + name + "\" in " + file +
                          " is not listed there by the index");
        tensors.emplace(name, std::move(t));
      }
    }
  } else {
    throw UserError("HF checkpoint " + dir.string() +
                    " has neither model.safetensors nor model.safetensors.index.json");
  }
  load_parameters(c.model, tensors, "model.", dir.string());
  c.model->to(device, dtype.value_or(resolve_dtype("auto", device)));
  for (const char* name : {"tokenizer.json", "tokenizer.model"})  // HF's own file first
    if (!c.tokenizer_path && fs::is_regular_file(dir / name)) c.tokenizer_path = dir / name;
  return c;
}

}  // namespace kernelrl
