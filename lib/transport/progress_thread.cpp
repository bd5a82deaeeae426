// The progress thread: busy while traffic moves, asleep in short naps when idle.
#include "progress_thread.hpp"
#include "async_op.hpp"
#include "progress_nap.hpp"
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <crown/detail/wait.hpp>
#include <crown/log.hpp>
#include <crown/trace.hpp>
#include <cstdint>
#include <cstring>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace crown::detail {
namespace {

std::atomic<int> g_running{0};
thread_local bool g_on_progress_thread = false;

constexpr auto busy_for = std::chrono::milliseconds(1);
constexpr auto nap = std::chrono::microseconds(100);
/// The nap while another thread polls inside a Crown wait (it progresses itself): a
/// wake-up steals a core from a busy rank, so this is long, and a large transfer queued
/// for the thread ends it early (100 us naps cost 1.1-1.3x in 8 B latency, crown-bench
/// progress).
constexpr auto aside_nap = std::chrono::milliseconds(1);
/// While this rank's own transfers are alive and moving, the thread naps this long
/// between polls instead of yielding: a yielding thread stays runnable and shares the
/// core of an owner that computes (crown-bench progress: 20 us hid 0.9-1.0 of a 1 MiB
/// put over UCX on TCP and the MPI window, 100 us 0.5-0.9).
constexpr auto in_flight_nap = std::chrono::microseconds(20);
/// After this long without traffic the naps grow to long_nap: a rank idle for a while
/// is unlikely to be asked anything urgent, and each wake-up costs a few microseconds
/// (1 ms naps kept an idle rank at 3-5% of a core, 5 ms at 0.6-1%). Over UCX the nap
/// ends early when traffic arrives (the worker's event fd); elsewhere the first request
/// to a long-idle rank waits up to one nap.
constexpr auto long_idle = std::chrono::milliseconds(100);
constexpr auto long_nap = std::chrono::milliseconds(5);

/// Bumped by every wake_progress_thread(); a nap sleeps on it.
std::atomic<std::uint32_t> g_wake_word{0};
std::atomic<int> g_napping{0};

/// Widens or narrows the calling thread's binding (CROWN_PROGRESS_CPUS); empty: as is.
void bind_to(const std::vector<int>& cpus) noexcept {
  if (cpus.empty()) return;
  const int count = *std::max_element(cpus.begin(), cpus.end()) + 1;
  const std::size_t size = CPU_ALLOC_SIZE(count);
  cpu_set_t* set = CPU_ALLOC(count);
  if (!set) return;
  CPU_ZERO_S(size, set);
  for (const int c : cpus) CPU_SET_S(static_cast<std::size_t>(c), size, set);
  if (sched_setaffinity(0, size, set) != 0)
    log(log_level::warn, "CROWN_PROGRESS_CPUS: the progress thread keeps its rank's binding (",
        std::strerror(errno), ")");
  CPU_FREE(set);
}

} // namespace

void progress_nap(std::chrono::microseconds limit) noexcept {
  // The word is read before the thread says it naps: a wake between the two changes the
  // word, and the futex then returns at once instead of sleeping through it.
  const std::uint32_t seen = g_wake_word.load(std::memory_order_seq_cst);
  g_napping.fetch_add(1, std::memory_order_seq_cst);
  const timespec wait{static_cast<time_t>(limit.count() / 1000000),
                      static_cast<long>(limit.count() % 1000000) * 1000};
  syscall(SYS_futex, &g_wake_word, FUTEX_WAIT_PRIVATE, seen, &wait, nullptr, 0);
  g_napping.fetch_sub(1, std::memory_order_relaxed);
}

void wake_progress_thread() noexcept {
  g_wake_word.fetch_add(1, std::memory_order_seq_cst);
  if (g_napping.load(std::memory_order_seq_cst) > 0)
    syscall(SYS_futex, &g_wake_word, FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
}

bool progress_thread_running() noexcept { return g_running.load(std::memory_order_relaxed) > 0; }
bool on_progress_thread() noexcept { return g_on_progress_thread; }

std::jthread launch_progress_thread(symmetric_heap& h, std::vector<int> cpus, bool without_mpi) {
  return std::jthread([&h, cpus = std::move(cpus), without_mpi](std::stop_token stop) {
    ++g_running;
    g_on_progress_thread = true;
    // Without this the kernel's default 50 us timer slack stretches every nap.
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
    pthread_setname_np(pthread_self(), "crown-progress"); // as top -H and gdb show it
    bind_to(cpus);
    auto last_moved = std::chrono::steady_clock::now();
    while (!stop.stop_requested()) {
      if (polling_threads().load(std::memory_order_relaxed) > 0) { // they progress
        const trace_span span("progress", "nap_aside",
                              {"limit_us", std::chrono::microseconds(aside_nap).count()});
        progress_nap(aside_nap);
        continue;
      }
      if (without_mpi ? h.progress_without_mpi() : h.progress()) {
        last_moved = std::chrono::steady_clock::now();
        continue;
      }
      const auto idle = std::chrono::steady_clock::now() - last_moved;
      const auto nap_for = [&](std::chrono::microseconds limit) {
        const trace_span span("progress", "nap", {"limit_us", limit.count()});
        h.transport()->idle_wait(limit);
      };
      if (idle < busy_for && operations_alive().load(std::memory_order_relaxed) > 0)
        nap_for(in_flight_nap);
      else if (idle < busy_for)
        std::this_thread::yield();
      else
        nap_for(idle < long_idle ? nap : long_nap);
    }
    --g_running;
  });
}

} // namespace crown::detail
