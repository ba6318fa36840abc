// Compile throughput of the evaluator's compile pool (reward/compile.h; issue 23): a directory of
// candidate sources (`kernelrl data synth --emit-dir`, or a policy's kernels) compiled into a
// cold cache by one pool of `--jobs` compilers, or by `--procs` processes at once on this host
// (as the ranks of a data-parallel job, each with its own pool). Prints candidates compiled per
// minute and the compilers' CPU seconds; `--csv` gets one row per source, `--summary` one row
// per run. Uses only the CompilePool calls that the pool had before issue 23, so
// bench/gpu_compile.sh builds it with g++ against either copy of reward/compile.* (before and
// after, in one call on one host); CMake builds it with the other benches.
//   bench_compile --sources DIR --match hgemm_cutlass --count 32 --jobs 0 --arch sm_90a
//                 --include CUTLASS_INCLUDE --cache /tmp/c --label after --csv rows.csv
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "reward/compile.h"

extern char** environ;

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string sources, match, include, arch = "sm_90a", backend = "gpu", cache, label = "run", csv,
                                       summary;
  int count = 0, jobs = 0, procs = 1, rank = -1;
  double timeout_s = 600;
};

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "bench_compile: " << why
            << "\nusage: bench_compile --sources DIR --cache DIR [--match S] [--count N] [--jobs J]"
               " [--procs P] [--include DIR] [--arch sm_90a] [--backend gpu|host] [--label L]"
               " [--csv FILE] [--summary FILE] [--timeout S]\n";
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) usage(a + " needs a value");
      return argv[++i];
    };
    if (a == "--sources")
      o.sources = val();
    else if (a == "--match")
      o.match = val();
    else if (a == "--count")
      o.count = std::stoi(val());
    else if (a == "--jobs")
      o.jobs = std::stoi(val());
    else if (a == "--procs")
      o.procs = std::stoi(val());
    else if (a == "--rank")
      o.rank = std::stoi(val());
    else if (a == "--include")
      o.include = val();
    else if (a == "--arch")
      o.arch = val();
    else if (a == "--backend")
      o.backend = val();
    else if (a == "--cache")
      o.cache = val();
    else if (a == "--label")
      o.label = val();
    else if (a == "--csv")
      o.csv = val();
    else if (a == "--summary")
      o.summary = val();
    else if (a == "--timeout")
      o.timeout_s = std::stod(val());
    else
      usage("unknown argument " + a);
  }
  if (o.sources.empty() || o.cache.empty()) usage("--sources and --cache are required");
  if (o.procs < 1) usage("--procs must be >= 1");
  return o;
}

// The sorted .cu/.cpp files whose names contain `match`; with count > 0, `count` of them evenly
// spaced over the sorted list (so every knob of a family is sampled, not the first few).
std::vector<fs::path> pick_sources(const Options& o) {
  std::vector<fs::path> all;
  for (const auto& e : fs::directory_iterator(o.sources)) {
    std::string name = e.path().filename().string();
    std::string ext = e.path().extension().string();
    if ((ext == ".cu" || ext == ".cpp") && name.find(o.match) != std::string::npos)
      all.push_back(e.path());
  }
  std::sort(all.begin(), all.end());
  if (o.count <= 0 || o.count >= static_cast<int>(all.size())) return all;
  std::vector<fs::path> out;
  for (int i = 0; i < o.count; ++i) out.push_back(all[i * all.size() / o.count]);
  return out;
}

std::string read_all(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

double children_cpu_s() {
  rusage ru{};
  getrusage(RUSAGE_CHILDREN, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
         1e-6 * (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

// One process's share: sources[rank::procs] through one pool. Rows to `csv` (if any).
struct Share {
  int sources = 0, ok = 0, compiled = 0;
};
Share compile_share(const Options& o, const std::vector<fs::path>& files, int rank) {
  std::vector<std::string> texts;
  std::vector<fs::path> mine;
  for (size_t i = rank; i < files.size(); i += o.procs) {
    mine.push_back(files[i]);
    texts.push_back(read_all(files[i]));
  }
  std::vector<std::string> inc;
  if (!o.include.empty()) inc.push_back(o.include);
  kernelrl::CompilePool pool(o.backend, o.arch, o.cache, o.jobs, o.timeout_s, inc);
  auto t0 = Clock::now();
  std::vector<double> done_at(texts.size());
  auto out = pool.compile_all(texts, [&](size_t i, const kernelrl::CompileOutcome&) {
    done_at[i] = std::chrono::duration<double>(Clock::now() - t0).count();
  });
  Share s;
  std::ostringstream rows;
  for (size_t i = 0; i < out.size(); ++i) {
    s.sources++;
    s.ok += out[i].ok;
    s.compiled += !out[i].cached;
    std::string first_error;
    if (!out[i].ok) {
      std::istringstream log(out[i].log);
      std::getline(log, first_error);
      std::replace(first_error.begin(), first_error.end(), ',', ';');
    }
    rows << o.label << "," << rank << "," << mine[i].filename().string() << "," << out[i].ok << ","
         << out[i].cached << "," << out[i].seconds << "," << done_at[i] << "," << first_error
         << "\n";
  }
  if (!o.csv.empty()) {
    std::string path = o.procs > 1 ? o.csv + ".rank" + std::to_string(rank) : o.csv;
    std::ofstream(path, std::ios::app) << rows.str();
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  auto files = pick_sources(o);
  if (files.empty()) usage("no sources match in " + o.sources);
  if (o.rank >= 0) {  // a child of a --procs run
    Share s = compile_share(o, files, o.rank);
    std::printf("rank %d: %d sources, %d ok, %d compiled\n", o.rank, s.sources, s.ok, s.compiled);
    return 0;
  }
  fs::remove_all(o.cache);  // cold
  fs::create_directories(o.cache);
  double cpu0 = children_cpu_s();
  auto t0 = Clock::now();
  Share total;
  if (o.procs == 1) {
    total = compile_share(o, files, 0);
  } else {
    std::vector<pid_t> pids;
    for (int r = 0; r < o.procs; ++r) {
      std::vector<std::string> args(argv, argv + argc);
      args.push_back("--rank");
      args.push_back(std::to_string(r));
      std::vector<char*> cargs;
      for (auto& a : args) cargs.push_back(a.data());
      cargs.push_back(nullptr);
      pid_t pid;
      if (posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, cargs.data(), environ) != 0) {
        std::perror("posix_spawn");
        return 1;
      }
      pids.push_back(pid);
    }
    for (pid_t p : pids) {
      int st = 0;
      waitpid(p, &st, 0);
      if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) std::fprintf(stderr, "rank process failed\n");
    }
    total.sources = static_cast<int>(files.size());
    if (!o.csv.empty()) {  // merge the ranks' rows
      std::ofstream merged(o.csv, std::ios::app);
      for (int r = 0; r < o.procs; ++r) {
        std::string part = o.csv + ".rank" + std::to_string(r);
        std::string rows = read_all(part);
        merged << rows;
        fs::remove(part);
        std::istringstream in(rows);
        for (std::string line; std::getline(in, line);) {
          std::vector<std::string> f;
          std::stringstream ls(line);
          for (std::string x; std::getline(ls, x, ',');) f.push_back(x);
          if (f.size() > 4) {
            total.ok += f[3] == "1";
            total.compiled += f[4] == "0";
          }
        }
      }
    }
  }
  double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  double cpu = children_cpu_s() - cpu0;
  char line[512];
  std::snprintf(line, sizeof line, "%s,%d,%d,%d,%d,%d,%.1f,%.1f,%.1f,%.2f", o.label.c_str(),
                total.sources, total.compiled, total.ok, o.jobs, o.procs, wall,
                total.sources / wall * 60, cpu, total.compiled ? cpu / total.compiled : 0.0);
  std::printf(
      "label,sources,compiled,ok,jobs,procs,wall_s,candidates_per_min,compiler_cpu_s,cpu_s_per_"
      "compile\n%s\n",
      line);
  if (!o.summary.empty()) {
    bool fresh = !fs::exists(o.summary);
    std::ofstream s(o.summary, std::ios::app);
    if (fresh)
      s << "label,sources,compiled,ok,jobs,procs,wall_s,candidates_per_min,compiler_cpu_s,cpu_s_"
           "per_compile\n";
    s << line << "\n";
  }
  return 0;
}
