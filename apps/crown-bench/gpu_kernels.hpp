// apps/crown-bench/gpu_kernels.hpp — the CUDA side of `crown-bench gpu` (gpu_kernels.cu,
// nvcc, C++17): baselines measured in one process and kernels using the kernel view.
#pragma once
#include <crown/device/coarray_view.hpp>
#include <cstddef>

struct CUstream_st;

namespace crown_bench::gpu_side {

/// Device memory, a stream, and the calls the baselines time (each synchronises).
void* device_alloc(std::size_t bytes);
void device_free(void* p);
CUstream_st* stream_create();
void stream_destroy(CUstream_st* s);
/// Page-locked host memory (cudaHostAlloc), for staging by hand.
void* pinned_alloc(std::size_t bytes);
void pinned_free(void* p);
/// cudaMemcpy device to device within this process (the bandwidth limit).
void memcpy_d2d(void* dst, const void* src, std::size_t bytes);
/// cudaMemcpyAsync (any kinds) on `s`, then cudaStreamSynchronize (the small-size floor).
void memcpy_async_sync(void* dst, const void* src, std::size_t bytes, CUstream_st* s);
/// One thread stores 8 bytes into `target`'s block through the view, then quiet;
/// launch plus synchronisation.
void kernel_store_peer(crown::device::coarray_view<double, 1> v, int target);
/// The same store into this process's own memory `p` (the kernel floor).
void kernel_store_local(double* p);
/// One block of 1024 threads copies `n` doubles of the local block into `target`'s.
void kernel_put_one_block(crown::device::coarray_view<double, 1> v, int target, std::size_t n);
/// One block copying `n` doubles between two local buffers (the one-block limit).
void kernel_copy_one_block(double* dst, const double* src, std::size_t n);

} // namespace crown_bench::gpu_side
