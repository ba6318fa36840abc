#include "reward/worker/graph_image.h"

#include <cstring>

namespace kernelrl::worker {

namespace {

constexpr size_t kMaxNodes = 4096;            // far above any real call's kernels
constexpr size_t kMaxParamBytes = 32 * 1024;  // CUDA's kernel parameter limit is 32,764 bytes
constexpr char kHex[] = "0123456789abcdef";

std::string hex(const std::vector<uint8_t>& b) {
  std::string s(b.size() * 2, '0');
  for (size_t i = 0; i < b.size(); ++i) {
    s[2 * i] = kHex[b[i] >> 4];
    s[2 * i + 1] = kHex[b[i] & 15];
  }
  return s;
}

int nibble(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  throw std::runtime_error("graph image: bad hex digit");
}

std::vector<uint8_t> unhex(const std::string& s) {
  if (s.size() % 2 || s.size() / 2 > kMaxParamBytes) throw std::runtime_error("graph image: bad parameter bytes");
  std::vector<uint8_t> b(s.size() / 2);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(nibble(s[2 * i]) << 4 | nibble(s[2 * i + 1]));
  return b;
}

template <class T>
T get(const nlohmann::json& j, const char* key) {
  if (!j.contains(key)) throw std::runtime_error(std::string("graph image: missing ") + key);
  return j.at(key).get<T>();
}

void dims(const nlohmann::json& j, const char* key, unsigned out[3]) {
  auto v = get<std::vector<unsigned>>(j, key);
  if (v.size() != 3) throw std::runtime_error(std::string("graph image: ") + key + " needs 3 values");
  for (int i = 0; i < 3; ++i) out[i] = v[i];
}

}  // namespace

std::vector<std::pair<uint64_t, uint64_t>> GraphImage::written_ranges() const {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (const auto& n : nodes) {
    if (n.type == NodeImage::Type::memset) {
      const auto& m = n.memset;
      const uint64_t rows = m.height > 1 ? (m.height - 1) * m.pitch : 0;
      out.emplace_back(m.dst, m.dst + rows + m.width * m.element_size);
    } else if (n.type == NodeImage::Type::memcpy) {
      const auto& c = n.memcpy;
      const uint64_t pitch = c.dst_pitch ? c.dst_pitch : c.width_bytes;
      const uint64_t slice = pitch * (c.dst_height ? c.dst_height : c.height);
      const uint64_t begin = c.dst + c.dst_x + c.dst_y * pitch + c.dst_z * slice;
      out.emplace_back(begin, begin + (c.depth - 1) * slice + (c.height - 1) * pitch + c.width_bytes);
    }
  }
  return out;
}

std::vector<ParamWord> GraphImage::parameter_words() const {
  std::vector<ParamWord> out;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const auto& n = nodes[i];
    if (n.type == NodeImage::Type::memcpy) out.push_back({n.memcpy.src, i, -1});
    if (n.type != NodeImage::Type::kernel) continue;
    const auto& b = n.kernel.param_bytes;
    for (size_t off = 0; off + 8 <= b.size(); off += 8) {
      uint64_t w;
      std::memcpy(&w, b.data() + off, 8);
      out.push_back({w, i, static_cast<int64_t>(off)});
    }
  }
  return out;
}

nlohmann::json to_json(const GraphImage& g) {
  nlohmann::json nodes = nlohmann::json::array();
  for (const auto& n : g.nodes) {
    nlohmann::json j;
    switch (n.type) {
      case NodeImage::Type::kernel: {
        const auto& k = n.kernel;
        std::vector<std::vector<uint32_t>> params;
        for (const auto& [o, s] : k.params) params.push_back({o, s});
        j = {{"type", "kernel"},
             {"name", k.name},
             {"grid", {k.grid[0], k.grid[1], k.grid[2]}},
             {"block", {k.block[0], k.block[1], k.block[2]}},
             {"shared_bytes", k.shared_bytes},
             {"param_bytes", hex(k.param_bytes)},
             {"params", params},
             {"cluster", {k.cluster[0], k.cluster[1], k.cluster[2]}},
             {"cluster_policy", k.cluster_policy},
             {"cooperative", k.cooperative},
             {"priority", k.priority},
             {"mem_sync_domain", k.mem_sync_domain},
             {"max_dynamic_shared", k.max_dynamic_shared},
             {"carveout", k.carveout},
             {"non_portable_cluster", k.non_portable_cluster},
             {"cluster_policy_fn", k.cluster_policy_fn}};
        break;
      }
      case NodeImage::Type::memset: {
        const auto& m = n.memset;
        j = {{"type", "memset"}, {"dst", m.dst},   {"pitch", m.pitch},          {"width", m.width},
             {"height", m.height}, {"value", m.value}, {"element_size", m.element_size}};
        break;
      }
      case NodeImage::Type::memcpy: {
        const auto& c = n.memcpy;
        j = {{"type", "memcpy"},     {"src", c.src},         {"dst", c.dst},
             {"src_x", c.src_x},     {"src_y", c.src_y},     {"src_z", c.src_z},
             {"dst_x", c.dst_x},     {"dst_y", c.dst_y},     {"dst_z", c.dst_z},
             {"src_pitch", c.src_pitch}, {"src_height", c.src_height}, {"dst_pitch", c.dst_pitch},
             {"dst_height", c.dst_height}, {"width_bytes", c.width_bytes}, {"height", c.height},
             {"depth", c.depth}};
        break;
      }
      case NodeImage::Type::empty: j = {{"type", "empty"}}; break;
    }
    nodes.push_back(std::move(j));
  }
  nlohmann::json edges = nlohmann::json::array();
  for (const auto& e : g.edges) edges.push_back({e.from, e.to, e.type, e.from_port, e.to_port});
  return {{"nodes", nodes}, {"edges", edges}};
}

GraphImage graph_image_from_json(const nlohmann::json& j) {
  GraphImage g;
  const auto& nodes = j.at("nodes");
  if (!nodes.is_array() || nodes.size() > kMaxNodes) throw std::runtime_error("graph image: bad node list");
  for (const auto& jn : nodes) {
    NodeImage n;
    const std::string type = get<std::string>(jn, "type");
    if (type == "kernel") {
      n.type = NodeImage::Type::kernel;
      KernelImage& k = n.kernel;
      k.name = get<std::string>(jn, "name");
      dims(jn, "grid", k.grid);
      dims(jn, "block", k.block);
      dims(jn, "cluster", k.cluster);
      k.shared_bytes = get<unsigned>(jn, "shared_bytes");
      k.param_bytes = unhex(get<std::string>(jn, "param_bytes"));
      for (const auto& p : get<std::vector<std::vector<uint32_t>>>(jn, "params")) {
        if (p.size() != 2 || uint64_t{p[0]} + p[1] > k.param_bytes.size())
          throw std::runtime_error("graph image: a parameter lies outside the parameter bytes");
        k.params.emplace_back(p[0], p[1]);
      }
      k.cluster_policy = get<int>(jn, "cluster_policy");
      k.cooperative = get<int>(jn, "cooperative");
      k.priority = get<int>(jn, "priority");
      k.mem_sync_domain = get<int>(jn, "mem_sync_domain");
      k.max_dynamic_shared = get<int>(jn, "max_dynamic_shared");
      k.carveout = get<int>(jn, "carveout");
      k.non_portable_cluster = get<int>(jn, "non_portable_cluster");
      k.cluster_policy_fn = get<int>(jn, "cluster_policy_fn");
    } else if (type == "memset") {
      n.type = NodeImage::Type::memset;
      MemsetImage& m = n.memset;
      m.dst = get<uint64_t>(jn, "dst");
      m.pitch = get<uint64_t>(jn, "pitch");
      m.width = get<uint64_t>(jn, "width");
      m.height = get<uint64_t>(jn, "height");
      m.value = get<unsigned>(jn, "value");
      m.element_size = get<unsigned>(jn, "element_size");
      if (m.element_size != 1 && m.element_size != 2 && m.element_size != 4)
        throw std::runtime_error("graph image: memset element size must be 1, 2 or 4");
    } else if (type == "memcpy") {
      n.type = NodeImage::Type::memcpy;
      MemcpyImage& c = n.memcpy;
      for (auto [key, field] : std::initializer_list<std::pair<const char*, uint64_t*>>{
               {"src", &c.src},           {"dst", &c.dst},         {"src_x", &c.src_x},
               {"src_y", &c.src_y},       {"src_z", &c.src_z},     {"dst_x", &c.dst_x},
               {"dst_y", &c.dst_y},       {"dst_z", &c.dst_z},     {"src_pitch", &c.src_pitch},
               {"src_height", &c.src_height}, {"dst_pitch", &c.dst_pitch}, {"dst_height", &c.dst_height},
               {"width_bytes", &c.width_bytes}, {"height", &c.height}, {"depth", &c.depth}})
        *field = get<uint64_t>(jn, key);
      if (c.height == 0 || c.depth == 0) throw std::runtime_error("graph image: empty memcpy extent");
    } else if (type == "empty") {
      n.type = NodeImage::Type::empty;
    } else {
      throw std::runtime_error("graph image: unknown node type " + type);
    }
    g.nodes.push_back(std::move(n));
  }
  for (const auto& je : j.at("edges")) {
    auto v = je.get<std::vector<uint32_t>>();
    if (v.size() != 5 || v[0] >= g.nodes.size() || v[1] >= g.nodes.size())
      throw std::runtime_error("graph image: bad edge");
    g.edges.push_back({v[0], v[1], static_cast<uint8_t>(v[2]), static_cast<uint8_t>(v[3]),
                       static_cast<uint8_t>(v[4])});
  }
  return g;
}

}  // namespace kernelrl::worker
