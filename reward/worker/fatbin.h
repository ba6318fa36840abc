// The device code inside a compiled candidate: the fatbin containers of its shared object's
// `.nv_fatbin` section (nvcc puts one per translation unit, plus one of the CUDA runtime's), read
// from the file without loading it, so that the worker can load a candidate's kernels
// (cuModuleLoadData) without ever running its host code (static initializers included).
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

namespace kernelrl::worker {

// Every fatbin container of `so`'s .nv_fatbin section, in file order. Throws std::runtime_error
// naming what is wrong for a file that is not a well-formed 64-bit ELF or has no such section.
std::vector<std::vector<uint8_t>> read_fatbins(const std::filesystem::path& so);

}  // namespace kernelrl::worker
