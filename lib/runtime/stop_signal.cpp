// SIGTERM/SIGUSR1 -> a flag that ranks agree on at step boundaries (crown/stop_signal.hpp).
#include <atomic>
#include <crown/error.hpp>
#include <crown/stop_signal.hpp>
#include <csignal>

namespace crown {

namespace {
// Lock-free atomics are async-signal-safe; the handler does nothing else.
std::atomic<int> g_signal{0};
std::atomic<bool> g_installed{false};
struct sigaction g_previous_term {};
struct sigaction g_previous_usr1 {};

extern "C" void on_stop_signal(int s) {
  int none = 0;
  g_signal.compare_exchange_strong(none, s); // the first one is kept
}
} // namespace

stop_signals::stop_signals() {
  if (g_installed.exchange(true))
    throw state_error("stop_signals", "stop signal handlers are installed already");
  g_signal = 0;
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART; // blocking calls go on; the flag is read at a step boundary
  sigaction(SIGTERM, &sa, &g_previous_term);
  sigaction(SIGUSR1, &sa, &g_previous_usr1);
}

stop_signals::~stop_signals() {
  sigaction(SIGTERM, &g_previous_term, nullptr);
  sigaction(SIGUSR1, &g_previous_usr1, nullptr);
  g_installed = false;
}

bool stop_signals::requested(MPI_Comm comm) const {
  int mine = received() ? 1 : 0, any = 0;
  if (const int rc = MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, comm); rc != MPI_SUCCESS)
    throw mpi_error("stop_signals::requested", rc);
  return any != 0;
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
