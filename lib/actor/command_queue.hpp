// lib/actor/command_queue.hpp — a serving rank's commands in the controller's order.
// Free of MPI, so that the fuzz target (tests/fuzz) drives it with arbitrary orders.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <utility>

namespace crown::detail {

/// Commands run in the order the controller gave them (each carries its count of
/// earlier commands to this rank); one that arrives early waits here for its turn.
/// Invariant: every held order lies above next(), and no order is held twice, so what
/// is held can all run eventually and nothing is run twice.
template <typename T>
class in_order_queue {
public:
  enum class verdict { run, hold, drop };
  /// What to do with a command of `order`: run it now, hold it, or drop it (an order
  /// already run or already held: only a broken or hostile sender sends one).
  [[nodiscard]] verdict admit(std::uint64_t order) const {
    if (order == next_) return verdict::run;
    return order < next_ || held_.count(order) ? verdict::drop : verdict::hold;
  }
  /// Keeps a command admitted as `hold`.
  void hold(std::uint64_t order, T item) { held_.emplace(order, std::move(item)); }
  /// The command of next() ran.
  void ran() noexcept { ++next_; }
  /// The held command whose turn has come (counted as run), if any.
  std::optional<T> take_ready() {
    const auto it = held_.find(next_);
    if (it == held_.end()) return std::nullopt;
    T item = std::move(it->second);
    held_.erase(it);
    ++next_;
    return item;
  }
  [[nodiscard]] std::uint64_t next() const noexcept { return next_; }
  [[nodiscard]] std::size_t held() const noexcept { return held_.size(); }

private:
  std::uint64_t next_ = 0;
  std::map<std::uint64_t, T> held_;
};

} // namespace crown::detail
