// include/crown/actor/arguments.hpp — values that travel as endpoint and constructor
// arguments beyond what cereal knows: meshes (actor-mesh handles and global_ptr carry
// their own serialisation), and reading types that have no default constructor.
#pragma once
#include <any>
#include <cereal/types/memory.hpp>
#include <crown/detail/archive.hpp>
#include <crown/mesh.hpp>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <tuple>
#include <vector>

namespace crown {

/// A mesh travels as its dimensions and world ranks; it is checked again on arrival.
template <class Ar>
void save(Ar& ar, const mesh& m) {
  std::vector<std::string> names;
  std::vector<int> sizes;
  for (const dim& d : m.dims()) {
    names.push_back(d.name);
    sizes.push_back(d.size);
  }
  ar(names, sizes, std::vector<int>(m.begin(), m.end()));
}

namespace detail {

/// A type without a default constructor that cereal builds from the archive (its
/// load_and_construct): it travels as cereal's unique_ptr does, a "present" byte first.
template <typename T>
inline constexpr bool built_on_load = !std::is_default_constructible_v<T> &&
                                      cereal::traits::has_load_and_construct<T, byte_reader>::value;

/// Reads a T: default-constructed and then loaded, built by its load_and_construct, or
/// (a specialisation) built from what the archive holds.
template <typename T>
struct value_loader {
  static constexpr bool default_loads = true; ///< a specialisation has its own way
  template <class Ar>
  static T load(Ar& ar) {
    if constexpr (built_on_load<T>) {
      std::unique_ptr<T> built;
      ar(built);
      if (!built) throw malformed_message("a missing value of a type built on load");
      return std::move(*built);
    } else {
      T value{};
      ar(value);
      return value;
    }
  }
};

/// Writes a T so that load_value<T> reads it back.
template <typename T, class Ar>
void save_value(Ar& ar, const T& value) {
  if constexpr (built_on_load<T>) ar(std::uint8_t{1});
  ar(value);
}

template <>
struct value_loader<mesh> {
  static constexpr bool default_loads = false;
  template <class Ar>
  static mesh load(Ar& ar) {
    std::vector<std::string> names;
    std::vector<int> sizes, ranks;
    ar(names, sizes, ranks);
    if (names.size() != sizes.size())
      throw malformed_message("a mesh with " + std::to_string(names.size()) + " names for " +
                              std::to_string(sizes.size()) + " dimensions");
    std::vector<dim> dims;
    for (std::size_t i = 0; i < names.size(); ++i) dims.push_back({names[i], sizes[i]});
    return mesh(std::move(dims), std::move(ranks));
  }
};

template <typename T, class Ar>
T load_value(Ar& ar) {
  return value_loader<T>::load(ar);
}

/// Arrays of numbers as parameters: a std::vector<T>, or a std::span<const T> that
/// views the arguments while the endpoint runs. From attach_threshold bytes up they
/// travel beside the command, straight from the caller's memory (no copy into the
/// message), and a span parameter views the received bytes (no copy out of it).
inline constexpr std::size_t attach_threshold = 64 << 10;
template <typename T>
inline constexpr bool bulk_element = std::is_arithmetic_v<T> && !std::is_same_v<T, bool>;
/// The element types an attachment may arrive as (a std::vector of it, no copy), by
/// code: index + 1 here (0: bytes alone). The sender writes the code, the receiver
/// (lib/actor/channel.cpp) makes the vector.
using bulk_element_types =
    std::tuple<char, signed char, unsigned char, wchar_t, char8_t, char16_t, char32_t, short,
               unsigned short, int, unsigned int, long, unsigned long, long long,
               unsigned long long, float, double, long double>;
template <typename T, std::size_t I = 0>
constexpr std::uint8_t bulk_element_code() {
  if constexpr (I == std::tuple_size_v<bulk_element_types>)
    return 0;
  else if constexpr (std::is_same_v<T, std::tuple_element_t<I, bulk_element_types>>)
    return static_cast<std::uint8_t>(I + 1);
  else
    return bulk_element_code<T, I + 1>();
}
/// Keeps a vector an attachment arrived in (or one an endpoint was done with) for the
/// next attachment of its type (lib/actor/channel.cpp): a payload sent each step then
/// lands in the same pages, with no zero fill.
void keep_arrived_vector(std::any vector);

template <typename P>
struct bulk_param {
  static constexpr bool bulk = false, view = false;
};
template <typename T>
requires bulk_element<T>
struct bulk_param<std::vector<T>> {
  static constexpr bool bulk = true, view = false;
  using element = T;
};
template <typename T>
requires bulk_element<T>
struct bulk_param<std::span<const T>> {
  static constexpr bool bulk = true, view = true;
  using element = T;
};

/// Writes one parameter: an array as a marker byte (0 inline, 1 beside the message), its
/// length and then its bytes or its attachment's index; any other value as save_value.
/// `may_attach` is false for a converted temporary, which dies before the send.
template <typename P>
void save_param(byte_writer& ar, const P& value, bool may_attach = true) {
  if constexpr (bulk_param<P>::bulk) {
    using T = typename bulk_param<P>::element;
    const auto bytes = std::as_bytes(std::span<const T>(value.data(), value.size()));
    attachment_list* beside = may_attach ? ar.attachments() : nullptr;
    const bool attach = beside && bytes.size() >= attach_threshold;
    ar(std::uint8_t{attach}, static_cast<std::uint64_t>(value.size()));
    if (!attach) return ar.saveBinary(bytes.data(), bytes.size());
    ar(static_cast<std::uint32_t>(beside->size()));
    beside->add(bytes, bulk_element_code<T>());
  } else {
    save_value(ar, value);
  }
}

/// Reads what save_param wrote (the attachments are the reader's).
template <typename P>
P load_param(byte_reader& ar) {
  if constexpr (bulk_param<P>::bulk) {
    using T = typename bulk_param<P>::element;
    std::uint8_t attached = 0;
    std::uint64_t count = 0;
    ar(attached, count);
    std::span<const std::byte> bytes;
    if (attached == 1) {
      std::uint32_t index = 0;
      ar(index);
      bytes = ar.attachment(index);
      if constexpr (!bulk_param<P>::view) // arrived as the vector itself: no copy
        if (auto arrived = ar.take_vector<P>(index, count)) return std::move(*arrived);
      if (bytes.size() % sizeof(T) != 0 || bytes.size() / sizeof(T) != count ||
          reinterpret_cast<std::uintptr_t>(bytes.data()) % alignof(T) != 0)
        throw malformed_message("attachment #" + std::to_string(index) + " of " +
                                std::to_string(bytes.size()) + " bytes for " +
                                std::to_string(count) + " elements of " +
                                std::to_string(sizeof(T)) + " bytes");
    } else if (attached == 0) {
      if (count > ar.remaining() / sizeof(T))
        throw malformed_message("an array of " + std::to_string(count) + " elements in the " +
                                std::to_string(ar.remaining()) + " bytes left in the message");
      bytes = ar.take(count * sizeof(T));
    } else {
      throw malformed_message("an array argument marked " + std::to_string(attached));
    }
    const auto* aligned = reinterpret_cast<const T*>(bytes.data()); // attachments only
    if constexpr (bulk_param<P>::view) {
      if (attached == 1) return P(aligned, count);
      std::byte* copy = ar.keep(bytes.size()); // inline bytes are unaligned
      if (!bytes.empty()) std::memcpy(copy, bytes.data(), bytes.size());
      return P(reinterpret_cast<const T*>(copy), count);
    } else {
      if (attached == 1) return P(aligned, aligned + count); // one pass: no zero fill
      P values(count);
      if (!bytes.empty()) std::memcpy(values.data(), bytes.data(), bytes.size());
      return values;
    }
  } else {
    return load_value<P>(ar);
  }
}

} // namespace detail

template <class Ar>
void load(Ar& ar, mesh& m) {
  m = detail::load_value<mesh>(ar);
}

} // namespace crown
