// Typed configuration: YAML <-> structs through one `visit(cfg::Visitor&)` per struct.
// Implements reading (full-key-path errors for unknown keys, wrong types and out-of-range
// values), `include:` of other files, `key.path=value` overrides and writing the resolved
// config back as commented YAML. It defines no component's fields: each component owns its
// FooConfig, whose visit() lists every field once with its YAML key, doc line and bounds.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "common/error.h"

namespace kernelrl::cfg {

// Allowed range for a number; describe() renders it as "in (0, 1]", "≥ 1", ...
struct Bounds {
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  bool lo_open = false;
  bool hi_open = false;
  bool contains(double x) const;
  std::string describe() const;  // empty when unbounded
};
inline Bounds at_least(double lo) { return {lo, Bounds{}.hi, false, true}; }
inline Bounds greater_than(double lo) { return {lo, Bounds{}.hi, true, true}; }
inline Bounds in_closed(double lo, double hi) { return {lo, hi, false, false}; }
inline Bounds in_open_closed(double lo, double hi) { return {lo, hi, true, false}; }
inline Bounds in_closed_open(double lo, double hi) { return {lo, hi, false, true}; }

// Allowed values for a string (empty: any string).
struct Choices {
  std::vector<std::string> allowed;
  Choices() = default;
  Choices(std::initializer_list<std::string> a) : allowed(a) {}
};

// One visitor drives reading, writing and describing every config struct.
class Visitor {
 public:
  virtual ~Visitor() = default;
  virtual void field(const char* key, bool& value, const char* doc) = 0;
  virtual void field(const char* key, int64_t& value, const char* doc, Bounds b = {}) = 0;
  virtual void field(const char* key, double& value, const char* doc, Bounds b = {}) = 0;
  virtual void field(const char* key, std::string& value, const char* doc, Choices c = {}) = 0;
  virtual void field(const char* key, std::vector<int64_t>& value, const char* doc,
                     Bounds b = {}) = 0;
  virtual void field(const char* key, std::vector<double>& value, const char* doc,
                     Bounds b = {}) = 0;
  virtual void field(const char* key, std::vector<std::string>& value, const char* doc,
                     Choices c = {}) = 0;
  // Free-form YAML (sweep grids); checked by its owner.
  virtual void field(const char* key, YAML::Node& value, const char* doc) = 0;
  void field(const char* key, int& value, const char* doc, Bounds b = {}) {
    int64_t v = value;
    field(key, v, doc, b);
    value = static_cast<int>(v);
  }

  // A key this mapping must not carry (for example a pretrain-only key in an RL stage): the
  // reader fails naming the key path and `why`; other visitors ignore it.
  virtual void reject(const char* key, const char* why) {
    (void)key;
    (void)why;
  }

  // A nested mapping owned by another struct.
  template <class S>
  void section(const char* key, S& sub, const char* doc) {
    enter(key, doc);
    sub.visit(*this);
    leave();
  }
  // A list of structs (for example the trainer's stages).
  template <class S>
  void list(const char* key, std::vector<S>& items, const char* doc) {
    size_t n = begin_list(key, doc, items.size());
    items.resize(n);
    for (size_t i = 0; i < n; ++i) {
      begin_item(i);
      items[i].visit(*this);
      end_item();
    }
    end_list();
  }

 protected:
  virtual void enter(const char* key, const char* doc) = 0;
  virtual void leave() = 0;
  virtual size_t begin_list(const char* key, const char* doc, size_t current) = 0;
  virtual void begin_item(size_t i) = 0;
  virtual void end_item() = 0;
  virtual void end_list() = 0;
};

// Loads a YAML file, resolving `include:` (a path or a list of paths, relative to the including
// file) in any mapping: included files are merged first, the including mapping on top.
YAML::Node load_yaml_file(const std::filesystem::path& path);

// Applies `a.b.c=value` overrides (value parsed as YAML; numeric segments index lists).
void apply_overrides(YAML::Node& root, const std::vector<std::string>& overrides);

// Deep merge: mappings merge key by key, anything else in `top` replaces `base`.
YAML::Node merge(const YAML::Node& base, const YAML::Node& top);

// Fills `config` from `root`; throws ConfigError naming the full key path on any problem.
template <class C>
void read(const YAML::Node& root, C& config);

// Renders `config` as YAML with a comment per field.
template <class C>
std::string to_yaml(C& config);

// Reads a file with includes and overrides into `config`.
template <class C>
void load(const std::filesystem::path& path, const std::vector<std::string>& overrides,
          C& config) {
  YAML::Node root = load_yaml_file(path);
  apply_overrides(root, overrides);
  read(root, config);
}

// ---- implementation detail: the reader and writer visitors ----------------------------------
class Reader final : public Visitor {
 public:
  explicit Reader(const YAML::Node& root);
  using Visitor::field;
  void field(const char* key, bool& value, const char* doc) override;
  void field(const char* key, int64_t& value, const char* doc, Bounds b) override;
  void field(const char* key, double& value, const char* doc, Bounds b) override;
  void field(const char* key, std::string& value, const char* doc, Choices c) override;
  void field(const char* key, std::vector<int64_t>& value, const char* doc, Bounds b) override;
  void field(const char* key, std::vector<double>& value, const char* doc, Bounds b) override;
  void field(const char* key, std::vector<std::string>& value, const char* doc,
             Choices c) override;
  void field(const char* key, YAML::Node& value, const char* doc) override;
  void reject(const char* key, const char* why) override;
  void finish();  // unknown keys at the root

 protected:
  void enter(const char* key, const char* doc) override;
  void leave() override;
  size_t begin_list(const char* key, const char* doc, size_t current) override;
  void begin_item(size_t i) override;
  void end_item() override;
  void end_list() override;

 private:
  struct Frame {
    YAML::Node node;  // the mapping (or list) being read; may be undefined
    std::string path;
    std::vector<std::string> seen;
  };
  const YAML::Node child(const char* key);
  std::string path_of(const char* key) const;
  void check_unknown(const Frame& f) const;
  std::vector<Frame> stack_;
};

class Writer final : public Visitor {
 public:
  Writer();
  using Visitor::field;
  void field(const char* key, bool& value, const char* doc) override;
  void field(const char* key, int64_t& value, const char* doc, Bounds b) override;
  void field(const char* key, double& value, const char* doc, Bounds b) override;
  void field(const char* key, std::string& value, const char* doc, Choices c) override;
  void field(const char* key, std::vector<int64_t>& value, const char* doc, Bounds b) override;
  void field(const char* key, std::vector<double>& value, const char* doc, Bounds b) override;
  void field(const char* key, std::vector<std::string>& value, const char* doc,
             Choices c) override;
  void field(const char* key, YAML::Node& value, const char* doc) override;
  std::string str();

 protected:
  void enter(const char* key, const char* doc) override;
  void leave() override;
  size_t begin_list(const char* key, const char* doc, size_t current) override;
  void begin_item(size_t i) override;
  void end_item() override;
  void end_list() override;

 private:
  void comment(const char* doc);
  YAML::Emitter out_;
};

template <class C>
void read(const YAML::Node& root, C& config) {
  Reader r(root);
  config.visit(r);
  r.finish();
}

template <class C>
std::string to_yaml(C& config) {
  Writer w;
  config.visit(w);
  return w.str();
}

}  // namespace kernelrl::cfg
