// The non-template one-sided ABI (include/crown/detail/heap.hpp): allocation with
// agreement, load/store or MPI RMA transfers, atomics, completion.
#include "../runtime/runtime_state.hpp"
#include "active_messages.hpp"
#include "agreement.hpp"
#include "host_collectives.hpp"
#include "symmetric_heap.hpp"
#include "transfer.hpp"
#include <algorithm>
#include <atomic>
#include <climits>
#include <crown/detail/heap.hpp>
#include <crown/detail/wait.hpp>
#include <crown/error.hpp>
#include <crown/log.hpp>
#include <crown/mesh.hpp>
#include <cstring>
#include <vector>

namespace crown::detail {
namespace {

std::atomic<symmetric_heap*> g_heap{nullptr};
std::atomic<std::size_t> g_chunk{std::size_t{1} << 30};
std::atomic<bool> g_check_allocations{true};
std::atomic<bool> g_check_collectives{false};

constexpr std::size_t alignment = 64;

symmetric_heap& heap(std::string_view op) {
  symmetric_heap* h = g_heap.load(std::memory_order_acquire);
  if (!h)
    throw state_error(std::string(op), "no crown::runtime is active (not yet, or already "
                                       "destroyed): one-sided memory needs one");
  return *h;
}

void check_range(const symmetric_heap& h, int rank, std::uint64_t offset, std::size_t bytes,
                 std::string_view op) {
  const int size = h.world_size();
  if (rank < 0 || rank >= size)
    throw argument_error(std::string(op), "rank " + std::to_string(rank) + " is out of range [0, " +
                                              std::to_string(size) + ")");
  if (offset > h.size() || bytes > h.size() - offset)
    throw argument_error(std::string(op), "bytes [" + std::to_string(offset) + ", " +
                                              std::to_string(offset + bytes) +
                                              ") fall outside the heap of " +
                                              std::to_string(h.size()) + " bytes");
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

/// One MPI_Put/MPI_Get of a group of runs: contiguous, or through an hindexed type.
/// With `requests`, request-based (MPI_Rput/MPI_Rget) and appended there.
void rma_transfer(bool put, MPI_Win win, int rank, std::span<const run> runs, std::byte* packed,
                  std::vector<MPI_Request>* requests = nullptr) {
  std::size_t total = 0;
  for (const run& r : runs) total += r.bytes;
  const int count = static_cast<int>(total);
  MPI_Datatype target = MPI_BYTE;
  int target_count = count;
  MPI_Aint disp = static_cast<MPI_Aint>(runs[0].offset);
  if (runs.size() > 1) {
    std::vector<int> lengths(runs.size());
    std::vector<MPI_Aint> displacements(runs.size());
    for (std::size_t i = 0; i < runs.size(); ++i) {
      lengths[i] = static_cast<int>(runs[i].bytes);
      displacements[i] = static_cast<MPI_Aint>(runs[i].offset);
    }
    check_mpi(MPI_Type_create_hindexed(static_cast<int>(runs.size()), lengths.data(),
                                       displacements.data(), MPI_BYTE, &target),
              "MPI_Type_create_hindexed");
    MPI_Type_commit(&target);
    target_count = 1;
    disp = 0;
  }
  int rc = MPI_SUCCESS;
  if (requests) {
    MPI_Request r = MPI_REQUEST_NULL;
    rc = put ? MPI_Rput(packed, count, MPI_BYTE, rank, disp, target_count, target, win, &r)
             : MPI_Rget(packed, count, MPI_BYTE, rank, disp, target_count, target, win, &r);
    if (rc == MPI_SUCCESS) requests->push_back(r);
  } else {
    rc = put ? MPI_Put(packed, count, MPI_BYTE, rank, disp, target_count, target, win)
             : MPI_Get(packed, count, MPI_BYTE, rank, disp, target_count, target, win);
  }
  if (target != MPI_BYTE) MPI_Type_free(&target); // pending operations keep their copy
  check_mpi(rc, put ? "MPI_Put" : "MPI_Get");
}

void transfer_runs(bool put, int rank, std::span<const run> runs, std::byte* packed) {
  const char* op = put ? "put" : "get";
  symmetric_heap& h = heap(op);
  for (const run& r : runs) check_range(h, rank, r.offset, r.bytes, op);
  if (std::byte* base = h.peer(rank, 0)) {
    for (const run& r : runs) {
      if (put)
        std::memcpy(base + r.offset, packed, r.bytes);
      else
        std::memcpy(packed, base + r.offset, r.bytes);
      packed += r.bytes;
    }
    return;
  }
  if (remote_transport* t = h.remote()) {
    for_each_chunk(runs, transfer_chunk_bytes(), [&](std::span<const run> group, std::size_t at) {
      if (put)
        t->put(rank, group, packed + at);
      else
        t->get(rank, group, packed + at);
    });
    return;
  }
  MPI_Win win = h.window_for(rank);
  for_each_chunk(runs, transfer_chunk_bytes(), [&](std::span<const run> group, std::size_t at) {
    rma_transfer(put, win, rank, group, packed + at);
  });
  check_mpi(MPI_Win_flush(rank, win), "MPI_Win_flush");
}

/// Copies one strided block between the heap at `base` and a packed buffer. The inner
/// loop copies whole rows when they are contiguous, else one element at a time with a
/// fixed-size copy the compiler turns into a move.
template <bool Put>
void copy_strided(std::byte* base, const strided& s, std::byte* packed) {
  const std::size_t inner = s.dims - 1;
  const bool rows = s.stride[inner] == s.elem;
  const std::size_t row_bytes = s.count[inner] * s.elem;
  std::size_t outer[2] = {1, 1}, outer_stride[2] = {0, 0};
  for (std::size_t d = 0; d < inner; ++d) {
    outer[2 - inner + d] = s.count[d];
    outer_stride[2 - inner + d] = s.stride[d];
  }
  auto move = [&](std::byte* heap, std::size_t bytes) {
    if (Put)
      std::memcpy(heap, packed, bytes);
    else
      std::memcpy(packed, heap, bytes);
    packed += bytes;
  };
  for (std::size_t i = 0; i < outer[0]; ++i)
    for (std::size_t j = 0; j < outer[1]; ++j) {
      std::byte* row = base + s.offset + i * outer_stride[0] + j * outer_stride[1];
      if (rows) {
        move(row, row_bytes);
      } else if (s.elem == 8) {
        for (std::size_t k = 0; k < s.count[inner]; ++k) move(row + k * s.stride[inner], 8);
      } else if (s.elem == 4) {
        for (std::size_t k = 0; k < s.count[inner]; ++k) move(row + k * s.stride[inner], 4);
      } else {
        for (std::size_t k = 0; k < s.count[inner]; ++k) move(row + k * s.stride[inner], s.elem);
      }
    }
}

/// The contiguous byte runs of a strided block, merged where they touch.
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

void transfer_strided(bool put, int rank, const strided& s, std::byte* packed) {
  const char* op = put ? "put" : "get";
  symmetric_heap& h = heap(op);
  if (!check_strided(h, rank, s, op)) return;
  if (std::byte* base = h.peer(rank, 0)) {
    if (put)
      copy_strided<true>(base, s, packed);
    else
      copy_strided<false>(base, s, packed);
    return;
  }
  const auto runs = runs_of(s);
  transfer_runs(put, rank, runs, packed);
}

/// Starts request-based window transfers of `runs` (chunked); the caller flushes.
void start_window_transfer(bool put, symmetric_heap& h, int rank, std::span<const run> runs,
                           std::byte* packed, std::vector<MPI_Request>& requests) {
  MPI_Win win = h.window_for(rank);
  for_each_chunk(runs, transfer_chunk_bytes(), [&](std::span<const run> group, std::size_t at) {
    rma_transfer(put, win, rank, group, packed + at, &requests);
  });
}

MPI_Datatype mpi_type(int width, bool floating) {
  if (floating) return width == 4 ? MPI_FLOAT : MPI_DOUBLE;
  return width == 4 ? MPI_INT32_T : MPI_INT64_T;
}

template <typename T>
std::uint64_t bits_of(T v) {
  if constexpr (sizeof(T) == 4) {
    std::uint32_t b;
    std::memcpy(&b, &v, 4);
    return b;
  } else {
    std::uint64_t b;
    std::memcpy(&b, &v, 8);
    return b;
  }
}

template <typename T>
T from_bits(std::uint64_t b) {
  T v;
  if constexpr (sizeof(T) == 4) {
    const auto narrow = static_cast<std::uint32_t>(b);
    std::memcpy(&v, &narrow, 4);
  } else {
    std::memcpy(&v, &b, 8);
  }
  return v;
}

/// The new value of a read-modify-write, computed on the old one.
template <typename T>
T apply(atomic_op op, T old, T operand) {
  switch (op) {
  case atomic_op::add:
    return static_cast<T>(old + operand);
  case atomic_op::store:
  case atomic_op::swap:
    return operand;
  default:
    break;
  }
  if constexpr (std::is_integral_v<T>) {
    switch (op) {
    case atomic_op::bit_and:
      return old & operand;
    case atomic_op::bit_or:
      return old | operand;
    case atomic_op::bit_xor:
      return old ^ operand;
    default:
      break;
    }
  }
  throw argument_error("atomic", "operation not defined on this type");
}

template <typename T>
std::uint64_t cpu_atomic(std::byte* where, atomic_op op, std::uint64_t operand_bits,
                         std::uint64_t compare_bits) {
  std::atomic_ref<T> word(*reinterpret_cast<T*>(where));
  const T operand = from_bits<T>(operand_bits);
  switch (op) {
  case atomic_op::load:
    return bits_of(word.load());
  case atomic_op::store:
    word.store(operand);
    return 0;
  case atomic_op::swap:
    return bits_of(word.exchange(operand));
  case atomic_op::compare_swap: {
    T expected = from_bits<T>(compare_bits);
    word.compare_exchange_strong(expected, operand);
    return bits_of(expected);
  }
  case atomic_op::add:
    return bits_of(word.fetch_add(operand));
  default:
    break;
  }
  if constexpr (std::is_integral_v<T>) {
    switch (op) {
    case atomic_op::bit_and:
      return bits_of(word.fetch_and(operand));
    case atomic_op::bit_or:
      return bits_of(word.fetch_or(operand));
    case atomic_op::bit_xor:
      return bits_of(word.fetch_xor(operand));
    default:
      break;
    }
  }
  throw argument_error("atomic", "operation not defined on this type");
}

/// MPI only promises atomicity between accumulates of one operation (plus MPI_NO_OP),
/// and coarray codes mix operations on one word, so every update goes through
/// MPI_Compare_and_swap: a loop for the operations MPI would do in one call.
template <typename T>
std::uint64_t mpi_atomic(MPI_Win win, int rank, std::uint64_t offset, atomic_op op,
                         std::uint64_t operand_bits, std::uint64_t compare_bits) {
  const MPI_Datatype type = mpi_type(sizeof(T), std::is_floating_point_v<T>);
  const auto disp = static_cast<MPI_Aint>(offset);
  auto fetch = [&] {
    T value{};
    check_mpi(MPI_Fetch_and_op(nullptr, &value, type, rank, disp, MPI_NO_OP, win),
              "MPI_Fetch_and_op(load)");
    check_mpi(MPI_Win_flush(rank, win), "MPI_Win_flush");
    return value;
  };
  auto cas = [&](T expected, T desired) {
    T previous{};
    check_mpi(MPI_Compare_and_swap(&desired, &expected, &previous, type, rank, disp, win),
              "MPI_Compare_and_swap");
    check_mpi(MPI_Win_flush(rank, win), "MPI_Win_flush");
    return previous;
  };
  if (op == atomic_op::load) return bits_of(fetch());
  if (op == atomic_op::compare_swap)
    return bits_of(cas(from_bits<T>(compare_bits), from_bits<T>(operand_bits)));
  return compare_and_swap_loop(
      op, sizeof(T), std::is_floating_point_v<T>, operand_bits, [&] { return bits_of(fetch()); },
      [&](std::uint64_t expected, std::uint64_t desired) {
        return bits_of(cas(from_bits<T>(expected), from_bits<T>(desired)));
      });
}

} // namespace

std::uint64_t atomic_result_bits(atomic_op op, int width, bool floating, std::uint64_t old,
                                 std::uint64_t operand) {
  const auto next = [&](auto tag) {
    using T = decltype(tag);
    return bits_of(apply(op, from_bits<T>(old), from_bits<T>(operand)));
  };
  if (floating) return width == 4 ? next(float{}) : next(double{});
  return width == 4 ? next(std::int32_t{}) : next(std::int64_t{});
}

std::uint64_t cpu_atomic_any(std::byte* where, atomic_op op, int width, bool floating,
                             std::uint64_t operand, std::uint64_t compare) {
  if (floating)
    return width == 4 ? cpu_atomic<float>(where, op, operand, compare)
                      : cpu_atomic<double>(where, op, operand, compare);
  return width == 4 ? cpu_atomic<std::int32_t>(where, op, operand, compare)
                    : cpu_atomic<std::int64_t>(where, op, operand, compare);
}

void wait_request(MPI_Request& request, const char* what) {
  int done = 0;
  backoff pause;
  for (;;) {
    check_mpi(MPI_Test(&request, &done, MPI_STATUS_IGNORE), what);
    if (done) return;
    pause.pause(); // drives progress, serving other ranks' one-sided requests
  }
}

void install_heap(symmetric_heap* h, const config& cfg) noexcept {
  forget_host_scratch(); // its blocks belong to the previous heap
  g_check_allocations = cfg.check != 0;
  g_check_collectives = cfg.check == 1;
  g_heap.store(h, std::memory_order_release);
  set_progress_hook(h && h->has_transport() ? &progress : nullptr);
}

std::int64_t heap_offset_of(const void* p, std::size_t bytes) noexcept {
  symmetric_heap* h = g_heap.load(std::memory_order_acquire);
  if (!h) return -1;
  const auto* b = static_cast<const std::byte*>(p);
  const std::byte* base = h->local(0);
  if (b < base || b > base + h->size() || bytes > static_cast<std::size_t>(base + h->size() - b))
    return -1;
  return b - base;
}

bool world_shares_memory() noexcept {
  symmetric_heap* h = g_heap.load(std::memory_order_acquire);
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
  symmetric_heap& h = heap(op);
  MPI_Comm comm = m.comm(); // throws for non-members
  const std::size_t rounded =
      (std::max<std::size_t>(bytes, 1) + alignment - 1) / alignment * alignment;

  if (g_check_allocations)
    check_same_arguments(m,
                         {{"size in bytes", static_cast<long long>(bytes)},
                          {"element type", static_cast<long long>(type_tag >> 1)}},
                         op);
  const std::lock_guard lock(h.mutex);
  // Members converge on the lowest offset free everywhere: propose, take the maximum,
  // re-propose at or above it, until every proposal agrees.
  std::uint64_t candidate = 0;
  for (;;) {
    const std::uint64_t next = h.space.first_fit_from(candidate, rounded);
    long long bounds[2] = {static_cast<long long>(next), -static_cast<long long>(next)};
    MPI_Request r;
    complete(MPI_Iallreduce(MPI_IN_PLACE, bounds, 2, MPI_LONG_LONG, MPI_MAX, comm, &r), r,
             "MPI_Allreduce(" + op + ")");
    candidate = static_cast<std::uint64_t>(bounds[0]);
    if (candidate >= h.space.capacity()) // every member sees the same maximum: all throw
      throw error(op, "symmetric heap full: " + std::to_string(rounded) +
                          " bytes needed on every member, heap " + std::to_string(h.size()) +
                          " bytes per rank, " + std::to_string(h.space.in_use()) +
                          " in use here, largest free block here " +
                          std::to_string(h.space.largest_free()) + "; raise CROWN_HEAP_SIZE");
    if (bounds[0] == -bounds[1]) break; // every member proposed the same offset
  }
  h.space.take(candidate, rounded);
  heap_block b{candidate, bytes, true};
  for (int r : m) b.cpu_atomics = b.cpu_atomics && h.peer(r, 0) != nullptr;
  std::memset(h.local(candidate), 0, rounded); // coarrays start zeroed, like Fortran's
  m.barrier(); // nobody writes into a block before its owner has cleared it
  return b;
}

void heap_release(const mesh& m, const heap_block& b) noexcept {
  try {
    symmetric_heap& h = heap("free");
    heap_quiet();
    m.barrier(); // no member frees while another may still access the block
    const std::lock_guard lock(h.mutex);
    h.space.give(b.offset);
  } catch (const std::exception& e) {
    log(log_level::error, "freeing a collective allocation failed: ", e.what());
  }
}

std::uint64_t heap_allocate_local(std::size_t bytes, std::string_view what) {
  symmetric_heap& h = heap(what);
  const std::size_t rounded =
      (std::max<std::size_t>(bytes, 1) + alignment - 1) / alignment * alignment;
  const std::lock_guard lock(h.mutex);
  const std::uint64_t offset = h.space.last_fit(rounded);
  if (offset >= h.space.capacity())
    throw error(std::string(what),
                "symmetric heap full: " + std::to_string(rounded) + " bytes needed, heap " +
                    std::to_string(h.size()) + " bytes, " + std::to_string(h.space.in_use()) +
                    " in use, largest free block " + std::to_string(h.space.largest_free()) +
                    "; raise CROWN_HEAP_SIZE");
  h.space.take(offset, rounded);
  return offset;
}

void heap_release_local(std::uint64_t offset) {
  symmetric_heap& h = heap("deallocate");
  const std::lock_guard lock(h.mutex);
  if (!h.space.give(offset))
    throw argument_error("deallocate(offset " + std::to_string(offset) + ")",
                         "no allocation starts there (freed twice, or never allocated)");
}

std::byte* heap_address(std::uint64_t offset) noexcept {
  symmetric_heap* h = g_heap.load(std::memory_order_acquire);
  return h ? h->local(offset) : nullptr;
}

std::byte* heap_peer_address(int world_rank, std::uint64_t offset) noexcept {
  symmetric_heap* h = g_heap.load(std::memory_order_acquire);
  return h ? h->peer(world_rank, offset) : nullptr;
}

void remote_put(int world_rank, std::uint64_t offset, const void* src, std::size_t bytes) {
  const run r{offset, bytes};
  transfer_runs(true, world_rank, {&r, 1},
                const_cast<std::byte*>(static_cast<const std::byte*>(src)));
}

void remote_get(int world_rank, std::uint64_t offset, void* dst, std::size_t bytes) {
  const run r{offset, bytes};
  transfer_runs(false, world_rank, {&r, 1}, static_cast<std::byte*>(dst));
}

bool start_transfer(bool put, int world_rank, std::uint64_t offset, void* buffer, std::size_t bytes,
                    std::vector<MPI_Request>& requests) {
  const char* op = put ? "put_async" : "get_async";
  symmetric_heap& h = heap(op);
  check_range(h, world_rank, offset, bytes, op);
  auto* local = static_cast<std::byte*>(buffer);
  const run r{offset, bytes};
  if (h.peer(world_rank, offset) || h.remote()) { // load/store, UCX and am finish now
    transfer_runs(put, world_rank, {&r, 1}, local);
    return false;
  }
  start_window_transfer(put, h, world_rank, {&r, 1}, local, requests);
  return true;
}

bool start_transfer_strided(bool put, int world_rank, const strided& s, void* packed,
                            std::vector<MPI_Request>& requests) {
  const char* op = put ? "put_async" : "get_async";
  symmetric_heap& h = heap(op);
  auto* local = static_cast<std::byte*>(packed);
  if (h.peer(world_rank, 0) || h.remote()) {
    transfer_strided(put, world_rank, s, local);
    return false;
  }
  if (!check_strided(h, world_rank, s, op)) return false;
  const auto runs = runs_of(s);
  start_window_transfer(put, h, world_rank, runs, local, requests);
  return true;
}

bool test_requests(std::vector<MPI_Request>& requests) {
  int done = 0;
  check_mpi(
      MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE),
      "MPI_Testall");
  if (done) requests.clear();
  return done != 0;
}

void flush_rank(int world_rank) {
  symmetric_heap& h = heap("flush");
  check_mpi(MPI_Win_flush(world_rank, h.window_for(world_rank)), "MPI_Win_flush");
}

void remote_put_strided(int world_rank, const strided& s, const void* packed) {
  transfer_strided(true, world_rank, s,
                   const_cast<std::byte*>(static_cast<const std::byte*>(packed)));
}

void remote_get_strided(int world_rank, const strided& s, void* packed) {
  transfer_strided(false, world_rank, s, static_cast<std::byte*>(packed));
}

std::uint64_t remote_atomic(int world_rank, std::uint64_t offset, atomic_op op, int width,
                            bool floating, std::uint64_t operand, std::uint64_t compare, bool cpu) {
  symmetric_heap& h = heap("atomic");
  check_range(h, world_rank, offset, static_cast<std::size_t>(width), "atomic");
  if (offset % static_cast<std::uint64_t>(width) != 0)
    throw argument_error("atomic at offset " + std::to_string(offset),
                         "the word is not aligned to its size " + std::to_string(width));
  if (cpu) return cpu_atomic_any(h.peer(world_rank, offset), op, width, floating, operand, compare);
  if (remote_transport* t = h.remote())
    return t->atomic(world_rank, offset, op, width, floating, operand, compare);
  MPI_Win win = h.window_for(world_rank);
  if (floating)
    return width == 4 ? mpi_atomic<float>(win, world_rank, offset, op, operand, compare)
                      : mpi_atomic<double>(win, world_rank, offset, op, operand, compare);
  return width == 4 ? mpi_atomic<std::int32_t>(win, world_rank, offset, op, operand, compare)
                    : mpi_atomic<std::int64_t>(win, world_rank, offset, op, operand, compare);
}

void progress() noexcept {
  symmetric_heap* h = g_heap.load(std::memory_order_acquire);
  if (!h) return;
  if (remote_transport* t = h->remote()) t->progress();
  if (!h->has_window()) return; // load/store traffic needs no progress
  // MPI's progress engine for two-sided traffic, and the window's own: osc/ucx advances
  // incoming emulated RMA (UCX over TCP) only inside calls on the window.
  int flag = 0;
  MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
  MPI_Win_flush_local_all(h->window());
}

const char* transport_name(int world_rank) noexcept {
  symmetric_heap* h = g_heap.load(std::memory_order_acquire);
  if (!h || world_rank < 0 || world_rank >= h->world_size() || h->peer(world_rank, 0))
    return nullptr;
  if (remote_transport* t = h->remote()) return t->name();
  return h->has_window() ? "mpi" : nullptr;
}

MPI_Comm active_message_comm() noexcept {
  symmetric_heap* h = g_heap.load(std::memory_order_acquire);
  auto* am = h ? dynamic_cast<active_messages*>(h->remote()) : nullptr;
  return am ? am->comm() : MPI_COMM_NULL;
}

void heap_quiet() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  symmetric_heap* h = g_heap.load(std::memory_order_acquire);
  if (h && h->has_window()) {
    check_mpi(MPI_Win_flush_all(h->window()), "MPI_Win_flush_all");
    check_mpi(MPI_Win_sync(h->window()), "MPI_Win_sync");
  }
}

void heap_sync_local() {
  symmetric_heap* h = g_heap.load(std::memory_order_acquire);
  if (h && h->has_window()) check_mpi(MPI_Win_sync(h->window()), "MPI_Win_sync");
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

} // namespace crown::detail
