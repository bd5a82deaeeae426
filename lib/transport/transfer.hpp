// lib/transport/transfer.hpp — pieces shared by the transports inside lib/transport.
#pragma once
#include <crown/detail/heap.hpp>
#include <crown/error.hpp>
#include <cstddef>
#include <cstdint>
#include <mpi.h>
#include <string>
#include <vector>

namespace crown::detail {

/// A contiguous piece of a transfer: `bytes` at heap `offset` at the target, matched
/// in order with consecutive bytes of the packed local buffer.
struct run {
  std::uint64_t offset;
  std::size_t bytes;
};

/// The contiguous byte runs of a strided block, in packed order, merged where they touch.
std::vector<run> runs_of(const strided& s);

/// A CPU atomic on the word at `where` (4/8-byte integer, float or double).
std::uint64_t cpu_atomic_any(std::byte* where, atomic_op op, int width, bool floating,
                             std::uint64_t operand, std::uint64_t compare);

/// The bits of `op` applied to `old` and `operand` (add, and, or, xor, swap, store),
/// for read-modify-writes that a transport builds from compare-and-swap.
std::uint64_t atomic_result_bits(atomic_op op, int width, bool floating, std::uint64_t old,
                                 std::uint64_t operand);

/// A read-modify-write as a compare-and-swap loop: `load()` gives the word's bits,
/// `cas(expected, desired)` the bits it held. Returns the previous value's bits.
template <typename Load, typename Cas>
std::uint64_t compare_and_swap_loop(atomic_op op, int width, bool floating, std::uint64_t operand,
                                    Load&& load, Cas&& cas) {
  std::uint64_t old = load();
  for (;;) {
    const std::uint64_t seen = cas(old, atomic_result_bits(op, width, floating, old, operand));
    if (seen == old) return old;
    old = seen;
  }
}

/// Waits for `request` under the backoff, driving progress (and so serving one-sided
/// requests from other ranks) on every poll.
void wait_request(MPI_Request& request, const char* what);

/// Checks the start of a nonblocking MPI call, then waits for it with wait_request.
/// Crown's own collectives go through here so that no rank blocks inside MPI while
/// another waits for it to serve a one-sided request.
inline void complete(int started, MPI_Request& request, const std::string& what) {
  check_mpi(started, what);
  wait_request(request, what.c_str());
}

} // namespace crown::detail
