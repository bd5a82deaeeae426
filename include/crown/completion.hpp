// include/crown/completion.hpp — completion of asynchronous one-sided transfers.
#pragma once
#include <crown/detail/heap.hpp>
#include <crown/detail/wait.hpp>
#include <mpi.h>
#include <span>
#include <utility>
#include <vector>

namespace crown {

/// Completion of one or more asynchronous transfers. Local completion: a put's source
/// may be reused, a get's data has arrived. Remote completion (wait()): a put's data is
/// in the target's memory. Cheap to move, not copyable; destroying a completion that
/// was never waited on waits for it, so no transfer is ever lost.
class completion {
public:
  completion() = default;
  completion(completion&& o) noexcept
      : requests_(std::move(o.requests_)), targets_(std::move(o.targets_)) {
    o.requests_.clear();
    o.targets_.clear();
  }
  completion& operator=(completion&& o) noexcept {
    if (this != &o) {
      wait_noexcept();
      requests_ = std::exchange(o.requests_, {});
      targets_ = std::exchange(o.targets_, {});
    }
    return *this;
  }
  completion(const completion&) = delete;
  completion& operator=(const completion&) = delete;
  ~completion() { wait_noexcept(); }

  /// Non-blocking: true once every transfer is locally complete.
  [[nodiscard]] bool test_local() {
    if (requests_.empty()) return true;
    return detail::test_requests(requests_);
  }
  void wait_local() {
    detail::backoff pause;
    while (!test_local()) pause.pause();
  }
  /// Blocks until every transfer is remotely complete.
  void wait() {
    wait_local();
    for (int t : targets_) detail::flush_rank(t);
    targets_.clear();
  }
  /// Merge: waiting on the result waits on both.
  completion& operator+=(completion&& o) {
    requests_.insert(requests_.end(), o.requests_.begin(), o.requests_.end());
    targets_.insert(targets_.end(), o.targets_.begin(), o.targets_.end());
    o.requests_.clear();
    o.targets_.clear();
    return *this;
  }
  [[nodiscard]] bool done() const noexcept { return requests_.empty() && targets_.empty(); }

  /// Used by the transfer templates: adds the requests of a started transfer.
  std::vector<MPI_Request>& requests() noexcept { return requests_; }
  void add_target(int world_rank) { targets_.push_back(world_rank); }

private:
  void wait_noexcept() noexcept {
    try {
      wait();
    } catch (...) { // a destructor must not throw; the error was reported by MPI already
    }
  }
  std::vector<MPI_Request> requests_;
  std::vector<int> targets_;
};

/// Waits for every completion (remote completion).
inline void wait_all(std::span<completion> all) {
  for (auto& c : all) c.wait();
}

} // namespace crown
