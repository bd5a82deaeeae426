// CROWN_FAULT: one injected fault on one rank (include/crown/detail/fault.hpp).
#include <crown/detail/fault.hpp>
#include <crown/error.hpp>
#include <crown/log.hpp>
#include <csignal>
#include <cstdio>
#include <unistd.h>

namespace crown::detail {

std::atomic<int> g_armed_fault{0};

namespace {
fault_spec g_fault;
std::atomic<long> g_arrivals{0};
} // namespace

void arm_fault(const fault_spec& f, int rank) noexcept {
  g_arrivals = 0;
  g_fault = f;
  const bool here = f.action != fault_action::none && f.rank == rank;
  g_armed_fault.store(here ? static_cast<int>(f.at) + 1 : 0, std::memory_order_relaxed);
}

void strike_fault(fault_point p) {
  if (++g_arrivals != g_fault.count) return;
  g_armed_fault.store(0, std::memory_order_relaxed); // once
  const char* action = g_fault.action == fault_action::kill   ? "kills itself (SIGKILL)"
                       : g_fault.action == fault_action::stop ? "stops itself (SIGSTOP)"
                                                              : "throws";
  log(log_level::error, "CROWN_FAULT=", to_string(g_fault), ": rank ", g_fault.rank, " ", action,
      " at ", to_string(p), " (arrival ", g_fault.count, ")");
  std::fflush(stderr);
  if (g_fault.action == fault_action::kill) ::kill(::getpid(), SIGKILL);
  if (g_fault.action == fault_action::stop) {
    ::kill(::getpid(), SIGSTOP); // every thread stops; a SIGCONT would resume here
    return;
  }
  throw state_error("CROWN_FAULT", "injected exception at " + std::string(to_string(p)) +
                                       " on rank " + std::to_string(g_fault.rank));
}

} // namespace crown::detail
