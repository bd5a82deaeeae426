// include/crown/detail/buffer.hpp — the non-template ABI under crown::remote_buffer.
// Implemented in lib/transport/remote_buffer.cpp.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace crown::detail {

/// What a rank needs to reach memory another rank registered: who owns it, where it
/// is in the owner's address space, and how to check it still lives there.
struct buffer_descriptor {
  int rank = -1;                ///< the owner's world rank
  int pid = 0;                  ///< the owner's process (kernel copies on its host)
  std::uint64_t id = 0;         ///< unique in the owner's process
  std::uint64_t address = 0;    ///< the memory, in the owner's address space
  std::uint64_t bytes = 0;      ///< its size
  std::uint64_t word = 0;       ///< heap offset of the owner's liveness word for it
  std::uint32_t generation = 0; ///< of the word: a reused word never matches
  std::uint32_t elem = 1;       ///< sizeof the element type it was made with
  std::vector<std::byte> rkey;  ///< UCX's packed key, when the owner registered it there
  std::string label;

  template <typename Archive>
  void serialize(Archive& ar) {
    ar(rank, pid, id, address, bytes, word, generation, elem, rkey, label);
  }
};

/// One piece of a buffer operation: `bytes` at `offset` in the buffer from (write) or
/// into (read) `local`.
struct buffer_piece {
  bool write = false;
  std::uint64_t offset = 0;
  std::byte* local = nullptr;
  std::size_t bytes = 0;
};

/// Registers [data, data + bytes) of the calling rank for remote access (not
/// collective). Throws resource_error when it cannot (UCX registration, heap full).
buffer_descriptor buffer_register(void* data, std::size_t bytes, std::size_t elem,
                                  std::string label);
/// Ends the registration: later accesses fail; waits for those in progress. Nothing
/// once the runtime that registered it has ended.
void buffer_unregister(const buffer_descriptor& d) noexcept;
/// Runs `pieces` in order against the buffer `d` describes, from any rank; returns with
/// the data there (writes) or here (reads). Throws argument_error for a piece outside
/// the buffer and state_error once its owner freed it, naming the buffer and its rank.
void buffer_transfer(const buffer_descriptor& d, std::span<const buffer_piece> pieces);
/// How this rank reaches `d` now: "local" (its owner), "process_vm" (kernel copy on
/// the owner's host), "ucx" (registered memory) or "am" (requests the owner serves).
const char* buffer_path(const buffer_descriptor& d);

} // namespace crown::detail
