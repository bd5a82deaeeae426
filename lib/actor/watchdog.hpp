// lib/actor/watchdog.hpp — the controller's watch over the serving ranks' heartbeats.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <vector>

namespace crown::detail {

/// The controller's view of the serving ranks' heartbeat counters, which their
/// heartbeat threads increment in rank 0's heap (one 8-byte word per rank).
class watchdog {
public:
  watchdog(std::uint64_t* counters, int size, double timeout)
      : counters_(counters), timeout_(timeout), seen_(static_cast<std::size_t>(size)),
        when_(static_cast<std::size_t>(size), std::chrono::steady_clock::now()) {}
  [[nodiscard]] bool enabled() const noexcept { return counters_ != nullptr; }
  [[nodiscard]] double timeout() const noexcept { return timeout_; }
  /// The first rank silent for longer than the timeout, or -1 (checked every 1 ms).
  int silent(double& for_seconds) {
    const auto now = std::chrono::steady_clock::now();
    if (!counters_ || now - last_check_ < std::chrono::milliseconds(1)) return -1;
    last_check_ = now;
    for (std::size_t r = 1; r < seen_.size(); ++r) {
      const std::uint64_t beat = std::atomic_ref<std::uint64_t>(counters_[r]).load();
      if (beat != seen_[r]) {
        seen_[r] = beat;
        when_[r] = now;
      }
      for_seconds = std::chrono::duration<double>(now - when_[r]).count();
      if (for_seconds > timeout_) return static_cast<int>(r);
    }
    return -1;
  }

private:
  std::uint64_t* counters_; ///< nullptr: no watchdog
  double timeout_;
  std::vector<std::uint64_t> seen_;
  std::vector<std::chrono::steady_clock::time_point> when_;
  std::chrono::steady_clock::time_point last_check_{};
};

} // namespace crown::detail
