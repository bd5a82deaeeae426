// include/crown/engine/functions.hpp — element functions and kernels for remote tensors,
// registered by name at static initialisation on every rank (the job runs one binary),
// so that the controller names them and the workers run them.
#pragma once
#include <array>
#include <crown/error.hpp>
#include <crown/tensor/dist_tensor.hpp>
#include <cstddef>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <typeinfo>
#include <vector>

namespace crown {

/// Runs on every owned element, in row-major order: x = f(global index, x).
template <typename T, std::size_t N>
using element_function = void (*)(const std::array<std::size_t, N>& index, T& x);
/// Runs on every worker with its local dist_tensors (the ones named in
/// tensor_engine::run, in that order) and the call's scalars; it may communicate
/// collectively over the tensors' mesh (every worker runs it together).
template <typename T, std::size_t N>
using kernel_function = void (*)(std::span<dist_tensor<T, N>* const> tensors,
                                 std::span<const double> scalars);

namespace detail {

struct registered_function {
  const std::type_info* type = nullptr; ///< of the function pointer
  void (*fn)() = nullptr;               ///< cast back to *type before the call
  int registrations = 0;                ///< more than one is an error when it is named
};
inline std::map<std::string, registered_function, std::less<>>& function_table() {
  static std::map<std::string, registered_function, std::less<>> table;
  return table;
}
/// A duplicate is recorded, not thrown: static initialisation cannot report it well.
template <typename F>
bool add_function(std::string name, F f) {
  registered_function& r = function_table()[std::move(name)];
  r.type = &typeid(F);
  r.fn = reinterpret_cast<void (*)()>(f);
  ++r.registrations;
  return true;
}
/// The function registered as `name` with type F; argument_error (with `context`) when
/// none is, when it has another type, or when the name was registered twice.
template <typename F>
F find_function(std::string_view name, const char* kind, const std::string& context) {
  const auto& table = function_table();
  const auto it = table.find(name);
  if (it == table.end())
    throw argument_error(context, "no " + std::string(kind) + " is registered as '" +
                                      std::string(name) + "'");
  if (it->second.registrations > 1)
    throw argument_error(context, "'" + std::string(name) + "' is registered " +
                                      std::to_string(it->second.registrations) + " times");
  if (*it->second.type != typeid(F))
    throw argument_error(context, "the " + std::string(kind) + " '" + std::string(name) +
                                      "' is registered for another element type or rank");
  return reinterpret_cast<F>(it->second.fn);
}

} // namespace detail

/// Registers an element function under a name unique in the program; call it at
/// namespace scope so that every rank registers it before main:
///   const bool ramp = crown::register_element_function<double, 2>("ramp", &ramp_fn);
template <typename T, std::size_t N>
bool register_element_function(std::string name, element_function<T, N> f) {
  return detail::add_function(std::move(name), f);
}
/// Registers a kernel, as register_element_function.
template <typename T, std::size_t N>
bool register_kernel(std::string name, kernel_function<T, N> f) {
  return detail::add_function(std::move(name), f);
}

} // namespace crown
