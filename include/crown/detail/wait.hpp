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

/// Threads of this process inside a Crown wait right now. They drive progress
/// themselves, so the progress thread naps while there are any (on a machine with more
/// threads than cores it would otherwise take the core they need).
std::atomic<int>& waiting_threads() noexcept;

/// Counts its owner in waiting_threads() for as long as it lives.
class waiting_scope {
public:
  waiting_scope() noexcept { waiting_threads().fetch_add(1, std::memory_order_relaxed); }
  waiting_scope(const waiting_scope&) noexcept : waiting_scope() {}
  waiting_scope& operator=(const waiting_scope&) noexcept { return *this; }
  ~waiting_scope() { waiting_threads().fetch_sub(1, std::memory_order_relaxed); }
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
  waiting_scope waiting_;
};

/// Polls `done()` under a backoff until it returns true.
template <typename Done>
void wait_until(Done&& done) {
  backoff b;
  while (!done()) b.pause();
}

} // namespace crown::detail
