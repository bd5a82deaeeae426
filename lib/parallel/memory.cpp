// The accounting allocator's ledger (include/crown/parallel/memory.hpp).
#include <crown/parallel/memory.hpp>
#include <mutex>

namespace {
// One mutex: charges are per buffer (not per element), and the total's peak needs the
// kinds read together.
std::mutex ledger_mutex;
crown::parallel::memory_ledger ledger;
std::size_t total_now = 0;
} // namespace

namespace crown::parallel {

std::string_view to_string(buffer_kind k) noexcept {
  constexpr std::array<std::string_view, buffer_kinds> names{"params", "grads", "optimizer",
                                                             "activations", "gathered"};
  return names[std::size_t(k)];
}

memory_ledger memory_now() noexcept {
  std::lock_guard lock(ledger_mutex);
  return ledger;
}

void reset_memory_peaks() noexcept {
  std::lock_guard lock(ledger_mutex);
  ledger.peak = ledger.current;
  ledger.peak_total = total_now;
}

} // namespace crown::parallel

namespace crown::detail {
using parallel::buffer_kind;
void charge(buffer_kind k, std::size_t bytes) noexcept {
  std::lock_guard lock(ledger_mutex);
  auto& now = ledger.current[std::size_t(k)];
  now += bytes;
  total_now += bytes;
  if (now > ledger.peak[std::size_t(k)]) ledger.peak[std::size_t(k)] = now;
  if (total_now > ledger.peak_total) ledger.peak_total = total_now;
}
void discharge(buffer_kind k, std::size_t bytes) noexcept {
  std::lock_guard lock(ledger_mutex);
  ledger.current[std::size_t(k)] -= bytes;
  total_now -= bytes;
}
} // namespace crown::detail
