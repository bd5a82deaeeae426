// lib/actor/protocol.hpp — the controller's wire format: commands that fan out along a
// tree, replies that come back along it. Decoding trusts nothing (fuzzed: tests/fuzz).
#pragma once
#include <crown/actor/wire.hpp>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace crown::detail {

inline constexpr std::uint32_t protocol_magic = 0x4e575243; // "CRWN"
inline constexpr std::uint16_t protocol_version = 1;

struct command_header {
  std::uint32_t magic = protocol_magic;
  std::uint16_t version = protocol_version;
  message_kind kind = message_kind::call;
  std::uint64_t seq = 0;     ///< the controller's sequence number
  std::uint64_t request = 0; ///< matches the replies
  std::uint32_t mesh_id = 0; ///< actor mesh
  std::uint32_t endpoint = 0;
  reply_mode mode = reply_mode::gather;
  std::uint8_t reduce_op = 0;
  std::uint16_t fanout = 16;
  std::uint32_t targets = 0;
  std::uint64_t payload_bytes = 0;
};

/// A decoded command. Target i is tree node i + 1 (node 0 is the controller); the
/// children of node k are nodes k*fanout+1 .. k*fanout+fanout.
struct command {
  command_header head;
  std::vector<std::int32_t> ranks;      ///< world rank of each target
  std::vector<std::uint32_t> positions; ///< each target's point index in the actor mesh
  std::vector<std::uint64_t> order;     ///< each target's count of earlier commands to it
  std::span<const std::byte> payload;
};

void encode_command(const command_header& head, std::span<const std::int32_t> ranks,
                    std::span<const std::uint32_t> positions, std::span<const std::uint64_t> order,
                    std::span<const std::byte> payload, std::vector<std::byte>& out);
/// nullopt unless magic, version and kind are right, 1 <= fanout, every rank lies in
/// [1, world_size) and appears once, and the lengths add up to exactly the message.
std::optional<command> decode_command(std::span<const std::byte> message, int world_size);

/// What a reply record holds: a serialised value, an actor_failure, or a log_line.
enum class record_kind : std::uint8_t { value = 0, error = 1, log = 2 };

/// One line an actor logged while it ran (crown::log), for the controller to print.
struct log_line {
  int level = 0;    ///< a crown::log_level
  std::string text; ///< "[trainers{dp=1}] message"
  template <class Ar>
  void serialize(Ar& ar) {
    ar(level, text);
  }
};

/// One target's answer inside a reply.
struct reply_record {
  std::uint32_t position = 0; ///< point index; all_positions for a reduced value
  record_kind kind = record_kind::value;
  std::span<const std::byte> bytes;
};
inline constexpr std::uint32_t all_positions = 0xffffffffu;

struct reply_header {
  std::uint32_t magic = protocol_magic;
  std::uint16_t version = protocol_version;
  message_kind kind = message_kind::reply;
  std::uint64_t request = 0;
  std::uint64_t records = 0;
};

/// Appends one record to a reply under construction (header first: begin_reply).
void begin_reply(std::uint64_t request, std::vector<std::byte>& out);
void append_record(std::uint32_t position, record_kind kind, std::span<const std::byte> bytes,
                   std::vector<std::byte>& out);
/// nullopt unless the header is right and the records fill exactly the message.
std::optional<std::pair<std::uint64_t, std::vector<reply_record>>>
decode_reply(std::span<const std::byte> message);

/// Tree helpers over node indices (0 = controller); 64-bit, so no product overflows.
inline std::uint64_t parent_node(std::uint64_t node, std::uint64_t fanout) {
  return (node - 1) / fanout;
}
inline std::uint64_t first_child(std::uint64_t node, std::uint64_t fanout) {
  return node * fanout + 1;
}

} // namespace crown::detail
