// A rank's inbox in shared memory (lib/actor/mailbox.hpp).
#include "mailbox.hpp"
#include <algorithm>
#include <atomic>
#include <bit>
#include <crown/error.hpp>
#include <cstring>
#include <string>

namespace crown::detail {
namespace {

std::atomic_ref<std::uint64_t> word(std::byte* p) noexcept {
  return std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(p));
}

struct first_fields {
  std::uint32_t bytes;
  std::int32_t source;
};

} // namespace

std::size_t mailbox::capacity_for(std::size_t bytes) noexcept {
  return bytes < min_capacity ? 0 : std::bit_floor(bytes);
}

mailbox::mailbox(std::byte* base, std::size_t capacity) noexcept
    : base_(base), ring_(base + control_bytes), cells_(capacity / cell) {}

std::uint64_t& mailbox::head() const noexcept { return *reinterpret_cast<std::uint64_t*>(base_); }
std::uint64_t& mailbox::tail() const noexcept {
  return *reinterpret_cast<std::uint64_t*>(base_ + cell);
}

bool mailbox::try_send(int source, std::span<const std::byte> bytes) noexcept {
  const std::uint64_t need = cells_for(bytes.size());
  std::atomic_ref<std::uint64_t> head_word(head());
  std::uint64_t position = head_word.load(std::memory_order_relaxed);
  do {
    // The owner's tail is read only when the last look at it leaves no room (it moves
    // on every message, and each read would be a cache miss). Acquire: the owner's
    // copies out of the cells about to be reused come first.
    if (position + need - known_tail_ > cells_) {
      known_tail_ = std::atomic_ref<std::uint64_t>(tail()).load(std::memory_order_acquire);
      if (position + need - known_tail_ > cells_) return false;
    }
  } while (!head_word.compare_exchange_weak(position, position + need, std::memory_order_relaxed,
                                            std::memory_order_relaxed));
  const first_fields fields{static_cast<std::uint32_t>(bytes.size()), source};
  std::byte* first = at(position);
  std::memcpy(first + stamp_bytes, &fields, sizeof fields);
  std::size_t done = std::min(first_data, bytes.size());
  std::memcpy(first + stamp_bytes + sizeof fields, bytes.data(), done);
  std::uint64_t c = position + 1;
  for (; bytes.size() - done >= cell_data; ++c, done += cell_data) // whole cells: inlined
    std::memcpy(at(c) + stamp_bytes, bytes.data() + done, cell_data);
  std::memcpy(at(c) + stamp_bytes, bytes.data() + done, bytes.size() - done);
  word(first).store(position + 1, std::memory_order_release);
  return true;
}

mailbox::record mailbox::next() {
  std::byte* first = at(tail_);
  if (word(first).load(std::memory_order_acquire) != tail_ + 1) return {};
  first_fields fields{};
  std::memcpy(&fields, first + stamp_bytes, sizeof fields);
  if (fields.bytes > max_message() || fields.source < 0)
    throw state_error("controller mailbox",
                      "the record at cell " + std::to_string(tail_) + " claims " +
                          std::to_string(fields.bytes) + " bytes from rank " +
                          std::to_string(fields.source) +
                          ", which no sender wrote: this rank's symmetric heap was overwritten");
  return {true, fields.source, fields.bytes};
}

void mailbox::copy_out(const record& r, std::byte* to) noexcept {
  if (to) {
    std::size_t done = std::min(first_data, r.bytes);
    std::memcpy(to, at(tail_) + stamp_bytes + sizeof(first_fields), done);
    std::uint64_t c = tail_ + 1;
    for (; r.bytes - done >= cell_data; ++c, done += cell_data) // whole cells: inlined
      std::memcpy(to + done, at(c) + stamp_bytes, cell_data);
    std::memcpy(to + done, at(c) + stamp_bytes, r.bytes - done);
  }
  tail_ += cells_for(r.bytes);
  // Release: the copy out comes before any sender reuses the cells.
  std::atomic_ref<std::uint64_t>(tail()).store(tail_, std::memory_order_release);
}

} // namespace crown::detail
