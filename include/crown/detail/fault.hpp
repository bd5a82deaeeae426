// include/crown/detail/fault.hpp — the points where CROWN_FAULT strikes, for tests of how
// a job ends when one rank dies, stops or throws at a chosen moment.
#pragma once
#include <atomic>
#include <crown/config.hpp>

namespace crown::detail {

/// 1 + the fault_point armed on this rank, or 0 (CROWN_FAULT is none here): one relaxed
/// load on the paths it watches.
extern std::atomic<int> g_armed_fault;

/// Arms CROWN_FAULT on this rank (the runtime, at start-up; none disarms).
void arm_fault(const fault_spec& f, int rank) noexcept;

/// Counts an arrival at `p`; at the configured one, kills (SIGKILL) or stops (SIGSTOP)
/// this process, or throws state_error, after a line on stderr saying so.
void strike_fault(fault_point p);

/// A fault point: costs one relaxed load unless CROWN_FAULT names this rank and point.
inline void fault_point_reached(fault_point p) {
  if (g_armed_fault.load(std::memory_order_relaxed) == static_cast<int>(p) + 1) [[unlikely]]
    strike_fault(p);
}

} // namespace crown::detail
