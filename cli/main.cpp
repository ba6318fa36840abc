// Entry point of the `kernelrl` executable: global options, subcommands, and the one place
// that turns exceptions into exit codes (user errors: one line, exit 2; bugs: exit 1).
#include <cstdio>
#include <exception>

#include "cli/commands.h"
#include "common/error.h"
#include "common/log.h"

int main(int argc, char** argv) {
  using namespace kernelrl;
  CLI::App app{
      "KernelRL: trains a language-model policy to write fast, correct CUDA kernels with "
      "reinforcement learning rewarded on a real GPU."};
  app.require_subcommand(1);
  app.set_version_flag("--version", cli::version_string);
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "debug | info | warn | error")
      ->check(CLI::IsMember({"debug", "info", "warn", "error"}));
  app.parse_complete_callback([&] { log::set_level(log::parse_level(log_level)); });

  cli::register_train(app);
  cli::register_sample(app);
  cli::register_eval(app);
  cli::register_bench(app);
  cli::register_sweep(app);
  cli::register_data(app);
  cli::register_tokenizer(app);
  cli::register_report(app);
  cli::register_catalog(app);
  cli::register_export(app);
  cli::register_lift(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const UserError& e) {
    std::fprintf(stderr, "kernelrl: error: %s\n", e.what());
    return 2;
  } catch (const PeerFailure& e) {
    std::fprintf(stderr, "kernelrl: error: %s\n", e.what());
    return 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kernelrl: internal error: %s\n", e.what());
    return 1;
  }
  return cli::exit_code;
}
