// Small non-cryptographic hashes shared across folders: FNV-1a over bytes and the splitmix64
// mixer (for deterministic splits, seeds and shingles). Not for content-addressed caches of
// untrusted input (reward/compile.cpp keys those with its own wider hash).
#pragma once

#include <cstdint>
#include <string_view>

namespace kernelrl {

inline uint64_t fnv1a(std::string_view s, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// splitmix64: x advanced by the golden-ratio increment, then finalized.
inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace kernelrl
