// lib/actor/mailbox.hpp — a rank's inbox for controller messages from the ranks of its
// host: a ring in its symmetric heap that any rank of the host writes into and only the
// owner reads. A message costs one copy in and one copy out and no MPI call, which is
// most of a call's cost between ranks of one host (MPI's per-message overhead).
//
// Invariants: the ring is a power-of-two number of 64-byte cells, each a stamp word and
// 56 bytes of data, so no payload byte ever lies where a stamp is read. Positions count
// cells and are never reused. A record is a run of cells (it may wrap around the end):
// the first holds {bytes, source} and the start of the payload, the rest continue it.
// A sender reserves [head, head + cells) with a compare-and-swap, so one sender's records
// follow one another in the order it sent them (FIFO per pair); it writes the data,
// then the first cell's stamp (position + 1) with release. The owner takes the record at
// its tail once that stamp reads tail + 1 (any older stamp names an older position),
// copies it out and publishes the new tail, which frees the cells for senders. The owner
// never writes a cell, so a message costs the cache lines it fills and nothing more.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace crown::detail {

/// Where a channel finds the mailboxes of its session (no ownership: the memory is a
/// block of the symmetric heap that runtime::control allocates and releases).
struct mailbox_map {
  std::byte* own = nullptr;      ///< this rank's block, or null: every message over MPI
  std::vector<std::byte*> peers; ///< by rank; null for ranks that share no memory with us
  std::size_t capacity = 0;      ///< ring bytes per block (a power of two)
};

class mailbox {
public:
  static constexpr std::size_t cell = 64;
  static constexpr std::size_t control_bytes = 2 * cell; ///< head and tail, a line each
  static constexpr std::size_t min_capacity = std::size_t{64} << 10;
  /// The ring bytes for a setting of `bytes` (a power of two, at least 64 KiB), or 0.
  static std::size_t capacity_for(std::size_t bytes) noexcept;
  static std::size_t block_bytes(std::size_t capacity) noexcept { return control_bytes + capacity; }

  /// A view of the block at `base` (zeroed before its first use by anyone).
  mailbox(std::byte* base, std::size_t capacity) noexcept;
  /// The largest message the ring takes (a record of at most half its cells).
  [[nodiscard]] std::size_t max_message() const noexcept {
    return (cells_ / 2 - 1) * cell_data + first_data;
  }

  /// Sender: copies `bytes` (at most max_message()) in as one message from rank
  /// `source`; false when the ring has no room now (the caller keeps the message and
  /// tries again later, in order).
  bool try_send(int source, std::span<const std::byte> bytes) noexcept;

  /// Owner: when a message has arrived, asks `into(source, bytes)` where to copy it
  /// (null: drop it), copies it there and frees its cells; false when none has. Throws
  /// state_error on a record no sender of Crown can have written (the heap was
  /// overwritten).
  template <typename Into>
  bool receive(Into&& into) {
    const record r = next();
    if (!r.arrived) return false;
    copy_out(r, into(r.source, r.bytes));
    return true;
  }

private:
  static constexpr std::size_t stamp_bytes = sizeof(std::uint64_t);
  static constexpr std::size_t cell_data = cell - stamp_bytes; ///< payload per cell
  static constexpr std::size_t first_data = cell_data - 8;     ///< after {bytes, source}
  struct record {
    bool arrived = false;
    int source = -1;
    std::size_t bytes = 0;
  };
  record next();
  void copy_out(const record& r, std::byte* to) noexcept;
  [[nodiscard]] static std::uint64_t cells_for(std::size_t bytes) noexcept {
    return bytes <= first_data ? 1 : 1 + (bytes - first_data + cell_data - 1) / cell_data;
  }
  [[nodiscard]] std::byte* at(std::uint64_t position) const noexcept {
    return ring_ + (position & (cells_ - 1)) * cell;
  }
  [[nodiscard]] std::uint64_t& head() const noexcept;
  [[nodiscard]] std::uint64_t& tail() const noexcept;

  std::byte* base_;
  std::byte* ring_;
  std::uint64_t cells_;
  std::uint64_t tail_ = 0;       ///< the owner's copy of its tail
  std::uint64_t known_tail_ = 0; ///< a sender's last look at the owner's tail
};

} // namespace crown::detail
