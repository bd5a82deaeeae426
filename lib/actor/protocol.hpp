// lib/actor/protocol.hpp — the controller's wire format: commands that fan out along a
// tree, replies that come back along it. Decoding trusts nothing (fuzzed: tests/fuzz)
// and allocates nothing: a decoded message is a set of views into its bytes.
#pragma once
#include <algorithm>
#include <crown/actor/wire.hpp>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace crown::detail {

inline constexpr std::uint32_t protocol_magic = 0x4e575243; // "CRWN"
inline constexpr std::uint16_t protocol_version = 6;

/// A command is this header, the payload, then per target its order (u64), for a relayed
/// command its order in the origin's stream (u64), its world rank (i32) and point index
/// (u32). The payload comes first so that the front end can serialise straight into the
/// message. A command with attachments (large arguments, which travel beside it from
/// the caller's memory) ends with their sizes (u64 each), their element types (u8 each,
/// bulk_element_code: what a receiver lands them in), the tag its sender sends them
/// on (u32: every hop down the tree picks its own) and their piece size (u32): each
/// attachment goes in pieces, so that a rank forwards a piece while the next arrives.
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
  std::uint32_t attachments = 0; ///< large arguments that travel beside the command
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
  packed<std::uint64_t> order;              ///< each target's count of earlier commands to it
  packed<std::uint64_t> origin_order;       ///< the same in the origin's stream (relayed only)
  packed<std::int32_t> ranks;               ///< world rank of each target
  packed<std::uint32_t> positions;          ///< each target's point index in the actor mesh
  packed<std::uint64_t> attachment_bytes;   ///< each attachment's size
  packed<std::uint8_t> attachment_elements; ///< and its element type (0, or unknown: bytes)
  int bulk_tag = 0;                         ///< the sender's tag for the pieces
  std::uint32_t piece_bytes = 0;
  /// The index of `rank` among the targets, or -1.
  [[nodiscard]] std::int64_t index_of(int rank) const noexcept;
  /// Sequenced by the controller for an actor: ordered in two streams.
  [[nodiscard]] bool relayed() const noexcept { return head.origin != head.sequencer; }
};

/// Completes a command whose payload was written after header_space() bytes of `out`:
/// writes the header in front and appends the per-target arrays (`origin_order` only
/// when the header says the command is relayed).
/// Attachments: their sizes, the sender's tag and the piece size (see command_header).
struct bulk_layout {
  std::span<const std::uint64_t> sizes;
  std::span<const std::uint8_t> elements; ///< one per size
  int tag = 0;
  std::uint32_t piece_bytes = 0;
};
void finish_command(command_header head, std::span<const std::int32_t> ranks,
                    std::span<const std::uint32_t> positions, std::span<const std::uint64_t> order,
                    std::span<const std::uint64_t> origin_order, std::vector<std::byte>& out,
                    const bulk_layout& bulk = {});
/// Tags of attachment pieces on the controller channel: the sender takes the next one
/// for each command it sends or forwards with attachments (tags 1 and 2 are the
/// channel's), so pieces of different commands never match each other's receives.
inline constexpr int bulk_tag_first = 1024;
inline constexpr int bulk_tags = 16384;
/// Attachments per command, the largest one and the piece sizes that decoding accepts.
inline constexpr std::uint32_t max_attachments = 1024;
inline constexpr std::uint64_t max_attachment_bytes = std::uint64_t{1} << 40;
inline constexpr std::uint32_t min_piece_bytes = 4096, max_piece_bytes = 64u << 20;
/// Pieces per command: a receiver keeps a record of each (a command of 1 KiB cannot make
/// it allocate gigabytes of records).
inline constexpr std::uint64_t max_pieces = std::uint64_t{1} << 20;
/// The attachments a command announces, read from its header alone (0 for a message
/// too short to be a command).
inline std::uint32_t attachments_of(std::span<const std::byte> message) {
  command_header h;
  if (message.size() < sizeof h) return 0;
  std::memcpy(&h, message.data(), sizeof h);
  return h.attachments;
}
/// Rewrites the tag of a command with attachments (a forwarding rank sends on its own).
void set_bulk_tag(std::vector<std::byte>& message, int tag);
inline constexpr std::size_t header_space() { return sizeof(command_header); }
/// nullopt unless magic, version and kind are right, 1 <= fanout, origin lies in the job,
/// the sequencer is the origin or the controller, every rank lies in [1, world_size) and
/// appears once, attachments (calls only) keep the limits above, and the lengths add up
/// to exactly the message.
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

/// A reply goes up the tree to a target's parent node, or from a top node (or any
/// target, when streamed) to the caller. The leg says which: a rank that called and is
/// also a target of its call holds both a node's open request and the caller's pending
/// one under the same request number, and a top node's answer may arrive before its
/// own part has run.
enum class reply_leg : std::uint8_t { to_parent = 0, to_caller = 1 };

struct reply_header {
  std::uint32_t magic = protocol_magic;
  std::uint16_t version = protocol_version;
  message_kind kind = message_kind::reply;
  std::uint64_t request = 0;
  std::uint32_t records = 0;
  reply_leg leg = reply_leg::to_parent;
  std::uint8_t reserved[3] = {}; ///< zero
};
static_assert(sizeof(reply_header) == 24, "no padding: the layout is the wire format");

/// A validated reply: its records are read one after the other with next().
class reply_view {
public:
  [[nodiscard]] std::uint64_t request() const noexcept { return request_; }
  [[nodiscard]] std::uint64_t records() const noexcept { return records_; }
  [[nodiscard]] reply_leg leg() const noexcept { return leg_; }
  /// The next record; false after the last.
  bool next(reply_record& r) noexcept;

private:
  friend std::optional<reply_view> decode_reply(std::span<const std::byte> message);
  std::uint64_t request_ = 0, records_ = 0, read_ = 0;
  reply_leg leg_ = reply_leg::to_parent;
  std::span<const std::byte> rest_;
};

/// Appends one record to a reply under construction (header first: begin_reply).
void begin_reply(std::uint64_t request, reply_leg leg, std::vector<std::byte>& out);
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
/// The nodes [first, last] that `node` forwards a command of `targets` to (none when
/// first > last).
inline std::pair<std::uint64_t, std::uint64_t> children_of(std::uint64_t node, std::uint64_t fanout,
                                                           std::uint64_t targets) {
  const std::uint64_t first = first_child(node, fanout);
  return {first, std::min<std::uint64_t>(first + fanout - 1, targets)};
}

} // namespace crown::detail
