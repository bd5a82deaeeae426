// tests/gpu/rank_gpu.hpp — the GPU tests' streams, buffers and kernels on the rank's GPU
// (local rank % GPUs), where its device coarrays live: Crown never changes the caller's
// current device, and a kernel on another GPU cannot write a heap mapped for this one.
#pragma once
#include "kernels.hpp"
#include <crown/detail/device_heap.hpp>

namespace gpu_test {

/// `using gpu_test::on_the_ranks_gpu; BOOST_TEST_GLOBAL_FIXTURE(on_the_ranks_gpu);` in each
/// GPU test program.
struct on_the_ranks_gpu {
  on_the_ranks_gpu() { use_device(crown::detail::device_ordinal()); }
};

} // namespace gpu_test
