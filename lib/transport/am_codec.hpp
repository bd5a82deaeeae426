// lib/transport/am_codec.hpp — the wire format of active-message requests, and its checked
// decoder. Free of MPI so that the fuzz target (tests/fuzz) compiles it on its own.
#pragma once
#include "../runtime/tags.hpp"
#include "transfer.hpp"
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace crown::detail {

/// put/get carry the payload or the data inside the request or reply; put_apart and
/// get_apart send it as a message of its own (am_data_tag), for large transfers.
/// buffer_* reach a remote_buffer's memory instead of the heap (inline, or apart like
/// put_apart/get_apart): `offset` names the buffer, `compare` its generation, runs are
/// offsets inside it; buffer 0 names the target's device heap (staged_transfer.hpp).
/// buffer_*_staged come from a rank whose heap the target maps (one host): the data
/// stays in the origin's heap at `operand`, and the target copies it between there and
/// the buffer itself, so that only the request and the status word cross MPI. The word
/// 8 bytes before `operand` holds the request's ticket (`op`): the target takes the
/// request by marking it, unless the origin cancelled it there first (host_staging.hpp).
enum class am_kind : std::uint32_t {
  put = 1,
  get = 2,
  atomic = 3,
  put_apart = 4,
  get_apart = 5,
  buffer_put = 6,
  buffer_get = 7,
  buffer_put_apart = 8,
  buffer_get_apart = 9,
  buffer_put_staged = 10,
  buffer_get_staged = 11,
};

/// Kinds whose payload (put) or data (get) travels apart from the request.
[[nodiscard]] constexpr bool am_put_apart(am_kind k) noexcept {
  return k == am_kind::put_apart || k == am_kind::buffer_put_apart;
}
[[nodiscard]] constexpr bool am_get_apart(am_kind k) noexcept {
  return k == am_kind::get_apart || k == am_kind::buffer_get_apart;
}
[[nodiscard]] constexpr bool am_staged_kind(am_kind k) noexcept {
  return k == am_kind::buffer_put_staged || k == am_kind::buffer_get_staged;
}
[[nodiscard]] constexpr bool am_buffer_kind(am_kind k) noexcept {
  return k == am_kind::buffer_put || k == am_kind::buffer_get || k == am_kind::buffer_put_apart ||
         k == am_kind::buffer_get_apart || am_staged_kind(k);
}

/// The status word that ends every reply: why a target refused, or ok.
enum class am_status : std::uint64_t {
  ok = 0,
  refused = 1,             ///< malformed, or outside the heap
  buffer_freed = 2,        ///< no remote_buffer of that id and generation lives there
  outside_buffer = 3,      ///< a run falls outside the remote_buffer
  no_device_heap = 4,      ///< device_heap_buffer named, but the target serves no device heap
  outside_device_heap = 5, ///< a run falls outside the target's device heap
  device_failed = 6,       ///< the target's GPU failed a copy (its log says how)
  too_large = 7,           ///< a device-heap request above staged_request_bytes
  cancelled = 8,           ///< a staged request its origin cancelled before it was served
};

/// The fixed part of every request. Runs (put/get) and the put payload follow it.
struct am_header {
  am_kind what;
  std::uint32_t id;      ///< the reply's tag, chosen by the origin
  std::uint64_t runs;    ///< put/get: number of runs after the header
  std::uint64_t bytes;   ///< put/get: the runs' total (the payload, or what goes back)
  std::uint64_t offset;  ///< atomic: the word; buffer_*: the buffer's id
  std::uint64_t operand; ///< atomic; buffer_*_staged: the data's offset in the origin's heap
  std::uint64_t compare; ///< atomic: compare_swap's expected value; buffer_*: generation
  std::uint32_t op;      ///< atomic: an atomic_op; buffer_*_staged: the ticket
  std::uint16_t width;   ///< atomic: 4 or 8
  std::uint16_t floating;
};

/// A request that passed every check against a heap of the decoder's size.
struct am_request {
  am_header head{};
  std::vector<run> runs;
  std::span<const std::byte> payload; ///< put (not put_apart): the bytes to store, in run order
};

/// Largest reply a get may ask for (MPI counts are ints; larger transfers are chunked).
inline constexpr std::uint64_t am_max_reply = 0x7fffffffu - 64;

/// Tags on the transport's own communicator: requests, then per request id (chosen by
/// the origin) its reply and its payload or data; from the one table of Crown's tags
/// (lib/runtime/tags.hpp), whose ranges cannot overlap.
inline constexpr int am_request_tag = tags::am_request.first;
using tags::am_data_tag;
using tags::am_reply_tag;

/// Where a target refuses a request too short to show its id (under 8 bytes): the
/// origin looks here too while it waits, so that no malformed request leaves it waiting.
inline constexpr int am_unreadable_tag = tags::am_unreadable.first;

/// What a request shows of its header, however short it is: every field whose bytes
/// arrived (the rest zero). The kind and the id come first, so 8 bytes name the reply's tag.
struct am_request_prefix {
  am_header head{};
  bool id_known = false; ///< at least the kind and the id arrived
};
[[nodiscard]] am_request_prefix read_am_prefix(std::span<const std::byte> message) noexcept;

/// Bytes of the refusal a target sends for a request with this (possibly partial)
/// header: what the origin's reply receive expects (a get's inline data, an atomic's
/// old value), then the status word; at most am_max_reply + 8.
[[nodiscard]] std::size_t am_refusal_bytes(const am_header& head) noexcept;

/// Appends header, runs and payload to `out` (cleared first; its capacity is reused).
void encode_am_request(const am_header& head, std::span<const run> runs,
                       std::span<const std::byte> payload, std::vector<std::byte>& out);

/// Checks a received request: the kind, that the lengths add up to exactly the
/// message, that every run and atomic word lies inside `heap_size` bytes (a buffer
/// request's runs only must not wrap: the buffer's owner checks them against it; a
/// staged request's data and ticket word must lie inside a heap of that size), the
/// atomic's width, alignment and operation. nullopt for anything malformed; never reads outside
/// `message`, never allocates more than the message's own size.
std::optional<am_request> decode_am_request(std::span<const std::byte> message,
                                            std::size_t heap_size);

} // namespace crown::detail
