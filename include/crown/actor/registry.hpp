// include/crown/actor/registry.hpp — actor types and their endpoints, type-erased so
// that a serving rank can construct an actor and call an endpoint from bytes alone.
#pragma once
#include <concepts>
#include <crown/actor/arguments.hpp>
#include <crown/actor/wire.hpp>
#include <crown/detail/archive.hpp>
#include <crown/error.hpp>
#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

namespace crown {

/// The endpoints of an actor class, listed once as a static member:
///   static constexpr auto endpoints = crown::endpoints(&trainer::step, &trainer::load);
template <typename... M>
constexpr std::tuple<M...> endpoints(M... m) {
  return {m...};
}

namespace detail {

std::string demangle(const char* mangled);

/// What a serving rank needs to host actors of one type (built by register_actor).
struct actor_type {
  std::string name;
  void* (*construct)(byte_reader& args) = nullptr;
  void (*destroy)(void* actor) = nullptr;
  /// Its hooks, null when the class has none: cleanup() when its actor mesh stops,
  /// supervise(failure) for failures of actor meshes it spawned (true: handled).
  void (*cleanup)(void* actor) = nullptr;
  bool (*supervise)(void* actor, const actor_failure& failure) = nullptr;
  /// Calls endpoint i with the arguments in `args` (beside it: `attachments`), appends
  /// the serialised result to `out`; returns the argument bytes it left unread.
  std::vector<std::size_t (*)(void* actor, std::span<const std::byte> args,
                              const arrived_attachments& attachments, std::vector<std::byte>& out)>
      endpoints;
  /// Combines two serialised results of endpoint i (null when not arithmetic).
  std::vector<void (*)(reduce_op op, std::span<const std::byte> a, std::span<const std::byte> b,
                       std::vector<std::byte>& out)>
      reducers;
};

/// Registers `t` under `key` (same key on every rank: the job runs one binary).
void register_actor_type(const std::string& key, actor_type t);
/// The registered type, or nullptr.
const actor_type* find_actor_type(const std::string& key);

/// What an endpoint takes and gives, for every member function a user writes: const or
/// not, noexcept or not. `result` is what travels back (a reference result is copied).
template <typename M>
struct endpoint_traits {
  static constexpr bool member_function = false;
};
template <typename A, typename R, typename... P>
struct endpoint_traits<R (A::*)(P...)> {
  static constexpr bool member_function = true;
  using actor = A;
  using declared_result = R;
  using result = std::remove_cvref_t<R>;
  using declared_params = std::tuple<P...>;
  using params = std::tuple<std::decay_t<P>...>;
};
template <typename A, typename R, typename... P>
struct endpoint_traits<R (A::*)(P...) const> : endpoint_traits<R (A::*)(P...)> {};
template <typename A, typename R, typename... P>
struct endpoint_traits<R (A::*)(P...) noexcept> : endpoint_traits<R (A::*)(P...)> {};
template <typename A, typename R, typename... P>
struct endpoint_traits<R (A::*)(P...) const noexcept> : endpoint_traits<R (A::*)(P...)> {};

/// A value that can cross ranks: cereal writes it and reads it back into a new object.
template <typename T>
inline constexpr bool travels =
    !std::is_pointer_v<T> && cereal::traits::is_output_serializable<T, byte_writer>::value &&
    (built_on_load<T> || !value_loader<T>::default_loads ||
     (std::is_default_constructible_v<T> &&
      cereal::traits::is_input_serializable<T, byte_reader>::value));
template <typename P>
inline constexpr bool param_travels =
    (!std::is_lvalue_reference_v<P> ||
     std::is_const_v<std::remove_reference_t<P>>)&&(travels<std::decay_t<P>> ||
                                                    bulk_param<std::decay_t<P>>::view) &&
    std::is_move_constructible_v<std::decay_t<P>>;
template <typename T>
struct all_params_travel;
template <typename... P>
struct all_params_travel<std::tuple<P...>> : std::bool_constant<(param_travels<P> && ...)> {};

/// The rules every endpoint follows, checked once per endpoint when its actor type is
/// registered; a broken one stops the build here, naming the endpoint (`M`).
template <auto M>
constexpr bool check_endpoint() {
  using traits = endpoint_traits<decltype(M)>;
  static_assert(traits::member_function, "crown endpoint: an endpoint is a member function of "
                                         "the actor class, listed as &actor::name");
  if constexpr (traits::member_function) {
    using R = typename traits::result;
    static_assert(!std::is_pointer_v<R>,
                  "crown endpoint: a pointer result cannot reach another rank; return a value");
    static_assert(std::is_void_v<R> || std::is_pointer_v<R> || travels<R>,
                  "crown endpoint: its result must be serialisable with cereal (a serialize "
                  "function) and default-constructible or built by load_and_construct");
    static_assert(all_params_travel<typename traits::declared_params>::value,
                  "crown endpoint: every parameter is taken by value, const& or && (a "
                  "non-const reference cannot reach the caller's object), is no pointer, is "
                  "serialisable with cereal and movable, and default-constructible or built by "
                  "load_and_construct (or is a std::span<const T> of numbers)");
    return std::is_void_v<R> || travels<R>;
  }
  return false;
}

template <typename T>
void to_bytes(const T& value, std::vector<std::byte>& out) {
  if constexpr (raw_value<T>) {
    append_raw(out, value);
  } else {
    byte_writer w(out);
    save_value(w, value);
  }
}
/// A value's message held more than the value.
inline void require_all_read(std::size_t rest) {
  if (rest != 0) throw malformed_message(std::to_string(rest) + " bytes left over after the value");
}
template <typename T>
T from_bytes(std::span<const std::byte> in) {
  if constexpr (raw_value<T>) {
    raw_reader r(in);
    const T value = r.read<T>();
    require_all_read(r.remaining());
    return value;
  } else {
    byte_reader r(in);
    T value = load_value<T>(r);
    require_all_read(r.remaining());
    return value;
  }
}

/// Reads a parameter tuple element by element (braced initialisation reads them in
/// order), so parameter types need no default constructor.
template <typename... P>
std::tuple<P...> load_params(std::type_identity<std::tuple<P...>>, byte_reader& in) {
  return std::tuple<P...>{load_param<P>(in)...};
}
/// Parameters that are all numbers (or none) travel as their bytes (as write_params
/// writes them).
template <typename... P>
constexpr bool all_raw(std::type_identity<std::tuple<P...>>) {
  return raw_values<P...>;
}
template <typename... P>
std::tuple<P...> load_params(std::type_identity<std::tuple<P...>>, raw_reader& in) {
  return std::tuple<P...>{in.read<P>()...};
}

/// A large array an endpoint took by reference goes back for the next one to arrive in
/// (one taken by value is the endpoint's).
template <typename Declared, typename P>
void keep_vector_param(P& value) {
  if constexpr (bulk_param<P>::bulk && !bulk_param<P>::view && std::is_lvalue_reference_v<Declared>)
    if (value.capacity() * sizeof(typename P::value_type) >= attach_threshold)
      keep_arrived_vector(std::any(std::move(value)));
}

/// Calls `m` with the arguments read from `in` (a byte_reader, or a raw_reader for
/// numbers): each parameter gets its value as it asks for it (moved into a by-value or
/// && parameter, so move-only types work).
template <typename M, typename Reader, std::size_t... I>
void invoke_endpoint(M m, void* actor, Reader& in, std::vector<std::byte>& out,
                     std::index_sequence<I...>) {
  using traits = endpoint_traits<M>;
  using declared = typename traits::declared_params;
  auto args = load_params(std::type_identity<typename traits::params>{}, in);
  auto* a = static_cast<typename traits::actor*>(actor);
  if constexpr (std::is_void_v<typename traits::result>)
    (a->*m)(std::forward<std::tuple_element_t<I, declared>>(std::get<I>(args))...);
  else
    to_bytes((a->*m)(std::forward<std::tuple_element_t<I, declared>>(std::get<I>(args))...), out);
  (keep_vector_param<std::tuple_element_t<I, declared>>(std::get<I>(args)), ...);
}

template <typename R>
R combine(reduce_op op, R x, R y) {
  return op == reduce_op::sum   ? static_cast<R>(x + y)
         : op == reduce_op::min ? (y < x ? y : x)
                                : (x < y ? y : x);
}

template <typename R>
void reduce_values(reduce_op op, std::span<const std::byte> a, std::span<const std::byte> b,
                   std::vector<std::byte>& out) {
  to_bytes(combine(op, from_bytes<R>(a), from_bytes<R>(b)), out);
}

template <typename A, typename... Args>
std::string actor_key() {
  return std::string(typeid(A).name()) + "(" + typeid(std::tuple<Args...>).name() + ")";
}

template <typename A>
using endpoint_list = std::remove_cv_t<decltype(A::endpoints)>;
template <typename A, std::size_t I>
using endpoint_at = std::tuple_element_t<I, endpoint_list<A>>;

template <typename A, std::size_t I>
std::size_t call_endpoint(void* actor, std::span<const std::byte> args,
                          const arrived_attachments& attachments, std::vector<std::byte>& out) {
  constexpr auto m = std::get<I>(A::endpoints);
  constexpr std::size_t params =
      std::tuple_size_v<typename endpoint_traits<std::remove_cv_t<decltype(m)>>::params>;
  if constexpr (!check_endpoint<m>()) { // only the rule's static_assert is reported
    return 0;
  } else if constexpr (all_raw(std::type_identity<typename endpoint_traits<
                                   std::remove_cv_t<decltype(m)>>::params>{})) {
    raw_reader in(args); // numbers or nothing: no archive to build
    invoke_endpoint(m, actor, in, out, std::make_index_sequence<params>{});
    return in.remaining();
  } else {
    byte_reader in(args, attachments);
    invoke_endpoint(m, actor, in, out, std::make_index_sequence<params>{});
    return in.remaining();
  }
}

template <typename R>
constexpr auto reducer_for() {
  using fn = void (*)(reduce_op, std::span<const std::byte>, std::span<const std::byte>,
                      std::vector<std::byte>&);
  if constexpr (std::is_arithmetic_v<R>)
    return fn{&reduce_values<R>};
  else
    return fn{nullptr};
}

template <typename A, std::size_t... I>
void add_endpoints(actor_type& t, std::index_sequence<I...>) {
  (t.endpoints.push_back(&call_endpoint<A, I>), ...);
  (t.reducers.push_back(reducer_for<typename endpoint_traits<endpoint_at<A, I>>::result>()), ...);
}

template <typename A, typename... Args>
actor_type make_actor_type() {
  actor_type t;
  t.name = demangle(typeid(A).name());
  t.construct = [](byte_reader& in) -> void* {
    auto args = load_params(std::type_identity<std::tuple<Args...>>{}, in);
    return std::apply([](auto&... a) { return new A(std::move(a)...); }, args);
  };
  t.destroy = [](void* a) { delete static_cast<A*>(a); };
  if constexpr (requires(A & a) { a.cleanup(); })
    t.cleanup = [](void* a) { static_cast<A*>(a)->cleanup(); };
  if constexpr (requires(A & a, const actor_failure& f) {
                  { a.supervise(f) } -> std::convertible_to<bool>;
                })
    t.supervise = [](void* a, const actor_failure& f) -> bool {
      return static_cast<A*>(a)->supervise(f);
    };
  add_endpoints<A>(t, std::make_index_sequence<std::tuple_size_v<endpoint_list<A>>>{});
  return t;
}

/// Registration at program start on every rank, instantiated by spawn<A>(args...).
template <typename A, typename... Args>
struct actor_registration {
  static inline const bool done =
      (register_actor_type(actor_key<A, Args...>(), make_actor_type<A, Args...>()), true);
};

/// The index of `m` in A::endpoints, or -1.
template <typename A, typename M, std::size_t... I>
int endpoint_index(M m, std::index_sequence<I...>) {
  int found = -1;
  (
      [&] {
        if constexpr (std::is_same_v<endpoint_at<A, I>, M>)
          if (found < 0 && std::get<I>(A::endpoints) == m) found = static_cast<int>(I);
      }(),
      ...);
  return found;
}
template <typename A, typename M>
int endpoint_index(M m) {
  return endpoint_index<A>(m, std::make_index_sequence<std::tuple_size_v<endpoint_list<A>>>{});
}

} // namespace detail
} // namespace crown
