// lib/transport/test_hooks.hpp — the one-sided layer's knobs and probes that tests turn
// and read (and the layer itself consults). Not installed: tests reach lib/ through a
// private include path; nothing of the public API depends on them.
#pragma once
#include <crown/mesh.hpp>
#include <cstddef>
#include <cstdint>
#include <mpi.h>
#include <optional>

namespace crown::detail {

/// The active-message transport's communicator (tests send it malformed requests), or
/// MPI_COMM_NULL when that transport is not in use.
MPI_Comm active_message_comm() noexcept;

/// Chunk size for transport transfers (2 GiB boundary of MPI's int counts; tests lower it).
std::size_t transfer_chunk_bytes() noexcept;
void set_transfer_chunk_bytes(std::size_t bytes) noexcept;

/// Lets co_* read other processes' ordinary memory with process_vm_readv (default on;
/// tests turn it off, on every image alike, to exercise the staged path).
void set_host_single_copy(bool allowed) noexcept;
/// Whether the probe times kernel copies against the heap path (default on; tests turn
/// it off, on every image alike, to exercise the kernel copies on any machine).
void set_host_single_copy_timed(bool timed) noexcept;
/// How co_* write the slots that other images read: as streaming_pays finds (nullopt,
/// the default), or streamed (true) or with ordinary stores (false) whatever it would
/// find; on every image alike.
void set_host_streaming(std::optional<bool> forced) noexcept;

/// Whether host-local co_* on a mesh read the other images' buffers with one kernel
/// copy (process_vm_readv): not yet asked (no reduction needed it), refused by the
/// ptrace rules or a failed read (staged copies instead), allowed but measured slower
/// than the staged copies (which it then uses), or in use.
enum class single_copy_state { unprobed, unavailable, slower, in_use };

/// Where `m`'s host-local co_* stand (for tests and diagnostics).
[[nodiscard]] single_copy_state host_single_copy_state(const mesh& m);

/// From which size remote_buffer transfers to an owner on this host go through this
/// rank's staging slots when kernel copies reach it too (0: all of them); nullopt
/// returns to the probe's size (host_staging.hpp). Either way, owners that lately left
/// a staged chunk unserved are forgotten (staged transfers go to them again at once).
void set_host_staging_from(std::optional<std::size_t> bytes) noexcept;

/// Staged chunks this process posted in its slots to owners that watch them (no MPI).
[[nodiscard]] std::uint64_t host_staging_posted() noexcept;

/// Heap bytes this process's staging slots hold, as the heap counts them (0 before its
/// first staged transfer): what a heap-full message names.
[[nodiscard]] std::size_t host_staging_in_use();

/// Forgets which owners watch this rank's slots: its staged requests to them go as
/// active messages again (they do not watch anew: they already do).
void forget_slot_watchers() noexcept;

/// A staged request's line as a reader might write it, wrong or not.
struct raw_staged_line {
  std::uint64_t id = 0, offset = 0, bytes = 0;
  std::uint64_t generation_put = 0; ///< the generation; bit 32: a put; no other bit
};
/// Posts `line` in this rank's first slot for `owner` (on this host) and waits for its
/// answer: the owner's am_status, or nullopt where that owner does not watch this
/// rank's slots (no staged transfer reached it yet).
[[nodiscard]] std::optional<int> post_raw_staged_line(int owner, const raw_staged_line& line);

/// True while Crown has made this process readable by any process of its user
/// (PR_SET_PTRACER_ANY), which it does only under Yama ptrace_scope 1, and only when
/// a reduction needs it and nothing else allows the reads.
[[nodiscard]] bool host_ptracer_granted() noexcept;

} // namespace crown::detail
