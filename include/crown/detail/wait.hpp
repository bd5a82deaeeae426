// include/crown/detail/wait.hpp — how every Crown wait spends its time.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

namespace crown::detail {

/// Busy polls before a waiting rank gives its core away: the runtime sets it from
/// CROWN_WAIT_SPINS, or to 0 when ranks outnumber hardware threads (a spinning
/// rank would then steal the very core the rank it waits for needs).
int wait_spins() noexcept;
void set_wait_spins(int spins) noexcept;

/// The progress engine: called on every poll of every Crown wait, so that transports
/// that complete other ranks' one-sided operations only while this rank is inside MPI
/// (UCX emulating RMA over TCP) keep moving. Set by the transport layer; null = none.
using progress_fn = void (*)() noexcept;
progress_fn progress_hook() noexcept;
void set_progress_hook(progress_fn f) noexcept;

/// Threads of this process polling inside a Crown wait right now (spinning or
/// yielding, not napping). They drive progress themselves at least every few
/// microseconds, so the progress thread naps while there are any: on a machine with
/// more threads than cores it would otherwise take the core they need. A wait that
/// has grown long naps between polls and stops counting, and the thread serves again.
std::atomic<int>& polling_threads() noexcept;

/// Counts its owner in polling_threads() until release() or its end.
class polling_scope {
public:
  polling_scope() noexcept { polling_threads().fetch_add(1, std::memory_order_relaxed); }
  polling_scope(const polling_scope&) noexcept : polling_scope() {}
  polling_scope& operator=(const polling_scope&) noexcept { // a fresh wait polls again
    if (!counted_) polling_threads().fetch_add(1, std::memory_order_relaxed);
    counted_ = true;
    return *this;
  }
  ~polling_scope() { release(); }
  void release() noexcept {
    if (counted_) polling_threads().fetch_sub(1, std::memory_order_relaxed);
    counted_ = false;
  }

private:
  bool counted_ = true;
};

/// Spin briefly, then yield, then sleep in short naps once a wait grows long; drive
/// progress on every poll.
class backoff {
public:
  void pause() noexcept {
    if (const progress_fn f = progress_hook()) f();
    if (polls_ < spins_) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    } else if (polls_ < spins_ + yield_polls) {
      std::this_thread::yield();
    } else {
      polling_.release();
      std::this_thread::sleep_for(std::chrono::microseconds(nap_us));
    }
    ++polls_;
  }
  [[nodiscard]] long polls() const noexcept { return polls_; }

private:
  static constexpr long yield_polls = 20000;
  static constexpr int nap_us = 50;
  long spins_ = wait_spins();
  long polls_ = 0;
  polling_scope polling_;
};

/// Polls `done()` under a backoff until it returns true.
template <typename Done>
void wait_until(Done&& done) {
  backoff b;
  while (!done()) b.pause();
}

} // namespace crown::detail
