// include/crown/actor/arguments.hpp — values that travel as endpoint and constructor
// arguments beyond what cereal knows: meshes (actor-mesh handles and global_ptr carry
// their own serialisation), and reading types that have no default constructor.
#pragma once
#include <cereal/types/memory.hpp>
#include <crown/detail/archive.hpp>
#include <crown/mesh.hpp>
#include <memory>
#include <string>
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

} // namespace detail

template <class Ar>
void load(Ar& ar, mesh& m) {
  m = detail::load_value<mesh>(ar);
}

} // namespace crown
