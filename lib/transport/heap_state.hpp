// lib/transport/heap_state.hpp — the runtime's active symmetric heap, for the heap ABI.
#pragma once
#include "symmetric_heap.hpp"
#include <atomic>
#include <crown/config.hpp>

namespace crown::detail {

/// Publishes the heap to the one-sided ABI (nullptr: none), with the checks cfg asks for.
void install_heap(symmetric_heap* h, const config& cfg) noexcept;
/// Set by install_heap(); read inline, since every put and get starts with it.
extern std::atomic<symmetric_heap*> g_active_heap;
/// The heap installed by the running crown::runtime, or nullptr.
inline symmetric_heap* active_heap() noexcept {
  return g_active_heap.load(std::memory_order_acquire);
}
/// Throws state_error naming `op`: no runtime is active.
[[noreturn, gnu::cold]] void no_active_heap(const char* op);
/// The active heap; throws state_error naming `op` when no runtime is active. A C
/// string, measured only for the error: every put and get passes through here.
inline symmetric_heap& active_heap(const char* op) {
  symmetric_heap* h = active_heap();
  if (!h) [[unlikely]]
    no_active_heap(op);
  return *h;
}

} // namespace crown::detail
