// include/crown/detail/wait.hpp — how every Crown wait spends its time.
#pragma once
#include <chrono>
#include <thread>

namespace crown::detail {

/// Busy polls before a waiting rank gives its core away: the runtime sets it from
/// CROWN_WAIT_SPINS, or to 0 when ranks outnumber hardware threads (a spinning
/// rank would then steal the very core the rank it waits for needs).
int wait_spins() noexcept;
void set_wait_spins(int spins) noexcept;

/// Spin briefly, then yield, then sleep in short naps once a wait grows long.
class backoff {
public:
  void pause() noexcept {
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
};

/// Polls `done()` under a backoff until it returns true.
template <typename Done>
void wait_until(Done&& done) {
  backoff b;
  while (!done()) b.pause();
}

} // namespace crown::detail
