// lib/actor/recycling_map.hpp — an unordered_map that keeps the nodes of erased entries
// for later insertions: the engines keep one entry per call in flight, and a node
// allocated and freed per call was a measurable part of a round trip.
#pragma once
#include <cstddef>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

namespace crown::detail {

template <typename K, typename V>
class recycling_map : public std::unordered_map<K, V> {
  using base = std::unordered_map<K, V>;

public:
  /// The entry of `key`, made from a spare node (with a fresh value) if there is none.
  V& acquire(const K& key) {
    if (spare_.empty()) return base::try_emplace(key).first->second;
    typename base::node_type node = std::move(spare_.back());
    spare_.pop_back();
    node.key() = key;
    std::destroy_at(&node.mapped()); // a fresh value, without a temporary to move from
    std::construct_at(&node.mapped());
    return base::insert(std::move(node)).position->second; // an existing entry wins
  }
  /// Erases the entry, keeping its node (up to `max_spare` of them).
  void release(typename base::iterator it) {
    if (spare_.size() < max_spare)
      spare_.push_back(base::extract(it));
    else
      base::erase(it);
  }
  static constexpr std::size_t max_spare = 1024;

private:
  std::vector<typename base::node_type> spare_;
};

} // namespace crown::detail
