// Logging: one line per message, prefixed with level, rank and (multi-host) host.
#include "runtime_state.hpp"
#include <atomic>
#include <crown/log.hpp>
#include <cstdio>
#include <mutex>

namespace crown {
namespace {
std::atomic<log_level> g_level{log_level::warn};
std::mutex g_sink_mutex;
std::function<void(std::string_view)> g_sink;
thread_local const detail::log_capture* t_capture = nullptr;
} // namespace

bool log_enabled(log_level level) noexcept {
  return static_cast<int>(level) <= static_cast<int>(g_level.load(std::memory_order_relaxed));
}

void log_write(log_level level, std::string_view message) {
  if (!log_enabled(level)) return;
  if (t_capture) return (*t_capture)(level, message);
  std::string line = "[crown " + std::string(to_string(level)) + " rank ";
  const int rank = detail::current_rank();
  line += rank >= 0 ? std::to_string(rank) : std::string("?");
  if (const auto& host = detail::log_host(); !host.empty()) line += "@" + host;
  line += "] ";
  line += message;
  line += '\n';
  const std::lock_guard lock(g_sink_mutex);
  if (g_sink) {
    g_sink(line);
  } else {
    std::fwrite(line.data(), 1, line.size(), stderr);
  }
}

namespace detail {
void set_log_sink(std::function<void(std::string_view)> sink) {
  const std::lock_guard lock(g_sink_mutex);
  g_sink = std::move(sink);
}
void write_output(std::string_view line) {
  const std::string text = std::string(line) + '\n';
  const std::lock_guard lock(g_sink_mutex);
  if (g_sink) {
    g_sink(text);
  } else {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  }
}
void set_log_level(log_level level) noexcept { g_level.store(level, std::memory_order_relaxed); }
void set_thread_log_capture(const log_capture* capture) noexcept { t_capture = capture; }
} // namespace detail

} // namespace crown
