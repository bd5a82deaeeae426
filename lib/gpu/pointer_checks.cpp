// CROWN_CHECK=1: device memory handed to host-kind transfers is refused by name.
#include "pointer_checks.hpp"
#include <crown/detail/device_heap.hpp>
#include <crown/error.hpp>
#include <cstdint>
#include <cuda_runtime_api.h>
#include <string>

namespace crown::detail {

std::atomic<bool> g_check_host_buffers{false};

bool is_device_pointer(const void* p) noexcept {
  cudaPointerAttributes a{};
  if (!p || cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError(); // no driver, no device, or an unknown pointer: host memory
    return false;
  }
  return a.type == cudaMemoryTypeDevice;
}

void refuse_device_buffer(const void* p, std::size_t bytes, const char* op) {
  if (bytes == 0 || !is_device_pointer(p)) return;
  cudaPointerAttributes a{};
  (void)cudaPointerGetAttributes(&a, p);
  throw argument_error(std::string(op) + " (CROWN_CHECK=1)",
                       "the buffer at " + std::to_string(reinterpret_cast<std::uintptr_t>(p)) +
                           " (" + std::to_string(bytes) + " bytes) is device memory of GPU " +
                           std::to_string(a.device) +
                           ", but this coarray is host memory: use host memory, or a "
                           "coarray<T, N, memory_kind::cuda>");
}

} // namespace crown::detail
