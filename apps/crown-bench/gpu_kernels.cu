// crown-bench gpu: baselines and kernel-view kernels (compiled by nvcc).
#include "gpu_kernels.hpp"
#include <chrono>
#include <crown/device.cuh>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#include <memory>

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

/// What finish_or_release writes into a side's words: above any round's number.
constexpr std::int64_t released = std::int64_t{1} << 62;

/// One side of the flag ping-pong: `put(k)` stores k into the other side's word (a
/// one-element put, then quiet), `wait(k)` returns once this side's word reaches k
/// (the value seen). Side 0 puts first; side 1 answers.
template <typename Put, typename Wait>
__device__ void play(int side, std::int64_t base, int rounds, Put put, Wait wait) {
  for (std::int64_t k = base + 1; k <= base + rounds; ++k) {
    if (side == 1 && wait(k) >= released) return;
    put(k);
    if (side == 0 && wait(k) >= released) return;
  }
}

__global__ void ping_pong(crown::device::coarray_view<std::int64_t, 1> v, int side,
                          std::int64_t base, int rounds) {
  play(
      side, base, rounds,
      [&](std::int64_t k) {
        v.on(1 - side)(0) = k;
        crown::device::quiet();
      },
      [&](std::int64_t k) { return v.wait_until(0, crown::device::cmp::ge, k); });
}

__global__ void ping_pong_local(std::int64_t* flags, std::int64_t base, int rounds) {
  const int side = static_cast<int>(blockIdx.x);
  play(
      side, base, rounds,
      [&](std::int64_t k) {
        flags[1 - side] = k;
        crown::device::quiet();
      },
      [&](std::int64_t k) {
        return crown::device::wait_until(flags + side, crown::device::cmp::ge, k);
      });
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

void start_flag_ping_pong(crown::device::coarray_view<std::int64_t, 1> v, int side,
                          std::int64_t base, int rounds, CUstream_st* s) {
  ping_pong<<<1, 1, 0, s>>>(v, side, base, rounds);
  check(cudaGetLastError(), "ping_pong");
}
void start_flag_ping_pong_local(std::int64_t* flags, std::int64_t base, int rounds,
                                CUstream_st* s) {
  ping_pong_local<<<2, 1, 0, s>>>(flags, base, rounds); // two blocks: both resident at once
  check(cudaGetLastError(), "ping_pong_local");
}
bool finish_or_release(CUstream_st* s, std::int64_t* own, int count, double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  cudaError_t rc;
  while ((rc = cudaStreamQuery(s)) == cudaErrorNotReady)
    if (std::chrono::steady_clock::now() > until) break;
  if (rc != cudaErrorNotReady) {
    check(rc, "flag ping-pong");
    return true;
  }
  // Released by copies on another stream (the copy engine runs beside the spinning
  // kernel), again until the kernel ends: a put of the other side's, still running, may
  // overwrite the word before this side's wait saw it; that side's own deadline ends it.
  const std::unique_ptr<CUstream_st, void (*)(CUstream_st*)> side(stream_create(), stream_destroy);
  const std::int64_t word = released;
  do {
    for (int k = 0; k < count; ++k)
      check(cudaMemcpyAsync(own + k, &word, sizeof word, cudaMemcpyHostToDevice, side.get()),
            "cudaMemcpyAsync(release)");
    check(cudaStreamSynchronize(side.get()), "cudaStreamSynchronize(release)");
  } while ((rc = cudaStreamQuery(s)) == cudaErrorNotReady);
  check(rc, "flag ping-pong (released)");
  return false;
}

} // namespace crown_bench::gpu_side
