// kernelrl_eval_worker: the isolated process that checks and times candidates for the evaluator
// (reward/worker_client.h talks to it). One JSON request per stdin line, JSON lines back on a
// private copy of stdout (fd 1 itself goes to stderr). It never runs a candidate's host code: for
// each request a fresh runner (kernelrl_candidate_runner, runner_main.cpp) loads the candidate
// inside the OS sandbox (sandbox.h), and this process runs only the work the runner captured
// (GPU) or checks the calls the runner made on shared buffers (host); docs/sandbox.md. A sticky
// CUDA error or a kernel that does not finish (the candidate's device code runs here) is
// reported and the process exits; the client restarts it. The ready message says which sandbox
// the runners get (a runner started once, without a candidate, reports it). {"op": "prewarm",
// "count": N} starts up to N spare runners while the evaluator compiles, so that a runner's
// start (its CUDA context) is not paid before each candidate.
//
//   kernelrl_eval_worker [--backend auto|gpu|host] [--device N] [--sandbox auto|on|off --scratch DIR]
//                        [--capture context|shim]
//   kernelrl_eval_worker --run-once SO --task JSON [--calls N] [--backend ...] [--device N]
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <filesystem>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>

#include "reward/worker/backend.h"
#include "reward/worker/harness.h"
#include "reward/worker/runner_client.h"

namespace kernelrl::worker {
namespace {

FILE* g_out = nullptr;  // the protocol channel

void send(const nlohmann::json& j) {
  std::string s = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  std::fwrite(s.data(), 1, s.size(), g_out);
  std::fflush(g_out);
}

struct Loaded {
  void* handle = nullptr;
  LaunchFn fn = nullptr;
  std::string error;
};

Loaded load(const std::string& so) {
  Loaded l;
  l.handle = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!l.handle) {
    const char* e = dlerror();
    l.error = std::string("dlopen failed: ") + (e ? e : "?");
    return l;
  }
  dlerror();
  l.fn = reinterpret_cast<LaunchFn>(dlsym(l.handle, "kernelrl_launch"));
  if (!l.fn) {
    l.error = "no symbol kernelrl_launch with C linkage (declare it extern \"C\" or include kernel_abi.h)";
    dlclose(l.handle);
    l.handle = nullptr;
  }
  return l;
}

std::unique_ptr<Backend> make_backend(const std::string& backend, int device) {
  if (backend == "host" || (backend == "auto" && gpu_count() == 0)) return make_host_backend();
  return make_gpu_backend(device);
}

}  // namespace
}  // namespace kernelrl::worker

int main(int argc, char** argv) {
  // Inside main, not at file scope: the worker's sources compile in unity batches
  // (CMakeLists.txt), where a file-scope using-directive would reach the files after this one
  // (kernelrl::worker::Backend against c10::Backend in LibTorch's headers).
  using namespace kernelrl::worker;
  std::string backend_name = "auto", run_once_so, task_json, sandbox_mode = "auto", scratch,
              capture = "context";
  int device = 0, calls = 3;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "kernelrl_eval_worker: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--backend") backend_name = next();
    else if (a == "--device") device = std::stoi(next());
    else if (a == "--run-once") run_once_so = next();
    else if (a == "--task") task_json = next();
    else if (a == "--calls") calls = std::stoi(next());
    else if (a == "--sandbox") sandbox_mode = next();
    else if (a == "--capture") capture = next();
    else if (a == "--scratch") scratch = next();
    else {
      std::fprintf(stderr, "kernelrl_eval_worker: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  // Keep the protocol on a private descriptor (never inherited by a runner); stdout goes to stderr.
  int proto = fcntl(1, F_DUPFD_CLOEXEC, 3);
  dup2(2, 1);
  g_out = fdopen(proto, "w");

  std::unique_ptr<Backend> backend;
  try {
    backend = make_backend(backend_name, device);
  } catch (const std::exception& e) {
    send({{"ready", false}, {"error", e.what()}});
    return 1;
  }
  RunnerOptions runner;
  runner.backend = backend->gpu() ? "gpu" : "host";
  runner.device = device;
  runner.visible_devices = backend->child_visible_devices();
  runner.sandbox = sandbox_mode;
  runner.capture = capture;  // reward.capture
  runner.scratch = scratch.empty() ? std::filesystem::temp_directory_path() /
                                         ("kernelrl-runner-" + std::to_string(getpid()))
                                   : std::filesystem::path(scratch);
  runner.log_path = runner.scratch.parent_path() / (runner.scratch.filename().string() + "-runner.log");
  Harness harness(*backend, runner);

  if (!run_once_so.empty()) {  // for ncu / compute-sanitizer
    Loaded l = load(run_once_so);
    if (!l.fn) {
      std::fprintf(stderr, "%s\n", l.error.c_str());
      return 3;
    }
    try {
      harness.run_once(nlohmann::json::parse(task_json), l.fn, calls);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "run-once failed: %s\n", e.what());
      return 4;
    }
    return 0;
  }

  // Lazy library state (LibTorch's cuBLAS handle, the graph pool) comes up before the first
  // evaluation; a runner started without a candidate says which sandbox candidates get (and
  // that runners start at all).
  nlohmann::json sandbox;
  try {
    harness.warm_up();
    sandbox = sandbox_mode == "off"
                  ? nlohmann::json{{"summary", "off (reward.sandbox: off)"}, {"parts", "off"}}
                  : harness.runner_sandbox();
  } catch (const std::exception& e) {
    send({{"ready", false}, {"error", e.what()}});
    return 1;
  }

  auto info = backend->info();
  send({{"ready", true},
        {"sandbox", sandbox},
        {"backend", info.backend},
        {"device", info.device},
        {"driver", info.driver},
        {"arch", info.arch},
        {"cc", std::to_string(info.cc_major) + "." + std::to_string(info.cc_minor)},
        {"device_count", info.device_count},
        {"l2_bytes", info.l2_bytes},
        {"pid", static_cast<int>(getpid())}});

  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    nlohmann::json req;
    try {
      req = nlohmann::json::parse(line);
    } catch (const std::exception& e) {
      send({{"result", {{"status", "internal_error"}, {"reason", std::string("bad request: ") + e.what()}}}});
      continue;
    }
    std::string op = req.value("op", "");
    if (op == "exit") break;
    if (op == "ping") {
      send({{"pong", true}});
      continue;
    }
    if (op == "prewarm") {  // spare runners, made ready now (Harness::prepare_spares)
      nlohmann::json result;
      try {
        result = harness.prepare_spares(req.value("count", int64_t{0}),
                                        [](const std::string& what) { send({{"tick", what}}); });
      } catch (const std::exception& e) {
        result = {{"status", "internal_error"}, {"reason", std::string("prewarm: ") + e.what()}};
      }
      send({{"result", result}});
      continue;
    }
    if (op != "eval" && op != "baselines") {
      send({{"result", {{"status", "internal_error"}, {"reason", "unknown op " + op}}}});
      continue;
    }
    nlohmann::json result;
    try {
      const Tick tick = [](const std::string& what) { send({{"tick", what}}); };
      result = op == "baselines" ? harness.baselines(req, tick) : harness.evaluate(req, req.value("so", ""), tick);
    } catch (const Fatal& f) {
      // The context is unusable (or a kernel is still running): report, then leave without
      // running destructors that would touch the device.
      send({{"result", {{"status", f.status}, {"check", f.check}, {"reason", f.what()}}}, {"fatal", true}});
      std::fflush(nullptr);
      _exit(3);
    } catch (const std::exception& e) {
      // A sticky CUDA error can surface through a LibTorch call: check the device before
      // blaming the harness, and leave if the context is gone.
      try {
        backend->sync_device();
      } catch (const Fatal& f) {
        send({{"result", {{"status", f.status}, {"check", f.check}, {"reason", f.what()}}}, {"fatal", true}});
        std::fflush(nullptr);
        _exit(3);
      }
      result = {{"status", "internal_error"}, {"check", "harness"}, {"reason", e.what()}};
    }
    if (backend->tainted()) {
      // LibTorch's capture bookkeeping may be left behind: say so with the answer (the client
      // waits for this process to end and starts a fresh one for the next request), then leave.
      send({{"result", result}, {"exiting", true}});
      std::fflush(nullptr);
      _exit(0);
    }
    send({{"result", result}});
  }
  return 0;
}
