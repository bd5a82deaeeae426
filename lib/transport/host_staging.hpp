// lib/transport/host_staging.hpp — memory only its owner can touch, on this rank's host
// (a remote_buffer), reached through slots in this rank's heap that the owner maps:
// the owner copies between its memory and a slot on request, this rank between the
// slot and its own memory, pipelined in chunks.
#pragma once
#include "async_op.hpp"
#include "transfer.hpp"
#include <cstddef>
#include <cstdint>
#include <functional>

namespace crown::detail {

/// Starts the owner's copy of `at` (offsets at the owner) between its memory and this
/// rank's heap at `heap_offset`; the word before it holds `ticket`.
using host_staging_request = std::function<async_handle(
    bool put, const run& at, std::uint64_t heap_offset, std::uint32_t ticket)>;
/// Moves `at` between the owner's memory and `local` without the owner (a kernel copy).
using host_staging_fallback = std::function<void(bool put, const run& at, std::byte* local)>;

/// A blocking put (`put`) or get of `r` at `owner`, from or into `local`; `what` names it
/// in errors. False, with nothing moved, when the slots are in use by another thread,
/// the heap has no room for them, or `owner` lately left a request unserved. With a
/// `fallback`, a chunk the owner has not taken within 10 ms (it left Crown for its own
/// work) is cancelled and moved by the fallback, as is the rest of the transfer, and
/// that owner gets no staged transfer for a second: an owner outside Crown delays it
/// by that much, never for longer. A transfer that fails cancels what the owner has not
/// taken, so that it does not wait for that owner either.
bool transfer_through_host_slots(int owner, bool put, const run& r, std::byte* local,
                                 const host_staging_request& request,
                                 const host_staging_fallback& fallback, const char* what);

/// The owner's side: takes the request whose data lies at `data` in the origin's heap,
/// unless the origin cancelled it first; true when it is the owner's to serve.
bool take_staged_ticket(std::byte* data, std::uint32_t ticket) noexcept;

/// From which size a transfer to an owner that kernel copies (process_vm_readv) also
/// reach goes through the slots instead: probed once per process.
std::size_t host_staging_from() noexcept;

/// Gives up the slots (their heap is going away) and the cancelled requests still
/// waiting for their refusals; the next runtime allocates its own.
void forget_host_staging() noexcept;

} // namespace crown::detail
