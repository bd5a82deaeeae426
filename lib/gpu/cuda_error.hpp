// lib/gpu/cuda_error.hpp — CUDA failures as crown::error naming rank, device and values.
#pragma once
#include <crown/detail/wait.hpp>
#include <cuda_runtime_api.h>
#include <exception>
#include <string>
#include <string_view>

struct CUctx_st; // cuda.h's CUcontext

namespace crown::detail {

/// The calling thread's current CUDA device, or -1.
int current_device() noexcept;

/// Throws crown::error "rank R: <what> on GPU D: <name> (<description>)" unless `rc` is
/// cudaSuccess; clears the runtime's last error first, so that one failure is reported
/// once. `what` names the call and its values ("cudaMemcpyAsync(1048576 bytes to rank 3)").
void check_cuda(cudaError_t rc, std::string_view what);

/// The same for a driver API result (CUresult, passed as its integer value).
void check_cu(int rc, std::string_view what);

/// Makes `device` current for the guard's lifetime and restores the caller's context:
/// Crown's calls never change the device an application works on. When it changes the
/// device, a thread that had no context (cudaGetDevice then says 0; the progress
/// thread) gets none back: restoring "device 0" would create a context on GPU 0 in
/// every rank of a node. When `device` is already the current one nothing is switched
/// (an application's own, non-primary context on that GPU stays current).
class device_guard {
public:
  explicit device_guard(int device);
  ~device_guard();
  device_guard(const device_guard&) = delete;
  device_guard& operator=(const device_guard&) = delete;

private:
  int previous_ = -1;
  bool changed_ = false;
  bool exact_ = false;          ///< the driver told the caller's context: restore that
  CUctx_st* context_ = nullptr; ///< the caller's context (CUcontext), null for none
};

/// Why `stream` cannot carry work on GPU `device`, or empty when it can: it is not a
/// valid stream, or a stream of another GPU (work on it would fail, or another GPU's
/// copies would wait for it). The default streams' handles (cudaStreamLegacy,
/// cudaStreamPerThread) name the current device's stream, which Crown's device_guard
/// makes `device`'s, so they always can. Never throws a crown::error: a failure to ask
/// is the answer.
std::string stream_device_problem(cudaStream_t stream, int device);

/// Completes `stream` when its scope is left by an exception: copies enqueued before a
/// failure complete before the error leaves, since they read or write buffers that the
/// caller may free once it has the error. The wait serves other ranks meanwhile (a
/// kernel on the stream may wait for one of them) and leaves no CUDA error behind: the
/// error being thrown is the one to report. Make it once something is enqueued.
class drain_on_failure {
public:
  explicit drain_on_failure(cudaStream_t stream) noexcept : stream_(stream) {}
  ~drain_on_failure() {
    if (std::uncaught_exceptions() <= failures_) return;
    backoff pause(wait_site{"completing the copies enqueued before a failure"});
    while (cudaStreamQuery(stream_) == cudaErrorNotReady) pause.pause();
    (void)cudaGetLastError();
  }
  drain_on_failure(const drain_on_failure&) = delete;
  drain_on_failure& operator=(const drain_on_failure&) = delete;

private:
  cudaStream_t stream_;
  int failures_ = std::uncaught_exceptions();
};

/// Waits until `ready()` (cudaStreamQuery, cudaEventQuery) stops answering
/// cudaErrorNotReady, then checks its result: a poll under a backoff that drives
/// progress, so this rank serves other ranks' requests meanwhile (a kernel on this GPU
/// may be waiting for one of them). `site` is what a wait that lasts is reported as.
template <typename Query>
void wait_for_gpu(Query&& ready, const std::string& what,
                  const wait_site& site = wait_site{"waiting for copies on the GPU"}) {
  backoff pause(site);
  cudaError_t rc = ready();
  for (; rc == cudaErrorNotReady; rc = ready()) pause.pause();
  check_cuda(rc, what);
}

} // namespace crown::detail
