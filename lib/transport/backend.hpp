// lib/transport/backend.hpp — the contract every one-sided backend implements.
#pragma once
#include "async_op.hpp"
#include "progress_nap.hpp"
#include "transfer.hpp"
#include <chrono>
#include <cstdint>
#include <mutex>
#include <span>
#include <thread>

namespace crown::detail {

/// Lets one thread at a time drive a progress engine; the others return at once. Two
/// threads progressing one engine only fight over its lock, and on a host with more
/// threads than cores the holder is descheduled while the other spins on it (UCX's
/// worker lock is a spinlock: 80% of a waiting rank's time went there). Calls that
/// must reach the engine (issuing a transfer) hold the gate and sleep until it is free.
class progress_gate {
public:
  /// f() when no other thread is inside; false (nothing moved here) when one is.
  template <typename F>
  bool run(F&& f) noexcept {
    if (!busy_.try_lock()) return false;
    const std::lock_guard lock(busy_, std::adopt_lock);
    return f();
  }
  /// Waits for the gate and keeps it until the returned lock ends.
  [[nodiscard]] std::unique_lock<std::mutex> hold() { return std::unique_lock(busy_); }

private:
  std::mutex busy_;
};

/// How a rank reaches heap slices of peers it cannot load from or store to: one MPI
/// window over the heap (mpi_window), UCX (ucx_transport) or active messages over
/// two-sided MPI (active_messages). The symmetric heap holds one, chosen at start-up;
/// the same-host path (shm_backend.hpp) is a backend too, inline (no virtual call).
///
/// Transfers are asynchronous: start() returns before the data moves, with an
/// operation the caller tests or waits for (a blocking transfer is start plus a wait
/// for remote completion, in onesided.cpp). Atomics are blocking; those on one
/// allocation all go through the same backend, so they are atomic with each other.
/// Every call is safe from any thread under MPI_THREAD_MULTIPLE.
class backend {
public:
  virtual ~backend() = default;
  [[nodiscard]] virtual const char* name() const noexcept = 0;

  /// Starts moving `runs` of `rank`'s heap to (put) or from (get) consecutive bytes of
  /// `packed`, which stays the caller's until local completion. nullptr when the
  /// transfer completed before returning.
  virtual async_handle start(bool put, int rank, std::span<const run> runs, std::byte* packed) = 0;
  virtual std::uint64_t atomic(int rank, std::uint64_t offset, atomic_op op, int width,
                               bool floating, std::uint64_t operand, std::uint64_t compare) = 0;

  /// Puts `runs`, then adds `add` to the 8-byte integer word at `flag` in the same
  /// rank's heap once the data is visible there (put-with-notify, as shmem_put_signal);
  /// returns with both done. By default a blocking put, then the atomic.
  virtual void put_notify(int rank, std::span<const run> runs, const std::byte* packed,
                          std::uint64_t flag, std::int64_t add);

  /// Orders this rank's earlier transfers before its later ones at every target,
  /// without waiting for them (as shmem_fence). By default a quiet.
  virtual void fence() { quiet(); }
  /// Remote completion of every transfer started to any rank (asynchronous ones too),
  /// then ordering of this rank's own accesses to its heap (as shmem_quiet).
  virtual void quiet() = 0;
  /// Makes remote writes into this rank's heap visible to its own loads.
  virtual void sync_local() {}
  /// Advances incoming and outgoing traffic; true when anything moved. Safe from any
  /// thread.
  virtual bool progress() noexcept = 0;
  /// Whether this backend serves every request addressed to this rank without an MPI
  /// call, so that a progress thread may serve them below MPI_THREAD_MULTIPLE
  /// (serve_without_mpi() first).
  [[nodiscard]] virtual bool serves_without_mpi() const noexcept { return false; }
  /// From now on sends nothing that the target could serve only inside MPI (called before
  /// a progress thread that makes no MPI call starts); only where serves_without_mpi().
  virtual void serve_without_mpi() noexcept {}
  /// progress() without any MPI call; true when anything moved.
  virtual bool progress_without_mpi() noexcept { return false; }
  /// The progress thread's nap when idle: returns after `limit`, or sooner when traffic
  /// arrives where the backend can tell, or when work is queued for the thread.
  virtual void idle_wait(std::chrono::microseconds limit) noexcept { progress_nap(limit); }
};

} // namespace crown::detail
