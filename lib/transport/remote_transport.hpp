// lib/transport/remote_transport.hpp — the cross-host path behind the symmetric heap.
#pragma once
#include "transfer.hpp"
#include <cstdint>
#include <span>

namespace crown::detail {

/// How a rank reaches heap slices it cannot load from or store to, when that is not
/// the MPI window: active messages over two-sided MPI, or UCX. Every call is blocking
/// and returns with remote completion (a put is visible at the target). Atomics on one
/// allocation all go through the same transport, so they are atomic with each other.
class remote_transport {
public:
  virtual ~remote_transport() = default;
  [[nodiscard]] virtual const char* name() const noexcept = 0;
  virtual void put(int rank, std::span<const run> runs, const std::byte* packed) = 0;
  virtual void get(int rank, std::span<const run> runs, std::byte* packed) = 0;
  virtual std::uint64_t atomic(int rank, std::uint64_t offset, atomic_op op, int width,
                               bool floating, std::uint64_t operand, std::uint64_t compare) = 0;
  /// Advances incoming and outgoing traffic. Safe from any thread.
  virtual void progress() noexcept = 0;
};

} // namespace crown::detail
