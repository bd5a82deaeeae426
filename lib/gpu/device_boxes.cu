// dist_tensor's device box copies by one kernel: each box a row of blocks, a thread
// per element (its words in turn), through this rank's mappings of its peers' memory.
#include "device_boxes.hpp"
#include "kernel_launch.cuh"
#include <algorithm>
#include <cstdint>

namespace crown::detail {
namespace {

struct box_batch {
  box3 boxes[boxes_per_launch];
};
static_assert(sizeof(box_batch) <= 4000, "a kernel's arguments may take 4 KiB");

template <typename Word>
// __grid_constant__: the batch is read where it lies, never copied per thread.
__global__ void copy_boxes(const __grid_constant__ box_batch batch, std::size_t words_per_element) {
  const box3& b = batch.boxes[blockIdx.y];
  const std::size_t n = b.count();
  const std::size_t step = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += step) {
    std::size_t z, y, x;
    b.position(i, z, y, x);
    const Word* from =
        reinterpret_cast<const Word*>(b.from) + b.from_offset(z, y, x) * words_per_element;
    Word* to = reinterpret_cast<Word*>(b.to) + b.to_offset(z, y, x) * words_per_element;
    for (std::size_t w = 0; w < words_per_element; ++w) to[w] = from[w];
  }
}

template <typename Word>
cudaError_t launch(cudaStream_t stream, const box_batch& batch, unsigned boxes, std::size_t largest,
                   std::size_t words_per_element) {
  constexpr unsigned threads = 256;
  const auto blocks = static_cast<unsigned>(
      std::min<std::size_t>((largest + threads - 1) / threads, std::size_t{1024}));
  return launch_kernel(copy_boxes<Word>, dim3(blocks, boxes), threads, stream, batch,
                       words_per_element);
}

} // namespace

cudaError_t launch_box_copies(cudaStream_t stream, const box3* boxes, std::size_t count,
                              std::size_t elem, std::size_t word) {
  if (count == 0 || count > boxes_per_launch || word == 0 || elem % word != 0)
    return cudaErrorInvalidValue;
  box_batch batch;
  std::size_t largest = 0;
  for (std::size_t k = 0; k < count; ++k) {
    batch.boxes[k] = boxes[k];
    largest = std::max(largest, boxes[k].count());
  }
  if (largest == 0) return cudaSuccess;
  const auto n = static_cast<unsigned>(count);
  switch (word) {
  case 8:
    return launch<std::uint64_t>(stream, batch, n, largest, elem / 8);
  case 4:
    return launch<std::uint32_t>(stream, batch, n, largest, elem / 4);
  case 2:
    return launch<std::uint16_t>(stream, batch, n, largest, elem / 2);
  default:
    return launch<std::uint8_t>(stream, batch, n, largest, elem);
  }
}

} // namespace crown::detail
