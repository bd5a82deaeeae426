// GPU discovery for builds without CUDA: there are no GPUs to use.
#include "gpu.hpp"

namespace crown::detail {
gpu_inventory discover_gpus() { return {}; }
bool gpu_self_test(int) { return false; }
std::string nccl_version() { return {}; }
} // namespace crown::detail
