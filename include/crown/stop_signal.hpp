// include/crown/stop_signal.hpp — checkpoint and leave when the batch system asks:
// SIGTERM (what `scontrol requeue`, preemption and `scancel` send, KillWait seconds
// before SIGKILL) and SIGUSR1 (what `sbatch --signal=USR1@T` and job scripts' traps send
// ahead of the time limit).
//
//   crown::stop_signals stop;                      // handlers installed, RAII
//   for (int it = first; it < iterations; ++it) {
//     step();
//     if (stop.requested(comm)) {                  // collective: every rank agrees
//       save(it + 1);
//       return crown::stop_exit_status;            // 75: stopped early, resume me
//     }
//   }
#pragma once
#include <mpi.h>

namespace crown {

/// The exit status of a program that checkpointed and left on a stop signal: 75, BSD's
/// EX_TEMPFAIL ("temporary failure, try again"), so a job script can tell "stopped,
/// requeue and resume" from success (0) and from failure (anything else).
inline constexpr int stop_exit_status = 75;

/// While alive, SIGTERM and SIGUSR1 set a process-wide flag instead of ending the
/// process (their previous handlers come back on destruction). One at a time per process;
/// a second while one is alive throws state_error.
///
/// srun and slurmstepd signal each task on its own, so ranks see the signal at slightly
/// different times, possibly in different steps: a rank that acted on its own flag would
/// leave the others waiting in the next collective. requested(comm) therefore agrees:
/// one MPI_Allreduce (MAX) of the flag over `comm`, at a point every rank reaches (a
/// step boundary), and the same answer on every rank.
///
/// A deadline: when the ranks have not agreed within CROWN_STOP_GRACE seconds (default
/// 10; 0: none) of the signal, the process ends by that signal as if no handler were
/// installed. Agreement never comes when a peer has died (srun --kill-on-bad-exit
/// signals the survivors with SIGTERM as well), and without the deadline they would sit
/// in a collective until Slurm's SIGKILL, KillWait (30 s by default) later. Keep it below
/// KillWait and above the longest step; once agreed, the checkpoint has no deadline
/// (SIGALRM is this class's while it is alive). Work between steps that may take long
/// (a periodic checkpoint, an evaluation) runs under a deadline_pause, and once the loop is
/// over, loop_done() drops the deadline: neither can then kill a healthy run.
class stop_signals {
public:
  /// `grace` false: no deadline, for processes that never call requested() because one
  /// process alone decides (a controller and its workers: the controller reads
  /// received(), the workers follow its calls; a dead controller is the watchdog's).
  explicit stop_signals(bool grace = true);
  ~stop_signals();
  stop_signals(const stop_signals&) = delete;
  stop_signals& operator=(const stop_signals&) = delete;

  /// Collective over `comm`: whether any rank has received SIGTERM or SIGUSR1.
  [[nodiscard]] bool requested(MPI_Comm comm) const;
  /// This rank's flag only, no communication (a controller that alone decides).
  [[nodiscard]] static bool received() noexcept;
  /// The first stop signal this process received (SIGTERM or SIGUSR1), or 0.
  [[nodiscard]] static int signal() noexcept;
  /// Its name for messages: "SIGTERM", "SIGUSR1", or "none".
  [[nodiscard]] static const char* signal_name() noexcept;
  /// The stepping loop has ended without stopping: no agreement will be asked for any more,
  /// so a signal from now on (or one pending) has no deadline. Nothing without a handler.
  static void loop_done() noexcept;

  /// While alive, the grace deadline does not run (a checkpoint or an evaluation between
  /// steps); what was left of it, or all of it for a signal that came meanwhile, runs
  /// again afterwards. Harmless where no stop_signals is alive.
  class deadline_pause {
  public:
    deadline_pause() noexcept;
    ~deadline_pause();
    deadline_pause(const deadline_pause&) = delete;
    deadline_pause& operator=(const deadline_pause&) = delete;

  private:
    unsigned left_ = 0;
  };
};

} // namespace crown
