// The fold of device collectives: one thread per element, images in order.
#include "device_fold.hpp"
#include "kernel_launch.cuh"
#include "x86_sum.hpp"
#include <algorithm>
#include <type_traits>

namespace crown::detail {
namespace {

enum : int { sum, min, max };                // crown::detail::reduction's values
enum : int { i32, u32, i64, u64, f32, f64 }; // crown::detail::device_number's values

template <typename T>
__device__ const T* source(const fold_sources& s, int j) {
  const std::byte* base = s.table ? s.table[j] : s.base + static_cast<std::size_t>(j) * s.stride;
  return reinterpret_cast<const T*>(base + s.offset);
}

template <typename T, int Op>
__device__ T combine(T a, T b) {
  if constexpr (Op == sum && std::is_floating_point_v<T>)
    return x86_sum(a, b); // the host's NaNs, not the GPU's canonical one
  else if constexpr (Op == sum)
    return static_cast<T>(a + b);
  else if constexpr (Op == min)
    return b < a ? b : a;
  else
    return a < b ? b : a;
}

template <typename T, int Op>
__global__ void fold_kernel(T* out, fold_sources s, std::size_t count, int images) {
  const std::size_t step = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t k = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < count;
       k += step) {
    T acc = source<T>(s, 0)[k];
    for (int j = 1; j < images; ++j) acc = combine<T, Op>(acc, source<T>(s, j)[k]);
    out[k] = acc;
  }
}

template <typename T>
cudaError_t launch(cudaStream_t stream, int op, void* out, const fold_sources& s, std::size_t count,
                   int images) {
  constexpr unsigned threads = 256;
  const auto blocks = static_cast<unsigned>(
      std::min<std::size_t>((count + threads - 1) / threads, std::size_t{4096}));
  auto* const kernel = op == sum   ? fold_kernel<T, sum>
                       : op == min ? fold_kernel<T, min>
                                   : fold_kernel<T, max>;
  return launch_kernel(kernel, blocks, threads, stream, static_cast<T*>(out), s, count, images);
}

} // namespace

cudaError_t launch_fold(cudaStream_t stream, int type, int op, void* out, fold_sources src,
                        std::size_t count, int images) {
  if (count == 0) return cudaSuccess;
  switch (type) {
  case i32:
    return launch<std::int32_t>(stream, op, out, src, count, images);
  case u32:
    return launch<std::uint32_t>(stream, op, out, src, count, images);
  case i64:
    return launch<std::int64_t>(stream, op, out, src, count, images);
  case u64:
    return launch<std::uint64_t>(stream, op, out, src, count, images);
  case f32:
    return launch<float>(stream, op, out, src, count, images);
  default:
    return launch<double>(stream, op, out, src, count, images);
  }
}

} // namespace crown::detail
