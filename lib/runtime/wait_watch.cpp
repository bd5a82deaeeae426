// The one stall report of every Crown wait (include/crown/detail/wait.hpp): a wait longer
// than CROWN_WAIT_WARN names itself once; one longer than CROWN_WAIT_TIMEOUT ends the job.
#include "layer_hooks.hpp"
#include "runtime_state.hpp"
#include "trace_control.hpp"
#include <atomic>
#include <crown/detail/wait.hpp>
#include <crown/log.hpp>
#include <crown/mesh.hpp>
#include <mpi.h>
#include <string>

namespace crown::detail {
namespace {

// Seconds, already multiplied by CROWN_TIMEOUT_SCALE; 0 = never.
std::atomic<double> g_warn{60};
std::atomic<double> g_timeout{0};
std::atomic<double> g_unserved{5}; ///< a one-sided request with no progress thread

/// Why no progress thread serves one-sided requests in this job, as the runtime decided.
std::string no_thread_because() {
  const auto st = current_state();
  if (st && !st->transports.progress_why.empty()) return st->transports.progress_why;
  return "it needs MPI_THREAD_MULTIPLE, or CROWN_PROGRESS_THREAD is 0";
}

/// The cause of a one-sided request that no progress thread serves, and the choices.
std::string unserved_cause() {
  return "No progress thread serves one-sided requests in this job (" + no_thread_because() +
         "): " + unserved_consequence;
}

std::string describe(const wait_site& site) {
  std::string s = site.what;
  if (site.on) s += " on " + site.on->to_string();
  if (site.rank >= 0) s += ", waiting for rank " + std::to_string(site.rank);
  return s;
}

} // namespace

const char* const unserved_consequence =
    "one-sided requests to a rank are served only inside its Crown calls (over the MPI window "
    "also inside its own MPI calls, where MPI's one-sided component progresses there), so a rank "
    "that computes or blocks in its own MPI call (MPI_Allreduce, MPI_Barrier, ...) may serve "
    "nothing meanwhile. Call crown::progress() in such loops and end one-sided phases with a "
    "Crown synchronisation (crown::sync_all()) before the application's own MPI calls, or "
    "initialise MPI at MPI_THREAD_MULTIPLE (over UCX, MPI_THREAD_FUNNELED or "
    "MPI_THREAD_SERIALIZED suffice).";

void set_wait_limits(double warn_seconds, double timeout_seconds,
                     double unserved_seconds) noexcept {
  g_warn = warn_seconds;
  g_timeout = timeout_seconds;
  g_unserved = unserved_seconds;
}

void backoff::watch() noexcept {
  const auto now = std::chrono::steady_clock::now();
  if (since_ == std::chrono::steady_clock::time_point{}) {
    since_ = now; // the first 1024 polls took well under a millisecond
    return;
  }
  const double waited = std::chrono::duration<double>(now - since_).count();
  const double timeout = g_timeout.load(std::memory_order_relaxed);
  try {
    const bool unserved = site_.needs_target_progress && !progress_thread_serves();
    if (timeout > 0 && waited >= timeout) {
      log(log_level::error, describe(site_), ": has waited ", static_cast<long>(waited),
          " s, longer than CROWN_WAIT_TIMEOUT (", timeout, " s with the scale). ",
          unserved ? unserved_cause() + " " : std::string(), "Aborting the job.");
      trace_finish_before_abort(); // CROWN_TRACE: this rank's file, with the wait open
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (warned_) return;
    const double warn = unserved ? g_unserved.load(std::memory_order_relaxed)
                                 : g_warn.load(std::memory_order_relaxed);
    if (warn <= 0 || waited < warn) return;
    warned_ = true;
    const std::string what = describe(site_);
    const std::string target =
        site_.rank >= 0 ? "rank " + std::to_string(site_.rank) : "the target";
    if (unserved)
      log(log_level::warn, what, ": no answer for ", static_cast<long>(waited), " s. ",
          unserved_cause(), " CROWN_WAIT_TIMEOUT ends such a job.");
    else if (site_.needs_target_progress)
      log(log_level::warn, what, ": no answer for ", static_cast<long>(waited), " s although ",
          target,
          "'s progress thread should serve it: it may hang or have lost contact "
          "(CROWN_WAIT_WARN; CROWN_WAIT_TIMEOUT ends such a job)");
    else
      log(log_level::warn, what, ": has waited ", static_cast<long>(waited),
          " s (CROWN_WAIT_WARN; CROWN_WAIT_TIMEOUT ends such a job)");
  } catch (...) { // a report that cannot be written is not worth a crash
  }
}

} // namespace crown::detail
