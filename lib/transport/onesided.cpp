// The heap ABI's transfer half (include/crown/detail/heap.hpp): every put, get and
// atomic is dispatched here, once, to the same-host path (inline loads and stores) or
// to the heap's backend (backend.hpp); chunking and range checks live here too.
#include "../gpu/pointer_checks.hpp"
#include "active_messages.hpp"
#include "heap_state.hpp"
#include "shm_backend.hpp"
#include "test_hooks.hpp"
#include "transfer.hpp"
#include <algorithm>
#include <atomic>
#include <crown/detail/device_heap.hpp>
#include <crown/detail/heap.hpp>
#include <crown/detail/wait.hpp>
#include <crown/error.hpp>
#include <crown/trace.hpp>
#include <vector>

namespace crown::detail {
namespace {

[[noreturn, gnu::cold, gnu::noinline]] void refuse_range(const symmetric_heap& h, int rank,
                                                         std::uint64_t offset, std::size_t bytes,
                                                         const char* op) {
  const int size = h.world_size();
  if (rank < 0 || rank >= size)
    throw argument_error(std::string(op), "rank " + std::to_string(rank) + " is out of range [0, " +
                                              std::to_string(size) + ")");
  throw argument_error(std::string(op),
                       "bytes [" + std::to_string(offset) + ", " + std::to_string(offset + bytes) +
                           ") fall outside the heap of " + std::to_string(h.size()) + " bytes");
}

/// `op` is a C string, used only for an error: this runs on every put and get, inline.
inline void check_range(const symmetric_heap& h, int rank, std::uint64_t offset, std::size_t bytes,
                        const char* op) {
  if (rank < 0 || rank >= h.world_size() || offset > h.size() || bytes > h.size() - offset)
      [[unlikely]]
    refuse_range(h, rank, offset, bytes, op);
}

/// Cuts runs into pieces of at most `chunk` bytes in total, preserving order, and
/// calls f(pieces, packed_offset) for each group.
template <typename F>
void for_each_chunk(std::span<const run> runs, std::size_t chunk, F&& f) {
  std::vector<run> group;
  std::size_t group_bytes = 0, packed = 0, group_start = 0;
  for (run r : runs) {
    while (r.bytes > 0) {
      const std::size_t take = std::min(r.bytes, chunk - group_bytes);
      group.push_back({r.offset, take});
      group_bytes += take;
      r.offset += take;
      r.bytes -= take;
      if (group_bytes == chunk) {
        f(std::span<const run>(group), group_start);
        packed += group_bytes;
        group_start = packed;
        group.clear();
        group_bytes = 0;
      }
    }
  }
  if (!group.empty()) f(std::span<const run>(group), group_start);
}

/// Checks that the whole strided block lies in `rank`'s heap; false when it is empty.
bool check_strided(const symmetric_heap& h, int rank, const strided& s, const char* op) {
  std::size_t last = 0, total = 1;
  for (std::size_t d = 0; d < s.dims; ++d) {
    total *= s.count[d];
    last += (s.count[d] ? s.count[d] - 1 : 0) * s.stride[d];
  }
  if (total == 0) return false;
  check_range(h, rank, s.offset, last + s.elem, op);
  return true;
}

/// Moves `runs` to or from `rank` (already checked): inline when it shares memory,
/// else through the backend in chunks. With `into`, what is still in flight is added
/// there; without, each chunk completes remotely before the call returns.
void dispatch(bool put, symmetric_heap& h, int rank, std::span<const run> runs, std::byte* packed,
              completion* into = nullptr) {
  if (std::byte* base = h.peer(rank, 0)) return shm_backend::transfer(put, base, runs, packed);
  backend& b = h.backend_for(rank);
  for_each_chunk(runs, transfer_chunk_bytes(), [&](std::span<const run> group, std::size_t at) {
    async_handle op = b.start(put, rank, group, packed + at);
    if (into)
      into->add(std::move(op));
    else if (op)
      wait_remote(*op, put ? "put" : "get");
  });
}

/// The operation's name in errors and stall reports.
const char* transfer_name(bool put, const completion* into) noexcept {
  return into ? (put ? "put_async" : "get_async") : (put ? "put" : "get");
}

/// One contiguous transfer, the commonest call. To a peer on this host it is a check
/// and a copy with nothing else on the way: through transfer_runs' loop and dispatch's
/// chunking an 8 B get spent a third of its time setting up their stack frame.
/// Always inlined: beside the trace hook's cold copies the compiler stopped inlining it
/// into remote_put, and the call cost 1.5-2 ns of a 6-9 ns 8 B put.
[[gnu::always_inline]] inline void transfer_one(bool put, int rank, std::uint64_t offset,
                                                std::byte* buffer, std::size_t bytes,
                                                completion* into = nullptr) {
  const char* op = transfer_name(put, into);
  symmetric_heap& h = active_heap(op);
  check_range(h, rank, offset, bytes, op);
  check_host_buffer(buffer, bytes, op);
  if (std::byte* peer = h.peer(rank, offset)) {
    if (put)
      copy_bytes(peer, buffer, bytes);
    else
      copy_bytes(buffer, peer, bytes);
    return;
  }
  const run r{offset, bytes};
  dispatch(put, h, rank, {&r, 1}, buffer, into);
}

/// A strided block: copied in place over shared memory, else as its runs.
void transfer_strided(bool put, int rank, const strided& s, std::byte* packed,
                      completion* into = nullptr) {
  const char* op = transfer_name(put, into);
  symmetric_heap& h = active_heap(op);
  if (!check_strided(h, rank, s, op)) return;
  check_host_buffer(packed, s.elem, op);
  if (std::byte* base = h.peer(rank, 0)) return shm_backend::transfer_strided(put, base, s, packed);
  const auto runs = runs_of(s);
  dispatch(put, h, rank, runs, packed, into);
}

} // namespace

std::vector<run> runs_of(const strided& s) {
  std::vector<run> runs;
  const std::size_t inner = s.dims - 1;
  const bool rows = s.stride[inner] == s.elem;
  std::size_t index[3] = {0, 0, 0};
  for (std::size_t d = 0; d < s.dims; ++d)
    if (s.count[d] == 0) return runs;
  for (;;) {
    std::uint64_t at = s.offset;
    for (std::size_t d = 0; d < s.dims; ++d) at += index[d] * s.stride[d];
    const std::size_t bytes = rows ? s.count[inner] * s.elem : s.elem;
    if (!runs.empty() && runs.back().offset + runs.back().bytes == at)
      runs.back().bytes += bytes;
    else
      runs.push_back({at, bytes});
    std::size_t d = s.dims;
    while (d-- > 0) {
      index[d] += (d == inner && rows) ? s.count[inner] : 1;
      if (index[d] < s.count[d]) break;
      index[d] = 0;
      if (d == 0) return runs;
    }
  }
}

void wait_request(MPI_Request& request, const char* what) {
  int done = 0;
  check_mpi(MPI_Test(&request, &done, MPI_STATUS_IGNORE), what);
  if (done) return;
  trace_span span("wait", "wait");
  if (span.recording()) span.text("what", what); // `what` may not outlive the wait
  backoff pause(wait_site{what});
  for (;;) {
    check_mpi(MPI_Test(&request, &done, MPI_STATUS_IGNORE), what);
    if (done) return;
    pause.pause(); // drives progress, serving other ranks' one-sided requests
  }
}

namespace {
/// A transfer inside its trace span (include/crown/trace.hpp): the cold side of the
/// contiguous transfers' one branch on the trace flag. An idle span on the hot path
/// itself (its frame, its destructor's test) cost 1-1.5 ns of a 6-9 ns 8 B put.
template <typename Transfer>
[[gnu::cold, gnu::noinline]] void traced(const char* name, int peer, std::size_t bytes,
                                         Transfer&& transfer) {
  const trace_span span("onesided", name, {"peer", peer},
                        {"bytes", static_cast<std::int64_t>(bytes)});
  transfer();
}
} // namespace

void remote_put(int world_rank, std::uint64_t offset, const void* src, std::size_t bytes) {
  auto* data = const_cast<std::byte*>(static_cast<const std::byte*>(src));
  if (trace_on()) [[unlikely]]
    return traced("put", world_rank, bytes,
                  [=] { transfer_one(true, world_rank, offset, data, bytes); });
  transfer_one(true, world_rank, offset, data, bytes);
}

void remote_put_untraced(int world_rank, std::uint64_t offset, const void* src, std::size_t bytes) {
  transfer_one(true, world_rank, offset, const_cast<std::byte*>(static_cast<const std::byte*>(src)),
               bytes);
}

void remote_get(int world_rank, std::uint64_t offset, void* dst, std::size_t bytes) {
  auto* data = static_cast<std::byte*>(dst);
  if (trace_on()) [[unlikely]]
    return traced("get", world_rank, bytes,
                  [=] { transfer_one(false, world_rank, offset, data, bytes); });
  transfer_one(false, world_rank, offset, data, bytes);
}

void start_transfer(bool put, int world_rank, std::uint64_t offset, void* buffer, std::size_t bytes,
                    completion& into) {
  auto* data = static_cast<std::byte*>(buffer);
  if (trace_on()) [[unlikely]]
    return traced(put ? "put_async" : "get_async", world_rank, bytes,
                  [=, &into] { transfer_one(put, world_rank, offset, data, bytes, &into); });
  transfer_one(put, world_rank, offset, data, bytes, &into);
}

namespace {
std::int64_t strided_bytes(const strided& s) {
  return static_cast<std::int64_t>(s.count[0] * s.count[1] * s.count[2] * s.elem);
}
} // namespace

void start_transfer_strided(bool put, int world_rank, const strided& s, void* packed,
                            completion& into) {
  const trace_span span("onesided", put ? "put_strided_async" : "get_strided_async",
                        {"peer", world_rank}, {"bytes", strided_bytes(s)});
  transfer_strided(put, world_rank, s, static_cast<std::byte*>(packed), &into);
}

void remote_put_strided(int world_rank, const strided& s, const void* packed) {
  const trace_span span("onesided", "put_strided", {"peer", world_rank},
                        {"bytes", strided_bytes(s)});
  transfer_strided(true, world_rank, s,
                   const_cast<std::byte*>(static_cast<const std::byte*>(packed)));
}

void remote_get_strided(int world_rank, const strided& s, void* packed) {
  const trace_span span("onesided", "get_strided", {"peer", world_rank},
                        {"bytes", strided_bytes(s)});
  transfer_strided(false, world_rank, s, static_cast<std::byte*>(packed));
}

void remote_put_notify(int world_rank, std::uint64_t offset, const void* src, std::size_t bytes,
                       std::uint64_t flag, std::int64_t add, bool cpu) {
  const trace_span span("onesided", "put_notify", {"peer", world_rank},
                        {"bytes", static_cast<std::int64_t>(bytes)});
  symmetric_heap& h = active_heap("put_notify");
  check_range(h, world_rank, offset, bytes, "put_notify");
  check_range(h, world_rank, flag, sizeof(std::int64_t), "put_notify (flag)");
  if (flag % sizeof(std::int64_t) != 0)
    throw argument_error("put_notify: flag at offset " + std::to_string(flag),
                         "the word is not aligned to 8 bytes");
  check_host_buffer(src, bytes, "put_notify");
  auto* data = const_cast<std::byte*>(static_cast<const std::byte*>(src));
  const run r{offset, bytes};
  if (std::byte* base = h.peer(world_rank, 0)) {
    shm_backend::transfer(true, base, {&r, 1}, data);
    if (cpu) { // a seq_cst read-modify-write: the data is visible before the count
      (void)cpu_atomic_any(base + flag, atomic_op::add, 8, false, static_cast<std::uint64_t>(add),
                           0);
      return;
    }
  } else if (bytes <= transfer_chunk_bytes()) {
    return h.backend_for(world_rank).put_notify(world_rank, {&r, 1}, data, flag, add);
  } else {
    dispatch(true, h, world_rank, {&r, 1}, data);
  }
  (void)h.backend_for(world_rank)
      .atomic(world_rank, flag, atomic_op::add, 8, false, static_cast<std::uint64_t>(add), 0);
}

std::uint64_t remote_atomic(int world_rank, std::uint64_t offset, atomic_op op, int width,
                            bool floating, std::uint64_t operand, std::uint64_t compare, bool cpu) {
  const trace_span span("onesided", "atomic", {"peer", world_rank}, {"bytes", width},
                        {"op", static_cast<std::int64_t>(op)});
  symmetric_heap& h = active_heap("atomic");
  check_range(h, world_rank, offset, static_cast<std::size_t>(width), "atomic");
  if (offset % static_cast<std::uint64_t>(width) != 0)
    throw argument_error("atomic at offset " + std::to_string(offset),
                         "the word is not aligned to its size " + std::to_string(width));
  if (cpu) return cpu_atomic_any(h.peer(world_rank, offset), op, width, floating, operand, compare);
  return h.backend_for(world_rank)
      .atomic(world_rank, offset, op, width, floating, operand, compare);
}

void progress() noexcept {
  if (symmetric_heap* h = active_heap()) h->progress(); // load/store needs none
}

const char* transport_name(int world_rank) noexcept {
  symmetric_heap* h = active_heap();
  if (!h || world_rank < 0 || world_rank >= h->world_size() || h->peer(world_rank, 0))
    return nullptr;
  backend* b = h->transport();
  return b ? b->name() : nullptr;
}

MPI_Comm active_message_comm() noexcept {
  symmetric_heap* h = active_heap();
  auto* am = h ? dynamic_cast<active_messages*>(h->transport()) : nullptr;
  return am ? am->comm() : MPI_COMM_NULL;
}

void heap_quiet() {
  device_quiet(); // Crown's device stream: sync_all and events complete device transfers too
  std::atomic_thread_fence(std::memory_order_seq_cst);
  symmetric_heap* h = active_heap();
  if (backend* b = h ? h->transport() : nullptr) b->quiet();
}

void heap_fence() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  symmetric_heap* h = active_heap();
  if (backend* b = h ? h->transport() : nullptr) b->fence();
}

void heap_sync_local() {
  symmetric_heap* h = active_heap();
  if (backend* b = h ? h->transport() : nullptr) b->sync_local();
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

} // namespace crown::detail
