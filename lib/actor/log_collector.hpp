// lib/actor/log_collector.hpp — what actors log and print, as the controller prints it.
#pragma once
#include "protocol.hpp"
#include <chrono>
#include <crown/log.hpp>
#include <map>
#include <set>
#include <string>

namespace crown::detail {

/// Prints the lines actors logged, tagged with their actor mesh and point; the same
/// line from several actors within 100 ms becomes one line with a count.
class log_collector {
public:
  void add(const log_line& line) {
    std::string label, message = line.text;
    if (const auto end = line.text.find("] ");
        line.text.starts_with("[") && end != std::string::npos) {
      label = line.text.substr(0, end + 1);
      message = line.text.substr(end + 2);
    }
    auto [it, fresh] = pending_.try_emplace(std::to_string(line.level) + '\x1f' + message);
    if (fresh)
      it->second = {line.level, label, std::move(message), 0, {}, std::chrono::steady_clock::now()};
    ++it->second.count;
    it->second.actors.insert(std::move(label));
  }
  void flush(bool all) {
    const auto now = std::chrono::steady_clock::now();
    for (auto it = pending_.begin(); it != pending_.end();) {
      const entry& e = it->second;
      if (!all && now - e.first < std::chrono::milliseconds(100)) {
        ++it;
        continue;
      }
      std::string text = e.label + " " + e.message;
      if (e.count > 1)
        text += " (" + std::to_string(e.count) + " lines from " + std::to_string(e.actors.size()) +
                (e.actors.size() == 1 ? " actor)" : " actors)");
      if (e.level == log_line::stdout_level)
        write_output(text);
      else
        log_write(static_cast<log_level>(e.level), text);
      it = pending_.erase(it);
    }
  }

private:
  struct entry {
    int level;
    std::string label, message; ///< the first actor's label
    int count;
    std::set<std::string> actors;
    std::chrono::steady_clock::time_point first;
  };
  std::map<std::string, entry> pending_;
};

} // namespace crown::detail
