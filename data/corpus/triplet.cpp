#include "data/corpus/triplet.h"

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/fs.h"

namespace kernelrl {

using json = nlohmann::json;

std::string to_jsonl(const Triplet& t) {
  json j = {{"id", t.id},     {"instruction", t.instruction}, {"context", t.context},
            {"code", t.code}, {"source", t.source},           {"tags", t.tags}};
  // Replace invalid UTF-8 (binary junk in a scanned file) instead of throwing.
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

Triplet parse_triplet(const std::string& line, const std::string& where) {
  json j;
  try {
    j = json::parse(line);
  } catch (const json::parse_error& e) {
    throw UserError(where + ": not valid JSON (" + std::string(e.what()) + ")");
  }
  if (!j.is_object()) throw UserError(where + ": expected a JSON object per line");
  Triplet t;
  auto str = [&](const char* key, std::string& out, bool required) {
    auto it = j.find(key);
    if (it == j.end()) {
      if (required) throw UserError(where + ": missing field \"" + key + "\"");
      return;
    }
    if (!it->is_string()) throw UserError(where + ": field \"" + key + "\" must be a string");
    out = it->get<std::string>();
  };
  str("id", t.id, true);
  str("instruction", t.instruction, true);
  str("context", t.context, true);
  str("code", t.code, true);
  str("source", t.source, false);
  if (auto it = j.find("tags"); it != j.end()) {
    if (!it->is_array()) throw UserError(where + ": field \"tags\" must be a list of strings");
    for (const auto& x : *it) {
      if (!x.is_string()) throw UserError(where + ": field \"tags\" must be a list of strings");
      t.tags.push_back(x.get<std::string>());
    }
  }
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    if (k != "id" && k != "instruction" && k != "context" && k != "code" && k != "source" &&
        k != "tags")
      throw UserError(where + ": unknown field \"" + k +
                      "\" (allowed: id, instruction, context, code, source, tags)");
  }
  if (t.id.empty()) throw UserError(where + ": field \"id\" is empty");
  return t;
}

void for_each_triplet(const std::filesystem::path& path,
                      const std::function<void(const Triplet&, int64_t line)>& fn) {
  std::ifstream in(path);
  if (!in) throw UserError("cannot read triplet file " + path.string() + ": check the path");
  std::string line;
  int64_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    fn(parse_triplet(line, path.string() + ":" + std::to_string(n)), n);
  }
}

std::vector<Triplet> read_triplets(const std::filesystem::path& path) {
  std::vector<Triplet> out;
  for_each_triplet(path, [&](const Triplet& t, int64_t) { out.push_back(t); });
  return out;
}

void write_triplets(const std::filesystem::path& path, const std::vector<Triplet>& triplets) {
  std::string s;
  for (const auto& t : triplets) {
    s += to_jsonl(t);
    s += '\n';
  }
  atomic_write(path, s);
}

}  // namespace kernelrl
