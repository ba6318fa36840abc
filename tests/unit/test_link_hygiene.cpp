// Link hygiene: libtorch.so of the PyTorch 2.11 wheel exports a broken copy of
// std::filesystem; our binaries must bind those symbols to libstdc++ (see CMakeLists.txt).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <torch/torch.h>

namespace {

std::string object_defining(void* addr) {
  Dl_info info{};
  if (dladdr(addr, &info) == 0 || !info.dli_fname) return "<unknown>";
  return info.dli_fname;
}

TEST(LinkHygiene, FilesystemSymbolsComeFromLibstdcxx) {
  using RemoveAll = std::uintmax_t (*)(const std::filesystem::path&, std::error_code&);
  RemoveAll fn = &std::filesystem::remove_all;
  std::string where = object_defining(reinterpret_cast<void*>(fn));
  EXPECT_NE(where.find("libstdc++"), std::string::npos) << "remove_all bound to " << where;
  // And it works beside live LibTorch objects.
  auto t = torch::ones({2, 2});
  std::error_code ec;
  auto dir = std::filesystem::temp_directory_path() / "kernelrl-link-hygiene";
  std::filesystem::create_directories(dir / "a/b");
  EXPECT_GE(std::filesystem::remove_all(dir, ec), 3u);
  EXPECT_FALSE(ec);
  EXPECT_EQ(t.sum().item<float>(), 4.f);
}

}  // namespace
