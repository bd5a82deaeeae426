// lib/transport/heap_state.hpp — the runtime's active symmetric heap, for the heap ABI.
#pragma once
#include "symmetric_heap.hpp"
#include <crown/config.hpp>

namespace crown::detail {

/// Publishes the heap to the one-sided ABI (nullptr: none), with the checks cfg asks for.
void install_heap(symmetric_heap* h, const config& cfg) noexcept;
/// The heap installed by the running crown::runtime, or nullptr.
symmetric_heap* active_heap() noexcept;
/// The active heap; throws state_error naming `op` when no runtime is active. A C
/// string, measured only for the error: every put and get passes through here.
symmetric_heap& active_heap(const char* op);

} // namespace crown::detail
