// Device selection for the policy: resolves run.device (auto | cpu | cuda) against what this
// process can see, with a clear error when CUDA is asked for and absent.
#pragma once

#include <torch/types.h>

#include <string>

namespace kernelrl {

// Number of CUDA devices LibTorch sees (0 without a GPU or driver).
int cuda_device_count();

// The CUDA device index resolve_device returns (0 unless set): a rank of a multi-process job
// sets its LOCAL_RANK (trainer/distributed.h) before anything resolves a device.
void set_default_cuda_index(int index);

// auto -> cuda:<default index> when a GPU is present, else cpu; cuda without a GPU throws NotAvailableError.
torch::Device resolve_device(const std::string& name);

}  // namespace kernelrl
