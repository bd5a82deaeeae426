// include/crown/actor/controller.hpp — the single controller: spawn actor meshes on the
// serving ranks and call their endpoints (runtime::control runs it on rank 0).
#pragma once
#include <crown/actor/future.hpp>
#include <crown/actor/registry.hpp>
#include <crown/actor/value_mesh.hpp>
#include <crown/actor/wire.hpp>
#include <crown/mesh.hpp>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace crown {

namespace detail {

/// The ranks a command goes to, with each one's point index in its actor mesh.
struct target_set {
  std::vector<int> ranks;
  std::vector<std::uint32_t> positions;
};

std::uint64_t submit(control_core& core, message_kind kind, std::uint32_t mesh_id,
                     std::uint32_t endpoint, reply_mode mode, reduce_op op,
                     const target_set& targets, std::span<const std::byte> payload);
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
void note_mesh(control_core& core, const std::string& name, const crown::mesh& on);
/// A payload buffer reused from command to command.
std::vector<std::byte>& payload_buffer(control_core& core);

} // namespace detail

class controller;

/// A group of actors of type A, one per point of a mesh of serving ranks; or a slice
/// of one. Every adverb is checked at compile time against the endpoint's signature.
template <typename A>
class actor_mesh {
public:
  [[nodiscard]] const crown::mesh& mesh() const noexcept { return view_; }
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  [[nodiscard]] actor_mesh slice(std::string_view dim, int index) const {
    return actor_mesh(*this, view_.slice(dim, index));
  }
  [[nodiscard]] actor_mesh slice(std::string_view dim, range r) const {
    return actor_mesh(*this, view_.slice(dim, r));
  }

  /// Every actor of the mesh; one value per point.
  template <typename M, typename... Args>
  auto call(M m, Args&&... args) const {
    using R = typename detail::endpoint_traits<M>::result;
    const auto request = send(m, "call", detail::reply_mode::gather, reduce_op::sum, targets(),
                              std::forward<Args>(args)...);
    const std::string what = describe("call");
    if constexpr (std::is_void_v<R>) {
      return future<void>(core(), request, what, [what](detail::call_result&& r) {
        if (!r.failures.empty()) throw actor_error(what, std::move(r.failures));
      });
    } else {
      return future<value_mesh<R>>(
          core(), request, what, [what, view = view_, full = full_](detail::call_result&& r) {
            if (!r.failures.empty()) throw actor_error(what, std::move(r.failures));
            std::vector<R> values(static_cast<std::size_t>(view.size()));
            for (auto& [position, bytes] : r.values) {
              const int rank = full.ranks()[position];
              values[static_cast<std::size_t>(view.index_of(rank))] = detail::from_bytes<R>(bytes);
            }
            return value_mesh<R>(view, std::move(values));
          });
    }
  }
  /// The actor at one point of this (sliced) mesh.
  template <typename M, typename... Args>
  auto call_one(const point& p, M m, Args&&... args) const {
    const int rank = view_.rank_at(p); // argument_error outside the mesh
    return one(rank, "call_one", m, std::forward<Args>(args)...);
  }
  /// One actor, the one with the fewest of this controller's calls in flight.
  template <typename M, typename... Args>
  auto choose(M m, Args&&... args) const {
    const detail::target_set all = targets();
    const std::size_t i = detail::least_busy(*core(), id_, all.positions);
    return one(all.ranks[i], "choose", m, std::forward<Args>(args)...);
  }
  /// Every actor, no results. Failures are never lost: they reach the controller's
  /// supervision (controller::flush, and the end of control()).
  template <typename M, typename... Args>
  void broadcast(M m, Args&&... args) const {
    const auto request = send(m, "broadcast", detail::reply_mode::errors_only, reduce_op::sum,
                              targets(), std::forward<Args>(args)...);
    detail::forget_request(*core(), request);
  }
  /// Every actor; the arithmetic results are combined along the reply tree, so only
  /// one value reaches the controller.
  template <typename M, typename... Args>
  auto reduce(reduce_op op, M m, Args&&... args) const {
    using R = typename detail::endpoint_traits<M>::result;
    static_assert(std::is_arithmetic_v<R>, "reduce needs an endpoint returning a number");
    const auto request =
        send(m, "reduce", detail::reply_mode::reduce, op, targets(), std::forward<Args>(args)...);
    const std::string what = describe("reduce");
    return future<R>(core(), request, what, [what, op](detail::call_result&& r) {
      if (!r.failures.empty()) throw actor_error(what, std::move(r.failures));
      R total = detail::from_bytes<R>(r.values.at(0).second); // one value per subtree
      for (std::size_t i = 1; i < r.values.size(); ++i)
        total = detail::combine(op, total, detail::from_bytes<R>(r.values[i].second));
      return total;
    });
  }

private:
  friend class controller;
  actor_mesh(controller* c, std::uint32_t id, std::string name, crown::mesh full)
      : c_(c), id_(id), name_(std::move(name)), full_(full), view_(std::move(full)) {}
  actor_mesh(const actor_mesh& whole, crown::mesh view)
      : c_(whole.c_), id_(whole.id_), name_(whole.name_), full_(whole.full_),
        view_(std::move(view)) {}

  detail::control_core* core() const;
  std::string describe(const char* adverb) const {
    return std::string(adverb) + " on actor mesh " + name_ + " " + view_.to_string();
  }
  detail::target_set targets() const {
    detail::target_set t;
    for (int r : view_) {
      t.ranks.push_back(r);
      t.positions.push_back(static_cast<std::uint32_t>(full_.index_of(r)));
    }
    return t;
  }
  template <typename M, typename... Args>
  std::uint64_t send(M m, const char* adverb, detail::reply_mode mode, reduce_op op,
                     const detail::target_set& t, Args&&... args) const {
    using traits = detail::endpoint_traits<M>;
    static_assert(std::is_same_v<typename traits::actor, A>,
                  "the endpoint is a member function of another class");
    static_assert(std::is_constructible_v<typename traits::params, Args&&...>,
                  "the arguments do not match the endpoint's parameters");
    const int index = detail::endpoint_index<A>(m);
    if (index < 0)
      throw argument_error(describe(adverb), "this member function is not listed in " +
                                                 detail::demangle(typeid(A).name()) +
                                                 "::endpoints");
    std::vector<std::byte>& payload = detail::payload_buffer(*core());
    payload.clear();
    detail::to_bytes(typename traits::params(std::forward<Args>(args)...), payload);
    return detail::submit(*core(), detail::message_kind::call, id_,
                          static_cast<std::uint32_t>(index), mode, op, t, payload);
  }
  template <typename M, typename... Args>
  auto one(int rank, const char* adverb, M m, Args&&... args) const {
    using R = typename detail::endpoint_traits<M>::result;
    detail::target_set t{{rank}, {static_cast<std::uint32_t>(full_.index_of(rank))}};
    const auto request =
        send(m, adverb, detail::reply_mode::gather, reduce_op::sum, t, std::forward<Args>(args)...);
    const std::string what = describe(adverb);
    return future<R>(core(), request, what, [what](detail::call_result&& r) -> R {
      if (!r.failures.empty()) throw actor_error(what, std::move(r.failures));
      if constexpr (!std::is_void_v<R>) return detail::from_bytes<R>(r.values.at(0).second);
    });
  }

  controller* c_;
  std::uint32_t id_;
  std::string name_;
  crown::mesh full_; ///< the mesh the actors were spawned on
  crown::mesh view_; ///< this handle's slice of it
};

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
    detail::to_bytes(std::tuple<std::decay_t<Args>...>(std::forward<Args>(args)...), spec.args);
    std::vector<std::byte>& payload = detail::payload_buffer(*core_);
    payload.clear();
    detail::to_bytes(spec, payload);
    detail::target_set t;
    for (int i = 0; i < on.size(); ++i) {
      t.ranks.push_back(on.ranks()[static_cast<std::size_t>(i)]);
      t.positions.push_back(static_cast<std::uint32_t>(i));
    }
    const std::uint32_t id = detail::new_mesh_id(*core_);
    const auto request = detail::submit(*core_, detail::message_kind::spawn, id, 0,
                                        detail::reply_mode::gather, reduce_op::sum, t, payload);
    future<void> done(core_, request, "spawn " + name, [name](detail::call_result&& r) {
      if (!r.failures.empty())
        throw actor_error("spawn of actor mesh " + name, std::move(r.failures));
    });
    done.get();
    detail::note_mesh(*core_, name, on);
    return actor_mesh<A>(this, id, std::move(name), on);
  }

private:
  /// Throws argument_error for meshes that include the controller or ranks outside
  /// the job, and for empty names.
  void check_spawn(const crown::mesh& on, const std::string& name) const;
  detail::control_core* core_;
};

template <typename A>
detail::control_core* actor_mesh<A>::core() const {
  return &c_->core();
}

template <typename A, typename... Args>
actor_mesh<A> proc_mesh::spawn(std::string name, Args&&... args) const {
  return c_->spawn<A>(mesh_, std::move(name), std::forward<Args>(args)...);
}

/// Inside an endpoint or constructor: the actor's mesh (a mesh like any other:
/// coarrays and collectives among the actors work on it), its point and its name.
struct actor_context {
  const crown::mesh& mesh;
  point coords;
  int index; ///< linear index in the actor mesh
  const std::string& name;
};
/// Throws state_error outside an actor's constructor or endpoint.
const actor_context& this_actor();

} // namespace crown
