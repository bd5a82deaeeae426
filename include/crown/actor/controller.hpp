// include/crown/actor/controller.hpp — the single controller: spawn actor meshes on the
// serving ranks and call their endpoints (runtime::control runs it on rank 0).
#pragma once
#include <algorithm>
#include <crown/actor/future.hpp>
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

/// The buffer to serialise a command's payload into (reused from command to command).
std::vector<std::byte>& begin_command(control_core& core);
/// Sends the command begun with begin_command to `ranks` (each with its point index in
/// the actor mesh); returns the request that its replies answer.
std::uint64_t submit(control_core& core, message_kind kind, std::uint32_t mesh_id,
                     std::uint32_t endpoint, reply_mode mode, reduce_op op,
                     std::span<const int> ranks, std::span<const std::uint32_t> positions);
std::uint32_t new_mesh_id(control_core& core);
/// What a spawn command carries (written by controller::spawn, read by the server).
struct spawn_spec {
  std::string name;
  std::vector<std::string> dim_names;
  std::vector<int> dim_sizes;
  std::vector<int> ranks;
  std::string key;             ///< actor_key<A, Args...>()
  std::vector<std::byte> args; ///< the constructor's arguments, serialised
  template <class Ar>
  void save(Ar& ar) const {
    ar(name, dim_names, dim_sizes, ranks, key, cereal::make_size_tag(args.size()));
    ar(cereal::binary_data(args.data(), args.size()));
  }
  template <class Ar>
  void load(Ar& ar) {
    cereal::size_type bytes = 0;
    ar(name, dim_names, dim_sizes, ranks, key, cereal::make_size_tag(bytes));
    args.resize(bytes);
    ar(cereal::binary_data(args.data(), bytes));
  }
};

/// The index in `positions` of the actor with the fewest calls in flight.
std::size_t least_busy(control_core& core, std::uint32_t mesh_id,
                       std::span<const std::uint32_t> positions);
/// Records a spawned actor mesh (the watchdog names the actors a hung rank hosts).
void note_mesh(control_core& core, std::uint32_t mesh_id, const std::string& name,
               const crown::mesh& on);

struct actor_mesh_ref {
  controller* owner = nullptr; ///< null on a serving rank (a handle passed as an argument)
  std::uint64_t session = 0;   ///< the control session `owner` lives in
  std::uint32_t id = 0;
  std::string name;
  crown::mesh full;                     ///< the mesh the actors were spawned on
  crown::mesh view;                     ///< a handle's slice of it
  std::vector<int> ranks;               ///< the view's ranks ...
  std::vector<std::uint32_t> positions; ///< ... and their point indices in `full`
  std::vector<int> view_index;          ///< by point index in `full`: index in view, or -1
};
/// The gathered values of a call, in the order of the view's points (R needs no default
/// constructor). Throws malformed_message unless every point answered exactly once.
template <typename R>
std::vector<R> in_view_order(call_result& r, const actor_mesh_ref& target);

/// Builds the reference for `view`, a part of `full`, with its targets worked out once.
std::shared_ptr<const actor_mesh_ref> make_actor_mesh_ref(controller* owner, std::uint32_t id,
                                                          std::string name, crown::mesh full,
                                                          crown::mesh view);

/// Serialises the arguments as the endpoint's parameter tuple, converting only those
/// whose type differs (a large vector argument is written once, never copied).
template <typename... P, typename... Args>
void write_params(std::vector<std::byte>& out, Args&&... args) {
  byte_writer w(out);
  [[maybe_unused]] auto one = [&w]<typename Param, typename Arg>(std::type_identity<Param>,
                                                                 Arg&& a) {
    if constexpr (std::is_same_v<std::remove_cvref_t<Arg>, Param>)
      save_value(w, a);
    else
      save_value(w, Param(std::forward<Arg>(a)));
  };
  (one(std::type_identity<P>{}, std::forward<Args>(args)), ...);
}
template <typename... P, typename... Args>
void write_param_tuple(std::type_identity<std::tuple<P...>>, std::vector<std::byte>& out,
                       Args&&... args) {
  write_params<P...>(out, std::forward<Args>(args)...);
}

} // namespace detail

/// A group of actors of type A, one per point of a mesh of serving ranks; or a slice
/// of one. Every adverb is checked at compile time against the endpoint's signature.
/// Copies are cheap (one shared reference). A handle may be passed to an endpoint as an
/// argument: the actor then knows the other actor mesh (mesh(), name()), but only the
/// controller calls actors, so the adverbs throw state_error there.
template <typename A>
class actor_mesh {
public:
  actor_mesh() = default; ///< an empty handle, e.g. to receive one as an argument
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
  auto call(M m, Args&&... args) const {
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
  auto call_one(const point& p, M m, Args&&... args) const {
    const int rank = ref().view.rank_at(p); // argument_error outside the mesh
    return one(rank, "call_one", m, std::forward<Args>(args)...);
  }
  /// One actor, the one with the fewest of this controller's calls in flight.
  template <typename M, typename... Args>
  auto choose(M m, Args&&... args) const {
    const detail::actor_mesh_ref& r = ref();
    const std::size_t i = detail::least_busy(*core(), r.id, r.positions);
    return one(r.ranks[i], "choose", m, std::forward<Args>(args)...);
  }
  /// Every actor, no results. Failures are never lost: they reach the controller's
  /// supervision (controller::flush, and the end of control()).
  template <typename M, typename... Args>
  void broadcast(M m, Args&&... args) const {
    const detail::actor_mesh_ref& r = ref();
    const auto request = send(m, "broadcast", detail::reply_mode::errors_only, reduce_op::sum,
                              r.ranks, r.positions, std::forward<Args>(args)...);
    detail::forget_request(*core(), request);
  }
  /// Every actor; the arithmetic results are combined along the reply tree, so only
  /// one value reaches the controller.
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

  template <class Ar>
  void save(Ar& ar) const {
    const detail::actor_mesh_ref& r = ref();
    ar(r.id, r.name, r.full, r.view);
  }
  template <class Ar>
  void load(Ar& ar) {
    std::uint32_t id = 0;
    std::string name;
    ar(id, name);
    crown::mesh full = detail::load_value<crown::mesh>(ar);
    crown::mesh view = detail::load_value<crown::mesh>(ar);
    ref_ =
        detail::make_actor_mesh_ref(nullptr, id, std::move(name), std::move(full), std::move(view));
  }

private:
  friend class controller;
  explicit actor_mesh(std::shared_ptr<const detail::actor_mesh_ref> ref) : ref_(std::move(ref)) {}

  const detail::actor_mesh_ref& ref() const {
    if (!ref_) throw state_error("crown::actor_mesh", "an empty handle (default-constructed)");
    return *ref_;
  }
  actor_mesh sliced(crown::mesh view) const {
    const detail::actor_mesh_ref& r = ref();
    return actor_mesh(detail::make_actor_mesh_ref(r.owner, r.id, r.name, r.full, std::move(view)));
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
    detail::write_param_tuple(std::type_identity<typename traits::params>{},
                              detail::begin_command(c), std::forward<Args>(args)...);
    return detail::submit(c, detail::message_kind::call, ref().id,
                          static_cast<std::uint32_t>(index), mode, op, ranks, positions);
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

template <typename R>
std::vector<R> detail::in_view_order(call_result& r, const actor_mesh_ref& target) {
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

/// Ranks that serve actors, as the controller sees them.
class proc_mesh {
public:
  proc_mesh(controller* c, crown::mesh m) : c_(c), mesh_(std::move(m)) {}
  [[nodiscard]] const crown::mesh& mesh() const noexcept { return mesh_; }
  /// Same ranks, new dimensions (row-major), e.g. {{"dp", 2}, {"tp", 2}}.
  [[nodiscard]] proc_mesh reshape(std::vector<dim> dims) const {
    return proc_mesh(c_, crown::mesh(std::move(dims), {mesh_.begin(), mesh_.end()}));
  }
  [[nodiscard]] proc_mesh slice(std::string_view dim, int index) const {
    return proc_mesh(c_, mesh_.slice(dim, index));
  }
  [[nodiscard]] proc_mesh slice(std::string_view dim, range r) const {
    return proc_mesh(c_, mesh_.slice(dim, r));
  }
  /// One A per point, constructed from `args` on its rank; waits until every
  /// constructor has run (actor_error listing the points whose constructor threw).
  template <typename A, typename... Args>
  actor_mesh<A> spawn(std::string name, Args&&... args) const;

private:
  controller* c_;
  crown::mesh mesh_;
};

/// Rank 0's handle on the job inside runtime::control.
class controller {
public:
  explicit controller(detail::control_core& core) : core_(&core) {}
  /// Every serving rank (all ranks but 0), as one dimension "workers".
  [[nodiscard]] proc_mesh workers();
  /// Waits until every command sent so far has completed; throws actor_error for
  /// failures that no future reported (broadcasts).
  void flush();
  [[nodiscard]] detail::control_core& core() noexcept { return *core_; }

  template <typename A, typename... Args>
  actor_mesh<A> spawn(const crown::mesh& on, std::string name, Args&&... args) {
    (void)detail::actor_registration<A, std::decay_t<Args>...>::done;
    check_spawn(on, name);
    detail::spawn_spec spec{
        name, {}, {}, {on.begin(), on.end()}, detail::actor_key<A, std::decay_t<Args>...>(), {}};
    for (const dim& d : on.dims()) {
      spec.dim_names.push_back(d.name);
      spec.dim_sizes.push_back(d.size);
    }
    detail::write_params<std::decay_t<Args>...>(spec.args, std::forward<Args>(args)...);
    detail::to_bytes(spec, detail::begin_command(*core_));
    const std::uint32_t id = detail::new_mesh_id(*core_);
    auto ref = detail::make_actor_mesh_ref(this, id, std::move(name), on, on);
    const auto request =
        detail::submit(*core_, detail::message_kind::spawn, id, 0, detail::reply_mode::gather,
                       reduce_op::sum, ref->ranks, ref->positions);
    future<void>(core_, request, detail::call_site{"spawn", ref},
                 [](detail::call_result&& r, const detail::call_site& s) {
                   if (!r.failures.empty()) throw actor_error(s.what(), std::move(r.failures));
                 })
        .get();
    detail::note_mesh(*core_, id, ref->name, on);
    return actor_mesh<A>(std::move(ref));
  }

private:
  /// Throws argument_error for meshes that include the controller or ranks outside
  /// the job, and for empty names.
  void check_spawn(const crown::mesh& on, const std::string& name) const;
  detail::control_core* core_;
};

template <typename A>
detail::control_core* actor_mesh<A>::core() const {
  const detail::actor_mesh_ref& r = ref();
  if (!r.owner)
    throw state_error(detail::call_site{"a call", ref_}.what(),
                      "actors are called by the controller (rank 0) only; this handle arrived "
                      "on a serving rank as an argument");
  if (r.session != detail::control_session())
    throw state_error(detail::call_site{"a call", ref_}.what(),
                      "its control session has ended (actor meshes live only inside "
                      "runtime::control)");
  return &r.owner->core();
}

template <typename A, typename... Args>
actor_mesh<A> proc_mesh::spawn(std::string name, Args&&... args) const {
  return c_->spawn<A>(mesh_, std::move(name), std::forward<Args>(args)...);
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
