// lib/runtime/cpu_list.hpp — CPU lists as Linux and hwloc write them ("0-3,8").
#pragma once
#include <charconv>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace crown::detail {

/// The CPUs of a list such as "0-3,8" (ascending ranges, no spaces), in the order
/// written; nullopt when `text` is not such a list (empty, a reversed range, CPUs at
/// or above 65536).
inline std::optional<std::vector<int>> parse_cpu_list(std::string_view text) {
  constexpr int limit = 1 << 16;
  std::vector<int> cpus;
  const auto number = [](std::string_view s, int& out) {
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && end == s.data() + s.size() && !s.empty() && out >= 0 && out < limit;
  };
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    const std::size_t dash = item.find('-');
    int first = 0, last = 0;
    if (!number(item.substr(0, dash), first)) return std::nullopt;
    last = first;
    if (dash != std::string_view::npos && (!number(item.substr(dash + 1), last) || last < first))
      return std::nullopt;
    for (int c = first; c <= last; ++c) cpus.push_back(c);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
    if (text.empty()) return std::nullopt; // a trailing comma
  }
  if (cpus.empty()) return std::nullopt;
  return cpus;
}

} // namespace crown::detail
