// lib/runtime/gpu.hpp — GPU discovery; CUDA builds implement it in cuda_devices.cu.
#pragma once
#include <string>
#include <vector>

namespace crown::detail {

struct gpu_inventory {
  int count = 0;
  std::vector<std::string> names;
};

/// GPUs visible to this process (0 without CUDA or without a device).
gpu_inventory discover_gpus();
/// Launches a tiny kernel on `device` and checks its result: true if the GPU computes.
bool gpu_self_test(int device);
/// NCCL's version ("2.27.7"), or empty when built without NCCL.
std::string nccl_version();

} // namespace crown::detail
