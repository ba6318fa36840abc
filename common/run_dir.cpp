#include "common/run_dir.h"

#include "common/error.h"
#include "common/fs.h"

namespace kernelrl {

RunDir RunDir::open(const std::filesystem::path& root, RunDirMode mode) {
  RunDir rd;
  rd.root_ = root;
  std::error_code ec;
  const bool exists = fs::exists(root, ec);
  if (exists && !fs::is_directory(root, ec))
    throw UserError("run directory '" + root.string() + "' exists and is not a directory");
  const bool empty = !exists || fs::is_empty(root, ec);
  switch (mode) {
    case RunDirMode::fresh:
      if (!empty)
        throw UserError("run directory '" + root.string() +
                        "' is not empty; pass --resume to continue it or --overwrite to "
                        "replace it");
      break;
    case RunDirMode::resume:
      if (!fs::exists(rd.config_path(), ec))
        throw UserError("cannot resume: '" + root.string() +
                        "' holds no config.yaml (no earlier run there)");
      rd.resumed_ = true;
      break;
    case RunDirMode::overwrite:
      if (exists) {
        for (const auto& e : fs::directory_iterator(root)) fs::remove_all(e.path());
      }
      break;
  }
  fs::create_directories(rd.checkpoints_dir());
  fs::create_directories(rd.logs_dir());
  remove_stale_temps(root);
  remove_stale_temps(rd.checkpoints_dir());
  return rd;
}

RunDir RunDir::attach(const std::filesystem::path& root, bool resumed) {
  RunDir rd;
  rd.root_ = root;
  rd.resumed_ = resumed;
  return rd;
}

void RunDir::write_config(const std::string& yaml) const { atomic_write(config_path(), yaml); }

}  // namespace kernelrl
