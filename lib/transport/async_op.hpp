// lib/transport/async_op.hpp — what crown::completion holds: an operation in flight.
#pragma once
#include <atomic>
#include <crown/completion.hpp>

namespace crown::detail {

/// Operations of this process alive now (started, not yet released): while there are
/// any, the progress thread keeps them moving in short naps (see progress_thread.cpp).
std::atomic<int>& operations_alive() noexcept;

/// A transfer in flight, owned by the backend that started it. Tests drive the
/// operation's own progress; the caller drives the rank's (detail::test_local/remote).
/// Both throw the operation's error once, naming the target; an operation that has
/// thrown counts as complete. The destructor runs only after remote completion (or the
/// error), so no buffer is left in use.
class async_op {
public:
  explicit async_op(int target) noexcept : target_(target) {
    operations_alive().fetch_add(1, std::memory_order_relaxed);
  }
  virtual ~async_op() { operations_alive().fetch_sub(1, std::memory_order_relaxed); }
  async_op(const async_op&) = delete;
  async_op& operator=(const async_op&) = delete;
  /// The world rank the operation waits on.
  [[nodiscard]] int target() const noexcept { return target_; }
  /// True once a put's source may be reused, or a get's data has arrived.
  virtual bool test_local() = 0;
  /// True once the data is at the target (implies local completion).
  virtual bool test_remote() = 0;

private:
  int target_;
};

/// Waits (driving progress) until `op` is remotely complete; throws its error. `what`
/// names the wait if it stalls.
void wait_remote(async_op& op, const char* what);

} // namespace crown::detail
