// lib/actor/stdout_capture.hpp — a serving rank's stdout, caught so that what actors
// print reaches the controller (CROWN_ACTOR_STDOUT=1). Standard output is pointed at an
// anonymous in-memory file: writes never block (a pipe would, once full, while the
// only reader runs the endpoint), and what an endpoint printed is read back after it.
// If the process dies first (a crash, abort(), exit()), what is still in memory is
// written to the real stdout by a signal handler or an exit hook, so no last line is lost.
#pragma once
#include <functional>
#include <string>
#include <string_view>

namespace crown::detail {

class stdout_capture {
public:
  stdout_capture();  ///< redirects stdout (throws state_error when it cannot)
  ~stdout_capture(); ///< prints what nobody collected to the real stdout, restores it
  stdout_capture(const stdout_capture&) = delete;
  stdout_capture& operator=(const stdout_capture&) = delete;

  /// Flushes C and C++ stdout and passes every complete line printed since the last
  /// call to `line` (an unfinished last line waits for its newline, or for finish()).
  void collect(const std::function<void(std::string_view)>& line);
  /// As collect(), and an unfinished last line goes too.
  void finish(const std::function<void(std::string_view)>& line);
  /// The actor whose output comes next, for the lines a crash rescues ("" for none).
  void set_label(std::string_view label) noexcept;

  /// Writes what nobody collected to the original stdout, each line tagged with the
  /// label: called when the process dies (a fatal signal, exit()) with output still in
  /// memory. Uses only calls that are safe in a signal handler (and never waits for
  /// stdio's lock).
  void rescue() noexcept;

private:
  int memory_ = -1; ///< the in-memory file stdout points at
  int saved_ = -1;  ///< the original stdout
  std::string partial_;
  char label_[128] = {}; ///< NUL-terminated, read by rescue()
};

} // namespace crown::detail
