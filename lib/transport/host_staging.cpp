// Same-host staging for remote_buffer: this rank's slots in its own heap, the tickets
// that let it cancel a request its owner has not taken, and the probe that decides
// from which size the slots beat a kernel copy.
#include "host_staging.hpp"
#include "host_collectives.hpp"
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
#include <mutex>
#include <unistd.h>
#include <unordered_map>
#include <vector>

namespace crown::detail {
namespace {

using clock = std::chrono::steady_clock;

constexpr std::size_t slot_count = 4;
constexpr std::size_t slot_bytes = std::size_t{256} << 10;
/// Each slot follows a cache line whose last word holds its request's ticket.
constexpr std::size_t slot_stride = slot_bytes + 64;
constexpr std::uint64_t no_slots = ~std::uint64_t{0};
constexpr std::uint64_t taken = std::uint64_t{1} << 63, cancelled = std::uint64_t{1} << 62;
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
  std::vector<async_handle> cancelled;                  ///< waiting for their refusals
  std::unordered_map<int, clock::time_point> shy_until; ///< per owner rank
};

slots& the_slots() {
  static slots s;
  return s;
}

std::atomic_ref<std::uint64_t> ticket_word(std::byte* data) noexcept {
  return std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(data - 8));
}

/// Chunks of a quarter of the transfer, 64 KiB to a slot: each costs a request's round
/// trip (about 5 µs here), so smaller ones do not pay for their overlap.
std::size_t chunk_for(std::size_t bytes) {
  const std::size_t quarter = (bytes / slot_count + 4095) / 4096 * 4096;
  return std::clamp(quarter, std::size_t{64} << 10, slot_bytes);
}

bool allocate(slots& s) {
  if (s.offset != no_slots) return true;
  try {
    s.offset = heap_allocate_local(slot_count * slot_stride, "remote_buffer staging");
    return true;
  } catch (const resource_error& e) {
    s.no_room = true;
    log(log_level::info, "remote_buffer: no heap room for staging slots (", e.what(),
        "); kernel copies or requests instead");
    return false;
  }
}

/// Waits for `op` as wait_remote does; false once `owner_deadline` passed without the
/// owner taking its ticket (once taken, the owner is copying: that is waited for).
bool wait_at_most(async_op& op, std::byte* slot, const char* what) {
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
/// kernel copy took more than 1.25 copies plus 16 µs: about what a staged transfer
/// costs, its two copies overlapping on two cores, plus the round trips of its first
/// and last chunks (2-core Zen 5 VM, 2026-12-05: 16 MiB staged in 0.7 ms, by the
/// kernel in 1.4-1.6; at 1 MiB a toss-up, 45-50 µs either way; 64 KiB 6 µs against 5).
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
    if (kernel_us > 1.25 * copy_us + 16) return bytes;
  }
  return never;
}

} // namespace

bool take_staged_ticket(std::byte* data, std::uint32_t ticket) noexcept {
  std::uint64_t expected = ticket;
  return ticket_word(data).compare_exchange_strong(expected, ticket | taken,
                                                   std::memory_order_acq_rel);
}

bool transfer_through_host_slots(int owner, bool put, const run& r, std::byte* local,
                                 const host_staging_request& request,
                                 const host_staging_fallback& fallback, const char* what) {
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
  const std::size_t chunk = chunk_for(r.bytes), n = (r.bytes + chunk - 1) / chunk;
  const auto slot = [&](std::size_t k) {
    return base + s.offset + (k % slot_count) * slot_stride + 64;
  };
  const auto at = [&](std::size_t k) {
    return run{r.offset + k * chunk, std::min(chunk, r.bytes - k * chunk)};
  };
  struct in_flight {
    async_handle op;
    std::size_t chunk = 0;
    std::uint32_t ticket = 0;
  };
  std::array<in_flight, slot_count> flying;
  bool given_up = !fallback; // waits without a deadline where nothing else reaches the owner
  const auto send = [&](std::size_t k) {
    if (put) copy_bytes(slot(k), local + k * chunk, at(k).bytes);
    const std::uint32_t ticket = ++s.next_ticket;
    ticket_word(slot(k)).store(ticket, std::memory_order_release);
    flying[k % slot_count] = {request(put, at(k), slot(k) - base, ticket), k, ticket};
  };
  // Completes the request in flight in slot k; an owner that does not take it in time
  // has it cancelled, and it and every later chunk go by the fallback.
  const auto settle = [&](std::size_t k) {
    in_flight& f = flying[k % slot_count];
    const bool in_time = !fallback || given_up || wait_at_most(*f.op, slot(k), what);
    if (!in_time) {
      given_up = true;
      s.shy_until[owner] = clock::now() + shy_for;
      log(log_level::debug, "remote_buffer: rank ", owner,
          " did not serve a staged chunk in time; kernel copies take the rest");
    }
    std::uint64_t expected = f.ticket;
    if (fallback && given_up &&
        ticket_word(slot(k)).compare_exchange_strong(expected, cancelled,
                                                     std::memory_order_acq_rel)) {
      s.cancelled.push_back(std::move(f.op));
      fallback(put, at(k), local + k * chunk);
    } else { // taken: the owner is copying it now
      wait_remote(*f.op, what);
      if (!put) copy_bytes(local + k * chunk, slot(k), at(k).bytes);
    }
    f.op = {};
  };
  const auto start = [&](std::size_t k) {
    if (fallback && given_up)
      fallback(put, at(k), local + k * chunk);
    else
      send(k);
  };
  // A transfer that fails (a refusal, a fallback's error) cancels what the owner has not
  // taken: destroying those handles would wait for the owner to answer.
  const auto cancel_untaken = [&] {
    for (in_flight& f : flying) {
      std::uint64_t expected = f.ticket;
      if (f.op && ticket_word(slot(f.chunk))
                      .compare_exchange_strong(expected, cancelled, std::memory_order_acq_rel))
        s.cancelled.push_back(std::move(f.op));
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
    cancel_untaken();
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

void forget_host_staging() noexcept {
  slots& s = the_slots();
  const std::lock_guard lock(s.mutex);
  for (async_handle& h : s.cancelled) delete h.release(); // ends its receive, waits for nothing
  s.cancelled.clear();
  s.shy_until.clear();
  s.offset = no_slots;
  s.no_room = false;
}

} // namespace crown::detail
