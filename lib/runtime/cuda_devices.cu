// GPU discovery and self-test with the CUDA runtime (compiled only when CUDA is found).
#include "gpu.hpp"
#include <crown/build_config.hpp>
#include <cuda_runtime.h>
#if CROWN_HAVE_NCCL
#include <nccl.h>
#endif

namespace crown::detail {
namespace {

__global__ void fill_iota(int* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 3 * i + 1;
}

} // namespace

gpu_inventory discover_gpus() {
  gpu_inventory inv;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError(); // no driver or no device: clear the sticky error, report none
    return inv;
  }
  inv.count = count;
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp prop{};
    inv.names.emplace_back(cudaGetDeviceProperties(&prop, d) == cudaSuccess ? prop.name : "?");
  }
  return inv;
}

bool gpu_self_test(int device) {
  constexpr int n = 1000;
  int previous = 0;
  if (cudaGetDevice(&previous) != cudaSuccess || cudaSetDevice(device) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  struct restore {
    int device;
    ~restore() { cudaSetDevice(device); } // the application's current device stays
  } keep{previous};
  int* dev = nullptr;
  if (cudaMalloc(&dev, n * sizeof(int)) != cudaSuccess) return false;
  fill_iota<<<(n + 255) / 256, 256>>>(dev, n);
  int host[n] = {};
  const bool copied = cudaMemcpy(host, dev, sizeof host, cudaMemcpyDeviceToHost) == cudaSuccess;
  cudaFree(dev);
  if (!copied) return false;
  for (int i = 0; i < n; ++i)
    if (host[i] != 3 * i + 1) return false;
  return true;
}

std::string nccl_version() {
#if CROWN_HAVE_NCCL
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return "?";
  // NCCL >= 2.9 encodes major*10000 + minor*100 + patch.
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100);
#else
  return {};
#endif
}

} // namespace crown::detail
