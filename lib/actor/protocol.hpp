// lib/actor/protocol.hpp — the controller's wire format: commands that fan out along a
// tree, replies that come back along it. Decoding trusts nothing (fuzzed: tests/fuzz)
// and allocates nothing: a decoded message is a set of views into its bytes.
#pragma once
#include <crown/actor/wire.hpp>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace crown::detail {

inline constexpr std::uint32_t protocol_magic = 0x4e575243; // "CRWN"
inline constexpr std::uint16_t protocol_version = 3;

/// A command is this header, the payload, then per target its order (u64), for a relayed
/// command its order in the origin's stream (u64), its world rank (i32) and point index
/// (u32). The payload comes first so that the front end can serialise straight into the
/// message (no copy of large payloads).
///
/// Node 0 of the tree is `origin`, the rank that called (the controller or an actor's
/// rank): the top targets' replies go there. `order` counts the commands each target
/// got before from `sequencer`: the origin itself, or the controller (rank 0) for a
/// command it relayed for an actor (spawns and calls of several actors), which then
/// also carries the origin's own count, so that both orders hold.
struct command_header {
  std::uint32_t magic = protocol_magic;
  std::uint16_t version = protocol_version;
  message_kind kind = message_kind::call;
  std::uint64_t seq = 0;     ///< the sequencer's sequence number
  std::uint64_t request = 0; ///< matches the replies; unique in the job (origin's rank inside)
  std::uint64_t mesh_id = 0; ///< actor mesh, unique in the job (spawner's rank inside)
  std::uint32_t endpoint = 0;
  reply_mode mode = reply_mode::gather;
  std::uint8_t reduce_op = 0;
  std::uint16_t fanout = 16;
  std::uint32_t targets = 0;
  std::int32_t origin = 0;
  std::int32_t sequencer = 0;
  std::uint32_t reserved = 0;
  std::uint64_t payload_bytes = 0;
};
static_assert(sizeof(command_header) == 64, "no padding: the layout is the wire format");

/// Elements of T stored unaligned inside a message (read with memcpy).
template <typename T>
class packed {
public:
  packed() = default;
  explicit packed(std::span<const std::byte> bytes) : bytes_(bytes) {}
  [[nodiscard]] std::size_t size() const noexcept { return bytes_.size() / sizeof(T); }
  T operator[](std::size_t i) const noexcept {
    T v;
    std::memcpy(&v, bytes_.data() + i * sizeof(T), sizeof(T));
    return v;
  }
  [[nodiscard]] std::span<const std::byte> bytes() const noexcept { return bytes_; }

private:
  std::span<const std::byte> bytes_;
};

/// A decoded command, viewing the message it was decoded from. Target i is tree node
/// i + 1 (node 0 is the controller); the children of node k are nodes
/// k*fanout+1 .. k*fanout+fanout.
struct command {
  command_header head;
  std::span<const std::byte> payload;
  packed<std::uint64_t> order;        ///< each target's count of earlier commands to it
  packed<std::uint64_t> origin_order; ///< the same in the origin's stream (relayed only)
  packed<std::int32_t> ranks;         ///< world rank of each target
  packed<std::uint32_t> positions;    ///< each target's point index in the actor mesh
  /// The index of `rank` among the targets, or -1.
  [[nodiscard]] std::int64_t index_of(int rank) const noexcept;
  /// Sequenced by the controller for an actor: ordered in two streams.
  [[nodiscard]] bool relayed() const noexcept { return head.origin != head.sequencer; }
};

/// Completes a command whose payload was written after header_space() bytes of `out`:
/// writes the header in front and appends the per-target arrays (`origin_order` only
/// when the header says the command is relayed).
void finish_command(command_header head, std::span<const std::int32_t> ranks,
                    std::span<const std::uint32_t> positions, std::span<const std::uint64_t> order,
                    std::span<const std::uint64_t> origin_order, std::vector<std::byte>& out);
inline constexpr std::size_t header_space() { return sizeof(command_header); }
/// nullopt unless magic, version and kind are right, 1 <= fanout, origin lies in the job,
/// the sequencer is the origin or the controller, every rank lies in [1, world_size) and
/// appears once, and the lengths add up to exactly the message.
std::optional<command> decode_command(std::span<const std::byte> message, int world_size);
/// The controller sequences a relayed command (a copy of it, `message`): its sequence
/// number and each target's order in the controller's stream.
void sequence_command(std::vector<std::byte>& message, std::uint64_t seq,
                      std::span<const std::uint64_t> order);

/// A one-way message: a supervision event for actor mesh `target` (payload: the
/// failures), a message for port `target` (payload: the value; `seq` orders one sender's
/// messages, `type` names the value's type by hash), or a port's closing notice.
struct note_header {
  std::uint32_t magic = protocol_magic;
  std::uint16_t version = protocol_version;
  message_kind kind = message_kind::port;
  std::uint64_t target = 0;
  std::uint64_t seq = 0;
  std::uint64_t type = 0;
};
static_assert(sizeof(note_header) == 32, "no padding: the layout is the wire format");
struct note {
  note_header head;
  std::span<const std::byte> payload;
};
/// Starts a note in `out` (the payload is appended after it).
void begin_note(const note_header& head, std::vector<std::byte>& out);
/// nullopt unless magic, version and kind (supervise, port or port_closed) are right.
std::optional<note> decode_note(std::span<const std::byte> message);

/// What a reply record holds: a serialised value, an actor_failure, or a log_line.
enum class record_kind : std::uint8_t { value = 0, error = 1, log = 2 };

/// One line an actor logged while it ran (crown::log), for the controller to print.
struct log_line {
  static constexpr int stdout_level = -1; ///< a line the actor printed to stdout
  int level = 0;                          ///< a crown::log_level, or stdout_level
  std::string text;                       ///< "[trainers{dp=1}] message"
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

/// A validated reply: its records are read one after the other with next().
class reply_view {
public:
  [[nodiscard]] std::uint64_t request() const noexcept { return request_; }
  [[nodiscard]] std::uint64_t records() const noexcept { return records_; }
  /// The next record; false after the last.
  bool next(reply_record& r) noexcept;

private:
  friend std::optional<reply_view> decode_reply(std::span<const std::byte> message);
  std::uint64_t request_ = 0, records_ = 0, read_ = 0;
  std::span<const std::byte> rest_;
};

/// Appends one record to a reply under construction (header first: begin_reply).
void begin_reply(std::uint64_t request, std::vector<std::byte>& out);
void append_record(std::uint32_t position, record_kind kind, std::span<const std::byte> bytes,
                   std::vector<std::byte>& out);
/// nullopt unless the header is right and the records fill exactly the message.
std::optional<reply_view> decode_reply(std::span<const std::byte> message);

/// The kind of any message (command or reply) from its common first bytes, or nullopt.
std::optional<message_kind> kind_of(std::span<const std::byte> message);

/// A message too large for a receive slot travels as a notice (this, in a slot) and
/// then its body, on a tag of its own. A notice announces; it allocates nothing until
/// the body itself has arrived (channel.cpp), so a false one costs no memory.
inline constexpr std::uint32_t notice_magic = 0x4c575243; // "CRWL"
inline constexpr std::size_t notice_size = 16;
/// The notice for a body of `bytes`.
void encode_notice(std::uint64_t bytes, std::vector<std::byte>& out);
/// The body size a slot message announces: nullopt when it is no notice at all (an
/// ordinary message), 0 when it is a notice that cannot be right (a body that fits a
/// slot of `slot_bytes`, or one beyond MPI's int count), else the size.
std::optional<std::uint64_t> notice_bytes(std::span<const std::byte> message,
                                          std::size_t slot_bytes);

/// Tree helpers over node indices (0 = controller); 64-bit, so no product overflows.
inline std::uint64_t parent_node(std::uint64_t node, std::uint64_t fanout) {
  return (node - 1) / fanout;
}
inline std::uint64_t first_child(std::uint64_t node, std::uint64_t fanout) {
  return node * fanout + 1;
}

} // namespace crown::detail
