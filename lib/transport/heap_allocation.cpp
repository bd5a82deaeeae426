// The heap ABI's allocation half (include/crown/detail/heap.hpp): collective blocks
// whose members agree on one offset, local blocks, addresses, and the active heap.
#include "../mesh/crown_comm.hpp"
#include "../runtime/runtime_state.hpp"
#include "agreement.hpp"
#include "async_collectives.hpp"
#include "heap_state.hpp"
#include "host_collectives.hpp"
#include "host_staging.hpp"
#include "offset_agreement.hpp"
#include "test_hooks.hpp"
#include "transfer.hpp"
#include <algorithm>
#include <atomic>
#include <climits>
#include <crown/detail/checked.hpp>
#include <crown/detail/heap.hpp>
#include <crown/detail/wait.hpp>
#include <crown/error.hpp>
#include <crown/log.hpp>
#include <crown/mesh.hpp>
#include <cstring>
#include <string>
#include <vector>

namespace crown::detail {
namespace {

std::atomic<std::size_t> g_chunk{std::size_t{1} << 30};
std::atomic<bool> g_check_allocations{true};
std::atomic<bool> g_check_collectives{false};

constexpr std::size_t alignment = 64;

/// Refuses, before any rounding, a size that no heap of `h`'s size can hold (beyond
/// 2^64 bytes, or beyond the heap itself); returns the size rounded to the alignment.
std::size_t checked_rounded(const symmetric_heap& h, std::size_t bytes, const std::string& op) {
  if (bytes == size_overflow)
    throw resource_error(op, "the size in bytes (elements x element size) exceeds 2^64: no "
                             "heap can hold it");
  if (bytes > h.size())
    throw resource_error(op, std::to_string(bytes) + " bytes can never fit: the symmetric heap " +
                                 "has " + std::to_string(h.size()) +
                                 " bytes per rank; raise CROWN_HEAP_SIZE");
  return (std::max<std::size_t>(bytes, 1) + alignment - 1) / alignment * alignment;
}

/// The heap bytes of remote_buffer's staging slots (0 without them); under the heap's lock.
std::size_t host_staging_heap_bytes(const symmetric_heap& h) {
  const auto at = host_staging_offset();
  return at ? h.space.block_bytes(*at) : 0;
}

/// The end of a heap-full message: what is in use, how much of it Crown itself holds
/// until the runtime ends (co_* scratch, remote_buffer's staging slots), and the advice.
std::string heap_usage(const symmetric_heap& h, const char* where) {
  std::string s = "heap " + std::to_string(h.size()) + " bytes per rank, " +
                  std::to_string(h.space.in_use()) + " in use" + where;
  std::vector<std::string> crown_own;
  if (const host_scratch_usage scratch = host_scratch_in_use(); scratch.bytes > 0)
    crown_own.push_back(std::to_string(scratch.bytes) + " bytes are the co_* scratch of " +
                        std::to_string(scratch.meshes) +
                        (scratch.meshes == 1 ? " mesh" : " meshes") +
                        " that reduced among ranks of one host, 1 MiB per distinct mesh");
  if (const std::size_t slots = host_staging_heap_bytes(h); slots > 0)
    crown_own.push_back(std::to_string(slots) +
                        " bytes are remote_buffer's staging slots, taken at this rank's first "
                        "staged transfer");
  for (std::size_t i = 0; i < crown_own.size(); ++i)
    s += (i == 0 ? " (of which " : ", and ") + crown_own[i];
  if (!crown_own.empty()) s += ", kept until the runtime ends)";
  return s + ", largest free block" + where + " " + std::to_string(h.space.largest_free()) +
         "; raise CROWN_HEAP_SIZE";
}

/// What Crown's waits drive on every poll where a transport needs the target's help.
void progress_transport_and_collectives() noexcept {
  progress();
  progress_collectives();
}

} // namespace

std::atomic<symmetric_heap*> g_active_heap{nullptr};

void no_active_heap(const char* op) {
  throw state_error(std::string(op), "no crown::runtime is active (not yet, or already "
                                     "destroyed): one-sided memory needs one");
}

void install_heap(symmetric_heap* h, const config& cfg) noexcept {
  forget_host_scratch(); // its blocks belong to the previous heap
  g_check_allocations = cfg.check != 0;
  g_check_collectives = cfg.check == 1;
  g_active_heap.store(h, std::memory_order_release);
  set_progress_hook(!h              ? nullptr
                    : h->messages() ? &progress_transport_and_collectives
                                    : &progress_collectives);
}

std::int64_t heap_offset_of(const void* p, std::size_t bytes) noexcept {
  symmetric_heap* h = active_heap();
  if (!h) return -1;
  const auto* b = static_cast<const std::byte*>(p);
  const std::byte* base = h->local(0);
  if (b < base || b > base + h->size() || bytes > static_cast<std::size_t>(base + h->size() - b))
    return -1;
  return b - base;
}

bool world_shares_memory() noexcept {
  symmetric_heap* h = active_heap();
  return h && h->all_peers_shared();
}

bool check_collectives() noexcept { return g_check_collectives.load(std::memory_order_relaxed); }
std::size_t transfer_chunk_bytes() noexcept { return g_chunk.load(std::memory_order_relaxed); }
void set_transfer_chunk_bytes(std::size_t bytes) noexcept {
  g_chunk.store(std::clamp<std::size_t>(bytes, 1, INT_MAX), std::memory_order_relaxed);
}

heap_block heap_allocate(const mesh& m, std::size_t bytes, std::uint64_t type_tag,
                         std::string_view what, memory_kind kind) {
  const std::string op = std::string(what) + " on " + m.to_string();
  if (kind != memory_kind::host)
    throw argument_error(op, "only host memory has a symmetric heap in this build");
  symmetric_heap& h = active_heap(op.c_str());
  MPI_Comm comm = crown_comm(m); // throws for non-members
  // Agreement first: a size refused on some members only would leave the others waiting.
  if (g_check_allocations)
    check_same_arguments(m,
                         {{"size in bytes", static_cast<long long>(bytes)},
                          {"element type", static_cast<long long>(type_tag >> 1)}},
                         op);
  const std::size_t rounded = checked_rounded(h, bytes, op);
  const std::lock_guard lock(h.mutex);
  const std::uint64_t candidate = agree_on_offset(h.space, comm, rounded, op);
  if (candidate >= h.space.capacity()) // every member sees the same maximum: all throw
    throw resource_error(op, "symmetric heap full: " + std::to_string(rounded) +
                                 " bytes needed on every member, " + heap_usage(h, " here"));
  h.space.take(candidate, rounded);
  heap_block b{candidate, bytes, true};
  for (int r : m) b.cpu_atomics = b.cpu_atomics && h.peer(r, 0) != nullptr;
  std::memset(h.local(candidate), 0, rounded); // coarrays start zeroed, like Fortran's
  crown_barrier(m); // nobody writes into a block before its owner has cleared it
  return b;
}

void heap_release(const mesh& m, const heap_block& b) noexcept {
  try {
    symmetric_heap& h = active_heap("free");
    heap_quiet();
    crown_barrier(m); // no member frees while another may still access the block
    const std::lock_guard lock(h.mutex);
    h.space.give(b.offset);
  } catch (const std::exception& e) {
    log(log_level::error, "freeing a collective allocation failed: ", e.what());
  }
}

std::uint64_t heap_allocate_local(std::size_t bytes, std::string_view what) {
  const std::string op(what);
  symmetric_heap& h = active_heap(op.c_str());
  const std::size_t rounded = checked_rounded(h, bytes, op);
  const std::lock_guard lock(h.mutex);
  const std::uint64_t offset = h.space.last_fit(rounded);
  if (offset >= h.space.capacity())
    throw resource_error(op, "symmetric heap full: " + std::to_string(rounded) + " bytes needed, " +
                                 heap_usage(h, ""));
  h.space.take(offset, rounded);
  return offset;
}

void heap_release_local(std::uint64_t offset) {
  symmetric_heap& h = active_heap("deallocate");
  const std::lock_guard lock(h.mutex);
  if (!h.space.give(offset))
    throw argument_error("deallocate(offset " + std::to_string(offset) + ")",
                         "no allocation starts there (freed twice, or never allocated)");
}

std::size_t host_staging_in_use() {
  symmetric_heap& h = active_heap("host_staging_in_use");
  const std::lock_guard lock(h.mutex);
  return host_staging_heap_bytes(h);
}

std::byte* heap_address(std::uint64_t offset) noexcept {
  symmetric_heap* h = active_heap();
  return h ? h->local(offset) : nullptr;
}

std::byte* heap_peer_address(int world_rank, std::uint64_t offset) noexcept {
  symmetric_heap* h = active_heap();
  return h ? h->peer(world_rank, offset) : nullptr;
}

} // namespace crown::detail
