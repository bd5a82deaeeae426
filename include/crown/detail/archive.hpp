// include/crown/detail/archive.hpp — cereal archives over byte buffers: the writer
// appends to a reusable buffer, the reader never reads past its message and refuses a
// length prefix larger than the bytes that remain (so a hostile size cannot make it
// allocate more than a small multiple of the message).
#pragma once
#include <any>
#include <cereal/cereal.hpp>
#include <cereal/types/array.hpp>
#include <cereal/types/map.hpp>
#include <cereal/types/optional.hpp>
#include <cereal/types/string.hpp>
#include <cereal/types/tuple.hpp>
#include <cereal/types/utility.hpp>
#include <cereal/types/vector.hpp>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace crown::detail {

/// Thrown by byte_reader for a truncated or malformed message.
class malformed_message : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// A message ended before a value it announced (every reader's one wording).
[[noreturn]] inline void throw_truncated(std::size_t needed, std::size_t left) {
  throw malformed_message("message truncated: " + std::to_string(needed) + " bytes needed, " +
                          std::to_string(left) + " left");
}

/// Bytes that travel beside a message instead of inside it (a large argument, sent
/// from the caller's own memory: see save_param in crown/actor/arguments.hpp), each with
/// the code of its element type (bulk_element_code; 0: bytes alone), so that a receiver
/// can land it straight in a std::vector of that type.
struct attachment_list {
  std::vector<std::span<const std::byte>> parts;
  std::vector<std::uint8_t> elements;
  void add(std::span<const std::byte> bytes, std::uint8_t element) {
    parts.push_back(bytes);
    elements.push_back(element);
  }
  [[nodiscard]] std::size_t size() const noexcept { return parts.size(); }
  [[nodiscard]] bool empty() const noexcept { return parts.empty(); }
  void clear() noexcept {
    parts.clear();
    elements.clear();
  }
};

/// Attachments as they arrived: their bytes and, where one arrived straight into a
/// std::vector of its element type, that vector (in a std::any; one per part, empty
/// where not), which the one parameter that reads it takes instead of a copy. `vectors`
/// is empty while the bytes are still being forwarded to other ranks.
struct arrived_attachments {
  std::span<const std::span<const std::byte>> parts;
  std::span<std::any> vectors;
};

class byte_writer : public cereal::OutputArchive<byte_writer, cereal::AllowEmptyClassElision> {
public:
  /// Appends to `out` (not cleared: the caller decides what the buffer already holds);
  /// large arguments go to `attachments` when given.
  explicit byte_writer(std::vector<std::byte>& out, attachment_list* attachments = nullptr)
      : cereal::OutputArchive<byte_writer, cereal::AllowEmptyClassElision>(this), out_(out),
        attachments_(attachments) {}
  void saveBinary(const void* data, std::size_t bytes) {
    const auto* from = static_cast<const std::byte*>(data);
    out_.insert(out_.end(), from, from + bytes); // no zero fill before the copy
  }
  /// Where large arguments go, or null (they are written inline).
  [[nodiscard]] attachment_list* attachments() const noexcept { return attachments_; }

private:
  std::vector<std::byte>& out_;
  attachment_list* attachments_;
};

class byte_reader : public cereal::InputArchive<byte_reader, cereal::AllowEmptyClassElision> {
public:
  /// Reads `in`; arguments that travelled beside it are `attachments` (aligned for any
  /// arithmetic type, alive as long as this reader).
  explicit byte_reader(std::span<const std::byte> in, arrived_attachments attachments = {})
      : cereal::InputArchive<byte_reader, cereal::AllowEmptyClassElision>(this), in_(in),
        attachments_(attachments.parts), vectors_(attachments.vectors) {}
  byte_reader(std::span<const std::byte> in,
              std::span<const std::span<const std::byte>> attachments)
      : byte_reader(in, arrived_attachments{attachments, {}}) {}
  void loadBinary(void* data, std::size_t bytes) {
    const auto from = take(bytes);
    if (bytes) std::memcpy(data, from.data(), bytes);
  }
  [[nodiscard]] std::size_t remaining() const noexcept { return in_.size() - at_; }
  /// The next `bytes` bytes, in place (unaligned).
  std::span<const std::byte> take(std::size_t bytes) {
    if (bytes > remaining()) throw_truncated(bytes, remaining());
    at_ += bytes;
    return in_.subspan(at_ - bytes, bytes);
  }
  /// Attachment `index`, once: a parameter of a hostile message that names one another
  /// parameter read is refused (that one may own its bytes by now).
  std::span<const std::byte> attachment(std::size_t index) {
    if (index >= attachments_.size())
      throw malformed_message("an argument in attachment #" + std::to_string(index) + " of " +
                              std::to_string(attachments_.size()));
    read_.resize(attachments_.size());
    if (read_[index])
      throw malformed_message("two parameters name attachment #" + std::to_string(index));
    read_[index] = true;
    return attachments_[index];
  }
  /// Attachment `index` as the V of `size` elements it arrived in, moved out (no copy),
  /// or nullopt where it did not arrive as one.
  template <typename V>
  std::optional<V> take_vector(std::size_t index, std::size_t size) {
    V* vector = index < vectors_.size() ? std::any_cast<V>(&vectors_[index]) : nullptr;
    if (!vector || vector->size() != size) return std::nullopt;
    return std::optional<V>(std::move(*vector));
  }
  /// Storage that lives as long as this reader (an aligned copy of a small array that a
  /// std::span parameter views).
  std::byte* keep(std::size_t bytes) {
    kept_.push_back(
        std::make_unique_for_overwrite<std::max_align_t[]>(bytes / sizeof(std::max_align_t) + 1));
    return reinterpret_cast<std::byte*>(kept_.back().get());
  }

private:
  std::span<const std::byte> in_;
  std::size_t at_ = 0;
  std::span<const std::span<const std::byte>> attachments_;
  std::span<std::any> vectors_;
  std::vector<bool> read_; ///< by attachment
  std::vector<std::unique_ptr<std::max_align_t[]>> kept_;
};

/// Types whose serialised form is just their bytes (what the archives below write for
/// them): they travel without a cereal archive, whose construction and destruction cost
/// hundreds of instructions per call. bool is not one: loading checks its byte.
template <typename T>
inline constexpr bool raw_value = std::is_arithmetic_v<T> && !std::is_same_v<T, bool>;
template <typename... T>
inline constexpr bool raw_values = (raw_value<T> && ...); ///< true for none, too

/// Reads raw values from a message, with the archive's checks and messages.
class raw_reader {
public:
  explicit raw_reader(std::span<const std::byte> in) : in_(in) {}
  template <typename T>
  T read() {
    if (sizeof(T) > in_.size()) throw_truncated(sizeof(T), in_.size());
    T value;
    std::memcpy(&value, in_.data(), sizeof value);
    in_ = in_.subspan(sizeof value);
    return value;
  }
  [[nodiscard]] std::size_t remaining() const noexcept { return in_.size(); }

private:
  std::span<const std::byte> in_;
};

template <typename T>
void append_raw(std::vector<std::byte>& out, const T& value) {
  const auto* bytes = reinterpret_cast<const std::byte*>(&value);
  out.insert(out.end(), bytes, bytes + sizeof value);
}

// Arithmetic values as raw bytes.
template <class T>
std::enable_if_t<std::is_arithmetic_v<T>> CEREAL_SAVE_FUNCTION_NAME(byte_writer& ar, const T& t) {
  ar.saveBinary(std::addressof(t), sizeof(t));
}
template <class T>
std::enable_if_t<std::is_arithmetic_v<T>> CEREAL_LOAD_FUNCTION_NAME(byte_reader& ar, T& t) {
  if constexpr (std::is_same_v<T, bool>) { // a byte other than 0 or 1 is no bool (UB: fuzzed)
    std::uint8_t byte = 0;
    ar.loadBinary(&byte, 1);
    if (byte > 1) throw malformed_message("a bool of value " + std::to_string(byte));
    t = byte == 1;
  } else {
    ar.loadBinary(std::addressof(t), sizeof(t));
  }
}
// Names are not stored.
template <class T>
void CEREAL_SAVE_FUNCTION_NAME(byte_writer& ar, const cereal::NameValuePair<T>& t) {
  ar(t.value);
}
template <class T>
void CEREAL_LOAD_FUNCTION_NAME(byte_reader& ar, cereal::NameValuePair<T>& t) {
  ar(t.value);
}
// Container sizes: a size larger than the bytes left cannot be honest (every element
// takes at least one byte), and is refused before the container allocates.
template <class T>
void CEREAL_SAVE_FUNCTION_NAME(byte_writer& ar, const cereal::SizeTag<T>& t) {
  const auto size = static_cast<std::uint64_t>(t.size);
  ar.saveBinary(&size, sizeof size);
}
template <class T>
void CEREAL_LOAD_FUNCTION_NAME(byte_reader& ar, cereal::SizeTag<T>& t) {
  std::uint64_t size = 0;
  ar.loadBinary(&size, sizeof size);
  if (size > ar.remaining())
    throw malformed_message("length prefix " + std::to_string(size) + " exceeds the " +
                            std::to_string(ar.remaining()) + " bytes left in the message");
  t.size = static_cast<std::remove_reference_t<T>>(size);
}
template <class T>
void CEREAL_SAVE_FUNCTION_NAME(byte_writer& ar, const cereal::BinaryData<T>& b) {
  ar.saveBinary(b.data, static_cast<std::size_t>(b.size));
}
template <class T>
void CEREAL_LOAD_FUNCTION_NAME(byte_reader& ar, cereal::BinaryData<T>& b) {
  ar.loadBinary(b.data, static_cast<std::size_t>(b.size));
}

} // namespace crown::detail

CEREAL_REGISTER_ARCHIVE(crown::detail::byte_writer)
CEREAL_REGISTER_ARCHIVE(crown::detail::byte_reader)
CEREAL_SETUP_ARCHIVE_TRAITS(crown::detail::byte_reader, crown::detail::byte_writer)
