#include "reward/worker/fatbin.h"

#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>

namespace kernelrl::worker {

namespace {

constexpr uint32_t kFatbinMagic = 0xBA55ED50;

template <class T>
T read_at(const std::vector<uint8_t>& b, uint64_t off) {
  if (off > b.size() || b.size() - off < sizeof(T)) throw std::runtime_error("truncated ELF");
  T v;
  std::memcpy(&v, b.data() + off, sizeof(T));
  return v;
}

}  // namespace

std::vector<std::vector<uint8_t>> read_fatbins(const std::filesystem::path& so) {
  std::ifstream in(so, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + so.string());
  std::vector<uint8_t> b((std::istreambuf_iterator<char>(in)), {});
  const std::string where = so.filename().string() + ": ";
  try {
    if (b.size() < 64 || std::memcmp(b.data(), "\x7f" "ELF", 4) != 0 || b[4] != 2 /*ELFCLASS64*/ ||
        b[5] != 1 /*little endian*/)
      throw std::runtime_error("not a 64-bit little-endian ELF file");
    const uint64_t shoff = read_at<uint64_t>(b, 0x28);
    const uint16_t shentsize = read_at<uint16_t>(b, 0x3a), shnum = read_at<uint16_t>(b, 0x3c),
                   shstrndx = read_at<uint16_t>(b, 0x3e);
    if (shentsize < 64 || shstrndx >= shnum) throw std::runtime_error("bad section header table");
    auto section = [&](uint16_t i, uint32_t& name, uint64_t& off, uint64_t& size) {
      const uint64_t h = shoff + uint64_t{i} * shentsize;
      name = read_at<uint32_t>(b, h);
      off = read_at<uint64_t>(b, h + 0x18);
      size = read_at<uint64_t>(b, h + 0x20);
      if (off > b.size() || b.size() - off < size) throw std::runtime_error("a section lies outside the file");
    };
    uint32_t n;
    uint64_t str_off, str_size;
    section(shstrndx, n, str_off, str_size);
    for (uint16_t i = 0; i < shnum; ++i) {
      uint64_t off, size;
      section(i, n, off, size);
      static constexpr char kName[] = ".nv_fatbin";
      if (n >= str_size || str_size - n < sizeof(kName) ||
          std::memcmp(b.data() + str_off + n, kName, sizeof(kName)) != 0)
        continue;
      std::vector<std::vector<uint8_t>> out;
      uint64_t p = off;
      const uint64_t end = off + size;
      while (p + 16 <= end) {
        if (read_at<uint32_t>(b, p) != kFatbinMagic) break;  // trailing padding
        const uint64_t header = read_at<uint16_t>(b, p + 6), body = read_at<uint64_t>(b, p + 8);
        if (header < 16 || body > end - p || header + body > end - p)
          throw std::runtime_error("a fatbin container runs past its section");
        out.emplace_back(b.begin() + static_cast<std::ptrdiff_t>(p),
                         b.begin() + static_cast<std::ptrdiff_t>(p + header + body));
        p = (p + header + body + 7) & ~uint64_t{7};
      }
      if (out.empty()) throw std::runtime_error("the .nv_fatbin section holds no fatbin");
      return out;
    }
    throw std::runtime_error("no .nv_fatbin section (no device code)");
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(where + e.what());
  }
}

}  // namespace kernelrl::worker
