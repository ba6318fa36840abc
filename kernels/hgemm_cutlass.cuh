// HGEMM for Hopper (sm_90a) from CUTLASS 3.x collective builders: C = A * B, fp16 in, fp32
// accumulate, fp16 out. The builders pick the TMA + wgmma mainloop (warp-specialized, stages
// from the shared memory the epilogue leaves) and the TMA epilogue; GemmUniversal runs them
// persistently (cooperative or ping-pong consumers) or with the stream-K scheduler.
// A: M x K row-major. B: K x N row-major (nn) or column-major (tn). C: M x N row-major.
// NDEBUG: a device-side assert is a function call inside the mainloop, which serializes wgmma.
#ifndef NDEBUG
#define NDEBUG
#endif
#include <cutlass/cutlass.h>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cute/tensor.hpp>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/kernel/gemm_universal.hpp>

#include "kernel_abi.h"

namespace hgemm_cutlass {
namespace {
using namespace cute;
namespace gemm = cutlass::gemm;
using RowMajor = cutlass::layout::RowMajor;

enum Sched { kCooperative, kPingpong, kStreamK };

// Tile BM x BN x BK, cluster CM x CN; RASTER 0/1/2 = CUTLASS's choice / along M / along N.
template <int BM, int BN, int BK, int CM, int CN, Sched S, bool B_KMAJOR, int RASTER, int SWIZZLE>
struct Config {
  using Tile = Shape<Int<BM>, Int<BN>, Int<BK>>;
  using Cluster = Shape<Int<CM>, Int<CN>, _1>;
  using LayoutB = std::conditional_t<B_KMAJOR, cutlass::layout::ColumnMajor, RowMajor>;
  using MainSchedule = std::conditional_t<S == kPingpong, gemm::KernelTmaWarpSpecializedPingpong,
                                          gemm::KernelTmaWarpSpecializedCooperative>;
  using EpiSchedule = std::conditional_t<S == kPingpong, cutlass::epilogue::TmaWarpSpecialized,
                                         cutlass::epilogue::TmaWarpSpecializedCooperative>;
  // C is void: the epilogue computes D = 1 * acc and never reads a source matrix.
  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Tile, Cluster,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, RowMajor, 8,
      cutlass::half_t, RowMajor, 8, EpiSchedule>::CollectiveOp;
  using Mainloop = typename gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, cutlass::half_t, RowMajor, 8,
      cutlass::half_t, LayoutB, 8, float, Tile, Cluster,
      gemm::collective::StageCountAutoCarveout<int(sizeof(typename Epilogue::SharedStorage))>,
      MainSchedule>::CollectiveOp;
  using Kernel = gemm::kernel::GemmUniversal<
      Shape<int, int, int, int>, Mainloop, Epilogue,
      std::conditional_t<S == kStreamK, gemm::StreamKScheduler, gemm::PersistentScheduler>>;
  using Gemm = gemm::device::GemmUniversalAdapter<Kernel>;
  static constexpr int kRaster = RASTER, kSwizzle = SWIZZLE;
  static constexpr bool kBKMajor = B_KMAJOR;
};

// The kernelrl_launch body for one Config: 0 on success.
template <class Cfg>
int run(const kernelrl_args* args, void* stream) {
  if (args->n_inputs < 2 || args->n_outputs < 1 || args->n_dims < 3) return 1;
  const int64_t M = args->dims[0], N = args->dims[1], K = args->dims[2];
  if (M <= 0 || N <= 0 || K <= 0 || M % 8 || N % 8 || K % 8 || (M | N | K) >> 31) return 2;
  using Kernel = typename Cfg::Kernel;
  // Packed strides in CUTLASS's (rows, columns, batch) order; B is viewed as N x K.
  typename Kernel::StrideA sa = make_stride(K, _1{}, int64_t(0));
  typename Kernel::StrideB sb;
  if constexpr (Cfg::kBKMajor)
    sb = make_stride(K, _1{}, int64_t(0));
  else
    sb = make_stride(_1{}, N, int64_t(0));
  typename Kernel::StrideC sc = make_stride(N, _1{}, int64_t(0));
  typename Kernel::StrideD sd = make_stride(N, _1{}, int64_t(0));
  auto* a = static_cast<const cutlass::half_t*>(args->inputs[0]);
  auto* b = static_cast<const cutlass::half_t*>(args->inputs[1]);
  auto* d = static_cast<cutlass::half_t*>(args->outputs[0]);
  typename Cfg::Gemm::Arguments arg{gemm::GemmUniversalMode::kGemm,
                                    {int(M), int(N), int(K), 1},
                                    {a, sa, b, sb},
                                    {{1.f, 0.f}, nullptr, sc, d, sd}};
  using Raster = gemm::kernel::detail::RasterOrderOptions;
  arg.scheduler.raster_order = Cfg::kRaster == 1   ? Raster::AlongM
                               : Cfg::kRaster == 2 ? Raster::AlongN
                                                   : Raster::Heuristic;
  arg.scheduler.max_swizzle_size = Cfg::kSwizzle;
  typename Cfg::Gemm op;
  if (op.can_implement(arg) != cutlass::Status::kSuccess) return 3;
  // Stream-K's partial tiles and locks go in the evaluator's workspace (zeroed on the stream).
  if (Cfg::Gemm::get_workspace_size(arg) > args->workspace_bytes) return 4;
  if (op.run(arg, args->workspace, static_cast<cudaStream_t>(stream)) != cutlass::Status::kSuccess)
    return 5;
  return cudaGetLastError() == cudaSuccess ? 0 : 6;
}

}  // namespace
}  // namespace hgemm_cutlass
