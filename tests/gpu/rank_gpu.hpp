// tests/gpu/rank_gpu.hpp — the GPU tests' streams, buffers and kernels on the rank's GPU
// (local rank % GPUs), where its device coarrays live: Crown never changes the caller's
// current device, and a kernel on another GPU cannot write a heap mapped for this one.
#pragma once
#include "kernels.hpp"
#include <crown/crown.hpp>
#include <crown/detail/device_heap.hpp>
#include <stdexcept>
#include <string>

namespace gpu_test {

/// `using gpu_test::on_the_ranks_gpu; BOOST_TEST_GLOBAL_FIXTURE(on_the_ranks_gpu);` in each
/// GPU test program.
struct on_the_ranks_gpu {
  on_the_ranks_gpu() {
    const int device = crown::detail::device_ordinal();
    if (device < 0) // a GPU is visible (the harness skips otherwise), but the heap failed
      throw std::runtime_error("rank " + std::to_string(crown::world().rank()) +
                               ": no device heap on this rank although a GPU is visible (rank "
                               "0's log says why the device heap did not start)");
    use_device(device);
  }
};

/// Lowers the widest pitch of Crown's 2-D copies for its lifetime (the row-by-row path).
class pitch_limit {
public:
  explicit pitch_limit(std::size_t bytes) noexcept {
    crown::detail::set_device_copy_pitch_limit(bytes);
  }
  ~pitch_limit() { crown::detail::set_device_copy_pitch_limit(0); }
  pitch_limit(const pitch_limit&) = delete;
  pitch_limit& operator=(const pitch_limit&) = delete;
};

} // namespace gpu_test
