// include/crown/detail/heap.hpp — the small, stable, non-template ABI under coarray,
// global_ptr, events, locks and atomics. Implemented in lib/transport/.
#pragma once
#include <crown/memory_kind.hpp>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace crown {
class mesh;
class completion;
} // namespace crown

namespace crown::detail {

/// A collective allocation: the same offset in every member's heap.
struct heap_block {
  std::uint64_t offset = 0;
  std::size_t bytes = 0;
  bool cpu_atomics = false; ///< every member reaches the block with loads and stores
};

/// Collective over the members of `m`: they agree on one offset among themselves.
/// Throws (on every member) when the sizes or `type_tag`s differ between members
/// (unless CROWN_CHECK=0) or when the block does not fit in some member's heap.
heap_block heap_allocate(const mesh& m, std::size_t bytes, std::uint64_t type_tag,
                         std::string_view what, memory_kind kind = memory_kind::host);
/// Collective over the members: completes outstanding traffic, then frees.
void heap_release(const mesh& m, const heap_block& b) noexcept;

/// Non-collective allocation in the calling rank's own heap (global_ptr).
std::uint64_t heap_allocate_local(std::size_t bytes, std::string_view what);
void heap_release_local(std::uint64_t offset);

/// The calling rank's address of a heap offset.
std::byte* heap_address(std::uint64_t offset) noexcept;
/// Load/store address of `offset` in `world_rank`'s heap, or nullptr when that rank
/// is reached through the cross-host transport.
std::byte* heap_peer_address(int world_rank, std::uint64_t offset) noexcept;

/// A strided block at the target: count[d] indices per dimension d < dims, `stride[d]`
/// bytes apart, elements of `elem` bytes, the first at heap `offset`. Row-major: the
/// packed local buffer holds the elements in that order.
struct strided {
  std::uint64_t offset = 0;
  std::size_t elem = 0;
  std::size_t dims = 0;
  std::size_t count[3] = {1, 1, 1};
  std::size_t stride[3] = {0, 0, 0};
};

/// Blocking transfers: return when the data is at the target (put) or here (get).
void remote_put(int world_rank, std::uint64_t offset, const void* src, std::size_t bytes);
void remote_get(int world_rank, std::uint64_t offset, void* dst, std::size_t bytes);
void remote_put_strided(int world_rank, const strided& s, const void* packed);
/// remote_put without its trace span: crown-bench's baseline for what the span costs
/// when tracing is off (docs/benchmarks.md).
void remote_put_untraced(int world_rank, std::uint64_t offset, const void* src, std::size_t bytes);
void remote_get_strided(int world_rank, const strided& s, void* packed);

/// Put-with-notify: puts `bytes` at `offset`, then adds `add` to the int64 word at
/// `flag` in the same rank's heap once the data is visible there (`cpu`: the word's
/// atomics are CPU atomics, as heap_block::cpu_atomics says). One round trip where the
/// transport can.
void remote_put_notify(int world_rank, std::uint64_t offset, const void* src, std::size_t bytes,
                       std::uint64_t flag, std::int64_t add, bool cpu);

/// Starts a contiguous transfer and adds what is still in flight to `into` (nothing
/// when it completed at once: load/store, or a backend that finished it).
void start_transfer(bool put, int world_rank, std::uint64_t offset, void* buffer, std::size_t bytes,
                    completion& into);
/// start_transfer for a strided block (`packed` holds its elements in row-major order).
void start_transfer_strided(bool put, int world_rank, const strided& s, void* packed,
                            completion& into);

enum class atomic_op { load, store, add, bit_and, bit_or, bit_xor, swap, compare_swap };
/// Atomic on a 4- or 8-byte integer word (or float/double for load/store/add/swap).
/// With `cpu` the word is updated with CPU atomics; otherwise through the transport,
/// also when the target is the calling rank. Returns the previous value's bits.
std::uint64_t remote_atomic(int world_rank, std::uint64_t offset, atomic_op op, int width,
                            bool floating, std::uint64_t operand, std::uint64_t compare, bool cpu);

/// Starts or stops Crown's progress thread (benchmarks compare both); false when the
/// thread cannot run (no transport, MPI_THREAD_SINGLE, or below MPI_THREAD_MULTIPLE a
/// transport that needs MPI calls to serve). Not thread-safe.
bool set_progress_thread(bool on);

/// Drives MPI's progress engine once (some transports, e.g. UCX over TCP or shared
/// memory, complete other ranks' one-sided operations on this rank only while it
/// progresses). Every Crown wait loop calls it.
void progress() noexcept;

/// How `world_rank`'s heap is reached: nullptr for load/store, else the transport's
/// name ("ucx", "mpi" or "am"). For tools and benchmarks.
const char* transport_name(int world_rank) noexcept;

/// Completes every outstanding transfer of this rank, asynchronous ones too, and orders
/// its memory accesses (the backend's quiet, then a full fence).
void heap_quiet();
/// Orders this rank's earlier transfers before its later ones, without waiting for
/// them where the transport can (the backend's fence).
void heap_fence();
/// Makes remote writes to this rank's heap visible to its own loads (MPI_Win_sync + fence).
void heap_sync_local();

/// The heap offset of [p, p + bytes) when it lies in this rank's heap, else -1.
std::int64_t heap_offset_of(const void* p, std::size_t bytes) noexcept;

/// True when every rank of the world reaches every other's heap by load/store.
bool world_shares_memory() noexcept;

/// CROWN_CHECK: true when collective argument checks are on.
bool check_collectives() noexcept;

} // namespace crown::detail
