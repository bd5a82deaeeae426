// apps/heat2d/stencil.hpp — heat2d's cell update, the one expression the CPU loops
// (problem.hpp) and the CUDA kernel (gpu_kernels.cu) both evaluate: plain C++17, a
// __host__ __device__ function under nvcc. Both are compiled without fused multiply-add
// (-ffp-contract=off; nvcc --fmad=false): IEEE-754 double additions and multiplications
// in this order round the same on either side, so every cell, and the checksum, is
// bitwise the same on CPU and GPU.
#pragma once

#if defined(__CUDACC__)
#define HEAT2D_HOST_DEVICE __host__ __device__
#else
#define HEAT2D_HOST_DEVICE
#endif

namespace heat2d {

inline constexpr double diffusion = 0.2; ///< k (stable below 0.25)

/// v = u + k * ((north + south) + (west + east) - 4 * u), evaluated in exactly that order.
HEAT2D_HOST_DEVICE inline double updated(double u, double north, double south, double west,
                                         double east) {
  return u + diffusion * ((north + south) + (west + east) - 4.0 * u);
}

} // namespace heat2d
