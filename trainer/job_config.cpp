#include "trainer/job_config.h"

#include <set>

namespace kernelrl {

JobConfig load_job_config(const std::filesystem::path& path,
                          const std::vector<std::string>& overrides) {
  JobConfig job;
  cfg::load(path, overrides, job);
  std::set<std::string> names;
  for (size_t i = 0; i < job.trainer.stages.size(); ++i) {
    auto& s = job.trainer.stages[i];
    const std::string key = "trainer.stages[" + std::to_string(i) + "].name";
    if (s.name.empty()) s.name = s.kind;
    if (!names.insert(s.name).second)
      throw ConfigError(key + ": stage name \"" + s.name + "\" is used twice; names must be unique");
  }
  return job;
}

}  // namespace kernelrl
