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

void check_command(std::span<const std::byte> message) {
  using namespace crown::detail;
  const auto c = decode_command(message, world);
  if (!c) return;
  require(c->ranks.size() == c->head.targets && c->positions.size() == c->head.targets &&
          c->order.size() == c->head.targets && c->head.fanout >= 1);
  for (const int r : c->ranks) require(r >= 1 && r < world);
  std::vector<std::byte> again;
  encode_command(c->head, c->ranks, c->positions, c->order, c->payload, again);
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
  begin_reply(r->first, again);
  for (const reply_record& rec : r->second) {
    require(rec.bytes.data() >= message.data() &&
            rec.bytes.data() + rec.bytes.size() <= message.data() + message.size());
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
