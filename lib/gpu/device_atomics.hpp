// lib/gpu/device_atomics.hpp — host-initiated atomics on device memory, as a one-thread
// kernel (device_atomics.cu; nvcc, C++17: this header includes nothing of C++20).
#pragma once
#include <cstdint>
#include <cuda_runtime_api.h>

namespace crown::detail {

/// Operation codes, in the order of crown::detail::atomic_op (checked in cuda_backend.cpp).
enum device_atomic_code : int { load, store, add, bit_and, bit_or, bit_xor, swap, compare_swap };

/// Enqueues on `stream` a kernel that applies `op` to the word at `where` (4 or 8
/// bytes; integer, or float/double for load, store, add, swap and compare_swap) with
/// system-scope atomics and writes the previous bits to `*result` (host-mapped memory).
cudaError_t launch_device_atomic(cudaStream_t stream, void* where, int op, int width, bool floating,
                                 std::uint64_t operand, std::uint64_t compare,
                                 std::uint64_t* result);

} // namespace crown::detail
