// The progress thread: busy while traffic moves, asleep in short naps when idle.
#include "progress_thread.hpp"
#include <atomic>
#include <chrono>
#include <crown/detail/wait.hpp>
#include <cstring>
#include <sys/prctl.h>

namespace crown::detail {
namespace {

std::atomic<int> g_running{0};
thread_local bool g_on_progress_thread = false;

constexpr auto busy_for = std::chrono::milliseconds(1);
constexpr auto nap = std::chrono::microseconds(100);
/// After this long without traffic the naps grow to long_nap: a rank idle for a while
/// is unlikely to be asked anything urgent, and each wake-up costs a few microseconds
/// (1 ms naps kept an idle rank at 3-5% of a core, 5 ms at 0.6-1%). Over UCX the nap
/// ends early when traffic arrives (the worker's event fd); elsewhere the first request
/// to a long-idle rank waits up to one nap.
constexpr auto long_idle = std::chrono::milliseconds(100);
constexpr auto long_nap = std::chrono::milliseconds(5);

} // namespace

bool progress_thread_running() noexcept { return g_running.load(std::memory_order_relaxed) > 0; }
bool on_progress_thread() noexcept { return g_on_progress_thread; }

std::jthread launch_progress_thread(symmetric_heap& h) {
  return std::jthread([&h](std::stop_token stop) {
    ++g_running;
    g_on_progress_thread = true;
    // Without this the kernel's default 50 us timer slack stretches every nap.
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
    auto last_moved = std::chrono::steady_clock::now();
    while (!stop.stop_requested()) {
      if (polling_threads().load(std::memory_order_relaxed) > 0) { // they progress
        std::this_thread::sleep_for(nap);
        continue;
      }
      if (h.progress()) {
        last_moved = std::chrono::steady_clock::now();
        continue;
      }
      const auto idle = std::chrono::steady_clock::now() - last_moved;
      if (idle < busy_for)
        std::this_thread::yield();
      else
        h.transport()->idle_wait(idle < long_idle ? nap : long_nap);
    }
    --g_running;
  });
}

} // namespace crown::detail
