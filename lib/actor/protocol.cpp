// The controller's wire format. Fixed-size fields are copied out (never read in
// place), every length is checked against the bytes that remain.
#include "protocol.hpp"
#include <cstring>

namespace crown::detail {
namespace {

template <typename T>
void put(std::vector<std::byte>& out, const T* data, std::size_t count) {
  const std::size_t bytes = count * sizeof(T);
  if (!bytes) return;
  const std::size_t at = out.size();
  out.resize(at + bytes);
  std::memcpy(out.data() + at, data, bytes);
}

/// Reads from a message front to back; fails (and stays failed) past its end.
class cursor {
public:
  explicit cursor(std::span<const std::byte> m) : m_(m) {}
  template <typename T>
  bool read(T* out, std::size_t count = 1) {
    if (count > left() / sizeof(T)) return ok_ = false;
    std::memcpy(out, m_.data() + at_, count * sizeof(T));
    at_ += count * sizeof(T);
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
  [[nodiscard]] bool ok() const { return ok_; }

private:
  std::span<const std::byte> m_;
  std::size_t at_ = 0;
  bool ok_ = true;
};

} // namespace

void encode_command(const command_header& head, std::span<const std::int32_t> ranks,
                    std::span<const std::uint32_t> positions, std::span<const std::uint64_t> order,
                    std::span<const std::byte> payload, std::vector<std::byte>& out) {
  out.clear();
  put(out, &head, 1);
  put(out, ranks.data(), ranks.size());
  put(out, positions.data(), positions.size());
  put(out, order.data(), order.size());
  put(out, payload.data(), payload.size());
}

std::optional<command> decode_command(std::span<const std::byte> message, int world_size) {
  cursor in(message);
  command c;
  if (!in.read(&c.head)) return std::nullopt;
  const command_header& h = c.head;
  if (h.magic != protocol_magic || h.version != protocol_version) return std::nullopt;
  if (h.kind != message_kind::spawn && h.kind != message_kind::call && h.kind != message_kind::stop)
    return std::nullopt;
  if (h.fanout == 0 || static_cast<std::uint8_t>(h.mode) > 2) return std::nullopt;
  // Sizes are checked against the bytes present before anything is allocated.
  const std::size_t per_target =
      sizeof(std::int32_t) + sizeof(std::uint32_t) + sizeof(std::uint64_t);
  if (h.targets == 0 || h.targets > in.left() / per_target) return std::nullopt;
  c.ranks.resize(h.targets);
  c.positions.resize(h.targets);
  c.order.resize(h.targets);
  in.read(c.ranks.data(), h.targets);
  in.read(c.positions.data(), h.targets);
  in.read(c.order.data(), h.targets);
  if (!in.ok() || h.payload_bytes != in.left()) return std::nullopt;
  c.payload = in.take(h.payload_bytes);
  std::vector<bool> seen(static_cast<std::size_t>(world_size > 0 ? world_size : 0));
  for (const std::int32_t r : c.ranks) {
    if (r < 1 || r >= world_size || seen[static_cast<std::size_t>(r)]) return std::nullopt;
    seen[static_cast<std::size_t>(r)] = true;
  }
  return c;
}

void begin_reply(std::uint64_t request, std::vector<std::byte>& out) {
  out.clear();
  reply_header h;
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

std::optional<std::pair<std::uint64_t, std::vector<reply_record>>>
decode_reply(std::span<const std::byte> message) {
  cursor in(message);
  reply_header h;
  if (!in.read(&h) || h.magic != protocol_magic || h.version != protocol_version ||
      h.kind != message_kind::reply)
    return std::nullopt;
  constexpr std::size_t record_header = sizeof(std::uint32_t) + 1 + sizeof(std::uint64_t);
  if (h.records > in.left() / record_header) return std::nullopt;
  std::vector<reply_record> records(h.records);
  for (reply_record& r : records) {
    std::uint8_t flag = 0;
    std::uint64_t length = 0;
    in.read(&r.position);
    in.read(&flag);
    in.read(&length);
    if (!in.ok() || flag > 2 || length > in.left()) return std::nullopt;
    r.kind = static_cast<record_kind>(flag);
    r.bytes = in.take(length);
  }
  if (!in.ok() || in.left() != 0) return std::nullopt;
  return std::pair{h.request, std::move(records)};
}

} // namespace crown::detail
