// The active-message wire format: encoding, and decoding that trusts nothing.
#include "am_codec.hpp"
#include <algorithm>
#include <cstddef>
#include <cstring>

namespace crown::detail {
namespace {

template <typename T>
void append(std::vector<std::byte>& out, const T* data, std::size_t count) {
  const std::size_t bytes = count * sizeof(T);
  if (bytes == 0) return;
  const std::size_t at = out.size();
  out.resize(at + bytes);
  std::memcpy(out.data() + at, data, bytes);
}

bool inside(std::uint64_t offset, std::uint64_t bytes, std::size_t heap_size) {
  return offset <= heap_size && bytes <= heap_size - offset;
}

bool valid_atomic(const am_header& h, std::size_t heap_size) {
  if (h.width != 4 && h.width != 8) return false;
  if (h.offset % h.width != 0 || !inside(h.offset, h.width, heap_size)) return false;
  if (h.op > static_cast<std::uint32_t>(atomic_op::compare_swap) || h.floating > 1) return false;
  const auto op = static_cast<atomic_op>(h.op);
  const bool bitwise =
      op == atomic_op::bit_and || op == atomic_op::bit_or || op == atomic_op::bit_xor;
  return !(bitwise && h.floating);
}

} // namespace

void encode_am_request(const am_header& head, std::span<const run> runs,
                       std::span<const std::byte> payload, std::vector<std::byte>& out) {
  out.clear();
  out.reserve(sizeof head + runs.size_bytes() + payload.size());
  append(out, &head, 1);
  append(out, runs.data(), runs.size());
  append(out, payload.data(), payload.size());
}

am_request_prefix read_am_prefix(std::span<const std::byte> message) noexcept {
  am_request_prefix p;
  if (!message.empty())
    std::memcpy(&p.head, message.data(), std::min(message.size(), sizeof p.head));
  p.id_known = message.size() >= offsetof(am_header, id) + sizeof p.head.id;
  return p;
}

std::size_t am_refusal_bytes(const am_header& h) noexcept {
  const bool get = h.what == am_kind::get || h.what == am_kind::buffer_get;
  const std::size_t before = get && h.bytes <= am_max_reply ? h.bytes
                             : h.what == am_kind::atomic    ? sizeof(std::uint64_t)
                                                            : 0;
  return before + sizeof(std::uint64_t);
}

std::optional<am_request> decode_am_request(std::span<const std::byte> message,
                                            std::size_t heap_size) {
  am_request r;
  if (message.size() < sizeof r.head) return std::nullopt;
  std::memcpy(&r.head, message.data(), sizeof r.head);
  const am_header& h = r.head;
  const std::size_t after_header = message.size() - sizeof h;
  if (h.what == am_kind::atomic)
    return h.runs == 0 && h.bytes == 0 && after_header == 0 && valid_atomic(h, heap_size)
               ? std::optional(std::move(r))
               : std::nullopt;
  const bool put = h.what == am_kind::put || h.what == am_kind::buffer_put;
  const bool buffer = am_buffer_kind(h.what);
  if (!put && !buffer && h.what != am_kind::get && !am_put_apart(h.what) && !am_get_apart(h.what))
    return std::nullopt;
  // The run count is checked against the bytes present before anything is allocated.
  if (h.runs > after_header / sizeof(run)) return std::nullopt;
  const std::size_t runs_bytes = h.runs * sizeof(run);
  r.runs.resize(h.runs);
  if (runs_bytes) std::memcpy(r.runs.data(), message.data() + sizeof h, runs_bytes);
  std::uint64_t total = 0;
  for (const run& piece : r.runs) {
    if (buffer ? piece.offset + piece.bytes < piece.offset || piece.bytes > am_max_reply
               : !inside(piece.offset, piece.bytes, heap_size))
      return std::nullopt;
    total += piece.bytes; // no overflow: each term <= 2^31 or heap_size, total capped below
    if (total > am_max_reply) return std::nullopt;
  }
  if (total != h.bytes) return std::nullopt;
  if (am_staged_kind(h.what) &&
      (h.operand < 8 || h.operand % 8 != 0 || !inside(h.operand - 8, total + 8, heap_size)))
    return std::nullopt;
  const std::size_t payload_bytes = after_header - runs_bytes;
  if (payload_bytes != (put ? total : 0)) return std::nullopt;
  r.payload = message.subspan(sizeof h + runs_bytes);
  return r;
}

} // namespace crown::detail
