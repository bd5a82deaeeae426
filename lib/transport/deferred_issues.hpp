// lib/transport/deferred_issues.hpp — large transfers that the progress thread issues.
#pragma once
#include "progress_nap.hpp"
#include "progress_thread.hpp"
#include "transfer.hpp"
#include <atomic>
#include <cstddef>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <span>
#include <utility>
#include <vector>

namespace crown::detail {

/// A transfer whose start a backend may hand to the progress thread: it keeps the
/// runs until then, and a failure to start for the transfer's tests to throw.
class deferrable {
public:
  /// Starts the kept transfer now (deferred_issues calls it, on any thread).
  void issue_deferred() noexcept {
    try {
      issue(*deferred_runs_, deferred_packed_);
    } catch (...) {
      start_failure_ = std::current_exception();
    }
    deferred_runs_.reset();
  }
  /// False while it waits in a deferred_issues queue.
  [[nodiscard]] bool issued() const noexcept { return issued_.load(std::memory_order_acquire); }

protected:
  deferrable() = default;
  ~deferrable() = default;
  /// Starts the transfer of `runs` from or to `packed`.
  virtual void issue(std::span<const run> runs, std::byte* packed) = 0;
  /// The deferred start's failure, handed over once (null: none).
  std::exception_ptr take_start_failure() noexcept {
    return std::exchange(start_failure_, nullptr);
  }

private:
  friend class deferred_issues;
  /// Keeps `runs` and `packed` for issue_deferred().
  void defer(std::span<const run> runs, std::byte* packed) {
    deferred_runs_.emplace(runs.begin(), runs.end());
    deferred_packed_ = packed;
  }

  std::atomic<bool> issued_{true};
  std::optional<std::vector<run>> deferred_runs_;
  std::byte* deferred_packed_ = nullptr;
  std::exception_ptr start_failure_;
};

/// Transfers handed to the progress thread, which issues them in the order they were
/// started while their owner goes on. For backends whose issuing call itself moves the
/// bytes: over TCP ucp_put_nbx writes them into the socket, and Open MPI's osc/ucx
/// MPI_Put returns only once a 1 MiB put has left, so a caller issuing a 1 MiB
/// put_async spent 95% of the transfer inside it. Whoever needs a queued transfer
/// issued (its test, a fence, an atomic behind it) issues the whole queue itself.
class deferred_issues {
public:
  explicit deferred_issues(std::size_t min_bytes) noexcept : min_bytes_(min_bytes) {}

  /// Queues `op`, keeping its runs, when it is large or behind one still queued (they
  /// keep their order), a progress thread runs and this is not it; false: issue it now.
  bool take(deferrable& op, std::span<const run> runs, std::byte* packed) {
    std::size_t bytes = 0;
    for (const run& r : runs) bytes += r.bytes;
    if ((bytes < min_bytes_ && count_.load(std::memory_order_acquire) == 0) ||
        !progress_thread_running() || on_progress_thread())
      return false;
    op.defer(runs, packed);
    const std::lock_guard hold(lock_);
    queue_.push_back(&op);
    op.issued_.store(false, std::memory_order_relaxed);
    count_.fetch_add(1, std::memory_order_release);
    wake_progress_thread();
    return true;
  }
  /// Issues every queued transfer, in order (any thread); true when there were any.
  /// The lock is held from pop to issue, so a transfer found queued has been issued
  /// once a caller gets the lock.
  bool issue_all() noexcept {
    if (count_.load(std::memory_order_acquire) == 0) return false;
    const std::lock_guard hold(lock_);
    const bool any = !queue_.empty();
    for (; !queue_.empty(); queue_.pop_front()) {
      deferrable& op = *queue_.front();
      op.issue_deferred();
      op.issued_.store(true, std::memory_order_release);
      count_.fetch_sub(1, std::memory_order_release);
    }
    return any;
  }

private:
  std::size_t min_bytes_;
  std::mutex lock_;
  std::deque<deferrable*> queue_;
  std::atomic<int> count_{0};
};

} // namespace crown::detail
