// tests/gpu/kernels.hpp — kernels the GPU tests launch (kernels.cu, nvcc, C++17): the
// kernel view in use, and device buffers without CUDA headers in the C++20 tests.
#pragma once
#include <crown/device/coarray_view.hpp>
#include <cstddef>
#include <cstdint>

struct CUstream_st;

namespace gpu_test {

/// Device memory (RAII), filled and read from the host.
class buffer {
public:
  explicit buffer(std::size_t bytes);
  ~buffer();
  buffer(const buffer&) = delete;
  buffer& operator=(const buffer&) = delete;
  [[nodiscard]] void* get() const noexcept { return p_; }
  void upload(const void* host, std::size_t bytes);
  void download(void* host, std::size_t bytes) const;

private:
  void* p_ = nullptr;
};

/// A created stream (RAII) and page-locked host memory.
class stream {
public:
  stream();
  ~stream();
  stream(const stream&) = delete;
  stream& operator=(const stream&) = delete;
  [[nodiscard]] CUstream_st* get() const noexcept { return s_; }
  void synchronize() const;

private:
  CUstream_st* s_ = nullptr;
};

void* pinned_alloc(std::size_t bytes);
void pinned_free(void* p);

/// Fills `n` ints at `dst` (device) with base + i, on `s` (nullptr: default stream).
void fill_iota(int* dst, std::size_t n, int base, CUstream_st* s);
/// v.on(target)(i, j) = 1000 * this_image + i * cols + j for the whole block (2-D view).
void store_to_image(crown::device::coarray_view<int, 2> v, int target);
/// out[i*cols+j] = v.on(source)(i, j) (device out).
void load_from_image(crown::device::coarray_view<int, 2> v, int source, int* out);
/// `times` threads each add 1 to element `i` of every image (int64).
void add_everywhere(crown::device::coarray_view<std::int64_t, 1> v, std::size_t i, int times);
/// Waits in a kernel until element `flag` of the local block is >= `value`, then copies
/// `n` doubles of the local data block to `out` (device).
void wait_then_copy(crown::device::coarray_view<std::int64_t, 1> flags, std::size_t flag,
                    std::int64_t value, crown::device::coarray_view<double, 1> data, double* out,
                    std::size_t n, CUstream_st* s);
/// Copies `n` doubles of the local block of `from` into image `target`'s block of `to`
/// from one kernel, then quiet and an atomic add on `flags` element `flag` there (a
/// kernel-side put-with-signal).
void kernel_put_signal(crown::device::coarray_view<double, 1> from,
                       crown::device::coarray_view<double, 1> to, int target, std::size_t n,
                       crown::device::coarray_view<std::int64_t, 1> flags, std::size_t flag);
/// Runs every kernel-side operation of <crown/device.cuh> on the local block of `v`
/// (4 elements, zero on entry), writing 10 results to `out` (device): 5, 7, 9, 0, 3, 9, 9,
/// num_images, 5, 9. Instantiated for int, unsigned, long long, unsigned long long, long
/// (std::int64_t), float, double, char32_t and wchar_t.
template <typename T>
void every_operation(crown::device::coarray_view<T, 1> v, T* out);
void synchronize();
/// cudaMemcpy of `bytes` from device (or any) memory to host memory.
void download(void* host, const void* from, std::size_t bytes);
/// Makes `device` this thread's current GPU (the one Crown's device heap is on), so that
/// the tests' buffers, streams and kernels live where the rank's device coarrays do.
void use_device(int device);
/// GPUs visible to this process (cudaGetDeviceCount).
int device_count();

} // namespace gpu_test
