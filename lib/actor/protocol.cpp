// The controller's wire format. Fixed-size fields are copied out (never read in
// place), every length is checked against the bytes that remain.
#include "protocol.hpp"

namespace crown::detail {
namespace {

template <typename T>
void put(std::vector<std::byte>& out, const T* data, std::size_t count) {
  const std::size_t bytes = count * sizeof(T); // small: resize + copy (GCC 12 misreads
  if (!bytes) return;                          // insert of a byte range here)
  const std::size_t at = out.size();
  out.resize(at + bytes);
  std::memcpy(out.data() + at, data, bytes);
}

/// Reads from a message front to back; fails (and stays failed) past its end.
class cursor {
public:
  explicit cursor(std::span<const std::byte> m) : m_(m) {}
  template <typename T>
  bool read(T& out) {
    if (sizeof(T) > left()) return ok_ = false;
    std::memcpy(&out, m_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return ok_;
  }
  std::span<const std::byte> take(std::size_t bytes) {
    if (bytes > left()) {
      ok_ = false;
      return {};
    }
    const auto s = m_.subspan(at_, bytes);
    at_ += bytes;
    return s;
  }
  [[nodiscard]] std::size_t left() const { return m_.size() - at_; }
  [[nodiscard]] std::span<const std::byte> rest() const { return m_.subspan(at_); }
  [[nodiscard]] bool ok() const { return ok_; }

private:
  std::span<const std::byte> m_;
  std::size_t at_ = 0;
  bool ok_ = true;
};

constexpr std::size_t per_target =
    sizeof(std::uint64_t) + sizeof(std::int32_t) + sizeof(std::uint32_t);
constexpr std::size_t record_header = sizeof(std::uint32_t) + 1 + sizeof(std::uint64_t);

} // namespace

std::int64_t command::index_of(int rank) const noexcept {
  for (std::size_t i = 0; i < ranks.size(); ++i)
    if (ranks[i] == rank) return static_cast<std::int64_t>(i);
  return -1;
}

void finish_command(command_header head, std::span<const std::int32_t> ranks,
                    std::span<const std::uint32_t> positions, std::span<const std::uint64_t> order,
                    std::span<const std::uint64_t> origin_order, std::vector<std::byte>& out,
                    const bulk_layout& bulk) {
  head.targets = static_cast<std::uint32_t>(ranks.size());
  head.attachments = static_cast<std::uint32_t>(bulk.sizes.size());
  head.payload_bytes = out.size() - header_space();
  std::memcpy(out.data(), &head, sizeof head);
  put(out, order.data(), order.size());
  if (head.origin != head.sequencer) put(out, origin_order.data(), origin_order.size());
  put(out, ranks.data(), ranks.size());
  put(out, positions.data(), positions.size());
  if (bulk.sizes.empty()) return;
  put(out, bulk.sizes.data(), bulk.sizes.size());
  put(out, bulk.elements.data(), bulk.elements.size());
  const std::uint32_t tail[2] = {static_cast<std::uint32_t>(bulk.tag), bulk.piece_bytes};
  put(out, tail, 2);
}

void set_bulk_tag(std::vector<std::byte>& message, int tag) {
  const auto t = static_cast<std::uint32_t>(tag);
  std::memcpy(message.data() + message.size() - 2 * sizeof t, &t, sizeof t);
}

std::optional<command> decode_command(std::span<const std::byte> message, int world_size) {
  cursor in(message);
  command c;
  if (!in.read(c.head)) return std::nullopt;
  const command_header& h = c.head;
  if (h.magic != protocol_magic || h.version != protocol_version) return std::nullopt;
  if (h.kind != message_kind::spawn && h.kind != message_kind::call &&
      h.kind != message_kind::stop && h.kind != message_kind::stop_mesh)
    return std::nullopt;
  if (h.fanout == 0 || static_cast<std::uint8_t>(h.mode) > 3) return std::nullopt;
  if (h.attachments > max_attachments || (h.attachments && h.kind != message_kind::call))
    return std::nullopt;
  if (h.origin < 0 || h.origin >= world_size || (h.sequencer != 0 && h.sequencer != h.origin))
    return std::nullopt;
  if (h.payload_bytes > in.left()) return std::nullopt;
  c.payload = in.take(h.payload_bytes);
  const std::size_t each = per_target + (c.relayed() ? sizeof(std::uint64_t) : 0);
  const std::size_t trailer =
      h.attachments ? h.attachments * (sizeof(std::uint64_t) + 1) + 2 * sizeof(std::uint32_t) : 0;
  if (h.targets == 0 || in.left() != std::size_t{h.targets} * each + trailer) return std::nullopt;
  c.order = packed<std::uint64_t>(in.take(h.targets * sizeof(std::uint64_t)));
  if (c.relayed())
    c.origin_order = packed<std::uint64_t>(in.take(h.targets * sizeof(std::uint64_t)));
  c.ranks = packed<std::int32_t>(in.take(h.targets * sizeof(std::int32_t)));
  c.positions = packed<std::uint32_t>(in.take(h.targets * sizeof(std::uint32_t)));
  if (h.attachments) {
    c.attachment_bytes = packed<std::uint64_t>(in.take(h.attachments * sizeof(std::uint64_t)));
    c.attachment_elements = packed<std::uint8_t>(in.take(h.attachments));
    std::uint32_t tag = 0;
    in.read(tag);
    in.read(c.piece_bytes);
    c.bulk_tag = static_cast<int>(tag);
    if (tag < bulk_tag_first || tag >= bulk_tag_first + bulk_tags ||
        c.piece_bytes < min_piece_bytes || c.piece_bytes > max_piece_bytes)
      return std::nullopt;
    std::uint64_t pieces = 0;
    for (std::size_t i = 0; i < c.attachment_bytes.size(); ++i) {
      const std::uint64_t bytes = c.attachment_bytes[i];
      if (bytes == 0 || bytes > max_attachment_bytes) return std::nullopt;
      pieces += (bytes + c.piece_bytes - 1) / c.piece_bytes;
    }
    if (pieces > max_pieces) return std::nullopt;
  }
  // Every rank once: a hostile list must not make the tree forward in circles. (A few
  // targets, most commands, are compared pairwise: no allocation per message.)
  const std::size_t n = c.ranks.size();
  for (std::size_t i = 0; i < n; ++i)
    if (c.ranks[i] < 1 || c.ranks[i] >= world_size) return std::nullopt;
  if (n <= 16) {
    for (std::size_t i = 1; i < n; ++i)
      for (std::size_t j = 0; j < i; ++j)
        if (c.ranks[i] == c.ranks[j]) return std::nullopt;
    return c;
  }
  std::vector<bool> seen(static_cast<std::size_t>(world_size));
  for (std::size_t i = 0; i < n; ++i) {
    const auto r = static_cast<std::size_t>(c.ranks[i]);
    if (seen[r]) return std::nullopt;
    seen[r] = true;
  }
  return c;
}

void sequence_command(std::vector<std::byte>& message, std::uint64_t seq,
                      std::span<const std::uint64_t> order) {
  command_header h;
  std::memcpy(&h, message.data(), sizeof h);
  h.seq = seq;
  std::memcpy(message.data(), &h, sizeof h);
  std::memcpy(message.data() + sizeof h + h.payload_bytes, order.data(), order.size_bytes());
}

void begin_note(const note_header& head, std::vector<std::byte>& out) {
  out.clear();
  put(out, &head, 1);
}

std::optional<note> decode_note(std::span<const std::byte> message) {
  cursor in(message);
  note n;
  if (!in.read(n.head) || n.head.magic != protocol_magic || n.head.version != protocol_version)
    return std::nullopt;
  if (n.head.kind != message_kind::supervise && n.head.kind != message_kind::port &&
      n.head.kind != message_kind::port_closed)
    return std::nullopt;
  n.payload = in.rest();
  return n;
}

void begin_reply(std::uint64_t request, reply_leg leg, std::vector<std::byte>& out) {
  out.clear();
  reply_header h;
  h.leg = leg;
  h.request = request;
  put(out, &h, 1);
}

void append_record(std::uint32_t position, record_kind kind, std::span<const std::byte> bytes,
                   std::vector<std::byte>& out) {
  reply_header h;
  std::memcpy(&h, out.data(), sizeof h);
  ++h.records;
  std::memcpy(out.data(), &h, sizeof h);
  const auto flag = static_cast<std::uint8_t>(kind);
  const std::uint64_t length = bytes.size();
  put(out, &position, 1);
  put(out, &flag, 1);
  put(out, &length, 1);
  put(out, bytes.data(), bytes.size());
}

bool reply_view::next(reply_record& r) noexcept {
  if (read_ == records_) return false;
  cursor in(rest_);
  std::uint8_t flag = 0;
  std::uint64_t length = 0;
  in.read(r.position);
  in.read(flag);
  in.read(length);
  r.kind = static_cast<record_kind>(flag);
  r.bytes = in.take(length);
  rest_ = in.rest();
  ++read_;
  return true;
}

std::optional<reply_view> decode_reply(std::span<const std::byte> message) {
  cursor in(message);
  reply_header h;
  if (!in.read(h) || h.magic != protocol_magic || h.version != protocol_version ||
      h.kind != message_kind::reply || h.leg > reply_leg::to_caller ||
      (h.reserved[0] | h.reserved[1] | h.reserved[2]) != 0)
    return std::nullopt;
  if (h.records > in.left() / record_header) return std::nullopt;
  reply_view v;
  v.leg_ = h.leg;
  v.request_ = h.request;
  v.records_ = h.records;
  v.rest_ = in.rest();
  for (std::uint64_t i = 0; i < h.records; ++i) { // validate all before any is used
    std::uint32_t position = 0;
    std::uint8_t flag = 0;
    std::uint64_t length = 0;
    in.read(position);
    in.read(flag);
    in.read(length);
    if (!in.ok() || flag > 2 || length > in.left()) return std::nullopt;
    in.take(length);
  }
  if (!in.ok() || in.left() != 0) return std::nullopt;
  return v;
}

std::optional<message_kind> kind_of(std::span<const std::byte> message) {
  reply_header h; // commands and replies share magic, version and kind
  if (message.size() < sizeof h) return std::nullopt;
  std::memcpy(&h, message.data(), sizeof h);
  if (h.magic != protocol_magic || h.version != protocol_version) return std::nullopt;
  return h.kind;
}

void encode_notice(std::uint64_t bytes, std::vector<std::byte>& out) {
  const std::uint32_t head[2] = {notice_magic, 0};
  out.resize(notice_size);
  std::memcpy(out.data(), head, sizeof head);
  std::memcpy(out.data() + sizeof head, &bytes, sizeof bytes);
}

std::optional<std::uint64_t> notice_bytes(std::span<const std::byte> message,
                                          std::size_t slot_bytes) {
  std::uint32_t head[2] = {0, 0};
  if (message.size() != notice_size) return std::nullopt;
  std::memcpy(head, message.data(), sizeof head);
  if (head[0] != notice_magic || head[1] != 0) return std::nullopt;
  std::uint64_t bytes = 0;
  std::memcpy(&bytes, message.data() + sizeof head, sizeof bytes);
  return bytes <= slot_bytes || bytes > 0x7fffffffu ? 0 : bytes;
}

} // namespace crown::detail
