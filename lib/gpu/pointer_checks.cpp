// CROWN_CHECK=1: device memory handed to host-kind transfers is refused by name.
#include "pointer_checks.hpp"
#include "cuda_error.hpp"
#include <crown/detail/device_heap.hpp>
#include <crown/error.hpp>
#include <cstdint>
#include <cuda_runtime_api.h>
#include <exception>
#include <optional>
#include <string>

namespace crown::detail {

std::atomic<bool> g_check_host_buffers{false};

namespace {
/// Whether `p` is device memory, with its attributes in `a`; asked on the device heap's
/// GPU where this rank has one: on a thread without a CUDA context the runtime would
/// otherwise make one on GPU 0 for the question (in every rank of a node, beside the
/// context each has on its own GPU).
bool device_memory(const void* p, cudaPointerAttributes& a) noexcept {
  if (!p) return false;
  cudaError_t rc = cudaErrorUnknown;
  try {
    const int heap_device = device_ordinal();
    std::optional<device_guard> on;
    if (heap_device >= 0) on.emplace(heap_device);
    rc = cudaPointerGetAttributes(&a, p);
  } catch (const std::exception&) { // the heap's GPU could not be made current: ask anyway
    rc = cudaPointerGetAttributes(&a, p);
  }
  if (rc == cudaSuccess) return a.type == cudaMemoryTypeDevice;
  (void)cudaGetLastError(); // no driver, no device, or an unknown pointer: host memory
  return false;
}
} // namespace

bool is_device_pointer(const void* p) noexcept {
  cudaPointerAttributes a{};
  return device_memory(p, a);
}

void refuse_device_buffer(const void* p, std::size_t bytes, const char* op) {
  cudaPointerAttributes a{};
  if (bytes == 0 || !device_memory(p, a)) return;
  throw argument_error(std::string(op) + " (CROWN_CHECK=1)",
                       "the buffer at " + std::to_string(reinterpret_cast<std::uintptr_t>(p)) +
                           " (" + std::to_string(bytes) + " bytes) is device memory of GPU " +
                           std::to_string(a.device) +
                           ", but this coarray is host memory: use host memory, or a "
                           "coarray<T, N, memory_kind::cuda>");
}

} // namespace crown::detail
