// How long a fresh process takes to get a CUDA context and a stream on one GPU: what the
// evaluation worker's candidate runner (reward/worker/runner_main.cpp) pays once per candidate.
//   bench_context_init DEVICE [HOLD_S]   prints "init_ms <ms> visible <n>" (cudaSetDevice +
//   cudaFree(0) + stream), then keeps the context HOLD_S seconds (for nvidia-smi to read the
//   device memory a context takes: what each spare runner holds, reward.spare_runners)
// bench/gpu_context_init.sh runs it with every GPU visible and with its own GPU alone
// (CUDA_VISIBLE_DEVICES=<uuid>), one process at a time and one per GPU at once.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

int main(int argc, char** argv) {
  const int device = argc > 1 ? std::atoi(argv[1]) : 0;
  const auto t0 = std::chrono::steady_clock::now();
  cudaStream_t s = nullptr;
  if (cudaSetDevice(device) != cudaSuccess || cudaFree(nullptr) != cudaSuccess ||
      cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) {
    std::fprintf(stderr, "bench_context_init: no context on device %d\n", device);
    return 1;
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  int visible = 0;
  cudaGetDeviceCount(&visible);
  std::printf("init_ms %.1f visible %d\n", ms, visible);
  std::fflush(stdout);
  if (argc > 2) std::this_thread::sleep_for(std::chrono::duration<double>(std::atof(argv[2])));
  return 0;
}
