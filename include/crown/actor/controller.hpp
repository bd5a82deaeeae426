// include/crown/actor/controller.hpp — the single controller: spawn actor meshes on the
// serving ranks and call their endpoints (runtime::control runs it on rank 0).
#pragma once
#include <algorithm>
#include <crown/actor/future.hpp>
#include <crown/actor/port.hpp>
#include <crown/actor/registry.hpp>
#include <crown/actor/value_mesh.hpp>
#include <crown/actor/wire.hpp>
#include <crown/mesh.hpp>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace crown {

class controller;

namespace detail {

/// Where failures that nobody waited for go: the actor that spawned the actor mesh (its
/// rank and actor mesh), or the controller (rank 0, mesh 0).
struct supervisor_ref {
  int rank = 0;
  std::uint64_t mesh = 0;
  template <class Ar>
  void serialize(Ar& ar) {
    ar(rank, mesh);
  }
};
/// The actor whose endpoint or constructor runs on this thread, or the controller.
supervisor_ref current_supervisor() noexcept;

/// The buffer to serialise a command's payload into (reused from command to command).
std::vector<std::byte>& begin_command(control_core& core);
/// The command's large arguments, which travel beside it (emptied by begin_command):
/// submit sends them from the caller's memory and returns once they are sent.
attachment_list& command_attachments(control_core& core);
/// Sends the command begun with begin_command to `ranks` (each with its point index in
/// the actor mesh); returns the request that its replies answer. On an actor's rank a
/// spawn, or a command to several actors, goes through the controller, which orders it
/// among its own commands (one global order for collectives among actors).
std::uint64_t submit(control_core& core, message_kind kind, std::uint64_t mesh_id,
                     std::uint32_t endpoint, reply_mode mode, reduce_op op,
                     std::span<const int> ranks, std::span<const std::uint32_t> positions,
                     supervisor_ref supervisor);
std::uint64_t new_mesh_id(control_core& core);
/// What a spawn command carries (written by spawn_on, read by the serving rank).
struct spawn_spec {
  std::string name;
  std::vector<std::string> dim_names;
  std::vector<int> dim_sizes;
  std::vector<int> ranks;
  std::string key;             ///< actor_key<A, Args...>()
  std::vector<std::byte> args; ///< the constructor's arguments, serialised
  supervisor_ref supervisor;   ///< who spawned it
  template <class Ar>
  void save(Ar& ar) const {
    ar(name, dim_names, dim_sizes, ranks, key, supervisor, cereal::make_size_tag(args.size()));
    ar(cereal::binary_data(args.data(), args.size()));
  }
  template <class Ar>
  void load(Ar& ar) {
    cereal::size_type bytes = 0;
    ar(name, dim_names, dim_sizes, ranks, key, supervisor, cereal::make_size_tag(bytes));
    args.resize(bytes);
    ar(cereal::binary_data(args.data(), bytes));
  }
};

/// The index in `positions` of the actor with the fewest of this rank's calls in flight.
std::size_t least_busy(control_core& core, std::uint64_t mesh_id,
                       std::span<const std::uint32_t> positions);
/// Records a spawned actor mesh (the watchdog names the actors a hung rank hosts).
void note_mesh(control_core& core, std::uint64_t mesh_id, const std::string& name,
               const crown::mesh& on);
/// Throws argument_error for meshes that include the controller or ranks outside the
/// job, and for empty names.
void check_spawn(const control_core& core, const crown::mesh& on, const std::string& name);

struct actor_mesh_ref {
  std::uint64_t session = 0; ///< the control session the handle lives in
  std::uint64_t id = 0;
  std::string name;
  supervisor_ref supervisor;            ///< who spawned the actor mesh
  crown::mesh full;                     ///< the mesh the actors were spawned on
  crown::mesh view;                     ///< a handle's slice of it
  std::vector<int> ranks;               ///< the view's ranks ...
  std::vector<std::uint32_t> positions; ///< ... and their point indices in `full`
  std::vector<int> view_index;          ///< by point index in `full`: index in view, or -1
  std::shared_ptr<bool> stopped;        ///< set by stop() on this rank, shared by slices
};
/// Builds the reference for `view`, a part of `full`, with its targets worked out once.
std::shared_ptr<const actor_mesh_ref> make_actor_mesh_ref(std::uint64_t id, std::string name,
                                                          supervisor_ref supervisor,
                                                          crown::mesh full, crown::mesh view,
                                                          std::shared_ptr<bool> stopped = {});

/// The gathered values of a call, in the order of the view's points (R needs no default
/// constructor). Throws malformed_message unless every point answered exactly once.
template <typename R>
std::vector<R> in_view_order(call_result& r, const actor_mesh_ref& target) {
  const auto slot = [&](std::uint32_t position) {
    return position < target.view_index.size() ? target.view_index[position] : -1;
  };
  std::sort(r.values.begin(), r.values.end(),
            [&](const auto& a, const auto& b) { return slot(a.first) < slot(b.first); });
  std::vector<R> values;
  values.reserve(r.values.size());
  for (auto& [position, bytes] : r.values) {
    if (slot(position) != static_cast<int>(values.size()))
      throw malformed_message("a reply for point #" + std::to_string(position) +
                              " that is not the next point of " + target.view.to_string());
    values.push_back(from_bytes<R>(bytes));
  }
  if (values.size() != target.ranks.size())
    throw malformed_message(std::to_string(values.size()) + " answers from " +
                            std::to_string(target.ranks.size()) + " actors");
  return values;
}

/// Serialises the arguments as the endpoint's parameter tuple, converting only those
/// whose type differs (a large vector argument is written once, never copied).
/// Large arrays go to `beside` (when given) as views of the caller's memory: a
/// converted temporary is written inline, since it dies before the command is sent.
template <typename... P, typename... Args>
void write_params(std::vector<std::byte>& out, attachment_list* beside, Args&&... args) {
  if constexpr (raw_values<P...>) { // numbers (or nothing): their bytes, no archive
    (append_raw(out, static_cast<P>(args)), ...);
    return;
  }
  byte_writer w(out, beside);
  [[maybe_unused]] auto one = [&w]<typename Param, typename Arg>(std::type_identity<Param>,
                                                                 Arg&& a) {
    if constexpr (std::is_same_v<std::remove_cvref_t<Arg>, Param>)
      save_param<Param>(w, a);
    else
      save_param<Param>(w, Param(std::forward<Arg>(a)), bulk_param<Param>::view);
  };
  (one(std::type_identity<P>{}, std::forward<Args>(args)), ...);
}
template <typename... P, typename... Args>
void write_param_tuple(std::type_identity<std::tuple<P...>>, std::vector<std::byte>& out,
                       attachment_list* beside, Args&&... args) {
  write_params<P...>(out, beside, std::forward<Args>(args)...);
}

} // namespace detail

/// A group of actors of type A, one per point of a mesh of serving ranks; or a slice
/// of one. Every adverb is checked at compile time against the endpoint's signature.
/// Copies are cheap (one shared reference). A handle travels as an argument: any actor
/// that holds one calls the actors with the same adverbs as the controller. Calls from
/// one caller (the controller or an actor's rank) to one actor run in the order made.
template <typename A>
class actor_mesh {
public:
  actor_mesh() = default; ///< an empty handle, e.g. to receive one as an argument
  /// (internal) The handle of a spawned actor mesh: see proc_mesh::spawn.
  explicit actor_mesh(std::shared_ptr<const detail::actor_mesh_ref> ref) : ref_(std::move(ref)) {}
  [[nodiscard]] const crown::mesh& mesh() const { return ref().view; }
  [[nodiscard]] const std::string& name() const { return ref().name; }
  [[nodiscard]] actor_mesh slice(std::string_view dim, int index) const {
    return sliced(ref().view.slice(dim, index));
  }
  [[nodiscard]] actor_mesh slice(std::string_view dim, range r) const {
    return sliced(ref().view.slice(dim, r));
  }

  /// Every actor of the mesh; one value per point.
  template <typename M, typename... Args>
  requires detail::endpoint_traits<M>::member_function auto call(M m, Args&&... args) const {
    using R = typename detail::endpoint_traits<M>::result;
    const detail::actor_mesh_ref& r = ref();
    const auto request = send(m, "call", detail::reply_mode::gather, reduce_op::sum, r.ranks,
                              r.positions, std::forward<Args>(args)...);
    detail::call_site site{"call", ref_};
    if constexpr (std::is_void_v<R>) {
      return future<void>(core(), request, std::move(site), &finish_void);
    } else {
      return future<value_mesh<R>>(core(), request, std::move(site),
                                   [](detail::call_result&& r, const detail::call_site& s) {
                                     throw_failures(r, s);
                                     return value_mesh<R>(s.target->view,
                                                          detail::in_view_order<R>(r, *s.target));
                                   });
    }
  }
  /// The actor at one point of this (sliced) mesh.
  template <typename M, typename... Args>
  requires detail::endpoint_traits<M>::member_function auto call_one(const point& p, M m,
                                                                     Args&&... args) const {
    const int rank = ref().view.rank_at(p); // argument_error outside the mesh
    return one(rank, "call_one", m, std::forward<Args>(args)...);
  }
  /// As call and call_one, but each value goes to the response port as its actor
  /// finishes (nothing to wait for); failures go to supervision, as for broadcast.
  template <typename R, typename M, typename... Args>
  void call(reply_to<R> to, M m, Args&&... args) const {
    const detail::actor_mesh_ref& r = ref();
    to_port(to, m, r.ranks, r.positions, std::forward<Args>(args)...);
  }
  template <typename R, typename M, typename... Args>
  void call_one(const point& p, reply_to<R> to, M m, Args&&... args) const {
    const int rank[] = {ref().view.rank_at(p)};
    const std::uint32_t position[] = {static_cast<std::uint32_t>(ref().full.index_of(rank[0]))};
    to_port(to, m, rank, position, std::forward<Args>(args)...);
  }
  /// One actor, the one with the fewest of this caller's calls in flight.
  template <typename M, typename... Args>
  auto choose(M m, Args&&... args) const {
    const detail::actor_mesh_ref& r = ref();
    const std::size_t i = detail::least_busy(*core(), r.id, r.positions);
    return one(r.ranks[i], "choose", m, std::forward<Args>(args)...);
  }
  /// Every actor, no results. Failures are never lost: they reach the supervisor of the
  /// actor mesh (the actor that spawned it, or controller::flush and the end of control()).
  template <typename M, typename... Args>
  void broadcast(M m, Args&&... args) const {
    const detail::actor_mesh_ref& r = ref();
    const auto request = send(m, "broadcast", detail::reply_mode::errors_only, reduce_op::sum,
                              r.ranks, r.positions, std::forward<Args>(args)...);
    detail::forget_request(*core(), request);
  }
  /// Every actor; the arithmetic results are combined along the reply tree, so only
  /// one value reaches the caller.
  template <typename M, typename... Args>
  auto reduce(reduce_op op, M m, Args&&... args) const {
    using R = typename detail::endpoint_traits<M>::result;
    static_assert(std::is_arithmetic_v<R>, "reduce needs an endpoint returning a number");
    const detail::actor_mesh_ref& r = ref();
    const auto request = send(m, "reduce", detail::reply_mode::reduce, op, r.ranks, r.positions,
                              std::forward<Args>(args)...);
    return future<R>(core(), request, detail::call_site{"reduce", ref_, op},
                     [](detail::call_result&& r, const detail::call_site& s) {
                       throw_failures(r, s);
                       R total = detail::from_bytes<R>(r.values.at(0).second); // per subtree
                       for (std::size_t i = 1; i < r.values.size(); ++i)
                         total = detail::combine(s.op, total,
                                                 detail::from_bytes<R>(r.values[i].second));
                       return total;
                     });
  }
  /// Every actor; each value as soon as its actor returns it (completion order), each
  /// failure as an actor_error when its turn comes.
  template <typename M, typename... Args>
  auto stream(M m, Args&&... args) const {
    using R = typename detail::endpoint_traits<M>::result;
    static_assert(!std::is_void_v<R>, "stream needs an endpoint that returns a value");
    const detail::actor_mesh_ref& r = ref();
    const auto request = send(m, "stream", detail::reply_mode::stream, reduce_op::sum, r.ranks,
                              r.positions, std::forward<Args>(args)...);
    return value_stream<R>(core(), request, detail::call_site{"stream", ref_});
  }
  /// Stops every actor of the actor mesh (not only this slice): each runs its cleanup()
  /// hook, if it has one, and is destroyed, so its memory is freed before the control
  /// session ends (an actor with an endpoint on its rank's stack goes when that returns:
  /// an actor mesh may stop itself). Calls this caller made before run first; later
  /// calls to the mesh, from anywhere, fail naming it. Throws actor_error for cleanup
  /// hooks that threw.
  void stop() const {
    const detail::actor_mesh_ref& r = ref();
    detail::control_core& c = *core();
    const auto whole =
        detail::make_actor_mesh_ref(r.id, r.name, r.supervisor, r.full, r.full, r.stopped);
    (void)detail::begin_command(c);
    const auto request =
        detail::submit(c, detail::message_kind::stop_mesh, r.id, 0, detail::reply_mode::errors_only,
                       reduce_op::sum, whole->ranks, whole->positions, r.supervisor);
    if (r.stopped) *r.stopped = true;
    future<void>(&c, request, detail::call_site{"stop", ref_}, &finish_void).get();
  }

  template <class Ar>
  void save(Ar& ar) const {
    const detail::actor_mesh_ref& r = ref();
    ar(r.id, r.name, r.supervisor, r.full, r.view);
  }
  template <class Ar>
  void load(Ar& ar) {
    std::uint64_t id = 0;
    std::string name;
    detail::supervisor_ref supervisor;
    ar(id, name, supervisor);
    crown::mesh full = detail::load_value<crown::mesh>(ar);
    crown::mesh view = detail::load_value<crown::mesh>(ar);
    ref_ = detail::make_actor_mesh_ref(id, std::move(name), supervisor, std::move(full),
                                       std::move(view));
  }

private:
  const detail::actor_mesh_ref& ref() const {
    if (!ref_) throw state_error("crown::actor_mesh", "an empty handle (default-constructed)");
    return *ref_;
  }
  actor_mesh sliced(crown::mesh view) const {
    const detail::actor_mesh_ref& r = ref();
    return actor_mesh(detail::make_actor_mesh_ref(r.id, r.name, r.supervisor, r.full,
                                                  std::move(view), r.stopped));
  }
  detail::control_core* core() const;
  static void throw_failures(detail::call_result& r, const detail::call_site& s) {
    if (!r.failures.empty()) throw actor_error(s.what(), std::move(r.failures));
  }
  static void finish_void(detail::call_result&& r, const detail::call_site& s) {
    throw_failures(r, s);
  }
  template <typename M, typename... Args>
  std::uint64_t send(M m, const char* adverb, detail::reply_mode mode, reduce_op op,
                     std::span<const int> ranks, std::span<const std::uint32_t> positions,
                     Args&&... args) const {
    using traits = detail::endpoint_traits<M>;
    static_assert(traits::member_function, "an endpoint is a member function: &actor::name");
    static_assert(std::is_same_v<typename traits::actor, A>,
                  "the endpoint is a member function of another class");
    static_assert(std::is_constructible_v<typename traits::params, Args&&...>,
                  "the arguments do not match the endpoint's parameters");
    detail::control_core& c = *core();
    const int index = detail::endpoint_index<A>(m);
    if (index < 0)
      throw argument_error(detail::call_site{adverb, ref_}.what(),
                           "this member function is not listed in " +
                               detail::demangle(typeid(A).name()) + "::endpoints");
    std::vector<std::byte>& out = detail::begin_command(c);
    detail::write_param_tuple(std::type_identity<typename traits::params>{}, out,
                              &detail::command_attachments(c), std::forward<Args>(args)...);
    const detail::actor_mesh_ref& r = ref();
    return detail::submit(c, detail::message_kind::call, r.id, static_cast<std::uint32_t>(index),
                          mode, op, ranks, positions, r.supervisor);
  }
  template <typename R, typename M, typename... Args>
  void to_port(reply_to<R> to, M m, std::span<const int> ranks,
               std::span<const std::uint32_t> positions, Args&&... args) const {
    static_assert(std::is_same_v<R, typename detail::endpoint_traits<M>::result>,
                  "a response port carries the endpoint's result type");
    const auto request = send(m, "call", detail::reply_mode::stream, reduce_op::sum, ranks,
                              positions, std::forward<Args>(args)...);
    detail::reply_via_port(*core(), request, to.to.rank(), to.to.id(), detail::port_type_tag<R>());
  }
  template <typename M, typename... Args>
  auto one(int rank, const char* adverb, M m, Args&&... args) const {
    using R = typename detail::endpoint_traits<M>::result;
    const int target[] = {rank};
    const std::uint32_t position[] = {static_cast<std::uint32_t>(ref().full.index_of(rank))};
    const auto request = send(m, adverb, detail::reply_mode::gather, reduce_op::sum, target,
                              position, std::forward<Args>(args)...);
    return future<R>(core(), request, detail::call_site{adverb, ref_},
                     [](detail::call_result&& r, const detail::call_site& s) -> R {
                       throw_failures(r, s);
                       if constexpr (!std::is_void_v<R>)
                         return detail::from_bytes<R>(r.values.at(0).second);
                     });
  }

  std::shared_ptr<const detail::actor_mesh_ref> ref_;
};

namespace detail {

template <typename A, typename... Args>
actor_mesh<A> spawn_on(control_core& core, const crown::mesh& on, std::string name,
                       Args&&... args) {
  (void)actor_registration<A, std::decay_t<Args>...>::done;
  check_spawn(core, on, name);
  spawn_spec spec{name,
                  {},
                  {},
                  {on.begin(), on.end()},
                  actor_key<A, std::decay_t<Args>...>(),
                  {},
                  current_supervisor()};
  for (const dim& d : on.dims()) {
    spec.dim_names.push_back(d.name);
    spec.dim_sizes.push_back(d.size);
  }
  write_params<std::decay_t<Args>...>(spec.args, nullptr, std::forward<Args>(args)...);
  to_bytes(spec, begin_command(core));
  const std::uint64_t id = new_mesh_id(core);
  auto ref =
      make_actor_mesh_ref(id, std::move(name), spec.supervisor, on, on, std::make_shared<bool>());
  const auto request = submit(core, message_kind::spawn, id, 0, reply_mode::gather, reduce_op::sum,
                              ref->ranks, ref->positions, spec.supervisor);
  future<void>(&core, request, call_site{"spawn", ref}, [](call_result&& r, const call_site& s) {
    if (!r.failures.empty()) throw actor_error(s.what(), std::move(r.failures));
  }).get();
  note_mesh(core, id, ref->name, on);
  return actor_mesh<A>(std::move(ref));
}

} // namespace detail

/// Ranks that serve actors: from controller::workers(), reshaped and sliced. A value: it
/// travels to actors as an argument, and an actor spawns actor meshes on it, which it
/// then supervises.
class proc_mesh {
public:
  explicit proc_mesh(crown::mesh m) : mesh_(std::move(m)) {}
  [[nodiscard]] const crown::mesh& mesh() const noexcept { return mesh_; }
  /// Same ranks, new dimensions (row-major), e.g. {{"dp", 2}, {"tp", 2}}.
  [[nodiscard]] proc_mesh reshape(std::vector<dim> dims) const {
    return proc_mesh(crown::mesh(std::move(dims), {mesh_.begin(), mesh_.end()}));
  }
  [[nodiscard]] proc_mesh slice(std::string_view dim, int index) const {
    return proc_mesh(mesh_.slice(dim, index));
  }
  [[nodiscard]] proc_mesh slice(std::string_view dim, range r) const {
    return proc_mesh(mesh_.slice(dim, r));
  }
  /// One A per point, constructed from `args` on its rank; waits until every
  /// constructor has run (actor_error listing the points whose constructor threw). The
  /// caller (the controller, or the actor whose endpoint spawns) supervises the result.
  template <typename A, typename... Args>
  actor_mesh<A> spawn(std::string name, Args&&... args) const {
    return detail::spawn_on<A>(detail::running_core("proc_mesh::spawn"), mesh_, std::move(name),
                               std::forward<Args>(args)...);
  }

  template <class Ar>
  void save(Ar& ar) const {
    ar(mesh_);
  }

private:
  crown::mesh mesh_;
};

namespace detail {
template <>
struct value_loader<proc_mesh> {
  static constexpr bool default_loads = false;
  template <class Ar>
  static proc_mesh load(Ar& ar) {
    return proc_mesh(load_value<crown::mesh>(ar));
  }
};
} // namespace detail

/// Rank 0's handle on the job inside runtime::control.
class controller {
public:
  explicit controller(detail::control_core& core) : core_(&core) {}
  /// Every serving rank (all ranks but 0), as one dimension "workers".
  [[nodiscard]] proc_mesh workers();
  /// Waits until every command sent so far has completed; throws actor_error for
  /// failures that no future reported (broadcasts, dropped futures, and failures that
  /// actors' supervise() hooks did not handle).
  void flush();
  [[nodiscard]] detail::control_core& core() noexcept { return *core_; }

  template <typename A, typename... Args>
  actor_mesh<A> spawn(const crown::mesh& on, std::string name, Args&&... args) {
    return detail::spawn_on<A>(*core_, on, std::move(name), std::forward<Args>(args)...);
  }

private:
  detail::control_core* core_;
};

template <typename A>
detail::control_core* actor_mesh<A>::core() const {
  const detail::actor_mesh_ref& r = ref();
  if (r.session == 0 || r.session != detail::control_session())
    throw state_error(detail::call_site{"a call", ref_}.what(),
                      "its control session has ended (actor meshes live only inside "
                      "runtime::control)");
  if (r.stopped && *r.stopped)
    throw state_error(detail::call_site{"a call", ref_}.what(),
                      "the actor mesh was stopped (actor_mesh::stop)");
  return &detail::running_core("an actor mesh's adverb");
}

/// Inside an endpoint or constructor: the actor's mesh (a mesh like any other:
/// coarrays and collectives among the actors work on it), its point and its name.
struct actor_context {
  const crown::mesh& mesh;
  const point& coords;
  int index; ///< linear index in the actor mesh
  const std::string& name;
};
/// Throws state_error outside an actor's constructor or endpoint.
const actor_context& this_actor();

} // namespace crown
