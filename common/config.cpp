#include "common/config.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "common/fs.h"

namespace kernelrl::cfg {
namespace {

std::string fmt_num(double x) {
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char buf[64];
  for (int prec = 1; prec <= 17; ++prec) {  // shortest text that reads back as the same double
    std::snprintf(buf, sizeof buf, "%.*g", prec, x);
    if (std::strtod(buf, nullptr) == x) break;
  }
  return buf;
}

// What a YAML value looks like, for "got ..." in error messages.
std::string describe_node(const YAML::Node& n) {
  if (!n.IsDefined() || n.IsNull()) return "nothing";
  if (n.IsMap()) return "a mapping";
  if (n.IsSequence()) return "a list";
  return "\"" + n.Scalar() + "\"";
}

bool parse_double(const std::string& s, double& out) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  out = std::strtod(s.c_str(), &end);
  return end && *end == '\0' && errno == 0 && !std::isnan(out);
}

bool parse_int(const std::string& s, int64_t& out) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (end && *end == '\0' && errno == 0) {
    out = v;
    return true;
  }
  double d;  // accept 1e6 and 4096.0 when they are whole numbers
  if (parse_double(s, d) && std::floor(d) == d && std::fabs(d) < 9.2e18) {
    out = static_cast<int64_t>(d);
    return true;
  }
  return false;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

std::string number_expectation(const char* kind, const Bounds& b) {
  std::string d = b.describe();
  return std::string(kind) + (d.empty() ? "" : " " + d);
}

std::string choice_expectation(const Choices& c) {
  if (c.allowed.empty()) return "a string";
  return "one of " + join(c.allowed, ", ");
}

YAML::Node resolve_includes(const YAML::Node& node, const fs::path& dir,
                            std::vector<fs::path>& stack);

YAML::Node load_file(const fs::path& path, std::vector<fs::path>& stack,
                     const std::string& what) {
  fs::path abs = fs::weakly_canonical(fs::absolute(path));
  if (std::find(stack.begin(), stack.end(), abs) != stack.end())
    throw ConfigError("include cycle: '" + abs.string() + "' includes itself");
  std::string text = read_file(path, what);
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw ConfigError(path.string() + ":" + std::to_string(e.mark.line + 1) + ":" +
                      std::to_string(e.mark.column + 1) + ": invalid YAML: " + e.msg);
  }
  if (root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  if (!root.IsMap())
    throw ConfigError(path.string() + ": expected a mapping at the top level, got " +
                      describe_node(root));
  stack.push_back(abs);
  YAML::Node out = resolve_includes(root, abs.parent_path(), stack);
  stack.pop_back();
  return out;
}

YAML::Node resolve_includes(const YAML::Node& node, const fs::path& dir,
                            std::vector<fs::path>& stack) {
  if (node.IsSequence()) {
    YAML::Node out(YAML::NodeType::Sequence);
    for (const auto& item : node) out.push_back(resolve_includes(item, dir, stack));
    return out;
  }
  if (!node.IsMap()) return YAML::Clone(node);
  YAML::Node base(YAML::NodeType::Map);
  YAML::Node inc = node["include"];
  if (inc) {
    std::vector<std::string> files;
    if (inc.IsScalar()) {
      files.push_back(inc.Scalar());
    } else if (inc.IsSequence()) {
      for (const auto& f : inc) {
        if (!f.IsScalar()) throw ConfigError("include: expected a path or a list of paths");
        files.push_back(f.Scalar());
      }
    } else {
      throw ConfigError("include: expected a path or a list of paths, got " +
                        describe_node(inc));
    }
    for (const auto& f : files) {
      fs::path p = fs::path(f).is_absolute() ? fs::path(f) : dir / f;
      base = merge(base, load_file(p, stack, "included config"));
    }
  }
  YAML::Node rest(YAML::NodeType::Map);
  for (const auto& kv : node) {
    const std::string k = kv.first.as<std::string>();
    if (k == "include") continue;
    rest[k] = resolve_includes(kv.second, dir, stack);
  }
  return merge(base, rest);
}

void set_path(YAML::Node node, const std::vector<std::string>& keys, size_t i,
              const YAML::Node& value, const std::string& key_text) {
  const std::string& k = keys[i];
  const bool last = i + 1 == keys.size();
  if (node.IsSequence()) {
    int64_t idx;
    if (!parse_int(k, idx) || idx < 0 || static_cast<size_t>(idx) >= node.size())
      throw ConfigError(key_text + ": '" + k + "' is not an index of the list there (size " +
                        std::to_string(node.size()) + ")");
    if (last) {
      node[static_cast<size_t>(idx)] = value;
      return;
    }
    set_path(node[static_cast<size_t>(idx)], keys, i + 1, value, key_text);
    return;
  }
  if (!node.IsMap() && !node.IsNull())
    throw ConfigError(key_text + ": cannot set a key inside a value that is not a mapping");
  if (last) {
    node[k] = value;
    return;
  }
  if (!node[k]) node[k] = YAML::Node(YAML::NodeType::Map);
  set_path(node[k], keys, i + 1, value, key_text);
}

}  // namespace

bool Bounds::contains(double x) const {
  if (lo_open ? !(x > lo) : !(x >= lo)) return false;
  if (hi_open ? !(x < hi) : !(x <= hi)) return false;
  return true;
}

std::string Bounds::describe() const {
  const bool has_lo = !std::isinf(lo), has_hi = !std::isinf(hi);
  if (has_lo && has_hi)
    return std::string("in ") + (lo_open ? "(" : "[") + fmt_num(lo) + ", " + fmt_num(hi) +
           (hi_open ? ")" : "]");
  if (has_lo) return std::string(lo_open ? "> " : ">= ") + fmt_num(lo);
  if (has_hi) return std::string(hi_open ? "< " : "<= ") + fmt_num(hi);
  return "";
}

YAML::Node merge(const YAML::Node& base, const YAML::Node& top) {
  if (!base.IsMap() || !top.IsMap()) return YAML::Clone(top);
  YAML::Node out = YAML::Clone(base);
  for (const auto& kv : top) {
    const std::string k = kv.first.as<std::string>();
    out[k] = base[k] ? merge(base[k], kv.second) : YAML::Clone(kv.second);
  }
  return out;
}

YAML::Node load_yaml_file(const fs::path& path) {
  std::vector<fs::path> stack;
  return load_file(path, stack, "config file");
}

void apply_overrides(YAML::Node& root, const std::vector<std::string>& overrides) {
  for (const auto& o : overrides) {
    auto eq = o.find('=');
    if (eq == std::string::npos || eq == 0)
      throw ConfigError("override '" + o + "': expected key.path=value");
    const std::string key = o.substr(0, eq), text = o.substr(eq + 1);
    if (text.empty()) throw ConfigError(key + ": override has an empty value");
    std::vector<std::string> keys;
    std::stringstream ss(key);
    for (std::string seg; std::getline(ss, seg, '.');) {
      if (seg.empty()) throw ConfigError("override '" + o + "': empty segment in key path");
      keys.push_back(seg);
    }
    YAML::Node value;
    try {
      value = YAML::Load(text);
    } catch (const YAML::Exception& e) {
      throw ConfigError(key + ": override value '" + text + "' is not valid YAML: " + e.msg);
    }
    set_path(root, keys, 0, value, key);
  }
}

// ---- Reader ------------------------------------------------------------------------------

Reader::Reader(const YAML::Node& root) { stack_.push_back({root, "", {}}); }

std::string Reader::path_of(const char* key) const {
  const std::string& p = stack_.back().path;
  return p.empty() ? std::string(key) : p + "." + key;
}

const YAML::Node Reader::child(const char* key) {
  Frame& f = stack_.back();
  f.seen.emplace_back(key);
  if (!f.node.IsDefined() || !f.node.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
  const YAML::Node& n = f.node;
  return n[key];
}

void Reader::reject(const char* key, const char* why) {
  if (child(key)) throw ConfigError(path_of(key) + ": " + why);
}

void Reader::field(const char* key, bool& value, const char* doc) {
  YAML::Node n = child(key);
  if (!n) return;
  if (n.IsScalar()) {
    const std::string& s = n.Scalar();
    if (s == "true" || s == "True" || s == "yes") {
      value = true;
      return;
    }
    if (s == "false" || s == "False" || s == "no") {
      value = false;
      return;
    }
  }
  throw ConfigError(path_of(key) + ": expected true or false, got " + describe_node(n));
}

void Reader::field(const char* key, int64_t& value, const char* doc, Bounds b) {
  YAML::Node n = child(key);
  if (!n) return;
  int64_t v;
  if (!n.IsScalar() || !parse_int(n.Scalar(), v) || !b.contains(static_cast<double>(v)))
    throw ConfigError(path_of(key) + ": expected " + number_expectation("an integer", b) +
                      ", got " + describe_node(n));
  value = v;
}

void Reader::field(const char* key, double& value, const char* doc, Bounds b) {
  YAML::Node n = child(key);
  if (!n) return;
  double v;
  if (!n.IsScalar() || !parse_double(n.Scalar(), v) || !b.contains(v))
    throw ConfigError(path_of(key) + ": expected " + number_expectation("a number", b) +
                      ", got " + describe_node(n));
  value = v;
}

void Reader::field(const char* key, std::string& value, const char* doc, Choices c) {
  YAML::Node n = child(key);
  if (!n) return;
  if (n.IsNull() && c.allowed.empty()) {
    value.clear();
    return;
  }
  if (!n.IsScalar() || (!c.allowed.empty() && std::find(c.allowed.begin(), c.allowed.end(),
                                                        n.Scalar()) == c.allowed.end()))
    throw ConfigError(path_of(key) + ": expected " + choice_expectation(c) + ", got " +
                      describe_node(n));
  value = n.Scalar();
}

template <class T, class Parse>
static void read_list(const YAML::Node& n, const std::string& path, const std::string& what,
                      std::vector<T>& out, Parse parse) {
  std::vector<T> v;
  auto fail = [&](const YAML::Node& bad) {
    throw ConfigError(path + ": expected a list of " + what + ", got " + describe_node(bad));
  };
  if (n.IsScalar()) fail(n);  // a lone scalar is a mistake, not a one-element list
  if (!n.IsSequence() && !n.IsNull()) fail(n);
  for (const auto& item : n) {
    T x;
    if (!item.IsScalar() || !parse(item.Scalar(), x)) fail(item);
    v.push_back(x);
  }
  out = std::move(v);
}

void Reader::field(const char* key, std::vector<int64_t>& value, const char* doc, Bounds b) {
  YAML::Node n = child(key);
  if (!n) return;
  read_list<int64_t>(n, path_of(key), number_expectation("integers", b), value,
                     [&](const std::string& s, int64_t& x) {
                       return parse_int(s, x) && b.contains(static_cast<double>(x));
                     });
}

void Reader::field(const char* key, std::vector<double>& value, const char* doc, Bounds b) {
  YAML::Node n = child(key);
  if (!n) return;
  read_list<double>(n, path_of(key), number_expectation("numbers", b), value,
                    [&](const std::string& s, double& x) {
                      return parse_double(s, x) && b.contains(x);
                    });
}

void Reader::field(const char* key, std::vector<std::string>& value, const char* doc,
                   Choices c) {
  YAML::Node n = child(key);
  if (!n) return;
  std::string what = c.allowed.empty() ? "strings" : "values from " + join(c.allowed, ", ");
  read_list<std::string>(n, path_of(key), what, value,
                         [&](const std::string& s, std::string& x) {
                           x = s;
                           return c.allowed.empty() || std::find(c.allowed.begin(),
                                                                 c.allowed.end(),
                                                                 s) != c.allowed.end();
                         });
}

void Reader::field(const char* key, YAML::Node& value, const char* doc) {
  YAML::Node n = child(key);
  if (!n) return;
  value = YAML::Clone(n);
}

void Reader::enter(const char* key, const char* doc) {
  YAML::Node n = child(key);
  if (n && !n.IsMap() && !n.IsNull())
    throw ConfigError(path_of(key) + ": expected a mapping, got " + describe_node(n));
  std::string p = path_of(key);
  stack_.push_back({n && n.IsMap() ? n : YAML::Node(YAML::NodeType::Undefined), p, {}});
}

void Reader::leave() {
  check_unknown(stack_.back());
  stack_.pop_back();
}

size_t Reader::begin_list(const char* key, const char* doc, size_t current) {
  YAML::Node n = child(key);
  std::string p = path_of(key);
  if (n && !n.IsSequence() && !n.IsNull())
    throw ConfigError(p + ": expected a list, got " + describe_node(n));
  stack_.push_back({n && n.IsSequence() ? n : YAML::Node(YAML::NodeType::Undefined), p, {}});
  return n && n.IsSequence() ? n.size() : current;
}

void Reader::begin_item(size_t i) {
  const Frame& list = stack_.back();
  std::string p = list.path + "[" + std::to_string(i) + "]";
  YAML::Node item = list.node.IsDefined() ? list.node[i] : YAML::Node(YAML::NodeType::Undefined);
  if (item.IsDefined() && !item.IsMap())
    throw ConfigError(p + ": expected a mapping, got " + describe_node(item));
  stack_.push_back({item, p, {}});
}

void Reader::end_item() { leave(); }
void Reader::end_list() { stack_.pop_back(); }
void Reader::finish() { check_unknown(stack_.front()); }

void Reader::check_unknown(const Frame& f) const {
  if (!f.node.IsDefined() || !f.node.IsMap()) return;
  for (const auto& kv : f.node) {
    const std::string k = kv.first.as<std::string>();
    if (std::find(f.seen.begin(), f.seen.end(), k) != f.seen.end()) continue;
    std::string best;
    size_t best_d = 3;  // suggest only close matches
    for (const auto& s : f.seen) {
      size_t d = edit_distance(k, s);
      if (d < best_d) best_d = d, best = s;
    }
    std::string path = f.path.empty() ? k : f.path + "." + k;
    std::string hint = best.empty() ? "" : "; did you mean '" + best + "'?";
    throw ConfigError(path + ": unknown key (allowed here: " + join(f.seen, ", ") + ")" + hint);
  }
}

// ---- Writer ------------------------------------------------------------------------------

Writer::Writer() { out_ << YAML::BeginMap; }

void Writer::comment(const char* doc) {
  if (doc && *doc) out_ << YAML::Comment(doc);
}

void Writer::field(const char* key, bool& value, const char* doc) {
  out_ << YAML::Key << key << YAML::Value << (value ? "true" : "false");
  comment(doc);
}
void Writer::field(const char* key, int64_t& value, const char* doc, Bounds) {
  out_ << YAML::Key << key << YAML::Value << value;
  comment(doc);
}
void Writer::field(const char* key, double& value, const char* doc, Bounds) {
  out_ << YAML::Key << key << YAML::Value << fmt_num(value);
  comment(doc);
}
void Writer::field(const char* key, std::string& value, const char* doc, Choices) {
  out_ << YAML::Key << key << YAML::Value << YAML::DoubleQuoted << value;
  comment(doc);
}
void Writer::field(const char* key, std::vector<int64_t>& value, const char* doc, Bounds) {
  out_ << YAML::Key << key << YAML::Value << YAML::Flow << value;
  comment(doc);
}
void Writer::field(const char* key, std::vector<double>& value, const char* doc, Bounds) {
  out_ << YAML::Key << key << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (double x : value) out_ << fmt_num(x);
  out_ << YAML::EndSeq;
  comment(doc);
}
void Writer::field(const char* key, std::vector<std::string>& value, const char* doc, Choices) {
  out_ << YAML::Key << key << YAML::Value << YAML::Flow << value;
  comment(doc);
}
void Writer::field(const char* key, YAML::Node& value, const char* doc) {
  out_ << YAML::Key << key << YAML::Value;
  if (value.IsDefined())
    out_ << value;
  else
    out_ << YAML::Null;
  comment(doc);
}
void Writer::enter(const char* key, const char* doc) {
  out_ << YAML::Key << key << YAML::Value;
  comment(doc);
  out_ << YAML::BeginMap;
}
void Writer::leave() { out_ << YAML::EndMap; }
size_t Writer::begin_list(const char* key, const char* doc, size_t current) {
  out_ << YAML::Key << key << YAML::Value;
  comment(doc);
  out_ << YAML::BeginSeq;
  return current;
}
void Writer::begin_item(size_t) { out_ << YAML::BeginMap; }
void Writer::end_item() { out_ << YAML::EndMap; }
void Writer::end_list() { out_ << YAML::EndSeq; }

std::string Writer::str() {
  out_ << YAML::EndMap;
  if (!out_.good()) throw std::runtime_error("config writer: " + out_.GetLastError());
  return std::string(out_.c_str()) + "\n";
}

}  // namespace kernelrl::cfg
