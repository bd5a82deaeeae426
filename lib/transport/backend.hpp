// lib/transport/backend.hpp — the contract every one-sided backend implements.
#pragma once
#include "transfer.hpp"
#include <cstdint>
#include <mpi.h>
#include <span>
#include <vector>

namespace crown::detail {

/// How a rank reaches heap slices of peers it cannot load from or store to: one MPI
/// window over the heap (mpi_window), UCX (ucx_transport) or active messages over
/// two-sided MPI (active_messages). The symmetric heap holds one, chosen at start-up;
/// the same-host path (shm_backend.hpp) is the fifth backend and stays inline.
///
/// Blocking calls return with remote completion (a put is visible at the target).
/// Atomics on one allocation all go through the same backend, so they are atomic with
/// each other. Every call is safe from any thread under MPI_THREAD_MULTIPLE.
class backend {
public:
  virtual ~backend() = default;
  [[nodiscard]] virtual const char* name() const noexcept = 0;

  virtual void put(int rank, std::span<const run> runs, const std::byte* packed) = 0;
  virtual void get(int rank, std::span<const run> runs, std::byte* packed) = 0;
  /// Starts a transfer. Returns false when it completed before returning; true when it
  /// is in flight with its requests appended to `requests`, and flush(rank) then gives
  /// remote completion. By default the blocking transfer.
  virtual bool start(bool put, int rank, std::span<const run> runs, std::byte* packed,
                     std::vector<MPI_Request>& requests) {
    (void)requests;
    if (put)
      this->put(rank, runs, packed);
    else
      get(rank, runs, packed);
    return false;
  }
  virtual std::uint64_t atomic(int rank, std::uint64_t offset, atomic_op op, int width,
                               bool floating, std::uint64_t operand, std::uint64_t compare) = 0;

  /// Remote completion of every transfer started to `rank`.
  virtual void flush(int rank) { (void)rank; }
  /// Remote completion of every transfer started to any rank, then ordering of this
  /// rank's own accesses to its heap.
  virtual void quiet() {}
  /// Makes remote writes into this rank's heap visible to its own loads.
  virtual void sync_local() {}
  /// Advances incoming and outgoing traffic. Safe from any thread.
  virtual void progress() noexcept = 0;
};

} // namespace crown::detail
