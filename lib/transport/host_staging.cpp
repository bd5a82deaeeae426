// Same-host staging for remote_buffer: this rank's slots in its own heap, the tickets
// that let it cancel a request its owner has not taken, and the probe that decides
// from which size the slots beat a kernel copy.
#include "host_staging.hpp"
#include "active_messages.hpp"
#include "buffer_registry.hpp"
#include "heap_state.hpp"
#include "host_collectives.hpp"
#include "shm_backend.hpp"
#include "test_hooks.hpp"
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <crown/detail/copy.hpp>
#include <crown/detail/heap.hpp>
#include <crown/detail/wait.hpp>
#include <crown/error.hpp>
#include <crown/log.hpp>
#include <crown/runtime.hpp>
#include <cstring>
#include <mutex>
#include <unistd.h>
#include <unordered_map>
#include <vector>

namespace crown::detail {
namespace {

using clock = std::chrono::steady_clock;

constexpr std::size_t slot_count = 4;
constexpr std::size_t slot_bytes = std::size_t{256} << 10;
/// Each slot follows a cache line: its request (words line_*), the ticket word last.
constexpr std::size_t slot_stride = slot_bytes + 64;
enum line_word : std::size_t {
  line_id,             ///< the remote_buffer's id
  line_offset,         ///< the chunk's offset in the buffer
  line_bytes,          ///< and its size
  line_generation_put, ///< the buffer's generation; bit 32: a put
  line_owner,          ///< the world rank asked to serve it
  line_slots,          ///< heap offset of the first slot's line: where the slots lie
  line_ticket = 7,
};
/// After the slots: one bit per world rank, set by owners that watch them.
std::size_t watched_words(int ranks) { return (static_cast<std::size_t>(ranks) + 63) / 64; }
std::size_t slots_bytes(int ranks) { return slot_count * slot_stride + 8 * watched_words(ranks); }
constexpr std::uint64_t no_slots = ~std::uint64_t{0};
/// The ticket word: the ticket in the low 32 bits; posted (in the line, no message),
/// taken (the owner is copying), done (a posted one: the status in bits 32-39), or
/// cancelled alone (by the reader, before the owner took it).
constexpr std::uint64_t taken = std::uint64_t{1} << 63, cancelled = std::uint64_t{1} << 62,
                        posted = std::uint64_t{1} << 61, done = std::uint64_t{1} << 60;
/// How long a chunk may wait for its owner to take it, and how long an owner that let
/// one wait is then left to kernel copies. A serving owner takes chunks within
/// microseconds, but one descheduled (2 vCPUs, 2 ranks and mpirun) took up to 5 ms;
/// an owner away in its own work costs its readers at most 1% this way.
constexpr auto owner_deadline = std::chrono::milliseconds(10);
constexpr auto shy_for = std::chrono::seconds(1);

/// This process's slots, allocated at the first staged transfer of a runtime; one
/// transfer uses them at a time.
struct slots {
  slots() = default;
  slots(const slots&) = delete;
  slots& operator=(const slots&) = delete;
  ~slots() { // at exit without a runtime's end: MPI is gone, so leave them be
    for (async_handle& h : cancelled) (void)h.release();
  }
  std::mutex mutex; ///< held for a whole transfer
  std::uint64_t offset = no_slots;
  bool no_room = false; ///< the heap could not hold them: not asked again this runtime
  std::uint32_t next_ticket = 0;
  std::uint64_t posted = 0;                             ///< chunks posted without MPI (for tests)
  std::vector<async_handle> cancelled;                  ///< waiting for their refusals
  std::unordered_map<int, clock::time_point> shy_until; ///< per owner rank
};

slots& the_slots() {
  static slots s;
  return s;
}
/// Where the slots are, for host_staging_offset (read without their lock).
std::atomic<std::uint64_t> g_slots_offset{no_slots};

/// Word `w` of the line before the slot whose data lies at `data` (another process
/// writes it too: atomic, relaxed but for the ticket's hand-overs).
std::atomic_ref<std::uint64_t> line(std::byte* data, line_word w) noexcept {
  return std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(data - 64 + 8 * w));
}
std::atomic_ref<std::uint64_t> ticket_word(std::byte* data) noexcept {
  return line(data, line_ticket);
}
/// Writes a request into the line before the slot at `data` (its ticket word apart).
void write_line(std::byte* data, std::uint64_t id, const run& at, std::uint64_t generation_put,
                int owner) noexcept {
  line(data, line_id).store(id, std::memory_order_relaxed);
  line(data, line_offset).store(at.offset, std::memory_order_relaxed);
  line(data, line_bytes).store(at.bytes, std::memory_order_relaxed);
  line(data, line_generation_put).store(generation_put, std::memory_order_relaxed);
  line(data, line_owner).store(static_cast<std::uint64_t>(owner), std::memory_order_relaxed);
}
/// Word `w` of the bitmap after the slots that start at `slots` (their first line).
std::atomic_ref<std::uint64_t> watched_word(std::byte* slots, std::size_t w) noexcept {
  return std::atomic_ref<std::uint64_t>(
      reinterpret_cast<std::uint64_t*>(slots + slot_count * slot_stride)[w]);
}

/// Chunks of a quarter of the transfer, up to a slot: no smaller than 16 KiB where the
/// requests are posted (a round trip of well under 1 µs), 64 KiB where each is an
/// active message (about 5 µs here), so that their overlap pays for them.
std::size_t chunk_for(std::size_t bytes, bool posting) {
  const std::size_t quarter = (bytes / slot_count + 4095) / 4096 * 4096;
  return std::clamp(quarter, (posting ? std::size_t{16} : std::size_t{64}) << 10, slot_bytes);
}

/// The posted request's status, once its owner served it.
class posted_op final : public async_op {
public:
  posted_op(int owner, std::byte* data, const char* what) noexcept
      : async_op(owner), data_(data), what_(what) {}
  bool test_local() override { return test_remote(); }
  bool test_remote() override {
    if (finished_) return true;
    const std::uint64_t w = ticket_word(data_).load(std::memory_order_acquire);
    if (w == cancelled) return finished_ = true; // by this rank: the owner never takes it
    if (!(w & done)) return false;
    finished_ = true;
    const auto status = static_cast<am_status>((w >> 32) & 0xff);
    if (status == am_status::ok) return true;
    const std::string where = std::string(what_) + " (rank " + std::to_string(target()) + ")";
    if (status == am_status::refused) // a malformed line, or a copy that failed there
      throw argument_error(where, "the owner refused the staged request (its log says why)");
    throw_am_refusal(where, status, 0);
  }

private:
  std::byte* data_;
  const char* what_;
  bool finished_ = false;
};

bool allocate(slots& s) {
  if (s.offset != no_slots) return true;
  try {
    const std::size_t bytes = slots_bytes(this_runtime().size());
    s.offset = heap_allocate_local(bytes, "remote_buffer staging");
    std::byte* const at = heap_address(s.offset);
    for (std::size_t k = 0; k < slot_count; ++k) { // no owner watches them yet
      std::memset(at + k * slot_stride, 0, 64);
      line(at + k * slot_stride + 64, line_slots).store(s.offset, std::memory_order_relaxed);
    }
    std::memset(at + slot_count * slot_stride, 0, bytes - slot_count * slot_stride);
    g_slots_offset.store(s.offset, std::memory_order_relaxed);
    return true;
  } catch (const resource_error& e) {
    s.no_room = true;
    log(log_level::info, "remote_buffer: no heap room for staging slots (", e.what(),
        "); kernel copies or requests instead");
    return false;
  }
}

/// True when a posted request completed within a few microseconds of polling it and
/// serving this rank's own watched slots (another reader may wait on us), without the
/// rest of this rank's progress (an MPI probe, about 1 µs a poll, would delay each chunk
/// by as much). Not where waits do not spin (CROWN_WAIT_SPINS=0: more ranks than cores).
bool answered_soon(async_op& op) {
  active_messages* const am = active_heap() ? active_heap()->messages() : nullptr;
  const int polls = std::min(wait_spins(), 256);
  for (int poll = 0; poll < polls; ++poll) {
    if (op.test_remote()) return true;
    if (!am || !am->serve_posted()) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
  }
  return false;
}

/// Whether `owner` watches this rank's slots (set there by the owner): requests to it
/// are posted, not sent.
bool watches(const slots& s, int owner) {
  return (watched_word(heap_address(s.offset), static_cast<std::size_t>(owner) / 64)
              .load(std::memory_order_acquire) >>
          (owner % 64)) &
         1;
}

/// Waits for `op` (`posted_request`: posted, not sent) as wait_remote does; false once
/// `owner_deadline` passed without the owner taking its ticket (once taken, the owner is copying:
/// that is waited for).
bool wait_at_most(async_op& op, bool posted_request, std::byte* slot, const char* what) {
  if (posted_request && answered_soon(op)) return true;
  backoff pause(wait_site{what, op.target(), nullptr, true});
  const auto until = clock::now() + owner_deadline;
  for (unsigned polls = 1; !op.test_remote(); ++polls) {
    if (polls % 16 == 0 && clock::now() > until &&
        !(ticket_word(slot).load(std::memory_order_acquire) & taken))
      return false;
    pause.pause();
  }
  return true;
}

constexpr std::size_t never = ~std::size_t{0};
std::atomic<std::size_t> g_forced_from{never}; ///< the tests' switch; never: probe

/// Times one process_vm_readv of this process's own memory against copy_bytes at a few
/// sizes (best of 3 after a warm-up each) and returns the smallest size at which the
/// kernel copy took more than 1.25 copies plus 8 µs: about what a staged transfer
/// costs, its two copies overlapping on two cores, plus the first and last chunks'
/// hand-overs (2-core Zen 5 VM, 2026-12-05, posted requests: 4 MiB staged in 155 µs, by
/// the kernel in 183; 1 MiB 45-48 against 50-56; 256 KiB 13.8 against 13.3; 64 KiB 6.0
/// against 6.4: the reader's copy out of a slot just written on the other core runs at
/// a quarter of a cached copy's speed, so small chunks gain nothing).
std::size_t probe_staging_from() {
  for (const std::size_t bytes : {std::size_t{64} << 10, std::size_t{256} << 10,
                                  std::size_t{1} << 20, std::size_t{4} << 20}) {
    std::vector<std::byte> from(bytes, std::byte{1}), to(bytes);
    const auto t = time_kernel_copy(getpid(), reinterpret_cast<std::uint64_t>(from.data()),
                                    from.data(), to.data(), bytes);
    if (!t) return bytes; // a kernel copy that fails here will not do better elsewhere
    const double kernel_us = std::chrono::duration<double, std::micro>(t->kernel).count(),
                 copy_us = std::chrono::duration<double, std::micro>(t->copy).count();
    log(log_level::debug, "remote_buffer: ", bytes, " bytes took ", kernel_us,
        " us by process_vm_readv, ", copy_us, " us by memcpy");
    if (kernel_us > 1.25 * copy_us + 8) return bytes;
  }
  return never;
}

} // namespace

am_status serve_staged_request(bool put, std::uint64_t id, std::uint32_t generation,
                               std::span<const run> runs, std::byte* data, std::uint32_t ticket) {
  bool taken_here = false;
  const am_status status = serve_buffer_request(id, generation, runs, [&](std::byte* base) {
    std::uint64_t expected = ticket;
    taken_here = ticket_word(data).compare_exchange_strong(expected, ticket | taken,
                                                           std::memory_order_acq_rel);
    if (taken_here) shm_backend::transfer(put, base, runs, data);
  });
  return status == am_status::ok && !taken_here ? am_status::cancelled : status;
}

void posted_slots::watch(int source, std::uint64_t data_offset, std::size_t heap_size, int me,
                         int ranks) noexcept {
  for (const reader& r : readers_)
    if (r.rank == source) return;
  // The line is the reader's to write: trust it only where it agrees with the request,
  // and read it only where the request's own checks put it inside the reader's heap.
  if (data_offset < 64) return;
  const std::uint64_t first =
      line(heap_peer_address(source, data_offset), line_slots).load(std::memory_order_relaxed);
  if (first > heap_size || slots_bytes(ranks) > heap_size - first || data_offset < first + 64 ||
      (data_offset - first - 64) % slot_stride != 0 ||
      (data_offset - first - 64) / slot_stride >= slot_count)
    return;
  std::byte* const slots = heap_peer_address(source, first);
  try {
    readers_.push_back({source, slots});
  } catch (const std::bad_alloc&) { // then its requests keep coming as messages
    return;
  }
  watched_word(slots, static_cast<std::size_t>(me) / 64)
      .fetch_or(std::uint64_t{1} << (me % 64), std::memory_order_release);
}

bool posted_slots::serve(int me) noexcept {
  bool moved = false;
  for (const reader& r : readers_)
    for (std::size_t k = 0; k < slot_count; ++k) {
      std::byte* const data = r.slots + k * slot_stride + 64;
      std::uint64_t w = ticket_word(data).load(std::memory_order_acquire);
      if ((w & (posted | taken | cancelled | done)) != posted ||
          line(data, line_owner).load(std::memory_order_relaxed) != static_cast<std::uint64_t>(me))
        continue;
      const std::uint64_t id = line(data, line_id).load(std::memory_order_relaxed),
                          generation_put =
                              line(data, line_generation_put).load(std::memory_order_relaxed);
      const run at{line(data, line_offset).load(std::memory_order_relaxed),
                   line(data, line_bytes).load(std::memory_order_relaxed)};
      // Taken, the line is ours until done: the reader neither cancels nor rewrites it.
      if (!ticket_word(data).compare_exchange_strong(w, w | taken, std::memory_order_acq_rel))
        continue;
      requests_served().fetch_add(1, std::memory_order_relaxed);
      auto status = am_status::refused;
      if (at.bytes <= slot_bytes && (generation_put >> 33) == 0) {
        try {
          status = serve_buffer_request(
              id, static_cast<std::uint32_t>(generation_put), {&at, 1}, [&](std::byte* base) {
                shm_backend::transfer((generation_put >> 32) != 0, base, {&at, 1}, data);
              });
        } catch (const std::exception& e) {
          log(log_level::error, "a staged request posted by rank ", r.rank, " failed: ", e.what());
        }
      } else {
        log(log_level::error, "refused a malformed staged request posted by rank ", r.rank, " (",
            at.bytes, " bytes, flags ", generation_put >> 32, ")");
      }
      ticket_word(data).store(w | taken | done |
                                  std::uint64_t{static_cast<std::uint8_t>(status)} << 32,
                              std::memory_order_release);
      moved = true;
    }
  return moved;
}

bool transfer_through_host_slots(const host_staging_buffer& to, bool put, const run& r,
                                 std::byte* local, const host_staging_request& request,
                                 const host_staging_fallback& fallback, const char* what) {
  const int owner = to.owner;
  slots& s = the_slots();
  const std::unique_lock lock(s.mutex, std::try_to_lock);
  if (!lock || s.no_room) return false;
  if (const auto shy = s.shy_until.find(owner); shy != s.shy_until.end()) {
    if (clock::now() < shy->second) return false;
    s.shy_until.erase(shy);
  }
  if (!allocate(s)) return false;
  std::erase_if(s.cancelled, [](async_handle& h) {
    try {
      return h->test_remote();
    } catch (const std::exception&) { // the refusal it waited for
      return true;
    }
  });
  std::byte* const base = heap_address(0);
  const bool posting = watches(s, owner);
  const std::size_t chunk = chunk_for(r.bytes, posting), n = (r.bytes + chunk - 1) / chunk;
  const auto slot = [&](std::size_t k) {
    return base + s.offset + (k % slot_count) * slot_stride + 64;
  };
  const auto at = [&](std::size_t k) {
    return run{r.offset + k * chunk, std::min(chunk, r.bytes - k * chunk)};
  };
  struct in_flight {
    async_handle op;
    std::size_t chunk = 0;
    std::uint64_t word = 0; ///< the ticket word as the request left it
  };
  std::array<in_flight, slot_count> flying;
  bool given_up = !fallback; // waits without a deadline where nothing else reaches the owner
  const auto send = [&](std::size_t k) {
    std::byte* const data = slot(k);
    if (put) copy_bytes(data, local + k * chunk, at(k).bytes);
    const std::uint32_t ticket = ++s.next_ticket;
    write_line(data, to.id, at(k), to.generation | std::uint64_t{put} << 32, owner);
    if (posting) { // the handle first: a request published is always waited for
      async_handle op(new posted_op(owner, data, what));
      ++s.posted;
      ticket_word(data).store(ticket | posted, std::memory_order_release);
      flying[k % slot_count] = {std::move(op), k, ticket | posted};
    } else {
      ticket_word(data).store(ticket, std::memory_order_release);
      flying[k % slot_count] = {request(put, at(k), data - base, ticket), k, ticket};
    }
  };
  // Ends the handle of a request that completed or was cancelled: a posted one without
  // the wait (and its progress pass) that releasing a handle does.
  const auto drop = [&](in_flight& f) {
    if (f.word & posted)
      delete f.op.release();
    else
      f.op = {};
  };
  // Cancels the request in slot k unless the owner took it; true when cancelled. An
  // active message is kept until its refusal arrives; a posted one needs nothing more.
  const auto cancel = [&](in_flight& f) {
    std::uint64_t expected = f.word;
    if (!ticket_word(slot(f.chunk))
             .compare_exchange_strong(expected, cancelled, std::memory_order_acq_rel))
      return false;
    if (f.word & posted)
      drop(f);
    else
      s.cancelled.push_back(std::move(f.op)); // until its refusal arrives
    return true;
  };
  // Completes the request in flight in slot k; an owner that does not take it in time
  // has it cancelled, and it and every later chunk go by the fallback.
  const auto settle = [&](std::size_t k) {
    in_flight& f = flying[k % slot_count];
    const bool in_time =
        !fallback || given_up || wait_at_most(*f.op, (f.word & posted) != 0, slot(k), what);
    if (!in_time) {
      given_up = true;
      s.shy_until[owner] = clock::now() + shy_for;
      log(log_level::debug, "remote_buffer: rank ", owner,
          " did not serve a staged chunk in time; kernel copies take the rest");
    }
    if (fallback && given_up && cancel(f)) {
      fallback(put, at(k), local + k * chunk);
    } else { // taken: the owner is copying it now
      if (!(f.word & posted) || !answered_soon(*f.op)) wait_remote(*f.op, what);
      if (!put) copy_bytes(local + k * chunk, slot(k), at(k).bytes);
      drop(f);
    }
  };
  const auto start = [&](std::size_t k) {
    if (fallback && given_up)
      fallback(put, at(k), local + k * chunk);
    else
      send(k);
  };
  // A transfer that fails (a refusal, a fallback's error) cancels what the owner has not
  // taken (destroying those handles would wait for the owner to answer) and waits for
  // what it has, which writes into the slots the next transfer fills.
  const auto end_after_failure = [&] {
    for (in_flight& f : flying)
      if (f.op && !cancel(f)) try {
          wait_remote(*f.op, what);
        } catch (const std::exception&) { // the first failure is the one reported
        }
  };
  try {
    if (put) {
      for (std::size_t k = 0; k < n; ++k) {
        if (k >= slot_count && flying[k % slot_count].op) settle(k - slot_count); // free the slot
        start(k);
      }
      for (in_flight& f : flying)
        if (f.op) settle(f.chunk);
    } else {
      for (std::size_t k = 0; k < std::min(n, slot_count); ++k) start(k);
      for (std::size_t k = 0; k < n; ++k) {
        if (flying[k % slot_count].op) settle(k);
        if (k + slot_count < n) start(k + slot_count);
      }
    }
  } catch (...) {
    end_after_failure();
    throw;
  }
  return true;
}

std::size_t host_staging_from() noexcept {
  if (const std::size_t forced = g_forced_from.load(); forced != never) return forced;
  static const std::size_t probed = [] {
    try {
      return probe_staging_from();
    } catch (...) {
      return never;
    }
  }();
  return probed;
}

void set_host_staging_from(std::optional<std::size_t> bytes) noexcept {
  g_forced_from = bytes ? std::min(*bytes, never - 1) : never;
  slots& s = the_slots();
  const std::lock_guard lock(s.mutex);
  s.shy_until.clear();
}

std::uint64_t host_staging_posted() noexcept {
  slots& s = the_slots();
  const std::lock_guard lock(s.mutex);
  return s.posted;
}

void forget_slot_watchers() noexcept {
  slots& s = the_slots();
  const std::lock_guard lock(s.mutex);
  if (s.offset == no_slots) return;
  for (std::size_t w = 0; w < watched_words(this_runtime().size()); ++w)
    watched_word(heap_address(s.offset), w).store(0, std::memory_order_relaxed);
}

std::optional<int> post_raw_staged_line(int owner, const raw_staged_line& raw) {
  slots& s = the_slots();
  const std::lock_guard lock(s.mutex);
  if (s.offset == no_slots || owner < 0 || owner >= this_runtime().size() || !watches(s, owner))
    return std::nullopt;
  std::byte* const data = heap_address(s.offset) + 64;
  write_line(data, raw.id, run{raw.offset, raw.bytes}, raw.generation_put, owner);
  ticket_word(data).store(++s.next_ticket | posted, std::memory_order_release);
  wait_until(wait_site{"post_raw_staged_line", owner, nullptr, true},
             [&] { return (ticket_word(data).load(std::memory_order_acquire) & done) != 0; });
  return static_cast<int>((ticket_word(data).load() >> 32) & 0xff);
}

void forget_host_staging() noexcept {
  slots& s = the_slots();
  const std::lock_guard lock(s.mutex);
  for (async_handle& h : s.cancelled) delete h.release(); // ends its receive, waits for nothing
  s.cancelled.clear();
  s.shy_until.clear();
  s.offset = no_slots;
  s.no_room = false;
  g_slots_offset.store(no_slots, std::memory_order_relaxed);
}

std::optional<std::uint64_t> host_staging_offset() noexcept {
  const std::uint64_t at = g_slots_offset.load(std::memory_order_relaxed);
  return at == no_slots ? std::nullopt : std::optional(at);
}

} // namespace crown::detail
