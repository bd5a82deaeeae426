// crown-heat2d --gpu: the stencil kernel and the few CUDA runtime calls (nvcc, C++17,
// --fmad=false: see stencil.hpp).
#include "gpu_kernels.hpp"
#include "stencil.hpp"
#include <cuda_runtime.h>
#include <stdexcept>
#include <string>

namespace heat2d::gpu {
namespace {

void check(cudaError_t rc, const char* what) {
  if (rc == cudaSuccess) return;
  (void)cudaGetLastError(); // not sticky for the next call
  int device = -1;
  (void)cudaGetDevice(&device);
  throw std::runtime_error(std::string("heat2d --gpu: ") + what + " on GPU " +
                           std::to_string(device) + ": " + cudaGetErrorName(rc) + " (" +
                           cudaGetErrorString(rc) + ")");
}

__global__ void update_kernel(const double* __restrict__ u, double* __restrict__ v,
                              std::size_t pitch, std::size_t rows, std::size_t cols) {
  const std::size_t i = blockIdx.y * std::size_t{blockDim.y} + threadIdx.y + 1;
  const std::size_t j = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x + 1;
  if (i > rows || j > cols) return;
  const std::size_t at = i * pitch + j;
  v[at] = updated(u[at], u[at - pitch], u[at + pitch], u[at - 1], u[at + 1]);
}

__global__ void pack_kernel(const double* __restrict__ u, std::size_t pitch, std::size_t rows,
                            std::size_t column, double* __restrict__ out) {
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i < rows) out[i] = u[(i + 1) * pitch + column];
}

} // namespace

void use_device(int device) { check(cudaSetDevice(device), "cudaSetDevice"); }

stream::stream() {
  cudaStream_t s = nullptr;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  s_ = s;
}
stream::~stream() { (void)cudaStreamDestroy(s_); }
void stream::synchronize() const { check(cudaStreamSynchronize(s_), "cudaStreamSynchronize"); }

buffer::buffer(std::size_t count) {
  void* p = nullptr;
  check(cudaMalloc(&p, count * sizeof(double)), "cudaMalloc");
  p_ = static_cast<double*>(p);
}
buffer::~buffer() { (void)cudaFree(p_); }

void update(const double* u, double* v, std::size_t pitch, std::size_t rows, std::size_t cols,
            CUstream_st* s) {
  if (rows == 0 || cols == 0) return; // an empty block: a grid of 0 is a launch error
  const dim3 threads(32, 8);
  const dim3 blocks(static_cast<unsigned>((cols + threads.x - 1) / threads.x),
                    static_cast<unsigned>((rows + threads.y - 1) / threads.y));
  update_kernel<<<blocks, threads, 0, s>>>(u, v, pitch, rows, cols);
  check(cudaGetLastError(), "the update kernel's launch");
}

void pack_column(const double* u, std::size_t pitch, std::size_t rows, std::size_t column,
                 double* out, CUstream_st* s) {
  if (rows == 0) return;
  const unsigned threads = 256;
  pack_kernel<<<static_cast<unsigned>((rows + threads - 1) / threads), threads, 0, s>>>(
      u, pitch, rows, column, out);
  check(cudaGetLastError(), "the column packing kernel's launch");
}

void copy(void* dst, const void* src, std::size_t bytes, CUstream_st* s) {
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s), "cudaMemcpyAsync");
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize after cudaMemcpyAsync");
}

void copy_rows(void* dst, std::size_t dst_pitch, const void* src, std::size_t src_pitch,
               std::size_t width, std::size_t rows, CUstream_st* s) {
  check(cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, width, rows, cudaMemcpyDefault, s),
        "cudaMemcpy2DAsync");
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize after cudaMemcpy2DAsync");
}

} // namespace heat2d::gpu
