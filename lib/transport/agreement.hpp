// lib/transport/agreement.hpp — checks that every member passed the same arguments.
#pragma once
#include <crown/mesh.hpp>
#include <initializer_list>
#include <string>

namespace crown::detail {

struct argument {
  const char* name;
  long long value;
};

/// Collective over the members of `m` (one allreduce): throws argument_error on every
/// member if any argument differs between members, naming this rank's value, the
/// first differing rank and its value. An argument named "element type" holds a type
/// tag >> 1 (detail::type_tag): its values are named by type, exchanged when they differ.
void check_same_arguments(const mesh& m, std::initializer_list<argument> args,
                          const std::string& op);

} // namespace crown::detail
