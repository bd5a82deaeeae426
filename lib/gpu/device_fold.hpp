// lib/gpu/device_fold.hpp — the reduction kernel of device collectives (device_fold.cu;
// nvcc, C++17: this header includes nothing of C++20).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cuda_runtime_api.h>

namespace crown::detail {

/// Where image j's elements lie: table[j] + offset bytes (`table`: a device array of
/// per-image bases, a kernel view's), or, without a table, base + j * stride + offset.
struct fold_sources {
  const std::byte* const* table = nullptr;
  const std::byte* base = nullptr;
  std::size_t stride = 0;
  std::size_t offset = 0;
};

/// Enqueues on `stream`: out[k] = the fold over images j = 0 .. images-1, in image order,
/// of source_j[k], for k < count. `type` is a device_number and `op` a reduction (their
/// integer values); elements combine exactly as the host collectives combine them
/// (a + b, b < a ? b : a, a < b ? b : a; floating sums with x86's NaNs, x86_sum.hpp),
/// so results are bitwise the host's.
cudaError_t launch_fold(cudaStream_t stream, int type, int op, void* out, fold_sources src,
                        std::size_t count, int images);

} // namespace crown::detail
