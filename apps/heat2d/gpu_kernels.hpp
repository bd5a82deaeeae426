// apps/heat2d/gpu_kernels.hpp — the CUDA side of crown-heat2d --gpu (gpu_kernels.cu, built
// by nvcc only where CMake found CUDA). No CUDA header here: host C++20 code includes it.
// Every failure throws std::runtime_error naming the CUDA call, the GPU and the error.
#pragma once
#include <cstddef>

struct CUstream_st; // cudaStream_t

namespace heat2d::gpu {

/// Makes `device` this thread's current GPU (the one Crown's device heap is on).
void use_device(int device);

/// A non-blocking CUDA stream, destroyed with this object.
class stream {
public:
  stream();
  ~stream();
  stream(const stream&) = delete;
  stream& operator=(const stream&) = delete;
  [[nodiscard]] CUstream_st* get() const noexcept { return s_; }
  /// Waits for everything enqueued so far.
  void synchronize() const;

private:
  CUstream_st* s_ = nullptr;
};

/// `count` doubles of device memory, freed with this object.
class buffer {
public:
  explicit buffer(std::size_t count);
  ~buffer();
  buffer(const buffer&) = delete;
  buffer& operator=(const buffer&) = delete;
  [[nodiscard]] double* data() const noexcept { return p_; }

private:
  double* p_ = nullptr;
};

/// Enqueues one iteration of the owned rows x cols cells of a block stored with one
/// halo cell on every side (padded coordinates from 1, `pitch` elements per stored
/// row), from u into v: problem.hpp's update_block(cells::all), cell for cell.
void update(const double* u, double* v, std::size_t pitch, std::size_t rows, std::size_t cols,
            CUstream_st* s);
/// Enqueues out[i] = u[(i + 1) * pitch + column] for i < rows: an owned column, packed.
void pack_column(const double* u, std::size_t pitch, std::size_t rows, std::size_t column,
                 double* out, CUstream_st* s);
/// Copies `bytes` between host and device memory (either way) in the stream's order,
/// and waits for the copy.
void copy(void* dst, const void* src, std::size_t bytes, CUstream_st* s);
/// The same for `rows` rows of `width` bytes, `dst_pitch`/`src_pitch` bytes apart
/// (cudaMemcpy2DAsync): a halo column to or from a contiguous host buffer.
void copy_rows(void* dst, std::size_t dst_pitch, const void* src, std::size_t src_pitch,
               std::size_t width, std::size_t rows, CUstream_st* s);

} // namespace heat2d::gpu
