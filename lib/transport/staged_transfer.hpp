// lib/transport/staged_transfer.hpp — memory only its owner can touch (a device heap on
// another host, with an MPI that cannot read GPU memory), reached by requests the owner
// serves through page-locked host memory, the origin's side pipelined in chunks.
#pragma once
#include "active_messages.hpp"
#include "am_codec.hpp"
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace crown::detail {

/// The remote_buffer id that names the target's device heap instead of a remote_buffer
/// (remote_buffer ids start at 1). Its runs are device-heap offsets.
inline constexpr std::uint64_t device_heap_buffer = 0;

/// The largest request a staged transfer sends (host memory goes in requests of this
/// size, device memory in slots no larger): the owner's server buffer holds one.
inline constexpr std::size_t staged_request_bytes = std::size_t{4} << 20;

/// One request of a staged transfer: `bytes` of the packed buffer from `packed_offset`
/// on, stored at (or loaded from) `runs` at the target.
struct staging_chunk {
  std::size_t packed_offset = 0;
  std::size_t bytes = 0;
  std::vector<run> runs;
};

/// Cuts `runs` (in packed order) into chunks of at most `chunk_bytes` each, splitting a
/// run where a chunk ends; empty runs are dropped. `chunk_bytes` must be positive.
std::vector<staging_chunk> plan_staging(std::span<const run> runs, std::size_t chunk_bytes);

/// The origin's side. `slots` are page-locked host buffers of `slot_bytes` each (at least
/// two, so that one chunk's copy overlaps another's flight); `fill` starts copying packed
/// bytes into a slot, `drain` a slot into the packed buffer, `finish` waits for the copy
/// started on a slot. Without slots the packed buffer is host memory, sent as it is.
struct staging {
  std::span<std::byte* const> slots;
  std::size_t slot_bytes = 0;
  std::function<void(std::byte* slot, std::size_t packed_offset, std::size_t bytes)> fill;
  std::function<void(std::byte* slot, std::size_t packed_offset, std::size_t bytes)> drain;
  std::function<void(std::byte* slot)> finish;
};

/// A blocking put or get between `packed` (host memory, or whatever `how` copies from
/// and into) and `runs` of `rank`'s device heap, over `am`. Chunk k+1 is copied into its
/// slot while chunk k is on the wire (put); chunk k is copied out while the next ones
/// arrive (get). Returns once every byte is at the target (put) or here (get); throws
/// what the target refused, naming it.
void staged_transfer(active_messages& am, bool put, int rank, std::span<const run> runs,
                     std::byte* packed, const staging& how);

/// The owner's side: stores the request's packed bytes at `runs` of the device heap
/// (`put`) or loads them. `network(host)` moves the packed bytes between the wire and
/// `host` (the runs' total, host memory): called once, before emptying `host` into the
/// device (put) or after filling it (get). Returns the status the origin gets.
using device_server = std::function<am_status(bool put, std::span<const run> runs,
                                              const std::function<void(std::byte* host)>& network)>;

/// Installs this process's server (the device heap does at start-up where a peer on
/// another host has one), or removes it (empty). Requests are served from then on
/// whenever Crown progresses, as remote_buffer requests are.
void set_device_server(device_server server);
/// True while a device server is installed.
bool device_requests_served() noexcept;
/// Runs the installed server; without one the request is refused (no_device_heap).
am_status serve_device_request(bool put, std::span<const run> runs,
                               const std::function<void(std::byte* host)>& network);

} // namespace crown::detail
