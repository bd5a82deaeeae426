// lib/runtime/memory_headroom.hpp — how much memory this process may still commit.
#pragma once
#include <cstdint>
#include <string>

namespace crown::detail {

struct memory_headroom {
  std::uint64_t bytes = UINT64_MAX; ///< UINT64_MAX: nothing known
  std::string limited_by;           ///< what set the figure, for error messages
};

/// MemAvailable, lowered to the room left under the memory limit of this process's
/// cgroup and of every ancestor (cgroup v1 and v2; usage less inactive file pages).
/// Shared memory reserved beyond this is not refused with ENOSPC: the kernel's OOM
/// killer ends some process instead, so callers check before reserving.
[[nodiscard]] memory_headroom current_memory_headroom();

} // namespace crown::detail
