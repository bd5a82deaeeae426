// lib/gpu/device_startup.hpp — the device heap's place in the runtime's lifetime (no
// CUDA header: lib/transport/runtime_stages.cpp includes it in every build).
#pragma once

namespace crown::detail {

struct runtime_state;

/// At runtime start, collective over the world: the device heap, when this rank has a
/// GPU and CROWN_GPU_HEAP_SIZE is not 0 (ranks without one take part and have none),
/// and CROWN_CHECK=1's host-buffer checks.
void start_device_heap(runtime_state& st);
/// At runtime shutdown, before the communicators go.
void stop_device_heap() noexcept;
/// "vmm" or "ipc" (how this host's ranks map each other's device heaps), or nullptr.
const char* device_heap_mapping() noexcept;

} // namespace crown::detail
