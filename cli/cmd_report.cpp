// `kernelrl report RUN_DIR`: summarises a run's metrics.jsonl (first, last, min, max of every
// numeric metric, per stage) as a table, or as JSON with --json.
#include <cmath>
#include <cstdio>
#include <map>

#include "cli/commands.h"
#include "common/error.h"
#include "common/fs.h"
#include "common/metrics.h"

namespace kernelrl::cli {

void register_report(CLI::App& app) {
  struct Opts {
    std::string run_dir;
    bool json = false;
  };
  auto opts = std::make_shared<Opts>();
  auto* sub = app.add_subcommand("report", "Summarise a run directory's metrics");
  sub->add_option("run_dir", opts->run_dir, "run directory")->required();
  sub->add_flag("--json", opts->json, "print the summary as JSON");
  sub->callback([opts] {
    const fs::path metrics = fs::path(opts->run_dir) / "metrics.jsonl";
    if (!fs::exists(metrics))
      throw UserError("'" + opts->run_dir + "' has no metrics.jsonl; is it a run directory?");
    struct Summary {
      double first = NAN, last = NAN, min = INFINITY, max = -INFINITY;
      int64_t n = 0, last_step = 0;
    };
    std::map<std::string, std::map<std::string, Summary>> by_stage;  // stage -> metric -> summary
    for (const auto& rec : MetricsWriter::read_all(metrics)) {
      const std::string stage = rec.value("stage", std::string("-"));
      for (const auto& [key, val] : rec.items()) {
        if (!val.is_number() || key == "step" || key == "time") continue;
        double x = val.get<double>();
        auto& s = by_stage[stage][key];
        if (s.n == 0) s.first = x;
        s.last = x;
        s.min = std::min(s.min, x);
        s.max = std::max(s.max, x);
        s.last_step = rec.value("step", int64_t{0});
        ++s.n;
      }
    }
    if (opts->json) {
      nlohmann::json out;
      for (const auto& [stage, m] : by_stage)
        for (const auto& [key, s] : m)
          out[stage][key] = {{"first", s.first}, {"last", s.last}, {"min", s.min},
                             {"max", s.max}, {"n", s.n}, {"last_step", s.last_step}};
      std::printf("%s\n", out.dump(2).c_str());
      return;
    }
    if (by_stage.empty()) std::printf("no metrics recorded yet\n");
    for (const auto& [stage, m] : by_stage) {
      std::printf("stage %s\n  %-28s %12s %12s %12s %12s %6s\n", stage.c_str(), "metric", "first",
                  "last", "min", "max", "n");
      for (const auto& [key, s] : m)
        std::printf("  %-28s %12.5g %12.5g %12.5g %12.5g %6lld\n", key.c_str(), s.first, s.last,
                    s.min, s.max, static_cast<long long>(s.n));
    }
  });
}

}  // namespace kernelrl::cli
