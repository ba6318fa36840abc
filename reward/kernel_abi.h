/* The one contract between the evaluator and every candidate kernel (issue 4). Candidates include
 * this header (or the evaluator prepends it): it declares the argument block and the C-linkage
 * entry point a candidate must define. It implements nothing. Plain C so that nvcc, g++ and
 * dlsym agree on the symbol name `kernelrl_launch`.
 *
 * HGEMM: inputs[0] = A (M x K row-major fp16), inputs[1] = B (K x N row-major for layout nn,
 * column-major for tn), outputs[0] = C (M x N row-major fp16), dims = {M, N, K}; fp32
 * accumulation unless the task says acc: f16. All work goes on `stream` (a cudaStream_t; null on
 * the host backend). A 32 MiB workspace is provided. Return 0 on success. */
#ifndef KERNELRL_KERNEL_ABI_H
#define KERNELRL_KERNEL_ABI_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
  const void* inputs[8];  int n_inputs;
  void*       outputs[4]; int n_outputs;
  int64_t     dims[8];    int n_dims;       /* HGEMM: M, N, K */
  void*       workspace;  size_t workspace_bytes;
} kernelrl_args;

#ifdef __cplusplus
extern "C" {
#endif
/* every candidate defines, with C linkage: */
int kernelrl_launch(const kernelrl_args* args, void* stream);  /* cudaStream_t; 0 = success */
#ifdef __cplusplus
}
#endif

#endif /* KERNELRL_KERNEL_ABI_H */
