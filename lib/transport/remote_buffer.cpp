// remote_buffer: registration of ordinary memory, the owner's liveness word, and the
// three ways to reach the memory from another rank (kernel copy, UCX, requests).
//
// Liveness: every registration has an 8-byte word in its owner's heap,
// [generation:32][dead:1][accesses in progress:31]. A rank that reaches the memory
// directly (kernel copy, UCX) first counts itself in, with a compare-and-swap from a
// value of the generation it expects without the dead bit, and out after the access
// with an add of minus one; the owner's drop sets the dead bit and waits until no
// access is in progress, so memory is never touched after its owner freed it. A
// recycled word gets the next generation, which no older handle matches; a word is
// written only where it holds that handle's generation, so a stale handle (from an
// earlier runtime of the process, say) never changes a heap word it does not own.
// All of them go through remote_atomic with the heap's CPU-or-transport rule, also on
// the owner. Requests the owner serves check its registry under its lock instead.
#include "../gpu/pointer_checks.hpp"
#include "../runtime/layer_hooks.hpp"
#include "buffer_registry.hpp"
#include "heap_state.hpp"
#include "host_collectives.hpp"
#include "host_staging.hpp"
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <crown/build_config.hpp>
#include <crown/detail/buffer.hpp>
#include <crown/detail/checked.hpp>
#include <crown/detail/heap.hpp>
#include <crown/detail/wait.hpp>
#include <crown/error.hpp>
#include <crown/log.hpp>
#include <crown/runtime.hpp>
#include <cstring>
#include <mutex>
#include <optional>
#include <sys/uio.h>
#include <unistd.h>
#include <unordered_map>
#if CROWN_HAVE_UCX
#include "ucx_transport.hpp"
#endif

namespace crown::detail {
namespace {

constexpr std::uint64_t dead_bit = std::uint64_t{1} << 31;
constexpr std::uint64_t count_mask = dead_bit - 1;
constexpr std::size_t words_per_block = 512;
/// Requests the owner serves move at most this much each (it blocks while one moves).
constexpr std::size_t request_bytes = std::size_t{4} << 20;

struct entry {
  std::byte* data = nullptr;
  std::size_t bytes = 0;
  std::uint32_t generation = 0;
  std::uint64_t word = 0;
  std::uint64_t epoch = 0;
#if CROWN_HAVE_UCX
  ucx_transport* ucx = nullptr;
  ucp_mem_h memory = nullptr;
#endif
};

/// This process's registrations. Never held across a call that may progress: the
/// serving side of a request takes it too.
struct registry {
  std::mutex mutex;
  std::unordered_map<std::uint64_t, entry> live;
  std::vector<std::uint64_t> free_words; ///< liveness words to reuse (this runtime's heap)
  std::uint64_t next_id = 1;             ///< never reused in the process
  std::uint64_t epoch = 1;               ///< one per runtime: older handles are inert
  std::vector<char> no_kernel_copy;      ///< per world rank: process_vm refused once
};

/// Some remote_buffer was registered in this runtime: requests for it, or for one
/// since freed (they are refused), may come and need serving.
std::atomic<bool> g_registered{false};

registry& the_registry() {
  static registry r;
  return r;
}

std::string name_of(const buffer_descriptor& d) {
  std::string s = "remote_buffer ";
  s += d.label.empty() ? "#" + std::to_string(d.id) : "'" + d.label + "'";
  s += " of rank " + std::to_string(d.rank) + " (" + std::to_string(d.bytes) + " bytes)";
  return s;
}

[[noreturn]] void throw_freed(const buffer_descriptor& d) {
  throw state_error(name_of(d), "its owner freed it (the remote_buffer's last owning handle "
                                "went, or drop() was called)");
}

std::uint64_t word_op(int rank, std::uint64_t word, atomic_op op, std::uint64_t operand,
                      std::uint64_t compare = 0) {
  return remote_atomic(rank, word, op, 8, false, operand, compare, world_shares_memory());
}

/// Holds one access in progress on the owner's liveness word; throws when the buffer
/// is gone.
class access_guard {
public:
  explicit access_guard(const buffer_descriptor& d) : d_(d) {
    std::uint64_t seen = word_op(d.rank, d.word, atomic_op::load, 0);
    for (;;) {
      if ((seen >> 32) != d.generation || (seen & dead_bit) != 0) throw_freed(d);
      const std::uint64_t was = word_op(d.rank, d.word, atomic_op::compare_swap, seen + 1, seen);
      if (was == seen) return;
      seen = was; // another access came or went, or the owner dropped it: look again
    }
  }
  ~access_guard() {
    try {
      release();
    } catch (const std::exception& e) {
      log(log_level::error, name_of(d_), ": ending an access failed: ", e.what());
    }
  }
  access_guard(const access_guard&) = delete;
  access_guard& operator=(const access_guard&) = delete;

private:
  void release() { (void)word_op(d_.rank, d_.word, atomic_op::add, ~std::uint64_t{0}); } // -1
  const buffer_descriptor& d_;
};

/// A liveness word of the next generation, not dead, no access in progress (the last
/// drop waited for them).
std::pair<std::uint64_t, std::uint32_t> take_word(int me) {
  registry& reg = the_registry();
  std::optional<std::uint64_t> reused;
  {
    const std::lock_guard lock(reg.mutex);
    if (!reg.free_words.empty()) {
      reused = reg.free_words.back();
      reg.free_words.pop_back();
    }
  }
  std::uint64_t word = reused.value_or(0);
  if (!reused) {
    const std::uint64_t block = heap_allocate_local(words_per_block * sizeof(std::uint64_t),
                                                    "remote_buffer liveness words");
    std::memset(heap_address(block), 0, words_per_block * sizeof(std::uint64_t));
    heap_sync_local();
    const std::lock_guard lock(reg.mutex);
    for (std::size_t i = words_per_block; i-- > 1;)
      reg.free_words.push_back(block + i * sizeof(std::uint64_t));
    word = block;
  }
  // Stale handles only compare-and-swap from their own generation: nothing else writes.
  const auto generation =
      static_cast<std::uint32_t>((word_op(me, word, atomic_op::load, 0) >> 32) + 1);
  (void)word_op(me, word, atomic_op::store, std::uint64_t{generation} << 32);
  return {word, generation};
}

void check_pieces(const buffer_descriptor& d, std::span<const buffer_piece> pieces) {
  for (const buffer_piece& p : pieces) {
    const char* op = p.write ? "write_from" : "read_into";
    if (p.offset > d.bytes || p.bytes > d.bytes - p.offset)
      throw argument_error(name_of(d) + ": " + op,
                           "bytes [" + std::to_string(p.offset) + ", " +
                               std::to_string(saturating_add(p.offset, p.bytes)) +
                               ") fall outside the buffer");
    if (p.bytes) check_host_buffer(p.local, p.bytes, op);
  }
}

/// Runs `pieces` as operations in flight together, waiting for those in flight before
/// the direction changes (so a read after a write sees it on every path).
template <typename Start>
void run_in_flight(std::span<const buffer_piece> pieces, Start&& start) {
  std::vector<async_handle> flying;
  bool writing = false;
  for (const buffer_piece& p : pieces) {
    if (!flying.empty() && p.write != writing) wait_remote(flying);
    writing = p.write;
    for (std::size_t at = 0; at < p.bytes; at += request_bytes) {
      const run r{p.offset + at, std::min(request_bytes, p.bytes - at)};
      if (async_handle op = start(p.write, r, p.local + at)) flying.push_back(std::move(op));
    }
  }
  wait_remote(flying);
}

/// The owner itself: a copy under the registry's lock.
void transfer_here(const buffer_descriptor& d, std::span<const buffer_piece> pieces) {
  registry& reg = the_registry();
  const std::lock_guard lock(reg.mutex);
  const auto it = reg.live.find(d.id);
  if (it == reg.live.end() || it->second.epoch != reg.epoch) throw_freed(d);
  for (const buffer_piece& p : pieces) {
    std::byte* at = it->second.data + p.offset;
    if (p.write)
      std::memmove(at, p.local, p.bytes);
    else
      std::memmove(p.local, at, p.bytes);
  }
}

/// One kernel copy per piece; false when the ptrace rules refuse before anything moved.
bool transfer_kernel(const buffer_descriptor& d, std::span<const buffer_piece> pieces) {
  const access_guard held(d);
  for (const buffer_piece& p : pieces) {
    iovec here{p.local, p.bytes};
    iovec there{reinterpret_cast<void*>(d.address + p.offset), p.bytes};
    if (p.bytes == 0) continue;
    const ssize_t moved = p.write ? process_vm_writev(d.pid, &here, 1, &there, 1, 0)
                                  : process_vm_readv(d.pid, &here, 1, &there, 1, 0);
    if (moved == static_cast<ssize_t>(p.bytes)) continue;
    if (moved < 0 && (errno == EPERM || errno == ESRCH || errno == ENOSYS) && &p == pieces.data())
      return false;
    throw error(name_of(d), std::string(p.write ? "process_vm_writev" : "process_vm_readv") +
                                " moved " + std::to_string(moved) + " of " +
                                std::to_string(p.bytes) + " bytes: " + std::strerror(errno));
  }
  return true;
}

bool kernel_copy_possible(const buffer_descriptor& d) {
  if (!single_copy_enabled() || d.pid == 0 || !heap_peer_address(d.rank, 0)) return false;
  registry& reg = the_registry();
  const std::lock_guard lock(reg.mutex);
  const auto r = static_cast<std::size_t>(d.rank);
  return r >= reg.no_kernel_copy.size() || !reg.no_kernel_copy[r];
}

void refuse_kernel_copy(const buffer_descriptor& d) {
  registry& reg = the_registry();
  const std::lock_guard lock(reg.mutex);
  const auto r = static_cast<std::size_t>(d.rank);
  if (reg.no_kernel_copy.size() <= r) reg.no_kernel_copy.resize(r + 1, 0);
  reg.no_kernel_copy[r] = 1;
  log(log_level::info, "remote_buffer: the ptrace rules refuse kernel copies from rank ", d.rank,
      "'s process; requests it serves instead");
}

#if CROWN_HAVE_UCX
ucx_transport* ucx_of(symmetric_heap* h) {
  return h ? dynamic_cast<ucx_transport*>(h->transport()) : nullptr;
}
#endif

/// Runs `f`, naming the buffer in what its owner refused.
template <typename F>
auto naming_refusals(const buffer_descriptor& d, F&& f) {
  try {
    return f();
  } catch (const state_error&) {
    throw_freed(d);
  } catch (const argument_error& e) {
    throw argument_error(name_of(d), e.what());
  }
}

/// Requests the owner serves, the data travelling with them.
void transfer_requests(const buffer_descriptor& d, std::span<const buffer_piece> pieces,
                       active_messages& am) {
  naming_refusals(d, [&] {
    run_in_flight(pieces, [&](bool write, const run& r, std::byte* local) {
      return am.start_buffer(write, d.rank, d.id, d.generation, {&r, 1}, local);
    });
  });
}

/// One piece through this rank's staging slots, which the owner (on this host) copies
/// into or out of; false when the slots are not to be had (host_staging.hpp). Where
/// kernel copies reach the owner, they take over from an owner that does not serve (and
/// where the ptrace rules then refuse them after all, requests carry those chunks).
bool transfer_staged(const buffer_descriptor& d, const buffer_piece& p, active_messages& am,
                     bool kernel_copies) {
  const auto by_kernel = [&](bool write, const run& at, std::byte* local) {
    const buffer_piece piece{write, at.offset, local, at.bytes};
    if (transfer_kernel(d, {&piece, 1})) return;
    refuse_kernel_copy(d); // never tried before: the slots had carried everything
    transfer_requests(d, {&piece, 1}, am);
  };
  return naming_refusals(d, [&] {
    return transfer_through_host_slots(
        host_staging_buffer{d.rank, d.id, d.generation}, p.write, run{p.offset, p.bytes}, p.local,
        [&](bool put, const run& at, std::uint64_t heap_offset, std::uint32_t ticket) {
          return am.start_buffer_staged(put, d.rank, d.id, d.generation, {&at, 1}, heap_offset,
                                        ticket);
        },
        kernel_copies ? host_staging_fallback(by_kernel) : host_staging_fallback(),
        p.write ? "remote_buffer write_from" : "remote_buffer read_into");
  });
}

} // namespace

bool buffers_registered() noexcept { return g_registered.load(std::memory_order_relaxed); }

am_status serve_buffer_request(std::uint64_t id, std::uint32_t generation,
                               std::span<const run> runs,
                               const std::function<void(std::byte* base)>& access) {
  registry& reg = the_registry();
  const std::lock_guard lock(reg.mutex);
  const auto it = reg.live.find(id);
  if (it == reg.live.end() || it->second.epoch != reg.epoch || it->second.generation != generation)
    return am_status::buffer_freed;
  const entry& e = it->second;
  for (const run& r : runs)
    if (r.offset > e.bytes || r.bytes > e.bytes - r.offset) return am_status::outside_buffer;
  access(e.data);
  return am_status::ok;
}

buffer_descriptor buffer_register(void* data, std::size_t bytes, std::size_t elem,
                                  std::string label) {
  symmetric_heap& h = active_heap("remote_buffer");
  if (bytes && !data)
    throw argument_error("remote_buffer '" + label + "'",
                         "a null span of " + std::to_string(bytes) + " bytes");
  if (bytes)
    refuse_device_buffer(data, bytes,
                         "remote_buffer (device memory is not supported "
                         "yet)");
  const int me = this_runtime().rank();
  buffer_descriptor d;
  d.rank = me;
  d.pid = static_cast<int>(getpid());
  d.address = reinterpret_cast<std::uint64_t>(data);
  d.bytes = bytes;
  d.elem = static_cast<std::uint32_t>(elem);
  d.label = std::move(label);
  entry e{static_cast<std::byte*>(data), bytes};
#if CROWN_HAVE_UCX
  if (ucx_transport* ucx = ucx_of(&h); ucx && bytes) {
    auto reg = ucx->register_memory(data, bytes);
    e.ucx = ucx;
    e.memory = reg.memory;
    d.rkey = std::move(reg.rkey);
  }
#else
  (void)h;
#endif
  try {
    std::tie(d.word, d.generation) = take_word(me);
  } catch (...) {
#if CROWN_HAVE_UCX
    if (e.memory) e.ucx->unregister_memory(e.memory);
#endif
    throw;
  }
  if (single_copy_enabled()) grant_process_access(); // this host's processes copy in and out
  e.generation = d.generation;
  e.word = d.word;
  registry& reg = the_registry();
  const std::lock_guard lock(reg.mutex);
  e.epoch = reg.epoch;
  d.id = reg.next_id++;
  reg.live.emplace(d.id, e);
  g_registered = true;
  return d;
}

void buffer_unregister(const buffer_descriptor& d) noexcept {
  registry& reg = the_registry();
  entry e;
  {
    const std::lock_guard lock(reg.mutex);
    const auto it = reg.live.find(d.id);
    if (it == reg.live.end()) return;
    e = it->second;
    reg.live.erase(it);
    if (e.epoch != reg.epoch) return; // its runtime has ended, and the heap with it
  }
  try {
    (void)word_op(d.rank, e.word, atomic_op::bit_or, dead_bit);
    backoff pause(wait_site{"remote_buffer drop: waiting for accesses in progress"});
    while ((word_op(d.rank, e.word, atomic_op::load, 0) & count_mask) != 0) pause.pause();
  } catch (const std::exception& ex) {
    log(log_level::error, name_of(d), ": drop failed: ", ex.what());
    return; // the word is not reused
  }
#if CROWN_HAVE_UCX
  if (e.memory) e.ucx->unregister_memory(e.memory);
#endif
  const std::lock_guard lock(reg.mutex);
  if (e.epoch == reg.epoch) reg.free_words.push_back(e.word);
}

namespace {

/// How this rank reaches a buffer; the names are what buffer_path() reports. Kernel
/// copies hand large pieces to the staged path where the probe found it faster.
enum class route { local, kernel_copy, staged, ucx, requests };
constexpr const char* route_names[] = {"local", "process_vm", "staged", "ucx", "am"};

route route_to(const buffer_descriptor& d, symmetric_heap& h) {
  if (d.rank < 0) throw state_error("remote_buffer", "an empty handle reaches no memory");
  if (d.rank >= h.world_size())
    throw argument_error(name_of(d), "rank " + std::to_string(d.rank) +
                                         " is not in this job's world of " +
                                         std::to_string(h.world_size()));
  if (d.rank == this_runtime().rank()) return route::local;
  if (kernel_copy_possible(d)) return route::kernel_copy;
#if CROWN_HAVE_UCX
  if (!d.rkey.empty() && ucx_of(&h)) return route::ucx; // needs nothing from the owner
#endif
  if (h.messages() && heap_peer_address(d.rank, 0)) return route::staged;
  if (h.messages()) return route::requests;
  throw state_error(name_of(d),
                    "no way to reach its owner from rank " + std::to_string(this_runtime().rank()));
}

} // namespace

const char* buffer_path(const buffer_descriptor& d) {
  return route_names[static_cast<int>(route_to(d, active_heap("remote_buffer")))];
}

void buffer_transfer(const buffer_descriptor& d, std::span<const buffer_piece> pieces) {
  symmetric_heap& h = active_heap("remote_buffer");
  const route r = route_to(d, h);
  check_pieces(d, pieces);
  switch (r) {
  case route::local:
    return transfer_here(d, pieces);
  case route::kernel_copy: {
    const std::size_t staged_from = host_staging_from();
    const auto staged = [&](const buffer_piece& p) { return p.bytes && p.bytes >= staged_from; };
    for (std::size_t i = 0; i < pieces.size();) { // in order: each path completes its pieces
      if (staged(pieces[i]) && transfer_staged(d, pieces[i], *h.messages(), true)) {
        ++i;
        continue;
      }
      std::size_t end = i + 1; // kernel copies up to the next piece to stage
      while (end < pieces.size() && !staged(pieces[end])) ++end;
      if (!transfer_kernel(d, pieces.subspan(i, end - i))) {
        refuse_kernel_copy(d);
        return buffer_transfer(d, pieces.subspan(i));
      }
      i = end;
    }
    return;
  }
  case route::staged:
    for (const buffer_piece& p : pieces)
      if (p.bytes && !transfer_staged(d, p, *h.messages(), false))
        transfer_requests(d, {&p, 1}, *h.messages());
    return;
#if CROWN_HAVE_UCX
  case route::ucx: {
    ucx_transport& ucx = *ucx_of(&h);
    const access_guard held(d);
    return run_in_flight(pieces, [&](bool write, const run& piece, std::byte* local) {
      return ucx.start_registered(write, d.rank, d.address, d.rkey, {&piece, 1}, local);
    });
  }
#endif
  default: // route::requests (route::ucx needs a UCX build)
    return transfer_requests(d, pieces, *h.messages());
  }
}

namespace {
/// At the runtime's end: registrations still alive become inert (their heap words and
/// UCX go with the runtime) before the transport stops.
const bool registered = register_layer_stage({
    .order = 260,
    .name = "remote buffers",
    .agreed = false,
    .start = [](runtime_state&) {},
    .stop =
        [](runtime_state&) noexcept {
          registry& reg = the_registry();
          const std::lock_guard lock(reg.mutex);
#if CROWN_HAVE_UCX
          for (auto& [id, e] : reg.live)
            if (e.memory && e.epoch == reg.epoch) e.ucx->unregister_memory(e.memory);
#endif
          ++reg.epoch;
          g_registered = false;
          reg.free_words.clear();
          reg.no_kernel_copy.clear();
          forget_host_staging();
        },
});
} // namespace

} // namespace crown::detail
