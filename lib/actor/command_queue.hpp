// lib/actor/command_queue.hpp — a serving rank's commands in each sender's order.
// Free of MPI, so that the fuzz target (tests/fuzz) drives it with arbitrary orders.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

namespace crown::detail {

/// A command's place in one sender's stream.
struct order_key {
  int stream = 0; ///< the sender's rank
  std::uint64_t order = 0;
};

/// Commands run in the order their senders gave them. A stream is one sender (the
/// controller, or an actor's rank); each command carries its count of earlier commands
/// from that sender to this rank, and one the controller relayed for an actor carries
/// its place in both streams and runs only when it is next in both. One that arrives
/// early waits here for its turn.
/// Invariant: every held key lies above its stream's next(), and no key is held twice,
/// so nothing is run twice; a command waits only for commands that came before it in
/// one of its streams (which the senders' own orders make acyclic).
template <typename T>
class in_order_queue {
public:
  using key = order_key;
  enum class verdict { run, hold, drop };

  /// What to do with a command of `keys`: run it now, hold it, or drop it (a key already
  /// run or already held: only a broken or hostile sender sends one).
  [[nodiscard]] verdict admit(std::span<const key> keys) const {
    bool now = true;
    for (const key& k : keys) {
      const auto s = streams_.find(k.stream);
      const std::uint64_t next = s == streams_.end() ? 0 : s->second.next;
      if (k.order < next || (s != streams_.end() && s->second.held.count(k.order)))
        return verdict::drop;
      now = now && k.order == next;
    }
    return now ? verdict::run : verdict::hold;
  }
  /// Keeps a command admitted as `hold`.
  void hold(std::span<const key> keys, T item) {
    const std::uint64_t id = ++last_id_;
    for (const key& k : keys) streams_[k.stream].held.emplace(k.order, id);
    items_.emplace(id, entry{std::move(item), {keys.begin(), keys.end()}});
  }
  /// The command of `keys`, admitted as `run`, ran.
  void ran(std::span<const key> keys) {
    for (const key& k : keys) {
      ++streams_[k.stream].next;
      advanced_.push_back(k.stream);
    }
  }
  /// A held command whose turn has come in all its streams (counted as run), if any.
  std::optional<T> take_ready() {
    while (!advanced_.empty()) {
      stream& s = streams_[advanced_.back()];
      const auto it = s.held.find(s.next);
      const auto e = it == s.held.end() ? items_.end() : items_.find(it->second);
      if (e == items_.end() || !all_next(e->second)) {
        advanced_.pop_back();
        continue;
      }
      entry taken = std::move(e->second);
      items_.erase(e);
      for (const key& k : taken.keys) streams_[k.stream].held.erase(k.order);
      ran(taken.keys);
      return std::move(taken.item);
    }
    return std::nullopt;
  }
  [[nodiscard]] std::uint64_t next(int stream_id) const {
    const auto s = streams_.find(stream_id);
    return s == streams_.end() ? 0 : s->second.next;
  }
  [[nodiscard]] std::size_t held() const noexcept { return items_.size(); }

private:
  struct stream {
    std::uint64_t next = 0;
    std::map<std::uint64_t, std::uint64_t> held; ///< order -> item
  };
  struct entry {
    T item;
    std::vector<key> keys;
  };
  [[nodiscard]] bool all_next(const entry& e) const {
    for (const key& k : e.keys)
      if (next(k.stream) != k.order) return false;
    return true;
  }

  std::unordered_map<int, stream> streams_;
  std::unordered_map<std::uint64_t, entry> items_;
  std::vector<int> advanced_; ///< streams whose next() moved since take_ready looked
  std::uint64_t last_id_ = 0;
};

} // namespace crown::detail
