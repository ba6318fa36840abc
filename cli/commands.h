// The `kernelrl` subcommands. Each register_* adds one CLI11 subcommand with its options and
// --help; its callback does the work and leaves its exit status in `exit_code`.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace kernelrl::cli {

// Set by a subcommand's callback; main() returns it.
extern int exit_code;

// Throws NotAvailableError: "kernelrl <cmd>: not built yet (<what lands it>)".
[[noreturn]] void not_built(const std::string& command, const std::string& what);

void register_train(CLI::App& app);
void register_sample(CLI::App& app);
void register_eval(CLI::App& app);
void register_bench(CLI::App& app);
void register_sweep(CLI::App& app);
void register_data(CLI::App& app);
void register_tokenizer(CLI::App& app);
void register_report(CLI::App& app);
void register_catalog(CLI::App& app);
void register_export(CLI::App& app);
void register_lift(CLI::App& app);

// "kernelrl X.Y.Z, LibTorch A.B.C, CUDA kernels built: yes|no, CUDA available: yes (N GPUs)|no"
std::string version_string();

// "a,b,,c" -> {"a", "b", "c"}: a comma-separated option value, empty items dropped.
std::vector<std::string> split_list(const std::string& s);

}  // namespace kernelrl::cli
