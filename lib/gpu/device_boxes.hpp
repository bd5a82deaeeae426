// lib/gpu/device_boxes.hpp — the kernel way of dist_tensor's device box copies
// (device_boxes.cu; nvcc, C++17: this header includes nothing of C++20).
#pragma once
#include "box_copy.hpp"
#include <cstddef>
#include <cuda_runtime_api.h>

namespace crown::detail {

/// How many boxes one launch takes: they travel as the kernel's argument (26, a 3-D
/// halo's pieces with corners, in 3.5 KiB of the 4 KiB a kernel's arguments may take).
inline constexpr std::size_t boxes_per_launch = 26;

/// Enqueues on `stream` one kernel copying `count` (at most boxes_per_launch) boxes of
/// `elem`-byte elements in words of `word` bytes (box_word_bytes of every box): a
/// thread per element, the boxes side by side in the grid. Both sides of every box must
/// be memory this device's kernels reach (its own, or a mapped peer's).
cudaError_t launch_box_copies(cudaStream_t stream, const box3* boxes, std::size_t count,
                              std::size_t elem, std::size_t word);

} // namespace crown::detail
