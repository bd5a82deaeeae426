// libFuzzer target: the controller's message decoders (lib/actor/protocol.cpp), the
// bounded cereal reader behind every payload, the channel's notices, the forwarding
// tree, one-way notes (supervision, ports) and a serving rank's queue of early commands
// (lib/actor/command_queue.hpp). Whatever the bytes, decoding either fails cleanly or
// yields a message whose parts lie inside the input and re-encodes to it; no read past
// the input, no allocation out of proportion to it.
#include "command_queue.hpp"
#include "protocol.hpp"
#include <algorithm>
#include <crown/actor/controller.hpp>
#include <cstring>

namespace {

void require(bool ok) {
  if (!ok) __builtin_trap();
}

constexpr int world = 64;
using queue_key = crown::detail::order_key;

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
  std::vector<std::uint64_t> order, origin_order;
  require(c->origin_order.size() == (c->relayed() ? c->head.targets : 0));
  require(c->head.origin >= 0 && c->head.origin < world);
  for (std::size_t i = 0; i < c->ranks.size(); ++i) {
    require(c->ranks[i] >= 1 && c->ranks[i] < world && c->index_of(c->ranks[i]) == std::int64_t(i));
    ranks.push_back(c->ranks[i]);
    positions.push_back(c->positions[i]);
    order.push_back(c->order[i]);
    if (c->relayed()) origin_order.push_back(c->origin_order[i]);
  }
  // The forwarding tree: every target has exactly one parent, which lies before it, and
  // is among that parent's children (what a serving rank forwards to).
  const std::uint64_t fanout = c->head.fanout, targets = c->head.targets;
  std::uint64_t children = 0;
  for (std::uint64_t node = 0; node <= targets; ++node) {
    const std::uint64_t first = first_child(node, fanout);
    const std::uint64_t last = std::min<std::uint64_t>(first + fanout - 1, targets);
    for (std::uint64_t child = first; child <= last; ++child) {
      require(child >= 1 && child <= targets && parent_node(child, fanout) == node);
      ++children;
    }
    if (first > targets) break; // later nodes have no children either
  }
  require(children == targets);
  // Attachments (large arguments beside the command): within the limits, calls only.
  std::vector<std::uint64_t> sizes;
  std::vector<std::uint8_t> elements;
  for (std::size_t i = 0; i < c->attachment_bytes.size(); ++i) {
    require(c->attachment_bytes[i] >= 1 && c->attachment_bytes[i] <= max_attachment_bytes);
    sizes.push_back(c->attachment_bytes[i]);
    elements.push_back(c->attachment_elements[i]);
  }
  require(
      sizes.size() == c->head.attachments &&
      (sizes.empty() || (c->head.kind == message_kind::call && c->piece_bytes >= min_piece_bytes &&
                         c->piece_bytes <= max_piece_bytes && c->bulk_tag >= bulk_tag_first &&
                         c->bulk_tag < bulk_tag_first + bulk_tags)));
  std::vector<std::byte> again(header_space());
  again.insert(again.end(), c->payload.begin(), c->payload.end());
  finish_command(c->head, ranks, positions, order, origin_order, again,
                 bulk_layout{sizes, elements, c->bulk_tag, c->piece_bytes});
  require(again.size() == message.size() &&
          std::memcmp(again.data(), message.data(), again.size()) == 0);
  // Payloads are cereal data from another rank: the reader must refuse, not overrun.
  try {
    (void)from_bytes<spawn_spec>(c->payload);
  } catch (const malformed_message&) {}
  // ... and so are array parameters, inline or naming attachments (two small ones here).
  alignas(64) static const std::byte first[16]{}, second[24]{};
  const std::span<const std::byte> beside[] = {first, second};
  try {
    byte_reader in(c->payload, beside);
    const auto a = load_param<std::vector<double>>(in);
    const auto b = load_param<std::span<const std::int32_t>>(in);
    (void)load_param<std::string>(in);
    // Nothing larger than the message or an attachment (no allocation out of proportion).
    const std::size_t most = std::max(c->payload.size(), sizeof second);
    require(a.size() * sizeof(double) <= most && b.size_bytes() <= most);
  } catch (const malformed_message&) {}
}

void check_reply(std::span<const std::byte> message) {
  using namespace crown::detail;
  const auto r = decode_reply(message);
  if (!r) return;
  std::vector<std::byte> again;
  begin_reply(r->request(), r->leg(), again);
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

/// A one-way note (supervision event, port message, port closed): decoded or refused;
/// an accepted one re-encodes to the input, and its supervision payload is read safely.
void check_note(std::span<const std::byte> message) {
  using namespace crown::detail;
  const auto n = decode_note(message);
  if (!n) return;
  require(inside(n->payload, message));
  std::vector<std::byte> again;
  begin_note(n->head, again);
  again.insert(again.end(), n->payload.begin(), n->payload.end());
  require(again.size() == message.size() &&
          std::memcmp(again.data(), message.data(), again.size()) == 0);
  try {
    if (n->head.kind == message_kind::supervise)
      (void)from_bytes<std::vector<crown::actor_failure>>(n->payload);
  } catch (const malformed_message&) {}
}

/// A slot's message as a notice: refused sizes are 0; an accepted one re-encodes to it.
void check_notice(std::span<const std::byte> message) {
  using namespace crown::detail;
  constexpr std::size_t slot = 16384;
  const auto bytes = notice_bytes(message, slot);
  if (!bytes) return;
  require(message.size() == notice_size);
  if (*bytes == 0) return;
  require(*bytes > slot && *bytes <= 0x7fffffffu);
  std::vector<std::byte> again;
  encode_notice(*bytes, again);
  require(again.size() == message.size() &&
          std::memcmp(again.data(), message.data(), again.size()) == 0);
}

/// The serving rank's queue of early commands under orders read from the input (16
/// bits each, the top bit choosing one of two senders; every third command is relayed:
/// ordered in both): every command runs once, in each of its streams' order, and
/// nothing held is stuck once all have arrived.
void check_queue(std::span<const std::byte> message) {
  using queue = crown::detail::in_order_queue<std::vector<queue_key>>;
  queue q;
  std::uint64_t ran = 0;
  std::uint64_t expected[2] = {0, 0};
  auto run = [&](const std::vector<queue_key>& keys) {
    for (const queue_key& k : keys) require(k.order == expected[k.stream]++);
    ++ran;
  };
  for (std::size_t i = 0; i + 1 < message.size(); i += 2) {
    const std::uint64_t word = std::to_integer<std::uint64_t>(message[i]) |
                               std::to_integer<std::uint64_t>(message[i + 1]) << 8;
    const int stream = static_cast<int>(word >> 15);
    std::vector<queue_key> keys{{stream, word & 0x7fff}};
    if (i % 6 == 4) keys.push_back({1 - stream, (word >> 3) & 0xfff});
    const queue::verdict v = q.admit(keys);
    if (v == queue::verdict::drop) continue;
    if (v == queue::verdict::hold) {
      q.hold(keys, keys);
      continue;
    }
    run(keys);
    q.ran(keys);
    while (const auto next = q.take_ready()) run(*next);
  }
  require(expected[0] == q.next(0) && expected[1] == q.next(1));
  require(q.held() <= message.size() / 2 && ran <= message.size() / 2);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::byte> message(size); // exactly `size` bytes: ASan sees any overrun
  if (size) std::memcpy(message.data(), data, size);
  check_command(message);
  check_reply(message);
  check_note(message);
  check_notice(message);
  check_queue(message);
  return 0;
}
