// include/crown/detail/wait.hpp — how every Crown wait spends its time, and how a wait
// that does not end is reported (CROWN_WAIT_WARN) or ends the job (CROWN_WAIT_TIMEOUT).
#pragma once
#include <atomic>
#include <chrono>
#include <crown/trace.hpp>
#include <cstdint>
#include <thread>
#include <utility>

namespace crown {
class mesh;
}

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

/// Requests from other ranks this process has served (active messages): a wait that
/// sees the count move polls again instead of napping, since whoever sent them is
/// likely waiting for the next to be served (a staged transfer's chunks).
std::atomic<std::uint64_t>& requests_served() noexcept;

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

/// What a wait waits for, named when it lasts: the operation, the world rank it waits
/// on (-1: several, or not known) and the mesh it runs on (may be null).
struct wait_site {
  const char* what = "a Crown wait";
  int rank = -1;
  const crown::mesh* on = nullptr;
  /// A one-sided request that only the target's progress completes: without a progress
  /// thread it is reported after 5 s (x CROWN_TIMEOUT_SCALE) with the progress rule.
  bool needs_target_progress = false;
};

/// What a rank without a progress thread serves, and the choices: the start-up log,
/// crown-info and the stall reports say it.
extern const char* const unserved_consequence;

/// Sets the seconds (already scaled) after which a wait is logged and after which it
/// ends the job; 0 = never. The runtime applies CROWN_WAIT_WARN and CROWN_WAIT_TIMEOUT.
void set_wait_limits(double warn_seconds, double timeout_seconds, double unserved_seconds) noexcept;

/// Spin briefly, then yield, then sleep in short naps once a wait grows long; drive
/// progress on every poll. Every 1024 polls (never on the fast path) the clock is read:
/// a wait longer than CROWN_WAIT_WARN logs its site once, one longer than
/// CROWN_WAIT_TIMEOUT logs it and calls MPI_Abort.
class backoff {
public:
  backoff() noexcept = default;
  explicit backoff(const wait_site& site) noexcept : site_(site) {}
  /// A wait that something else bounds and that may rightly last for ever (a serving
  /// rank idle between commands, the controller waiting for its calls): never reported.
  [[nodiscard]] static backoff unwatched() noexcept {
    backoff b;
    b.watched_ = false;
    return b;
  }

  void pause() noexcept {
    if (const progress_fn f = progress_hook()) f();
    if (const auto served = requests_served().load(std::memory_order_relaxed);
        served != served_) { // serving someone: stay awake for their next request
      served_ = served;
      if (polls_ >= spins_ + yield_polls) polling_ = polling_scope{};
      polls_ = 0;
    }
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
    if ((++watch_polls_ & 1023) == 0 && watched_) watch(); // never reset: stalls still show
  }
  /// The wait now waits on another rank (a loop over several operations).
  void retarget(int rank) noexcept { site_.rank = rank; }

private:
  void watch() noexcept; ///< reads the clock; reports or aborts (lib/runtime/wait_watch.cpp)

  static constexpr long yield_polls = 20000;
  static constexpr int nap_us = 50;
  long spins_ = wait_spins();
  long polls_ = 0;
  unsigned long watch_polls_ = 0;
  std::uint64_t served_ = requests_served().load(std::memory_order_relaxed);
  wait_site site_{};
  bool watched_ = true;
  bool warned_ = false;
  std::chrono::steady_clock::time_point since_{}; ///< the first watch(): 1024 polls in
  polling_scope polling_;
};

/// Polls `done()` under a backoff until it returns true. A wait that waits at all is a
/// trace span (CROWN_TRACE) naming what it waits for and on whom.
template <typename Done>
void wait_until(const wait_site& site, Done&& done) {
  if (done()) return;
  trace_span span("wait", "wait", {"peer", site.rank});
  if (span.recording()) span.text("what", site.what); // `what` may not outlive the wait
  backoff b(site);
  do b.pause();
  while (!done());
}
template <typename Done>
void wait_until(Done&& done) {
  wait_until(wait_site{}, std::forward<Done>(done));
}

} // namespace crown::detail
