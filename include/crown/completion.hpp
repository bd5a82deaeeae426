// include/crown/completion.hpp — completion of asynchronous one-sided transfers.
#pragma once
#include <memory>
#include <span>
#include <utility>
#include <vector>

namespace crown {

namespace detail {
/// A transfer (or collective) in flight, owned by the backend that started it; defined
/// inside libcrown (lib/transport/async_op.hpp), so no transport type shows here.
class async_op;
/// Frees an operation, first waiting for it if it is still in flight.
struct async_op_release {
  void operator()(async_op* op) const noexcept;
};
using async_handle = std::unique_ptr<async_op, async_op_release>;
/// Tests drive progress once; waits block (and report a wait that stalls, naming the
/// target). Local completion: a put's source may be reused, a get's data has arrived.
/// Remote completion: a put's data is in the target's memory (it implies local). They
/// throw an operation's error, naming its target. The remote ones drop what completed.
bool test_local(const std::vector<async_handle>& ops);
void wait_local(const std::vector<async_handle>& ops);
bool test_remote(std::vector<async_handle>& ops);
void wait_remote(std::vector<async_handle>& ops);
} // namespace detail

/// Completion of one or more asynchronous transfers: local completion (test_local,
/// wait_local) and remote completion (test, wait). Returned by put_async/get_async
/// before the data moves, on every backend; the transfers advance in the background
/// (progress thread) and inside every Crown call. Cheap to move, not copyable;
/// destroying a completion that was never waited on waits for it, so no transfer is
/// ever lost and no buffer is left in use.
class completion {
public:
  completion() = default;
  completion(completion&&) noexcept = default;
  completion& operator=(completion&& o) noexcept {
    if (this != &o) {
      wait_noexcept();
      ops_ = std::move(o.ops_);
    }
    return *this;
  }
  completion(const completion&) = delete;
  completion& operator=(const completion&) = delete;
  ~completion() { wait_noexcept(); }

  /// Non-blocking: true once every transfer is locally complete.
  [[nodiscard]] bool test_local() { return ops_.empty() || detail::test_local(ops_); }
  void wait_local() {
    if (!ops_.empty()) detail::wait_local(ops_);
  }
  /// Non-blocking: true once every transfer is remotely complete.
  [[nodiscard]] bool test() { return ops_.empty() || detail::test_remote(ops_); }
  /// Blocks until every transfer is remotely complete.
  void wait() {
    if (!ops_.empty()) detail::wait_remote(ops_);
  }
  /// Merge: waiting on the result waits on both.
  completion& operator+=(completion&& o) {
    for (auto& op : o.ops_) ops_.push_back(std::move(op));
    o.ops_.clear();
    return *this;
  }
  [[nodiscard]] bool done() const noexcept { return ops_.empty(); }

  /// Used by the transfer templates: adds an operation in flight (null: none).
  void add(detail::async_handle op) {
    if (op) ops_.push_back(std::move(op));
  }

private:
  void wait_noexcept() noexcept {
    try {
      wait();
    } catch (...) { // a destructor must not throw; each operation's release waits too
    }
    ops_.clear();
  }
  std::vector<detail::async_handle> ops_;
};

/// Waits for every completion (remote completion).
inline void wait_all(std::span<completion> all) {
  for (auto& c : all) c.wait();
}

} // namespace crown
