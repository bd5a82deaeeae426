// libFuzzer target: the active-message request decoder (lib/transport/am_codec.cpp)
// must accept only requests that lie inside the heap and add up to exactly the message,
// and never read outside the message; the refusal path must find the reply's tag of
// anything 8 bytes long and answer with a bounded reply. Built with clang
// -fsanitize=fuzzer,address.
#include "am_codec.hpp"
#include <cstdint>
#include <cstring>
#include <vector>

namespace {

void require(bool ok) {
  if (!ok) __builtin_trap();
}

/// What every accepted request must satisfy; and it must re-encode to the input.
void check(const crown::detail::am_request& r, std::span<const std::byte> message,
           std::size_t heap) {
  using crown::detail::am_kind;
  const auto& h = r.head;
  if (h.what == am_kind::atomic) {
    using crown::detail::atomic_op;
    require((h.width == 4 || h.width == 8) && h.offset % h.width == 0);
    require(h.offset + h.width <= heap && r.runs.empty() && r.payload.empty());
    require(h.op <= static_cast<std::uint32_t>(atomic_op::compare_swap) && h.floating <= 1);
    const auto op = static_cast<atomic_op>(h.op);
    require(!(h.floating &&
              (op == atomic_op::bit_and || op == atomic_op::bit_or || op == atomic_op::bit_xor)));
    return;
  }
  const bool staged = h.what == am_kind::buffer_put_staged || h.what == am_kind::buffer_get_staged;
  const bool buffer = h.what == am_kind::buffer_put || h.what == am_kind::buffer_get ||
                      h.what == am_kind::buffer_put_apart || h.what == am_kind::buffer_get_apart ||
                      staged;
  require(buffer || h.what == am_kind::put || h.what == am_kind::get ||
          h.what == am_kind::put_apart || h.what == am_kind::get_apart);
  std::uint64_t total = 0;
  for (const auto& piece : r.runs) {
    if (buffer) // the owner checks them against the buffer; they must not wrap
      require(piece.offset + piece.bytes >= piece.offset);
    else
      require(piece.offset <= heap && piece.bytes <= heap - piece.offset);
    total += piece.bytes;
  }
  require(total == h.bytes && total <= crown::detail::am_max_reply);
  if (staged) // the ticket word and the data lie in the origin's heap, which is the same size
    require(h.operand >= 8 && h.operand % 8 == 0 && h.operand <= heap && total <= heap - h.operand);
  const bool inline_payload = h.what == am_kind::put || h.what == am_kind::buffer_put;
  require(r.payload.size() == (inline_payload ? total : 0));
  std::vector<std::byte> again;
  crown::detail::encode_am_request(h, r.runs, r.payload, again);
  require(again.size() == message.size() &&
          std::memcmp(again.data(), message.data(), again.size()) == 0);
}

/// The refusal path: whatever arrived, the target reads the id once 8 bytes are there
/// (the reply goes to that id's tag) and answers with a bounded reply.
void check_refusal(std::span<const std::byte> message) {
  using namespace crown::detail;
  const am_request_prefix p = read_am_prefix(message);
  require(p.id_known == (message.size() >= 8));
  if (p.id_known) {
    std::uint32_t id = 0;
    std::memcpy(&id, message.data() + 4, sizeof id);
    require(p.head.id == id && tags::am_reply.contains(am_reply_tag(p.head.id)));
  }
  require(am_refusal_bytes(p.head) >= 8 && am_refusal_bytes(p.head) <= am_max_reply + 8);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // A copy of exactly `size` bytes, so that ASan catches any read past the message.
  std::vector<std::byte> message(size);
  if (size) std::memcpy(message.data(), data, size);
  for (std::size_t heap : {std::size_t{4096}, std::size_t{1} << 30}) {
    if (const auto r = crown::detail::decode_am_request(message, heap)) {
      check(*r, message, heap);
      // an accepted request shows the same header to the refusal path
      const crown::detail::am_request_prefix p = crown::detail::read_am_prefix(message);
      require(std::memcmp(&p.head, &r->head, sizeof r->head) == 0);
    }
  }
  check_refusal(message);
  return 0;
}
