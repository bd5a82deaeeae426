// libFuzzer target: the controller's message decoders (lib/actor/protocol.cpp) and the
// bounded cereal reader behind every payload. Whatever the bytes, decoding either
// fails cleanly or yields a message whose parts lie inside the input and re-encodes to
// it; no read past the input, no allocation out of proportion to it.
#include "protocol.hpp"
#include <crown/actor/controller.hpp>
#include <cstring>

namespace {

void require(bool ok) {
  if (!ok) __builtin_trap();
}

constexpr int world = 64;

bool inside(std::span<const std::byte> part, std::span<const std::byte> message) {
  return part.empty() || (part.data() >= message.data() &&
                          part.data() + part.size() <= message.data() + message.size());
}

void check_command(std::span<const std::byte> message) {
  using namespace crown::detail;
  const auto c = decode_command(message, world);
  if (!c) return;
  require(c->ranks.size() == c->head.targets && c->positions.size() == c->head.targets &&
          c->order.size() == c->head.targets && c->head.fanout >= 1);
  require(inside(c->payload, message) && inside(c->ranks.bytes(), message) &&
          inside(c->order.bytes(), message) && inside(c->positions.bytes(), message));
  std::vector<std::int32_t> ranks;
  std::vector<std::uint32_t> positions;
  std::vector<std::uint64_t> order;
  for (std::size_t i = 0; i < c->ranks.size(); ++i) {
    require(c->ranks[i] >= 1 && c->ranks[i] < world && c->index_of(c->ranks[i]) == std::int64_t(i));
    ranks.push_back(c->ranks[i]);
    positions.push_back(c->positions[i]);
    order.push_back(c->order[i]);
  }
  std::vector<std::byte> again(header_space());
  again.insert(again.end(), c->payload.begin(), c->payload.end());
  finish_command(c->head, ranks, positions, order, again);
  require(again.size() == message.size() &&
          std::memcmp(again.data(), message.data(), again.size()) == 0);
  // Payloads are cereal data from another rank: the reader must refuse, not overrun.
  try {
    (void)from_bytes<spawn_spec>(c->payload);
  } catch (const malformed_message&) {}
}

void check_reply(std::span<const std::byte> message) {
  using namespace crown::detail;
  const auto r = decode_reply(message);
  if (!r) return;
  std::vector<std::byte> again;
  begin_reply(r->request(), again);
  reply_record rec;
  for (reply_view v = *r; v.next(rec);) {
    require(inside(rec.bytes, message));
    append_record(rec.position, rec.kind, rec.bytes, again);
    try {
      if (rec.kind == record_kind::error) (void)from_bytes<crown::actor_failure>(rec.bytes);
      if (rec.kind == record_kind::log) (void)from_bytes<log_line>(rec.bytes);
    } catch (const malformed_message&) {}
  }
  require(again.size() == message.size() &&
          std::memcmp(again.data(), message.data(), again.size()) == 0);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::byte> message(size); // exactly `size` bytes: ASan sees any overrun
  if (size) std::memcpy(message.data(), data, size);
  check_command(message);
  check_reply(message);
  return 0;
}
