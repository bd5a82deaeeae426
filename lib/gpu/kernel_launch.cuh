// lib/gpu/kernel_launch.cuh — a kernel launch that reports its own error (nvcc only).
#pragma once
#include <cuda_runtime.h>
#include <utility>

namespace crown::detail {

/// kernel<<<grid, block, 0, stream>>>(args...), returning this launch's error alone.
/// cudaGetLastError after <<<>>> would also return, and clear, an earlier failure the
/// application left unchecked on this thread, and Crown would throw it as its own.
template <typename... Params, typename... Args>
cudaError_t launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, cudaStream_t stream,
                          Args&&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.stream = stream;
  const cudaError_t rc = cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
  if (rc != cudaSuccess) (void)cudaGetLastError(); // ours, thrown by the caller: not left behind
  return rc;
}

} // namespace crown::detail
