// include/crown/log.hpp — rank-prefixed logging, filtered by CROWN_LOG.
#pragma once
#include <crown/config.hpp>
#include <functional>
#include <sstream>
#include <string>
#include <string_view>

namespace crown {

/// True when messages at `level` are printed (CROWN_LOG, default warn).
[[nodiscard]] bool log_enabled(log_level level) noexcept;
/// Writes one line "[crown <level> rank <r>@<host>] message" to the log sink
/// (stderr by default); the host appears only when the job spans several hosts.
void log_write(log_level level, std::string_view message);

/// Formats its arguments with operator<< only when the level is enabled.
template <typename... Args>
void log(log_level level, const Args&... args) {
  if (!log_enabled(level)) return;
  std::ostringstream line;
  (line << ... << args);
  log_write(level, line.str());
}

namespace detail {
/// Replaces the sink (tests capture lines); an empty function restores stderr.
void set_log_sink(std::function<void(std::string_view line)> sink);
void set_log_level(log_level level) noexcept;
/// One line of program output (what actors printed, on the controller): to the sink
/// when one is set, else to stdout.
void write_output(std::string_view line);
/// While set, lines this thread logs go to `capture` instead of the sink (an actor's
/// lines travel to the controller); nullptr restores the sink.
using log_capture = std::function<void(log_level level, std::string_view message)>;
void set_thread_log_capture(const log_capture* capture) noexcept;
} // namespace detail

} // namespace crown
