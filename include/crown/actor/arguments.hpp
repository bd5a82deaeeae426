// include/crown/actor/arguments.hpp — values that travel as endpoint and constructor
// arguments beyond what cereal knows: meshes (actor-mesh handles and global_ptr carry
// their own serialisation), and reading types that have no default constructor.
#pragma once
#include <crown/detail/archive.hpp>
#include <crown/mesh.hpp>
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

/// Reads a T (a specialisation builds types that have no default constructor).
template <typename T>
struct value_loader {
  template <class Ar>
  static T load(Ar& ar) {
    T value{};
    ar(value);
    return value;
  }
};

template <>
struct value_loader<mesh> {
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
