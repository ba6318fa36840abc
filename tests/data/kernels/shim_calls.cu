// The shim capture's fixture (tests/unit/shim/test_shim_capture.cpp, reward.capture: shim): one
// library whose kernelrl_launch does what dims[0] selects, so that one compile serves every
// case. The parameter bytes the test expects are derived by hand from the arguments it passes.
//   0: shim_a<<<>>> (pointer, pointer, int, struct) then a memset of outputs[1]
//   1: cudaLaunchKernelEx of shim_b with a (2,1,1) cluster, then shim_b with programmatic
//      stream serialization (PDL)
//   2: cudaMalloc  3: cudaDeviceSynchronize  4: an event recorded and synchronized
//   5: the launch on the legacy stream (another stream)  6: a host callback
//   7: opens /dev/nvidia0 for writing  8: grid from the occupancy query (asks the worker)
//   9: a device-to-device copy of 256 bytes from inputs[0] to outputs[0]
//   10: a copy from host memory (a static array) to outputs[0]
#include <fcntl.h>
#include <unistd.h>

#include "kernel_abi.h"

struct ShimParams {
  int m;
  double scale;
  char flag;
};

__global__ void shim_a(const float* in, float* out, int n, ShimParams p) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * static_cast<float>(p.scale) + static_cast<float>(p.m + p.flag);
}

__global__ void shim_b(float* out, long long n) {
  const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) out[i] = 1.f;
}

static void host_fn(void*) {}
static float host_table[64];

extern "C" int kernelrl_launch(const kernelrl_args* args, void* stream_ptr) {
  cudaStream_t s = static_cast<cudaStream_t>(stream_ptr);
  const int mode = static_cast<int>(args->dims[0]);
  const int n = static_cast<int>(args->dims[1]);
  const float* in = static_cast<const float*>(args->inputs[0]);
  float* out = static_cast<float*>(args->outputs[0]);
  switch (mode) {
    case 0: {
      ShimParams p;
      p.m = static_cast<int>(args->dims[2]);
      p.scale = 0.5 * static_cast<double>(args->dims[3]);
      p.flag = 'k';
      shim_a<<<(n + 255) / 256, 256, 128, s>>>(in, out, n, p);
      if (cudaMemsetAsync(args->outputs[1], 0x5a, 1000, s) != cudaSuccess) return 2;
      break;
    }
    case 1: {
      cudaLaunchAttribute attr[1];
      attr[0].id = cudaLaunchAttributeClusterDimension;
      attr[0].val.clusterDim.x = 2, attr[0].val.clusterDim.y = 1, attr[0].val.clusterDim.z = 1;
      cudaLaunchConfig_t cfg = {};
      cfg.gridDim = dim3(8, 2, 1), cfg.blockDim = dim3(64, 1, 1), cfg.stream = s;
      cfg.attrs = attr, cfg.numAttrs = 1;
      if (cudaLaunchKernelEx(&cfg, shim_b, out, (long long)n) != cudaSuccess) return 3;
      attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attr[0].val.programmaticStreamSerializationAllowed = 1;
      cfg.gridDim = dim3(4, 1, 1);
      if (cudaLaunchKernelEx(&cfg, shim_b, out, (long long)n * 3) != cudaSuccess) return 4;
      break;
    }
    case 2: {
      void* p = nullptr;
      cudaMalloc(&p, 1024);
      shim_b<<<1, 32, 0, s>>>(out, n);
      break;
    }
    case 3:
      shim_b<<<1, 32, 0, s>>>(out, n);
      cudaDeviceSynchronize();
      break;
    case 4: {
      cudaEvent_t e;
      cudaEventCreate(&e);
      shim_b<<<1, 32, 0, s>>>(out, n);
      cudaEventRecord(e, s);
      cudaEventSynchronize(e);
      break;
    }
    case 5: shim_b<<<1, 32>>>(out, n); break;
    case 6:
      shim_b<<<1, 32, 0, s>>>(out, n);
      cudaLaunchHostFunc(s, host_fn, nullptr);
      break;
    case 7: {
      const int fd = open("/dev/nvidia0", O_RDWR);
      if (fd >= 0) close(fd);
      shim_b<<<1, 32, 0, s>>>(out, n);
      break;
    }
    case 8: {
      int blocks = 0, sms = 0, dev = 0;
      if (cudaGetDevice(&dev) != cudaSuccess ||
          cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
          cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, shim_b, 128, 0) != cudaSuccess)
        return 5;
      shim_b<<<blocks * sms, 128, 0, s>>>(out, n);
      break;
    }
    case 9:
      if (cudaMemcpyAsync(out, in, 256, cudaMemcpyDeviceToDevice, s) != cudaSuccess) return 6;
      break;
    case 10:
      if (cudaMemcpyAsync(out, host_table, sizeof host_table, cudaMemcpyDefault, s) != cudaSuccess) return 7;
      break;
    default: return 1;
  }
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
