// CUDA error reporting and the device guard.
#include "cuda_error.hpp"
#include "driver_api.hpp"
#include <crown/error.hpp>
#include <string>

namespace crown::detail {

int current_device() noexcept {
  int d = -1;
  if (cudaGetDevice(&d) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return d;
}

void check_cuda(cudaError_t rc, std::string_view what) {
  if (rc == cudaSuccess) return;
  (void)cudaGetLastError(); // not sticky for the next call
  throw error(std::string(what) + " on GPU " + std::to_string(current_device()),
              std::string(cudaGetErrorName(rc)) + " (" + cudaGetErrorString(rc) + ")");
}

void check_cu(int rc, std::string_view what) {
  if (rc == 0) return;
  throw error(std::string(what) + " on GPU " + std::to_string(current_device()),
              "CUresult " + std::to_string(rc) + " (" + driver_error_text(rc) + ")");
}

std::string stream_device_problem(cudaStream_t stream, int device) {
  if (!stream || stream == cudaStreamLegacy || stream == cudaStreamPerThread) return {};
  int on = -1;
  cudaError_t rc = cudaSuccess;
  try { // asked on `device`: a thread without a context would get one on GPU 0 for it
    const device_guard guard(device);
    rc = cudaStreamGetDevice(stream, &on);
  } catch (const error& e) {
    return e.what();
  }
  if (rc != cudaSuccess) {
    (void)cudaGetLastError();
    return std::string("the stream is not a valid CUDA stream (cudaStreamGetDevice: ") +
           cudaGetErrorName(rc) + ")";
  }
  if (on == device) return {};
  return "the stream belongs to GPU " + std::to_string(on) +
         ", but this rank's device heap is on GPU " + std::to_string(device) +
         " (create it there: cudaSetDevice(crown::detail::device_ordinal()))";
}

device_guard::device_guard(int device) : previous_(current_device()) {
  if (previous_ == device) return;
  if (const driver_api* d = driver(); d && d->context_get(&context_) == CUDA_SUCCESS) exact_ = true;
  check_cuda(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")");
  changed_ = true;
}

device_guard::~device_guard() {
  if (!changed_) return;
  if (exact_)
    (void)driver()->context_set(context_); // the application's own context, or none
  else if (previous_ >= 0)
    (void)cudaSetDevice(previous_);
}

} // namespace crown::detail
