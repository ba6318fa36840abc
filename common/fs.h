// Files: crash-safe writes and checked reads.
// atomic_write writes to a temp file beside the target, fsyncs it, renames it over the target
// and fsyncs the directory, so a reader sees the old or the new content, never a torn file.
// Temp files left by a crash are named `<target>.tmp.<pid>.<n>`; readers ignore them.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace kernelrl {

namespace fs = std::filesystem;

// Replaces `path` with `content` atomically (temp + fsync + rename + fsync dir).
void atomic_write(const fs::path& path, std::string_view content);

// Reads a whole file; throws UserError naming `what` and the path if it cannot.
std::string read_file(const fs::path& path, const std::string& what = "file");

// True for names produced by atomic_write's temp files (left behind by a crash).
bool is_atomic_temp(const fs::path& path);

// Removes temp files left in `dir` (not recursive) by crashed atomic writes; returns how many.
int remove_stale_temps(const fs::path& dir);

}  // namespace kernelrl
