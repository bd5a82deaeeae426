// The MPI-window backend: one window over the heap, MPI RMA, atomics as compare-and-swap.
#include "mpi_window.hpp"
#include "atomic_bits.hpp"
#include "progress_thread.hpp"
#include <algorithm>
#include <crown/detail/wait.hpp>
#include <optional>
#include <type_traits>
#include <vector>

namespace crown::detail {
namespace {

/// One MPI_Put/MPI_Get of a group of runs: contiguous, or through an hindexed type.
void rma_transfer(bool put, MPI_Win win, int rank, std::span<const run> runs, std::byte* packed) {
  std::size_t total = 0;
  for (const run& r : runs) total += r.bytes;
  const int count = static_cast<int>(total);
  MPI_Datatype target = MPI_BYTE;
  int target_count = count;
  MPI_Aint disp = static_cast<MPI_Aint>(runs[0].offset);
  if (runs.size() > 1) {
    std::vector<int> lengths(runs.size());
    std::vector<MPI_Aint> displacements(runs.size());
    for (std::size_t i = 0; i < runs.size(); ++i) {
      lengths[i] = static_cast<int>(runs[i].bytes);
      displacements[i] = static_cast<MPI_Aint>(runs[i].offset);
    }
    check_mpi(MPI_Type_create_hindexed(static_cast<int>(runs.size()), lengths.data(),
                                       displacements.data(), MPI_BYTE, &target),
              "MPI_Type_create_hindexed");
    MPI_Type_commit(&target);
    target_count = 1;
    disp = 0;
  }
  const int rc = put ? MPI_Put(packed, count, MPI_BYTE, rank, disp, target_count, target, win)
                     : MPI_Get(packed, count, MPI_BYTE, rank, disp, target_count, target, win);
  if (target != MPI_BYTE) MPI_Type_free(&target); // pending operations keep their copy
  check_mpi(rc, put ? "MPI_Put" : "MPI_Get");
}

MPI_Datatype mpi_type(int width, bool floating) {
  if (floating) return width == 4 ? MPI_FLOAT : MPI_DOUBLE;
  return width == 4 ? MPI_INT32_T : MPI_INT64_T;
}

/// MPI only promises atomicity between accumulates of one operation (plus MPI_NO_OP),
/// and coarray codes mix operations on one word, so every update goes through
/// MPI_Compare_and_swap: a loop for the operations MPI would do in one call.
template <typename T>
std::uint64_t mpi_atomic(MPI_Win win, int rank, std::uint64_t offset, atomic_op op,
                         std::uint64_t operand_bits, std::uint64_t compare_bits) {
  const MPI_Datatype type = mpi_type(sizeof(T), std::is_floating_point_v<T>);
  const auto disp = static_cast<MPI_Aint>(offset);
  auto fetch = [&] {
    T value{};
    check_mpi(MPI_Fetch_and_op(nullptr, &value, type, rank, disp, MPI_NO_OP, win),
              "MPI_Fetch_and_op(load)");
    check_mpi(MPI_Win_flush(rank, win), "MPI_Win_flush");
    return value;
  };
  auto cas = [&](T expected, T desired) {
    T previous{};
    check_mpi(MPI_Compare_and_swap(&desired, &expected, &previous, type, rank, disp, win),
              "MPI_Compare_and_swap");
    check_mpi(MPI_Win_flush(rank, win), "MPI_Win_flush");
    return previous;
  };
  if (op == atomic_op::load) return bits_of(fetch());
  if (op == atomic_op::compare_swap)
    return bits_of(cas(from_bits<T>(compare_bits), from_bits<T>(operand_bits)));
  return compare_and_swap_loop(
      op, sizeof(T), std::is_floating_point_v<T>, operand_bits, [&] { return bits_of(fetch()); },
      [&](std::uint64_t expected, std::uint64_t desired) {
        return bits_of(cas(from_bits<T>(expected), from_bits<T>(desired)));
      });
}

} // namespace

std::unique_ptr<mpi_window> mpi_window::create(MPI_Comm world, std::byte* heap, std::size_t bytes,
                                               std::string& reason) {
  MPI_Win win = MPI_WIN_NULL;
  MPI_Info info = MPI_INFO_NULL;
  MPI_Info_create(&info);
  MPI_Info_set(info, "same_disp_unit", "true");
  const int rc = MPI_Win_create(heap, static_cast<MPI_Aint>(bytes), 1, info, world, &win);
  MPI_Info_free(&info);
  int ok = rc == MPI_SUCCESS;
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, world),
            "MPI_Allreduce(heap window created)");
  if (!ok) {
    if (rc == MPI_SUCCESS) MPI_Win_free(&win);
    reason = "MPI_Win_create over the heap failed on some rank";
    return nullptr;
  }
  check_mpi(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN), "MPI_Win_set_errhandler");
  int* model = nullptr;
  int flag = 0;
  check_mpi(MPI_Win_get_attr(win, MPI_WIN_MODEL, &model, &flag), "MPI_Win_get_attr");
  if (!flag || *model != MPI_WIN_UNIFIED) {
    MPI_Win_free(&win);
    throw state_error("symmetric heap", "MPI gave a window in the SEPARATE memory model, which "
                                        "Crown does not support (it needs MPI_WIN_UNIFIED)");
  }
  check_mpi(MPI_Win_lock_all(MPI_MODE_NOCHECK, win), "MPI_Win_lock_all");
  return std::make_unique<mpi_window>(win);
}

mpi_window::~mpi_window() {
  MPI_Win_unlock_all(win_);
  MPI_Win_free(&win_);
}

namespace {

/// One transfer's MPI_Put/MPI_Get, completed by a blocking MPI_Win_flush_local (local)
/// or MPI_Win_flush (remote) of its target: MPI has no nonblocking flush. Not
/// MPI_Rput/MPI_Rget: Open MPI 4.1's osc/ucx ties an Rput/Rget request to the
/// operation's completion callback only after starting it, so when another thread's
/// progress (Crown's progress thread, a heartbeat, the application's) runs that callback
/// in between, the request never completes. Seen as a put or get unanswered for ever, 1
/// run in tens under load (coarray.fake2.np3, differential.fake2.np4, netns.two_hosts).
class window_op final : public async_op, public deferrable {
public:
  window_op(mpi_window& window, MPI_Win win, bool put, int rank)
      : async_op(rank), window_(window), win_(win), put_(put), rank_(rank) {}

  /// Issues the transfer now; `sequence` numbers it for mpi_window's flush ledger.
  void issue(std::span<const run> runs, std::byte* packed) override {
    rma_transfer(put_, win_, rank_, runs, packed);
    sequence_ = window_.started(rank_);
  }

  bool test_local() override {
    if (!local_) {
      // Done also after an error: the operation is over either way. The flush drives
      // MPI itself, so it counts as polling (see start()).
      local_ = true;
      if (!begun()) return true;
      if (window_.complete(rank_, sequence_)) return true;
      const polling_scope polling;
      check_mpi(MPI_Win_flush_local(rank_, win_), "MPI_Win_flush_local");
    }
    return true;
  }
  bool test_remote() override {
    if (!remote_) {
      remote_ = local_ = true;
      if (!begun()) return true;
      if (window_.complete(rank_, sequence_)) return true;
      const polling_scope polling;
      check_mpi(window_.flush(rank_), "MPI_Win_flush");
    }
    return true;
  }

private:
  /// Issues a deferred transfer if the progress thread has not yet; throws a failure
  /// to start once. False when there is nothing to flush (it failed to start).
  bool begun() {
    if (!issued()) window_.deferred_.issue_all();
    if (const std::exception_ptr failure = take_start_failure()) std::rethrow_exception(failure);
    return sequence_ != 0;
  }

  mpi_window& window_;
  MPI_Win win_;
  bool put_;
  int rank_;
  std::uint64_t sequence_ = 0;
  bool local_ = false, remote_ = false;
};

} // namespace

async_handle mpi_window::start(bool put, int rank, std::span<const run> runs, std::byte* packed) {
  // A thread inside the window's calls drives MPI's progress itself, and counts as
  // polling, so that the progress thread naps meanwhile. Were it to call MPI_Iprobe, it
  // would spin on the UCX worker's lock (osc/ucx), which this thread holds while it
  // progresses; and where the rank is bound to one core the two share it, so the
  // spinning thread took the core from the lock's holder: 8 B puts over TCP took
  // 200-290 us with the progress thread on against 36-54 us with it off.
  const polling_scope polling;
  auto* op = new window_op(*this, win_, put, rank);
  async_handle handle(op);
  if (!deferred_.take(*op, runs, packed)) op->issue(runs, packed);
  return handle;
}

std::uint64_t mpi_window::started(int rank) {
  const std::lock_guard lock(ledger_);
  unflushed_[rank] = ++started_;
  return started_;
}

int mpi_window::flush(int rank) {
  std::uint64_t before = 0;
  {
    const std::lock_guard lock(ledger_);
    before = started_;
  }
  const int rc = MPI_Win_flush(rank, win_);
  if (rc != MPI_SUCCESS) return rc;
  const std::lock_guard lock(ledger_);
  std::uint64_t& done = complete_[rank];
  done = std::max(done, before);
  if (const auto it = unflushed_.find(rank); it != unflushed_.end() && it->second <= done)
    unflushed_.erase(it);
  return rc;
}

bool mpi_window::complete(int rank, std::uint64_t sequence) {
  const std::lock_guard lock(ledger_);
  const auto it = complete_.find(rank);
  return it != complete_.end() && it->second >= sequence;
}

bool mpi_window::flush_started() {
  std::vector<int> ranks;
  {
    const std::lock_guard lock(ledger_);
    for (const auto& [rank, newest] : unflushed_) ranks.push_back(rank);
  }
  for (const int rank : ranks) (void)flush(rank); // a failure: the transfer's own test throws
  return !ranks.empty();
}

std::uint64_t mpi_window::atomic(int rank, std::uint64_t offset, atomic_op op, int width,
                                 bool floating, std::uint64_t operand, std::uint64_t compare) {
  deferred_.issue_all();       // in the order they were started
  const polling_scope polling; // see start()
  if (floating)
    return width == 4 ? mpi_atomic<float>(win_, rank, offset, op, operand, compare)
                      : mpi_atomic<double>(win_, rank, offset, op, operand, compare);
  return width == 4 ? mpi_atomic<std::int32_t>(win_, rank, offset, op, operand, compare)
                    : mpi_atomic<std::int64_t>(win_, rank, offset, op, operand, compare);
}

void mpi_window::quiet() {
  deferred_.issue_all();
  const polling_scope polling; // see start()
  check_mpi(MPI_Win_flush_all(win_), "MPI_Win_flush_all");
  check_mpi(MPI_Win_sync(win_), "MPI_Win_sync");
}

void mpi_window::sync_local() { check_mpi(MPI_Win_sync(win_), "MPI_Win_sync"); }

bool mpi_window::progress() noexcept {
  // MPI's progress engine, osc/ucx's included (it registers with opal_progress while a
  // window exists), so incoming emulated RMA (UCX over TCP, and its shared-memory atomics)
  // is served. It says nothing of whether anything moved. No call on the window: a flush
  // there blocks until every operation in flight completes, and one aimed at a rank
  // that stopped never does, which held a serving rank's polls and the watchdog thread
  // that should report that rank (actor.stopped_controller_window.np2). Before
  // 2026-12-02 the main thread's polls also called MPI_Win_flush_local_all.
  int flag = 0;
  MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
  try {
    if (!on_progress_thread()) return false;
    const bool issued = deferred_.issue_all();
    // A thread waiting on a transfer flushes it itself; two flushes only contend.
    return polling_threads().load(std::memory_order_relaxed) > 0 ? issued
                                                                 : (flush_started() || issued);
  } catch (...) { // std::bad_alloc of the ledger's copy: the transfers' own tests flush
    return false;
  }
}

} // namespace crown::detail
