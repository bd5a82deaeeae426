// include/crown/detail/archive.hpp — cereal archives over byte buffers: the writer
// appends to a reusable buffer, the reader never reads past its message and refuses a
// length prefix larger than the bytes that remain (so a hostile size cannot make it
// allocate more than a small multiple of the message).
#pragma once
#include <cereal/cereal.hpp>
#include <cereal/types/array.hpp>
#include <cereal/types/map.hpp>
#include <cereal/types/optional.hpp>
#include <cereal/types/string.hpp>
#include <cereal/types/tuple.hpp>
#include <cereal/types/utility.hpp>
#include <cereal/types/vector.hpp>
#include <cstddef>
#include <cstring>
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

class byte_writer : public cereal::OutputArchive<byte_writer, cereal::AllowEmptyClassElision> {
public:
  /// Appends to `out` (not cleared: the caller decides what the buffer already holds).
  explicit byte_writer(std::vector<std::byte>& out)
      : cereal::OutputArchive<byte_writer, cereal::AllowEmptyClassElision>(this), out_(out) {}
  void saveBinary(const void* data, std::size_t bytes) {
    const auto* from = static_cast<const std::byte*>(data);
    out_.insert(out_.end(), from, from + bytes); // no zero fill before the copy
  }

private:
  std::vector<std::byte>& out_;
};

class byte_reader : public cereal::InputArchive<byte_reader, cereal::AllowEmptyClassElision> {
public:
  explicit byte_reader(std::span<const std::byte> in)
      : cereal::InputArchive<byte_reader, cereal::AllowEmptyClassElision>(this), in_(in) {}
  void loadBinary(void* data, std::size_t bytes) {
    if (bytes > remaining())
      throw malformed_message("message truncated: " + std::to_string(bytes) + " bytes needed, " +
                              std::to_string(remaining()) + " left");
    if (bytes) std::memcpy(data, in_.data() + at_, bytes);
    at_ += bytes;
  }
  [[nodiscard]] std::size_t remaining() const noexcept { return in_.size() - at_; }

private:
  std::span<const std::byte> in_;
  std::size_t at_ = 0;
};

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
