// lib/transport/mpi_window.hpp — one-sided traffic through one MPI window (CROWN_TRANSPORT=mpi).
#pragma once
#include "backend.hpp"
#include <memory>
#include <mpi.h>
#include <string>

namespace crown::detail {

/// MPI RMA on one window created over the heap (never a dynamic window), held in one
/// lock_all epoch for its whole life; transfers complete with MPI_Win_flush.
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
  void put(int rank, std::span<const run> runs, const std::byte* packed) override;
  void get(int rank, std::span<const run> runs, std::byte* packed) override;
  /// Request-based (MPI_Rput/MPI_Rget): always in flight when it returns.
  bool start(bool put, int rank, std::span<const run> runs, std::byte* packed,
             std::vector<MPI_Request>& requests) override;
  std::uint64_t atomic(int rank, std::uint64_t offset, atomic_op op, int width, bool floating,
                       std::uint64_t operand, std::uint64_t compare) override;
  void flush(int rank) override;
  void quiet() override;
  void sync_local() override;
  void progress() noexcept override;

private:
  MPI_Win win_;
};

} // namespace crown::detail
