// The progress thread: busy while traffic moves, asleep in short naps when idle.
#include "progress_thread.hpp"
#include <atomic>
#include <chrono>
#include <cstring>
#include <sys/prctl.h>

namespace crown::detail {
namespace {

std::atomic<int> g_running{0};

constexpr auto busy_for = std::chrono::milliseconds(1);
constexpr auto nap = std::chrono::microseconds(100);
/// UCX wakes the thread itself; the nap only bounds how late the active messages that
/// carry its strided transfers are served.
constexpr auto ucx_nap = std::chrono::milliseconds(1);

} // namespace

bool progress_thread_running() noexcept { return g_running.load(std::memory_order_relaxed) > 0; }

std::jthread launch_progress_thread(backend& b) {
  return std::jthread([&b](std::stop_token stop) {
    ++g_running;
    // Without this the kernel's default 50 us timer slack stretches every nap.
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
    const auto idle_nap = std::strcmp(b.name(), "ucx") == 0
                              ? std::chrono::duration_cast<std::chrono::microseconds>(ucx_nap)
                              : nap;
    auto last_moved = std::chrono::steady_clock::now();
    while (!stop.stop_requested()) {
      if (b.progress()) {
        last_moved = std::chrono::steady_clock::now();
      } else if (std::chrono::steady_clock::now() - last_moved < busy_for) {
        std::this_thread::yield();
      } else {
        b.idle_wait(idle_nap);
      }
    }
    --g_running;
  });
}

} // namespace crown::detail
