// Kernels of the GPU tests: the kernel view (crown/device.cuh) in use.
#include "kernels.hpp"
#include <crown/device.cuh>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

namespace gpu_test {
namespace {

void check(cudaError_t rc, const char* what) {
  if (rc == cudaSuccess) return;
  std::fprintf(stderr, "gpu_test: %s: %s\n", what, cudaGetErrorString(rc));
  std::abort();
}

__global__ void iota(int* dst, std::size_t n, int base) {
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i < n) dst[i] = base + static_cast<int>(i);
}

__global__ void store(crown::device::coarray_view<int, 2> v, int target) {
  const std::size_t rows = v.extents[0], cols = v.extents[1];
  for (std::size_t k = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; k < rows * cols;
       k += std::size_t{gridDim.x} * blockDim.x)
    v.on(target)(k / cols, k % cols) = 1000 * v.this_image + static_cast<int>(k);
  crown::device::quiet();
}

__global__ void load(crown::device::coarray_view<int, 2> v, int source, int* out) {
  const std::size_t rows = v.extents[0], cols = v.extents[1];
  for (std::size_t k = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; k < rows * cols;
       k += std::size_t{gridDim.x} * blockDim.x)
    out[k] = v.on(source)(k / cols, k % cols);
}

__global__ void add_all(crown::device::coarray_view<std::int64_t, 1> v, std::size_t i) {
  for (int img = 0; img < v.num_images; ++img) v.atomic_add(img, i, std::int64_t{1});
}

__global__ void wait_copy(crown::device::coarray_view<std::int64_t, 1> flags, std::size_t flag,
                          std::int64_t value, crown::device::coarray_view<double, 1> data,
                          double* out, std::size_t n) {
  if (threadIdx.x == 0) (void)flags.wait_until(flag, crown::device::cmp::ge, value);
  __syncthreads();
  for (std::size_t i = threadIdx.x; i < n; i += blockDim.x) out[i] = data(i);
}

__global__ void put_signal(crown::device::coarray_view<double, 1> from,
                           crown::device::coarray_view<double, 1> to, int target, std::size_t n,
                           crown::device::coarray_view<std::int64_t, 1> flags, std::size_t flag) {
  for (std::size_t i = threadIdx.x; i < n; i += blockDim.x) to.on(target)(i) = from(i);
  crown::device::quiet();
  __syncthreads();
  if (threadIdx.x == 0) flags.atomic_add(target, flag, std::int64_t{1});
}

/// Every operation of <crown/device.cuh> on the local block (one thread), so that each
/// is compiled for every element type in every CUDA build; out[0..9] are checked by
/// the test.
template <typename T>
__global__ void every_op(crown::device::coarray_view<T, 1> v, T* out) {
  namespace d = crown::device;
  const int me = v.this_image;
  v(0) = T(5);
  v.on(me)(1) = T(7);
  d::fence();
  d::quiet();
  out[0] = v.atomic_load(me, 0);                   // 5
  out[1] = v.compare_and_swap(me, 1, T(7), T(9));  // 7, now 9
  out[2] = v.compare_and_swap(me, 1, T(7), T(11)); // 9, unchanged
  out[3] = v.atomic_add(me, 2, T(3));              // 0, now 3
  out[4] = v.wait_until(2, d::cmp::ge, T(3));      // 3
  out[5] = d::wait_until(&v(1), d::cmp::eq, T(9)); // 9
  out[6] = v.atomic_load(me, 1);                   // 9
  out[7] = T(v.num_images);
  out[8] = v.atomic_add(me, 0, T(-6)); // 5; a 4-byte integer is now all ones
  v.atomic_add(me, 0, T(1));           // all ones + 1: carries out of element 0 only
  out[9] = v.atomic_load(me, 1);       // 9: an add wider than T would have made it 10 (8
                                       // for wchar_t, whose -6 borrows)
}

} // namespace

template <typename T>
void every_operation(crown::device::coarray_view<T, 1> v, T* out) {
  every_op<<<1, 1>>>(v, out);
  check(cudaDeviceSynchronize(), "every_operation");
}
template void every_operation(crown::device::coarray_view<int, 1>, int*);
template void every_operation(crown::device::coarray_view<unsigned, 1>, unsigned*);
template void every_operation(crown::device::coarray_view<long long, 1>, long long*);
template void every_operation(crown::device::coarray_view<unsigned long long, 1>,
                              unsigned long long*);
template void every_operation(crown::device::coarray_view<long, 1>, long*);
template void every_operation(crown::device::coarray_view<float, 1>, float*);
template void every_operation(crown::device::coarray_view<double, 1>, double*);
template void every_operation(crown::device::coarray_view<char32_t, 1>, char32_t*);
template void every_operation(crown::device::coarray_view<wchar_t, 1>, wchar_t*);

buffer::buffer(std::size_t bytes) { check(cudaMalloc(&p_, bytes), "cudaMalloc"); }
buffer::~buffer() { cudaFree(p_); }
void buffer::upload(const void* host, std::size_t bytes) {
  check(cudaMemcpy(p_, host, bytes, cudaMemcpyHostToDevice), "upload");
}
void buffer::download(void* host, std::size_t bytes) const {
  check(cudaMemcpy(host, p_, bytes, cudaMemcpyDeviceToHost), "download");
}

stream::stream() {
  cudaStream_t s = nullptr;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  s_ = s;
}
stream::~stream() { cudaStreamDestroy(s_); }
void stream::synchronize() const { check(cudaStreamSynchronize(s_), "cudaStreamSynchronize"); }

void* pinned_alloc(std::size_t bytes) {
  void* p = nullptr;
  check(cudaMallocHost(&p, bytes), "cudaMallocHost");
  return p;
}
void pinned_free(void* p) { cudaFreeHost(p); }

void fill_iota(int* dst, std::size_t n, int base, CUstream_st* s) {
  iota<<<static_cast<unsigned>((n + 255) / 256), 256, 0, s>>>(dst, n, base);
  check(cudaGetLastError(), "iota");
}
void store_to_image(crown::device::coarray_view<int, 2> v, int target) {
  store<<<8, 128>>>(v, target);
  check(cudaDeviceSynchronize(), "store_to_image");
}
void load_from_image(crown::device::coarray_view<int, 2> v, int source, int* out) {
  load<<<8, 128>>>(v, source, out);
  check(cudaDeviceSynchronize(), "load_from_image");
}
void add_everywhere(crown::device::coarray_view<std::int64_t, 1> v, std::size_t i, int times) {
  add_all<<<1, times>>>(v, i);
  check(cudaDeviceSynchronize(), "add_everywhere");
}
void wait_then_copy(crown::device::coarray_view<std::int64_t, 1> flags, std::size_t flag,
                    std::int64_t value, crown::device::coarray_view<double, 1> data, double* out,
                    std::size_t n, CUstream_st* s) {
  wait_copy<<<1, 128, 0, s>>>(flags, flag, value, data, out, n);
  check(cudaGetLastError(), "wait_then_copy");
}
void kernel_put_signal(crown::device::coarray_view<double, 1> from,
                       crown::device::coarray_view<double, 1> to, int target, std::size_t n,
                       crown::device::coarray_view<std::int64_t, 1> flags, std::size_t flag) {
  put_signal<<<1, 256>>>(from, to, target, n, flags, flag);
  check(cudaDeviceSynchronize(), "kernel_put_signal");
}
void synchronize() { check(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); }
void download(void* host, const void* from, std::size_t bytes) {
  check(cudaMemcpy(host, from, bytes, cudaMemcpyDefault), "cudaMemcpy(download)");
}

void use_device(int device) { check(cudaSetDevice(device), "cudaSetDevice"); }
int device_count() {
  int count = 0;
  check(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  return count;
}

} // namespace gpu_test
