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
      const stream* s = find(k.stream);
      const std::uint64_t next = s ? s->next : 0;
      if (k.order < next || (s && !s->held.empty() && s->held.count(k.order))) return verdict::drop;
      now = now && k.order == next;
    }
    return now ? verdict::run : verdict::hold;
  }
  /// Keeps a command admitted as `hold`.
  void hold(std::span<const key> keys, T item) {
    const std::uint64_t id = ++last_id_;
    for (const key& k : keys) get(k.stream).held.emplace(k.order, id);
    items_.emplace(id, entry{std::move(item), {keys.begin(), keys.end()}});
  }
  /// The command of `keys`, admitted as `run`, ran.
  void ran(std::span<const key> keys) {
    for (const key& k : keys) {
      stream& s = get(k.stream);
      ++s.next;
      if (!s.held.empty()) advanced_.push_back(k.stream); // else nothing waits on it
    }
  }
  /// A held command whose turn has come in all its streams (counted as run), if any.
  std::optional<T> take_ready() {
    while (!advanced_.empty()) {
      stream& s = get(advanced_.back());
      const auto it = s.held.find(s.next);
      const auto e = it == s.held.end() ? items_.end() : items_.find(it->second);
      if (e == items_.end() || !all_next(e->second)) {
        advanced_.pop_back();
        continue;
      }
      entry taken = std::move(e->second);
      items_.erase(e);
      for (const key& k : taken.keys) get(k.stream).held.erase(k.order);
      ran(taken.keys);
      return std::move(taken.item);
    }
    return std::nullopt;
  }
  [[nodiscard]] std::uint64_t next(int stream_id) const {
    const stream* s = find(stream_id);
    return s ? s->next : 0;
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
  /// The stream of `id` (the last one used is cached: most commands come from one sender).
  const stream* find(int id) const {
    if (last_ && last_id_stream_ == id) return last_;
    const auto it = streams_.find(id);
    return it == streams_.end() ? nullptr : &it->second;
  }
  stream& get(int id) {
    if (!last_ || last_id_stream_ != id) {
      last_ = &streams_[id]; // nodes of an unordered_map stay where they are
      last_id_stream_ = id;
    }
    return *last_;
  }
  [[nodiscard]] bool all_next(const entry& e) const {
    for (const key& k : e.keys)
      if (next(k.stream) != k.order) return false;
    return true;
  }

  std::unordered_map<int, stream> streams_;
  std::unordered_map<std::uint64_t, entry> items_;
  std::vector<int> advanced_; ///< streams whose next() moved since take_ready looked
  std::uint64_t last_id_ = 0;
  stream* last_ = nullptr;
  int last_id_stream_ = 0;
};

} // namespace crown::detail
