// lib/transport/stall_watch.hpp — naming a wait on another rank that does not end.
#pragma once
#include <chrono>
#include <string>

namespace crown::detail {

/// Watches one wait on `target` (polled on every round of its loop; the clock is read
/// every 1024 polls). Without a progress thread a target that computes or blocks in its
/// own MPI calls never serves the request, so after a few seconds the wait is logged
/// once with the target and the rule; with one, only after a minute (a hung target).
class stall_watch {
public:
  stall_watch(int target, const char* what) noexcept : target_(target), what_(what) {}
  void poll() noexcept {
    if (reported_ || (++polls_ & 1023) != 0) return;
    check();
  }
  /// A new operation is waited on (a loop over several).
  void retarget(int target) noexcept { target_ = target; }

private:
  void check() noexcept;

  int target_;
  const char* what_;
  long polls_ = 0;
  bool reported_ = false;
  std::chrono::steady_clock::time_point since_ = std::chrono::steady_clock::now();
};

} // namespace crown::detail
