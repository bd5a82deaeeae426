// C entry points over crown::stop_signals (crown/stop_signal.hpp) for crown-heat2d-fortran,
// called through ISO_C_BINDING (heat2d_checkpoint.f90): Fortran has no signal handling
// of its own. The images agree on the flag themselves (co_max at an iteration boundary).
#include <crown/error.hpp>
#include <crown/stop_signal.hpp>
#include <cstdio>
#include <cstring>
#include <optional>

namespace {
std::optional<crown::stop_signals> g_stop;
std::optional<crown::stop_signals::deadline_pause> g_pause;
} // namespace

extern "C" {

/// Installs the SIGTERM/SIGUSR1 handlers; 0, or 2 after printing why (a bad
/// CROWN_STOP_GRACE: every image reads the same value, so every image returns 2).
int heat2d_stop_install() {
  try {
    g_stop.emplace();
    return 0;
  } catch (const crown::error& e) {
    std::fprintf(stderr, "heat2d_fortran: %s\n", e.what());
    return 2;
  }
}

/// 1 when this image has received SIGTERM or SIGUSR1.
int heat2d_stop_received() { return crown::stop_signals::received() ? 1 : 0; }

/// The signal's name ("SIGTERM", "SIGUSR1", or "none"), blank-padded to `size`.
void heat2d_stop_signal_name(char* out, int size) {
  const char* name = crown::stop_signals::signal_name();
  const auto n = static_cast<int>(std::strlen(name));
  for (int i = 0; i < size; ++i) out[i] = i < n ? name[i] : ' ';
}

/// The images agreed to stop, or the loop is over: no grace deadline from now on.
void heat2d_stop_done() { crown::stop_signals::loop_done(); }

/// `on` 1: the grace deadline waits (a periodic checkpoint is being written); 0: it runs
/// again.
void heat2d_stop_pause(int on) {
  if (on)
    g_pause.emplace();
  else
    g_pause.reset();
}

} // extern "C"
