// crown-bench gpu: baselines and kernel-view kernels (compiled by nvcc).
#include "gpu_kernels.hpp"
#include <crown/device.cuh>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

namespace crown_bench::gpu_side {
namespace {

void check(cudaError_t rc, const char* what) {
  if (rc == cudaSuccess) return;
  std::fprintf(stderr, "crown-bench gpu: %s: %s\n", what, cudaGetErrorString(rc));
  std::exit(1);
}

__global__ void store_peer(crown::device::coarray_view<double, 1> v, int target) {
  v.on(target)(0) = 1.0;
  crown::device::quiet();
}

__global__ void store_local(double* p) { *p = 1.0; }

__global__ void put_block(crown::device::coarray_view<double, 1> v, int target, std::size_t n) {
  double* to = &v.on(target)(0);
  const double* from = &v(0);
  for (std::size_t i = threadIdx.x; i < n; i += blockDim.x) to[i] = from[i];
  crown::device::quiet();
}

__global__ void copy_block(double* dst, const double* src, std::size_t n) {
  for (std::size_t i = threadIdx.x; i < n; i += blockDim.x) dst[i] = src[i];
}

} // namespace

void* device_alloc(std::size_t bytes) {
  void* p = nullptr;
  check(cudaMalloc(&p, bytes), "cudaMalloc");
  check(cudaMemset(p, 1, bytes), "cudaMemset");
  return p;
}
void device_free(void* p) { cudaFree(p); }
CUstream_st* stream_create() {
  cudaStream_t s = nullptr;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  return s;
}
void stream_destroy(CUstream_st* s) { cudaStreamDestroy(s); }
void* pinned_alloc(std::size_t bytes) {
  void* p = nullptr;
  check(cudaHostAlloc(&p, bytes, cudaHostAllocDefault), "cudaHostAlloc");
  return p;
}
void pinned_free(void* p) { cudaFreeHost(p); }
void memcpy_d2d(void* dst, const void* src, std::size_t bytes) {
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice), "cudaMemcpy");
}
void memcpy_async_sync(void* dst, const void* src, std::size_t bytes, CUstream_st* s) {
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s), "cudaMemcpyAsync");
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
}
void kernel_store_peer(crown::device::coarray_view<double, 1> v, int target) {
  store_peer<<<1, 1>>>(v, target);
  check(cudaDeviceSynchronize(), "store_peer");
}
void kernel_store_local(double* p) {
  store_local<<<1, 1>>>(p);
  check(cudaDeviceSynchronize(), "store_local");
}
void kernel_put_one_block(crown::device::coarray_view<double, 1> v, int target, std::size_t n) {
  put_block<<<1, 1024>>>(v, target, n);
  check(cudaDeviceSynchronize(), "put_block");
}
void kernel_copy_one_block(double* dst, const double* src, std::size_t n) {
  copy_block<<<1, 1024>>>(dst, src, n);
  check(cudaDeviceSynchronize(), "copy_block");
}

} // namespace crown_bench::gpu_side
