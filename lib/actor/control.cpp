// runtime::control: rank 0 runs the controller, every other rank serves actors, with
// heartbeats from the serving ranks to the controller's watchdog.
#include "control.hpp"
#include "../runtime/runtime_state.hpp"
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <crown/detail/heap.hpp>
#include <crown/detail/types.hpp>
#include <crown/log.hpp>
#include <mutex>
#include <thread>

namespace crown {

int runtime::control(const std::function<void(controller&)>& fn) {
  state_->check_alive("runtime::control");
  MPI_Comm comm = MPI_COMM_NULL; // control traffic never meets data traffic
  check_mpi(MPI_Comm_dup(state_->world_comm.get(), &comm), "runtime::control: MPI_Comm_dup");
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  // Heartbeats: a thread on each serving rank adds to its word in rank 0's heap (plain
  // atomics on one host, the transport across hosts), even while an endpoint runs.
  const auto& cfg = state_->cfg;
  const double timeout = cfg.watchdog * cfg.timeout_scale;
  const bool watched = timeout > 0 && state_->level == thread_level::multiple && state_->size > 1;
  const detail::heap_block beats =
      detail::heap_allocate(*state_->world, sizeof(std::uint64_t) * state_->size,
                            detail::type_tag<std::uint64_t, 1>(), "controller heartbeats");
  int code = 0;
  if (state_->rank == 0) {
    auto* counters = reinterpret_cast<std::uint64_t*>(detail::heap_address(beats.offset));
    code = detail::run_controller(comm, state_->size, cfg, watched ? counters : nullptr, fn);
  } else {
    std::jthread heartbeat;
    if (watched)
      heartbeat = std::jthread([&](std::stop_token stop) {
        const auto period = std::chrono::duration<double>(std::max(timeout / 10, 0.01));
        const std::uint64_t word = beats.offset + sizeof(std::uint64_t) * state_->rank;
        std::mutex m;
        std::condition_variable_any wake; // woken by the stop request, not only by time
        std::unique_lock lock(m);
        do
          detail::remote_atomic(0, word, detail::atomic_op::add, 8, false, 1, 0, beats.cpu_atomics);
        while (!wake.wait_for(lock, stop, period, [&] { return stop.stop_requested(); }));
      });
    try {
      code = detail::serve_actors(comm, state_->rank, state_->size, cfg.actor_stdout);
    } catch (const std::exception& e) { // the controller would wait for this rank forever
      log(log_level::error, "serving actors failed: ", e.what(), ". Aborting the job.");
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
  detail::heap_release(*state_->world, beats); // a barrier: the heartbeat threads are gone
  MPI_Comm_free(&comm);
  return code;
}

} // namespace crown
