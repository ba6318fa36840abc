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

template <int BM, int BN, int BK, int CM, int CN, Sched S, bool B_KMAJOR, int RASTER, int SWIZZLE>
struct Config {
  using Tile = Shape<Int<BM>, Int<BN>, Int<BK>>;
  using Cluster = Shape<Int<CM>, Int<CN>, _1>;
  using LayoutB = std::conditional_t<B_KMAJOR, cutlass::layout::ColumnMajor, RowMajor>;
  using MainSchedule = std::conditional_t<S == kPingpong, gemm::KernelTmaWarpSpecializedPingpong,
                                          gemm::KernelTmaWarpSpecializedCooperative>;
  using EpiSchedule = std::conditional_t<S == kPingpong, cutlass::epilogue::TmaWarpSpecialized,
                                         cutlass::epilogue::TmaWarpSpecializedCooperative>;
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
  static constexpr int kSwizzle = SWIZZLE;
};

template <class Cfg>
int run(const kernelrl_args* args, void* stream) {
  if (args->n_inputs < 2 || args->n_outputs < 1 || args->n_dims < 3) return 1;
  const int64_t M = args->dims[0], N = args->dims[1], K = args->dims[2];
  if (M <= 0 || N <= 0 || K <= 0 || M % 8 || N % 8 || K % 8 || (M | N | K) >> 31) return 2;
  using Kernel = typename Cfg::Kernel;
  typename Kernel::StrideA sa = make_stride(K, _1{}, int64_t(0));
  typename Kernel::StrideB sb;
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
  arg.scheduler.raster_order = Raster::Heuristic;
  arg.scheduler.max_swizzle_size = Cfg::kSwizzle;
  typename Cfg::Gemm op;
  if (op.can_implement(arg) != cutlass::Status::kSuccess) return 3;
  if (Cfg::Gemm::get_workspace_size(arg) > args->workspace_bytes) return 4;
  if (op.run(arg, args->workspace, static_cast<cudaStream_t>(stream)) != cutlass::Status::kSuccess)
    return 5;
  return cudaGetLastError() == cudaSuccess ? 0 : 6;
}
}
}

// ---- instance: 64x64x64 tile, cluster 1x1, ping-pong, raster 0 swizzle 1, layout nn
using Cfg = hgemm_cutlass::Config<64, 64, 64, 1, 1, hgemm_cutlass::kPingpong, /*B_KMAJOR=*/false, /*RASTER=*/0, /*SWIZZLE=*/1>;
extern "C" int kernelrl_launch(const kernelrl_args* args, void* stream) {
  return hgemm_cutlass::run<Cfg>(args, stream);
}
