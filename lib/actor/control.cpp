// runtime::control: rank 0 runs the controller, every other rank serves actors. Every
// rank beats: a thread adds to its word in rank 0's heap; the controller watches the
// serving ranks' words (control_core.cpp), each serving rank watches the controller's.
#include "control.hpp"
#include "../runtime/runtime_state.hpp"
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <crown/detail/heap.hpp>
#include <crown/detail/types.hpp>
#include <crown/log.hpp>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

namespace crown {
namespace {

/// A serving rank's view of the controller's heartbeat word (rank 0's word 0): loads on
/// one host; across hosts read() runs on a thread of its own, because a read from a
/// controller that no longer serves (stopped) may block for ever (over the MPI window
/// every test of a transfer is a blocking flush), and check() must still see the word
/// stand still.
class controller_watch {
public:
  controller_watch(const detail::heap_block& beats, double timeout)
      : beats_(beats), timeout_(timeout), changed_(std::chrono::steady_clock::now()) {}

  /// Reads the word through the transport (blocking); not needed on one host.
  void read() {
    std::uint64_t value = 0;
    try {
      detail::remote_get(0, beats_.offset, &value, sizeof value);
      read_.store(value, std::memory_order_relaxed);
      has_read_.store(true, std::memory_order_release);
    } catch (const std::exception& e) { // a failed read is silence too
      log(log_level::debug, "reading the controller's heartbeat: ", e.what());
    }
  }

  /// Called every heartbeat period; ends the job once the word stood still too long.
  void check() {
    std::uint64_t now_value = last_;
    bool fresh = false;
    if (beats_.cpu_atomics) {
      now_value = std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(
                                                     detail::heap_peer_address(0, beats_.offset)))
                      .load();
      fresh = true;
    } else if (has_read_.load(std::memory_order_acquire)) {
      now_value = read_.load(std::memory_order_relaxed);
      fresh = true;
    }
    const auto now = std::chrono::steady_clock::now();
    if (fresh && now_value != last_) {
      last_ = now_value;
      changed_ = now;
      return;
    }
    const double silent = std::chrono::duration<double>(now - changed_).count();
    if (silent <= timeout_) return;
    log(log_level::error, "watchdog: the controller (rank 0) sent no heartbeat for ",
        static_cast<int>(silent), " s (CROWN_WATCHDOG x CROWN_TIMEOUT_SCALE = ", timeout_,
        " s); it hangs or lost contact while this rank served its actors. Aborting the job.");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }

private:
  detail::heap_block beats_;
  double timeout_;
  std::chrono::steady_clock::time_point changed_;
  std::uint64_t last_ = 0;
  std::atomic<std::uint64_t> read_{0};
  std::atomic<bool> has_read_{false};
};

/// The session's mailboxes (lib/actor/mailbox.hpp): a block of every rank's heap, which
/// the ranks of its host write into. Collective. None (every message over MPI) under
/// CROWN_MAILBOX_SIZE=0 or when the block does not fit in the heap (then on every rank).
struct session_mailboxes {
  detail::mailbox_map map;
  std::optional<detail::heap_block> block;

  session_mailboxes(const mesh& world, std::size_t setting) {
    const std::size_t capacity = detail::mailbox::capacity_for(setting);
    if (capacity == 0) return;
    try {
      block = detail::heap_allocate(world, detail::mailbox::block_bytes(capacity),
                                    detail::type_tag<std::byte, 1>(), "controller mailboxes");
    } catch (const resource_error& e) {
      if (world.rank() == 0)
        log(log_level::warn, "controller messages travel over MPI in this session: ", e.what(),
            " (CROWN_MAILBOX_SIZE=", setting, "; 0 turns the mailboxes off)");
      return;
    }
    map.own = detail::heap_address(block->offset);
    map.capacity = capacity;
    int local = 0;
    for (int r = 0; r < world.size(); ++r) {
      map.peers.push_back(detail::heap_peer_address(r, block->offset));
      local += map.peers.back() != nullptr;
    }
    log(log_level::info, "controller messages: to the ", local,
        " ranks of this host (this one too) through mailboxes of ", capacity, " bytes, to ",
        world.size() - local, " over MPI");
  }
};

/// Runs `f` every `period` seconds until stopped.
std::jthread every(double period, std::function<void()> f) {
  return std::jthread([period, f = std::move(f)](std::stop_token stop) {
    std::mutex m;
    std::condition_variable_any wake; // woken by the stop request, not only by time
    std::unique_lock lock(m);
    do f();
    while (!wake.wait_for(lock, stop, std::chrono::duration<double>(period),
                          [&] { return stop.stop_requested(); }));
  });
}

/// Adds to this rank's heartbeat word every `period` until stopped.
std::jthread beat(const detail::heap_block& beats, int rank, double period) {
  const std::uint64_t word = beats.offset + sizeof(std::uint64_t) * rank;
  return every(period, [beats, word] {
    detail::remote_atomic(0, word, detail::atomic_op::add, 8, false, 1, 0, beats.cpu_atomics);
  });
}

} // namespace

int runtime::control(const std::function<void(controller&)>& fn) {
  state_->check_alive("runtime::control");
  MPI_Comm comm = MPI_COMM_NULL; // control traffic never meets data traffic
  check_mpi(MPI_Comm_dup(state_->world_comm.get(), &comm), "runtime::control: MPI_Comm_dup");
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  // Heartbeats: a thread on each rank adds to its word in rank 0's heap (plain atomics
  // on one host, the transport across hosts), even while an endpoint or the
  // controller's own code runs.
  const auto& cfg = state_->cfg;
  const double timeout = cfg.watchdog * cfg.timeout_scale;
  const bool watched = timeout > 0 && state_->level == thread_level::multiple && state_->size > 1;
  const double period = std::max(timeout / 10, 0.01);
  const detail::heap_block beats =
      detail::heap_allocate(*state_->world, sizeof(std::uint64_t) * state_->size,
                            detail::type_tag<std::uint64_t, 1>(), "controller heartbeats");
  const session_mailboxes boxes(*state_->world, cfg.mailbox_size);
  int code = 0;
  // Every rank beats until all have left their loop (the barrier below): a serving rank
  // that stopped early must not look hung while the controller still waits for others.
  const auto until_all_done = [&](std::jthread& heartbeat) {
    state_->world->barrier();
    heartbeat.request_stop();
    if (heartbeat.joinable()) heartbeat.join();
  };
  if (state_->rank == 0) {
    auto* counters = reinterpret_cast<std::uint64_t*>(detail::heap_address(beats.offset));
    std::jthread heartbeat;
    if (watched) heartbeat = beat(beats, 0, period);
    code = detail::run_controller(comm, boxes.map, state_->size, cfg, watched ? counters : nullptr,
                                  fn);
    until_all_done(heartbeat);
  } else {
    // The watch has a thread of its own: across hosts a beat to a stopped controller
    // blocks in its atomic, and must not keep the watch from seeing that.
    controller_watch watch(beats, timeout); // outlives the threads that use it
    std::jthread heartbeat, watching, reading;
    if (watched) {
      heartbeat = beat(beats, state_->rank, period);
      if (!beats.cpu_atomics) reading = every(period, [&watch] { watch.read(); });
      watching = every(period, [&watch] { watch.check(); });
    }
    try {
      code = detail::serve_actors(comm, boxes.map, state_->rank, state_->size, cfg);
    } catch (const std::exception& e) { // the controller would wait for this rank forever
      log(log_level::error, "serving actors failed: ", e.what(), ". Aborting the job.");
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    until_all_done(heartbeat);
    for (std::jthread* t : {&watching, &reading}) {
      t->request_stop();
      if (t->joinable()) t->join();
    }
  }
  if (boxes.block) detail::heap_release(*state_->world, *boxes.block);
  detail::heap_release(*state_->world, beats); // a barrier: the heartbeat threads are gone
  MPI_Comm_free(&comm);
  return code;
}

} // namespace crown
