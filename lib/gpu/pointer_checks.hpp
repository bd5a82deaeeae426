// lib/gpu/pointer_checks.hpp — device memory passed where host memory is expected.
#pragma once
#include <atomic>
#include <cstddef>

namespace crown::detail {

/// On under CROWN_CHECK=1 (set at start-up): host-kind transfers check their buffers.
extern std::atomic<bool> g_check_host_buffers;

/// Throws argument_error naming `op`, the address and its device when `p` is device
/// memory.
void refuse_device_buffer(const void* p, std::size_t bytes, const char* op);

/// Host paths call this on the caller's buffer: one relaxed load unless CROWN_CHECK=1,
/// so host-kind coarrays pay nothing for device memory existing.
inline void check_host_buffer(const void* p, std::size_t bytes, const char* op) {
  if (g_check_host_buffers.load(std::memory_order_relaxed)) refuse_device_buffer(p, bytes, op);
}

} // namespace crown::detail
