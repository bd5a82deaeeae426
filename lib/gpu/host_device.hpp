// lib/gpu/host_device.hpp — CROWN_HOST_DEVICE: __host__ __device__ under nvcc, nothing
// elsewhere, for arithmetic that the host tests check without a GPU and kernels run.
#pragma once

#if defined(__CUDACC__)
#define CROWN_HOST_DEVICE __host__ __device__
#else
#define CROWN_HOST_DEVICE
#endif
