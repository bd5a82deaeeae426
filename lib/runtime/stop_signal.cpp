// SIGTERM/SIGUSR1 -> a flag that ranks agree on at step boundaries (crown/stop_signal.hpp).
#include <atomic>
#include <cerrno>
#include <crown/error.hpp>
#include <crown/stop_signal.hpp>
#include <csignal>
#include <cstdlib>
#include <string>
#include <unistd.h>

namespace crown {

namespace {
// Lock-free atomics are async-signal-safe; the handler does nothing else.
std::atomic<int> g_signal{0};
std::atomic<bool> g_installed{false};
std::atomic<bool> g_paused{false}; // a deadline_pause is alive, or the loop is done
std::atomic<bool> g_agreed{false}; // requested() said yes: no deadline any more
static_assert(std::atomic<int>::is_always_lock_free && std::atomic<bool>::is_always_lock_free);
struct sigaction g_previous_term {};
struct sigaction g_previous_usr1 {};
struct sigaction g_previous_alarm {};
std::atomic<unsigned> g_grace{10}; // seconds; 0: no deadline

extern "C" void on_stop_signal(int s) {
  const int saved = errno;
  int none = 0;
  if (g_signal.compare_exchange_strong(none, s) && g_grace > 0 && !g_paused) // the first one
    alarm(g_grace);
  errno = saved;
}

// No agreement within the grace: a peer is gone (srun's --kill-on-bad-exit sends SIGTERM
// too), so end as the stop signal would have without a handler, not at SIGKILL, KillWait
// seconds later.
extern "C" void on_grace_spent(int) {
  struct sigaction fallback {};
  fallback.sa_handler = SIG_DFL;
  sigemptyset(&fallback.sa_mask);
  const int s = g_signal.load();
  sigaction(s, &fallback, nullptr);
  kill(getpid(), s);
}

unsigned grace_from_environment() { // the runtime's configuration checks it the same way
  const char* text = std::getenv("CROWN_STOP_GRACE");
  if (!text || !*text) return 10;
  char* end = nullptr;
  const double v = std::strtod(text, &end);
  if (*end || !(v == 0 || (v >= 1 && v <= 86400)))
    throw config_error("CROWN_STOP_GRACE", std::string("invalid value '") + text +
                                               "' (expected 0 or a number from 1 to 86400)");
  return static_cast<unsigned>(v);
}
} // namespace

stop_signals::stop_signals(bool grace) {
  if (g_installed.exchange(true))
    throw state_error("stop_signals", "stop signal handlers are installed already");
  try {
    g_grace = grace ? grace_from_environment() : 0;
  } catch (...) {
    g_installed = false;
    throw;
  }
  g_signal = 0;
  g_paused = false;
  g_agreed = false;
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART; // blocking calls go on; the flag is read at a step boundary
  sigaction(SIGTERM, &sa, &g_previous_term);
  sigaction(SIGUSR1, &sa, &g_previous_usr1);
  sa.sa_handler = on_grace_spent;
  sigaction(SIGALRM, &sa, &g_previous_alarm);
}

stop_signals::~stop_signals() {
  sigaction(SIGTERM, &g_previous_term, nullptr);
  sigaction(SIGUSR1, &g_previous_usr1, nullptr);
  alarm(0);
  sigaction(SIGALRM, &g_previous_alarm, nullptr);
  g_installed = false;
}

bool stop_signals::requested(MPI_Comm comm) const {
  int mine = received() ? 1 : 0, any = 0;
  if (const int rc = MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, comm); rc != MPI_SUCCESS)
    throw mpi_error("stop_signals::requested", rc);
  if (any != 0) { // agreed: the checkpoint may take what it takes
    g_agreed = true;
    alarm(0);
  }
  return any != 0;
}

void stop_signals::loop_done() noexcept {
  if (!g_installed) return;
  g_paused = true; // for good: nobody will agree on a signal any more
  alarm(0);
}

stop_signals::deadline_pause::deadline_pause() noexcept {
  if (!g_installed || g_paused) { // nothing to pause (or an outer pause holds it)
    left_ = ~0u;
    return;
  }
  g_paused = true;
  left_ = alarm(0);
}

stop_signals::deadline_pause::~deadline_pause() {
  if (left_ == ~0u || !g_installed) return;
  g_paused = false;
  // What was left of a running deadline, or all of it for a signal that came meanwhile.
  if (left_ > 0)
    alarm(left_);
  else if (g_signal.load() != 0 && !g_agreed && g_grace > 0)
    alarm(g_grace);
}

bool stop_signals::received() noexcept { return g_signal.load() != 0; }

int stop_signals::signal() noexcept { return g_signal.load(); }

const char* stop_signals::signal_name() noexcept {
  switch (g_signal.load()) {
  case SIGTERM:
    return "SIGTERM";
  case SIGUSR1:
    return "SIGUSR1";
  default:
    return "none";
  }
}

} // namespace crown
