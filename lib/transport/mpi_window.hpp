// lib/transport/mpi_window.hpp — one-sided traffic through one MPI window (CROWN_TRANSPORT=mpi).
#pragma once
#include "backend.hpp"
#include "deferred_issues.hpp"
#include <cstdint>
#include <map>
#include <memory>
#include <mpi.h>
#include <mutex>
#include <string>

namespace crown::detail {

/// MPI RMA on one window created over the heap (never a dynamic window), held in one
/// lock_all epoch for its whole life. Transfers are MPI_Put/MPI_Get, completed by
/// MPI_Win_flush_local or MPI_Win_flush of their target (never MPI_Rput/MPI_Rget: see
/// window_op in mpi_window.cpp).
class mpi_window final : public backend {
public:
  /// Collective over `world`. nullptr on every rank, with `reason` set, when MPI could
  /// not create the window on some rank; throws state_error for a SEPARATE window.
  static std::unique_ptr<mpi_window> create(MPI_Comm world, std::byte* heap, std::size_t bytes,
                                            std::string& reason);
  explicit mpi_window(MPI_Win win) noexcept : win_(win) {}
  ~mpi_window() override;
  mpi_window(const mpi_window&) = delete;
  mpi_window& operator=(const mpi_window&) = delete;

  [[nodiscard]] const char* name() const noexcept override { return "mpi"; }
  /// MPI_Put/MPI_Get; a test of the operation flushes its target (blocking).
  async_handle start(bool put, int rank, std::span<const run> runs, std::byte* packed) override;
  std::uint64_t atomic(int rank, std::uint64_t offset, atomic_op op, int width, bool floating,
                       std::uint64_t operand, std::uint64_t compare) override;
  void quiet() override;
  void sync_local() override;
  bool progress() noexcept override;

  /// Numbers a transfer to `rank` just issued.
  std::uint64_t started(int rank);
  /// MPI_Win_flush of `rank` (blocking); on success every transfer to `rank` numbered
  /// before it began counts as remotely complete. MPI's return code.
  int flush(int rank);
  /// Whether the transfer numbered `sequence` to `rank` is known to be complete.
  bool complete(int rank, std::uint64_t sequence);

  /// Transfers of 64 KiB and more (and any behind them) are issued by the progress thread.
  deferred_issues deferred_{64 << 10};

private:
  /// Flushes the targets of transfers started and not yet flushed (on the progress
  /// thread): Open MPI's osc/ucx moves a put's bytes only inside calls on the window, so
  /// without this an asynchronous put waits for its owner's wait before it moves.
  bool flush_started();

  MPI_Win win_;
  std::mutex ledger_;
  std::uint64_t started_ = 0;              ///< transfers numbered so far
  std::map<int, std::uint64_t> unflushed_; ///< rank -> newest transfer not known complete
  std::map<int, std::uint64_t> complete_;  ///< rank -> transfers up to this one complete
};

} // namespace crown::detail
