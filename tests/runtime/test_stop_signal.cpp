// crown::stop_signals: SIGTERM/SIGUSR1 set a flag instead of ending the process, and
// requested(comm) gives every rank the same answer when only one rank was signalled.
#include <boost/test/unit_test.hpp>
#include <crown/error.hpp>
#include <crown/stop_signal.hpp>
#include <csignal>
#include <cstdlib>
#include <harness/crown_test.hpp>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

namespace {
int rank_of(MPI_Comm c) {
  int r = 0;
  MPI_Comm_rank(c, &r);
  return r;
}
int size_of(MPI_Comm c) {
  int n = 0;
  MPI_Comm_size(c, &n);
  return n;
}
volatile std::sig_atomic_t g_own_handler_ran = 0;
extern "C" void own_handler(int) { g_own_handler_ran = 1; }
} // namespace

BOOST_AUTO_TEST_CASE(no_signal_no_stop) {
  const crown::stop_signals stop;
  BOOST_TEST(!crown::stop_signals::received());
  BOOST_TEST(crown::stop_signals::signal() == 0);
  BOOST_TEST(!stop.requested(MPI_COMM_WORLD));
}

BOOST_AUTO_TEST_CASE(one_signalled_rank_stops_every_rank) {
  for (const int sig : {SIGUSR1, SIGTERM}) {
    const crown::stop_signals stop;
    const bool last = rank_of(MPI_COMM_WORLD) == size_of(MPI_COMM_WORLD) - 1;
    if (last) std::raise(sig); // would end the process without the handler
    BOOST_TEST(crown::stop_signals::received() == last);
    BOOST_TEST(crown::stop_signals::signal() == (last ? sig : 0));
    BOOST_TEST(stop.requested(MPI_COMM_WORLD)); // every rank, the same answer
    if (last) {
      std::raise(sig == SIGUSR1 ? SIGTERM : SIGUSR1); // the first signal is kept
      BOOST_TEST(crown::stop_signals::signal() == sig);
      BOOST_TEST(crown::stop_signals::signal_name() ==
                 std::string(sig == SIGUSR1 ? "SIGUSR1" : "SIGTERM"));
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
}

BOOST_AUTO_TEST_CASE(a_second_instance_is_refused) {
  const crown::stop_signals stop;
  BOOST_CHECK_THROW(crown::stop_signals{}, crown::state_error);
}

BOOST_AUTO_TEST_CASE(previous_handlers_come_back) {
  struct sigaction own {
  }, before{};
  own.sa_handler = own_handler;
  sigemptyset(&own.sa_mask);
  sigaction(SIGUSR1, &own, &before);
  { const crown::stop_signals stop; }
  std::raise(SIGUSR1);
  BOOST_TEST(g_own_handler_ran == 1);
  sigaction(SIGUSR1, &before, nullptr);
}

BOOST_AUTO_TEST_CASE(no_agreement_within_the_grace_ends_by_the_signal) {
  if (rank_of(MPI_COMM_WORLD) != 0) return;
  const pid_t child = fork(); // a process that never reaches requested(): a dead peer's
  if (child == 0) {
    ::setenv("CROWN_STOP_GRACE", "1", 1);
    const crown::stop_signals stop;
    std::raise(SIGUSR1);
    for (int i = 0; i < 50; ++i) ::usleep(100000); // 5 s; the grace ends it after 1
    ::_exit(0);
  }
  int status = 0;
  BOOST_REQUIRE(::waitpid(child, &status, 0) == child);
  BOOST_TEST(WIFSIGNALED(status));
  BOOST_TEST(WTERMSIG(status) == SIGUSR1);
}

BOOST_AUTO_TEST_CASE(without_grace_a_signalled_process_waits_for_its_decider) {
  if (rank_of(MPI_COMM_WORLD) != 0) return;
  const pid_t child = fork(); // a controller's worker: it never calls requested()
  if (child == 0) {
    ::setenv("CROWN_STOP_GRACE", "1", 1);
    const crown::stop_signals stop(false);
    std::raise(SIGTERM);
    for (int i = 0; i < 20; ++i) ::usleep(100000); // 2 s: past the grace it does not have
    ::_exit(crown::stop_signals::received() ? 0 : 1);
  }
  int status = 0;
  BOOST_REQUIRE(::waitpid(child, &status, 0) == child);
  BOOST_TEST(WIFEXITED(status));
  BOOST_TEST(WEXITSTATUS(status) == 0);
}

/// Runs `body` in a child process with a 1 s grace; returns its wait status.
template <typename Body>
int in_child_with_short_grace(Body body) {
  const pid_t child = fork();
  if (child == 0) {
    ::setenv("CROWN_STOP_GRACE", "1", 1);
    const crown::stop_signals stop;
    body();
    ::_exit(crown::stop_signals::received() ? 0 : 1);
  }
  int status = 0;
  if (::waitpid(child, &status, 0) != child) return -1;
  return status;
}

/// The deadline's timing cases run in the one-rank suite only (they take seconds).
bool one_rank() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n == 1;
}

BOOST_AUTO_TEST_CASE(a_paused_deadline_lets_a_long_checkpoint_finish_then_runs_again) {
  if (!one_rank()) return;
  // A signal during a 2 s checkpoint (paused): the process lives through it...
  int status = in_child_with_short_grace([] {
    const crown::stop_signals::deadline_pause hold;
    std::raise(SIGUSR1);
    for (int i = 0; i < 20; ++i) ::usleep(100000);
  });
  BOOST_TEST((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  // ...and when nobody agrees after it, the whole grace runs from the end of the pause.
  status = in_child_with_short_grace([] {
    {
      const crown::stop_signals::deadline_pause hold;
      std::raise(SIGUSR1);
      ::usleep(1500000);
    }
    for (int i = 0; i < 30; ++i) ::usleep(100000);
  });
  BOOST_TEST(WIFSIGNALED(status));
  BOOST_TEST(WTERMSIG(status) == SIGUSR1);
}

BOOST_AUTO_TEST_CASE(after_the_loop_a_signal_has_no_deadline) {
  if (!one_rank()) return;
  const int status = in_child_with_short_grace([] {
    crown::stop_signals::loop_done(); // the run's output, after its last step
    std::raise(SIGTERM);
    for (int i = 0; i < 20; ++i) ::usleep(100000);
  });
  BOOST_TEST((WIFEXITED(status) && WEXITSTATUS(status) == 0));
}

BOOST_AUTO_TEST_CASE(a_bad_grace_is_refused) {
  ::setenv("CROWN_STOP_GRACE", "soon", 1);
  BOOST_CHECK_THROW(crown::stop_signals{}, crown::config_error);
  ::unsetenv("CROWN_STOP_GRACE");
  const crown::stop_signals stop; // refused without leaving itself installed
}
