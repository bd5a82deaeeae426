// lib/transport/deferred_issues.hpp — large transfers that the progress thread issues.
#pragma once
#include "progress_thread.hpp"
#include <atomic>
#include <cstddef>
#include <deque>
#include <mutex>

namespace crown::detail {

/// A transfer whose start a backend may hand to the progress thread.
class deferrable {
public:
  /// Starts the transfer now; a failure to start is kept for the transfer's tests.
  virtual void issue_deferred() noexcept = 0;
  /// False while it waits in a deferred_issues queue.
  [[nodiscard]] bool issued() const noexcept { return issued_.load(std::memory_order_acquire); }

protected:
  deferrable() = default;
  ~deferrable() = default;

private:
  friend class deferred_issues;
  std::atomic<bool> issued_{true};
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

  /// Whether a transfer of `bytes` goes to the queue: a large one, or any behind one
  /// still queued (they keep their order), when a progress thread runs and this is not it.
  [[nodiscard]] bool wanted(std::size_t bytes) const noexcept {
    return (bytes >= min_bytes_ || count_.load(std::memory_order_acquire) > 0) &&
           progress_thread_running() && !on_progress_thread();
  }
  void push(deferrable& op) {
    const std::lock_guard hold(lock_);
    queue_.push_back(&op);
    op.issued_.store(false, std::memory_order_relaxed);
    count_.fetch_add(1, std::memory_order_release);
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
