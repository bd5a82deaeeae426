// lib/transport/host_staging.hpp — memory only its owner can touch, on this rank's host
// (a remote_buffer), reached through slots in this rank's heap that the owner maps:
// the owner copies between its memory and a slot on request, this rank between the
// slot and its own memory, pipelined in chunks.
#pragma once
#include "am_codec.hpp"
#include "async_op.hpp"
#include "transfer.hpp"
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

namespace crown::detail {

/// The remote_buffer a staged transfer reaches: its owner (world rank), id and generation.
struct host_staging_buffer {
  int owner = -1;
  std::uint64_t id = 0;
  std::uint32_t generation = 0;
};

/// Starts the owner's copy of `at` (offsets at the owner) between its memory and this
/// rank's heap at `heap_offset`; the word before it holds `ticket`. An active message:
/// used until the owner watches this rank's slots (posted_slots), then no more.
using host_staging_request = std::function<async_handle(
    bool put, const run& at, std::uint64_t heap_offset, std::uint32_t ticket)>;
/// Moves `at` between the owner's memory and `local` without the owner (a kernel copy).
using host_staging_fallback = std::function<void(bool put, const run& at, std::byte* local)>;

/// A blocking put (`put`) or get of `r` in `to`, from or into `local`; `what` names it
/// in errors. False, with nothing moved, when the slots are in use by another thread,
/// the heap has no room for them, or the owner lately left a request unserved. With a
/// `fallback`, a chunk the owner has not taken within 10 ms (it left Crown for its own
/// work) is cancelled and moved by the fallback, as is the rest of the transfer, and
/// that owner gets no staged transfer for a second: an owner outside Crown delays it
/// by that much, never for longer. A transfer that fails cancels what the owner has not
/// taken, so that it does not wait for that owner either.
bool transfer_through_host_slots(const host_staging_buffer& to, bool put, const run& r,
                                 std::byte* local, const host_staging_request& request,
                                 const host_staging_fallback& fallback, const char* what);

/// The owner's side of a staged active message for remote_buffer `id` of `generation`
/// whose data lies at `data` in the origin's heap: copies `runs` between the buffer and
/// there, unless the origin cancelled the request (the word before `data` no longer
/// holds `ticket`) first.
am_status serve_staged_request(bool put, std::uint64_t id, std::uint32_t generation,
                               std::span<const run> runs, std::byte* data, std::uint32_t ticket);

/// The owner's side of staged requests posted without MPI. A reader's first staged
/// request to an owner is an active message; serving it, the owner starts watching
/// that reader's slots and marks them so, and the reader posts its later requests
/// there: the request in the line before the slot, the status back in its ticket word,
/// a few hundred nanoseconds where a message round trip took 5 µs. Used by the
/// serving thread of one runtime's active messages only.
class posted_slots {
public:
  /// After serving a staged request from `source` whose data lay at `data_offset` of
  /// its heap (mapped here, `heap_size` bytes): watches the slots it lies in, when they
  /// are where that request's line says. `me` and `ranks`: this rank and the world's size.
  void watch(int source, std::uint64_t data_offset, std::size_t heap_size, int me,
             int ranks) noexcept;
  /// Serves the requests posted for rank `me` in the slots watched; true when it
  /// served any.
  bool serve(int me) noexcept;

private:
  struct reader {
    int rank;
    std::byte* slots; ///< mapped here
  };
  std::vector<reader> readers_;
};

/// From which size a transfer to an owner that kernel copies (process_vm_readv) also
/// reach goes through the slots instead: probed once per process.
std::size_t host_staging_from() noexcept;

/// The heap offset of this process's slots (nullopt until its first staged transfer):
/// a heap-full message names their block, as it stays until the runtime ends. Read
/// without the slots' lock (the message is written under the heap's, which a transfer
/// holding the slots' lock may be waiting for).
std::optional<std::uint64_t> host_staging_offset() noexcept;

/// Gives up the slots (their heap is going away) and the cancelled requests still
/// waiting for their refusals; the next runtime allocates its own.
void forget_host_staging() noexcept;

} // namespace crown::detail
