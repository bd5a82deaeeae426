// apps/crown-bench/gpu_kernels.hpp — the CUDA side of `crown-bench gpu` (gpu_kernels.cu,
// nvcc, C++17): baselines measured in one process and kernels using the kernel view.
#pragma once
#include <crown/device/coarray_view.hpp>
#include <cstddef>
#include <cstdint>

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

/// Kernel-to-kernel flag hand-offs, round trips base + 1 .. base + `rounds`: side 0
/// stores the round's number into side 1's word 0 (v.on(1)(0) = k, then quiet) and
/// waits with v.wait_until until its own word reaches it; side 1 waits first and
/// answers alike. Each of the two processes starts its side on `s` (one thread);
/// returns at once.
void start_flag_ping_pong(crown::device::coarray_view<std::int64_t, 1> v, int side,
                          std::int64_t base, int rounds, CUstream_st* s);
/// The same-process baseline: both sides as two blocks of one kernel, side k's word at
/// flags[k] (device memory), the same stores and wait.
void start_flag_ping_pong_local(std::int64_t* flags, std::int64_t base, int rounds, CUstream_st* s);
/// Waits for `s` up to `seconds`. Past that, writes a value no round reaches into the
/// `count` words at `own` (this side's flags, device memory) until the kernel on `s`
/// ended, and returns false: a hand-off that never comes cannot hang the run.
bool finish_or_release(CUstream_st* s, std::int64_t* own, int count, double seconds);

} // namespace crown_bench::gpu_side
