// include/crown/trace.hpp — CROWN_TRACE: where a job's time goes, as one Chrome/Perfetto
// trace file per rank (docs/tracing.md). Spans are recorded only while tracing is on;
// off (the default), a span costs one predicted branch on a flag read once at start-up.
#pragma once
#include <crown/build_config.hpp>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace crown::detail {

/// Set once at runtime start-up from CROWN_TRACE (and by set_trace_enabled); read on
/// every traced call. Never written while spans run, so a plain bool.
extern bool g_trace_on;

[[nodiscard]] inline bool trace_on() noexcept {
#if CROWN_TRACE_COMPILED
  return g_trace_on;
#else
  return false;
#endif
}

/// One numeric argument of a span ("peer", "bytes"); a null key is no argument.
struct trace_arg {
  const char* key = nullptr;
  std::int64_t value = 0;
};

struct trace_buffer;

/// A complete event ("ph":"X") on the calling thread's track, from construction to
/// destruction. `category` and `name` must be string literals (they are kept, not copied).
class trace_span {
public:
  explicit trace_span(const char* category, const char* name, trace_arg a = {}, trace_arg b = {},
                      trace_arg c = {}) noexcept {
    if (trace_on()) [[unlikely]]
      begin(category, name, a, b, c);
  }
  ~trace_span() {
    if (buffer_) [[unlikely]]
      end();
  }
  trace_span(const trace_span&) = delete;
  trace_span& operator=(const trace_span&) = delete;

  /// True when this span is being recorded (tracing was on at its start).
  [[nodiscard]] bool recording() const noexcept { return buffer_ != nullptr; }
  /// Adds a text argument (copied); only while recording().
  void text(const char* key, std::string_view value) noexcept;

private:
  [[gnu::cold, gnu::noinline]] void begin(const char* category, const char* name, trace_arg a,
                                          trace_arg b, trace_arg c) noexcept;
  [[gnu::cold, gnu::noinline]] void end() noexcept;

  trace_buffer* buffer_ = nullptr;
  std::size_t index_ = 0;
};

/// Turns recording on or off in this process (crown-bench measures a traced put). Events
/// recorded without CROWN_TRACE are kept in memory and never written. Not thread-safe.
void set_trace_enabled(bool on) noexcept;

/// This rank's clock offset against rank 0 (add it to a local time to get rank 0's) and
/// its error bound, in microseconds, as estimated at start-up; {0, 0} when not tracing.
struct clock_offset {
  double offset_us = 0;
  double error_us = 0;
};
[[nodiscard]] clock_offset trace_clock_offset() noexcept;

} // namespace crown::detail
