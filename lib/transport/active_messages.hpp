// lib/transport/active_messages.hpp — one-sided traffic as requests over two-sided MPI.
#pragma once
#include "am_codec.hpp"
#include "backend.hpp"
#include <atomic>
#include <mpi.h>
#include <mutex>
#include <span>
#include <vector>

namespace crown::detail {

/// The cross-host path for networks without RDMA (CROWN_TRANSPORT=am): a put, get or
/// atomic is one request message to the target and one reply back, on a communicator of
/// its own. The target executes it on its heap (atomics as CPU atomics, so they are
/// atomic with every other atomic on the word) when it progresses: inside every Crown
/// wait, transfer and collective. A rank that computes outside Crown serves nobody
/// until it comes back (the progress rule in README).
class active_messages final : public backend {
public:
  active_messages(MPI_Comm world, std::byte* heap, std::size_t heap_size);
  ~active_messages();
  active_messages(const active_messages&) = delete;
  active_messages& operator=(const active_messages&) = delete;

  [[nodiscard]] const char* name() const noexcept override { return "am"; }
  void put(int rank, std::span<const run> runs, const std::byte* packed) override;
  void get(int rank, std::span<const run> runs, std::byte* packed) override;
  std::uint64_t atomic(int rank, std::uint64_t offset, atomic_op op, int width, bool floating,
                       std::uint64_t operand, std::uint64_t compare) override;
  /// Executes every request that has arrived (one thread serves at a time).
  void progress() noexcept override;
  [[nodiscard]] MPI_Comm comm() const noexcept { return comm_; }

private:
  std::vector<std::byte> call(int rank, std::vector<std::byte>& request, std::size_t reply_bytes);

  MPI_Comm comm_ = MPI_COMM_NULL;
  std::byte* heap_;
  std::size_t heap_size_;
  std::mutex serving_;
  void execute(const am_request& r);     ///< fills reply_
  std::vector<std::byte> inbox_, reply_; ///< reused by the serving thread
  std::atomic<std::uint32_t> next_id_{0};
};

} // namespace crown::detail
