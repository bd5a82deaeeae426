// include/crown/engine/remote_tensor.hpp — the tensor engine: the controller creates
// dist_tensors on the ranks of a proc_mesh and programs them by handle (Monarch's tensor
// engine). Every operation is one command fanned out along the actor tree to a hidden
// worker actor per rank; elements cross to rank 0 only in sum/max/norm2 (one value) and
// fetch_shard/fetch.
#pragma once
#include <crown/actor/controller.hpp>
#include <crown/engine/functions.hpp>
#include <crown/engine/worker.hpp>
#include <crown/tensor/dist_tensor.hpp>
#include <crown/tensor/layout.hpp>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace crown {

template <typename T, std::size_t N>
class remote_tensor;

namespace detail {

/// What a tensor engine and its tensors share: the workers, and the commands whose
/// answers nobody has waited for yet (the oldest first), each with what it did.
struct engine_state {
  struct command {
    future<void> answer;
    std::string what; ///< "remote_tensor u (...): fill", for its failure
  };
  actor_mesh<tensor_worker> workers;
  bool stopped = false;
  std::uint64_t next_id = 1;
  std::deque<command> pending;

  /// Keeps the answer of a command; the answers of earlier ones that are in are
  /// collected (a failure is thrown here, by a later command, never by the one that
  /// failed), and at most 256 stay in flight.
  void keep(future<void>&& answer, std::string what) {
    pending.push_back({std::move(answer), std::move(what)});
    while (pending.size() > 1 && (pending.size() > 256 || pending.front().answer.ready()))
      take_oldest();
  }
  /// Waits for every command kept; throws the first failure, naming its command.
  void wait() {
    while (!pending.empty()) take_oldest();
  }
  void take_oldest() {
    command c = std::move(pending.front());
    pending.pop_front();
    try {
      c.answer.get();
    } catch (const actor_error& e) {
      throw actor_error(c.what, e.failures());
    }
  }
  /// Sends a call whose value the caller waits for, then collects the commands before
  /// it (their failures first): no extra round trip.
  template <typename F>
  auto value(F&& send, const std::string& what) {
    auto answer = send();
    wait();
    try {
      return answer.get();
    } catch (const actor_error& e) {
      throw actor_error(what, e.failures());
    }
  }
  [[nodiscard]] std::string ranks_text() const {
    std::string t;
    for (int r : workers.mesh()) t += (t.empty() ? "" : ", ") + std::to_string(r);
    return "ranks " + t;
  }
};

template <std::size_t N>
tensor_spec make_spec(std::string type, std::string name, const std::array<std::size_t, N>& shape,
                      const std::vector<placement>& placements, const halo_spec<N>& halo) {
  tensor_spec s{std::move(type), std::move(name), {shape.begin(), shape.end()}, {}, {}, {}};
  for (const placement& p : placements)
    s.placements.push_back(p.is_shard() ? static_cast<int>(p.dim) : -1);
  for (std::size_t d = 0; d < N; ++d) {
    s.halo_width.push_back(halo.width[d]);
    s.periodic.push_back(halo.periodic[d] ? 1 : 0);
  }
  return s;
}

} // namespace detail

/// Distributed tensors on the ranks of a proc_mesh, programmed from the controller.
/// Copies share one engine. Commands run on the workers in the order sent and are not
/// waited for, but for those that return a value; wait() waits for all.
class tensor_engine {
public:
  /// Spawns the workers, one per point of `on` (the tensors' mesh has its dimensions).
  explicit tensor_engine(const proc_mesh& on, std::string name = "tensor_engine")
      : state_(std::make_shared<detail::engine_state>()) {
    state_->workers = on.spawn<detail::tensor_worker>(std::move(name));
  }
  [[nodiscard]] const crown::mesh& mesh() const { return state_->workers.mesh(); }
  [[nodiscard]] const std::string& name() const { return state_->workers.name(); }

  /// A new tensor (elements unset); throws argument_error for a layout or halo that does
  /// not fit, as dist_tensor's constructor does.
  template <typename T, std::size_t N>
  remote_tensor<T, N> create(std::string name, const std::array<std::size_t, N>& shape,
                             std::vector<placement> placements, halo_spec<N> halo = {}) {
    return remote_tensor<T, N>::create(
        state_, std::move(name), tensor_layout<N>(mesh(), shape, std::move(placements)), halo);
  }

  /// Runs the kernel registered as `kernel` on every worker, with the workers' blocks
  /// of `first, more...` (one element type and rank) and `scalars`.
  template <typename T, std::size_t N, typename... More>
  requires(std::is_same_v<More, remote_tensor<T, N>>&&...) void run(
      std::string_view kernel, std::vector<double> scalars, const remote_tensor<T, N>& first,
      const More&... more) {
    std::string context =
        "tensor_engine::run(" + std::string(kernel) + ") on " + name() + " tensors " + first.name();
    ((context += ", " + more.name()), ...);
    (void)detail::find_function<kernel_function<T, N>>(kernel, "kernel", context);
    std::vector<std::uint64_t> ids{first.id_for(*this, context), more.id_for(*this, context)...};
    first.guarded([&] {
      state_->keep(state_->workers.call(&detail::tensor_worker::run, std::string(kernel), ids,
                                        std::move(scalars)),
                   context);
    });
  }

  /// Waits until every command sent so far has run; throws the first failure.
  void wait() {
    check("tensor_engine::wait");
    state_->wait();
  }
  /// Frees every tensor and stops the workers (after the commands sent before); the
  /// handles then throw state_error. Throws the first failure of those commands.
  void stop() {
    check("tensor_engine::stop");
    state_->stopped = true;
    state_->workers.stop();
    state_->wait(); // all answered by now
  }

private:
  template <typename T, std::size_t N>
  friend class remote_tensor;
  void check(const char* what) const {
    if (state_->stopped)
      throw state_error(std::string(what) + " on " + name() + " " + mesh().to_string(),
                        "the engine was stopped");
  }
  std::shared_ptr<detail::engine_state> state_;
};

/// The controller's handle on a distributed tensor that lives on a tensor engine's
/// workers (a dist_tensor<T, N> per worker). Copies share the tensor; the last one to go
/// frees it on the workers.
template <typename T, std::size_t N>
class remote_tensor {
  static_assert(std::is_trivially_copyable_v<T>, "remote tensors hold trivially copyable types");

public:
  using index_type = std::array<std::size_t, N>;
  remote_tensor() = default;

  [[nodiscard]] const std::string& name() const { return ref().name; }
  [[nodiscard]] const tensor_layout<N>& layout() const { return ref().layout; }
  [[nodiscard]] const index_type& shape() const { return layout().shape(); }
  [[nodiscard]] const crown::mesh& mesh() const { return layout().mesh(); }
  [[nodiscard]] const halo_spec<N>& halo() const { return ref().halo; }

  void fill(const T& value) {
    command("fill", &detail::tensor_worker::fill, id(), detail::raw_bytes(&value, 1));
  }
  /// x = f(index, x) for every element, f registered as `function`.
  void apply(std::string_view function) {
    (void)detail::find_function<element_function<T, N>>(function, "element function", context());
    command("apply", &detail::tensor_worker::apply, id(), std::string(function));
  }
  /// This += a * x (same engine, shape and placements).
  void axpy(const T& a, const remote_tensor& x) {
    command("axpy", &detail::tensor_worker::axpy, id(), detail::raw_bytes(&a, 1), same(x, "axpy"));
  }
  void copy_from(const remote_tensor& x) {
    command("copy_from", &detail::tensor_worker::copy, id(), same(x, "copy_from"));
  }
  /// The same array with other placements and halos, as a new tensor (default name:
  /// this one's).
  [[nodiscard]] remote_tensor redistribute(std::vector<placement> placements,
                                           halo_spec<N> halo = {}, std::string name = {}) const {
    tensor_layout<N> to(mesh(), shape(), std::move(placements));
    if (name.empty()) name = ref().name;
    const std::shared_ptr<detail::engine_state>& e = engine();
    remote_tensor out(e, e->next_id++, std::move(name), std::move(to), halo);
    const detail::tensor_spec spec = out.spec();
    guarded([&] {
      e->keep(e->workers.call(&detail::tensor_worker::redistribute, id(), out.id(), spec),
              context() + ": redistribute to " + out.context());
    });
    return out;
  }
  void exchange_halos() { command("exchange_halos", &detail::tensor_worker::exchange_halos, id()); }
  /// Combines the copies along mesh dimension `dim` (where the tensor is replicated)
  /// element-wise, so each holds the sum (min, max) of them all.
  void reduce(std::string_view dim, reduce_op op = reduce_op::sum) {
    const auto& dims = mesh().dims();
    std::size_t md = 0;
    while (md < dims.size() && dims[md].name != dim) ++md;
    if (md == dims.size())
      throw argument_error(context() + ": reduce",
                           "no dimension '" + std::string(dim) + "' in " + mesh().to_string());
    if (layout().placements()[md].is_shard())
      throw argument_error(context() + ": reduce",
                           "the tensor is sharded along '" + std::string(dim) +
                               "', not replicated: its blocks there differ in place");
    command("reduce", &detail::tensor_worker::reduce_along, id(), std::string(dim),
            static_cast<int>(op));
  }

  [[nodiscard]] T sum() const {
    return detail::from_raw<T>(value("sum", &detail::tensor_worker::sum, id())[0]);
  }
  [[nodiscard]] T max() const {
    return detail::from_raw<T>(value("max", &detail::tensor_worker::max, id())[0]);
  }
  [[nodiscard]] double norm2() const {
    return value("norm2", &detail::tensor_worker::norm2, id())[0];
  }

  /// The block of the worker at `p` (a point of the engine's mesh), row-major.
  [[nodiscard]] std::vector<T> fetch_shard(const point& p) const {
    const crown::mesh& m = mesh();
    bool inside = p.size() == m.ndim();
    for (std::size_t d = 0; inside && d < p.size(); ++d)
      inside = p[d] >= 0 && p[d] < m.dims()[d].size;
    if (!inside)
      throw argument_error(context() + ": fetch_shard",
                           "point " + text(p) + " is not in " + m.to_string() + ": no such shard");
    const std::string op =
        ": fetch_shard " + text(p) + " (rank " + std::to_string(m.rank_at(p)) + ")";
    const auto& e = engine(op);
    return guarded([&] {
      return elements(e->value(
          [&] { return e->workers.call_one(p, &detail::tensor_worker::block, id(), false); },
          context() + op));
    });
  }
  /// The whole array on the controller, row-major (one block from each primary copy).
  [[nodiscard]] std::vector<T> fetch() const {
    const auto blocks = value("fetch", &detail::tensor_worker::block, id(), true);
    std::vector<T> all(layout().elements());
    for (const detail::shard_data& b : blocks) {
      index_type lo, extent;
      for (std::size_t d = 0; d < N; ++d) lo[d] = b.lo.at(d), extent[d] = b.hi.at(d) - b.lo.at(d);
      const std::vector<T> e = elements(b);
      if (!e.empty())
        detail::copy_box(e.data(), extent, index_type{}, all.data(), shape(), lo, extent);
    }
    return all;
  }

  /// Exchanges two handles (double buffering): no command.
  void swap(remote_tensor& o) noexcept { ref_.swap(o.ref_); }
  friend void swap(remote_tensor& a, remote_tensor& b) noexcept { a.swap(b); }

private:
  friend class tensor_engine;
  struct tensor_ref {
    std::shared_ptr<detail::engine_state> engine;
    std::uint64_t id = 0;
    std::string name;
    tensor_layout<N> layout;
    halo_spec<N> halo;
    tensor_ref(std::shared_ptr<detail::engine_state> e, std::uint64_t i, std::string n,
               tensor_layout<N> l, halo_spec<N> h)
        : engine(std::move(e)), id(i), name(std::move(n)), layout(std::move(l)), halo(h) {}
    tensor_ref(const tensor_ref&) = delete;
    tensor_ref& operator=(const tensor_ref&) = delete;
    ~tensor_ref() {
      if (engine->stopped) return;
      try { // after the control session, or while it fails, there is nothing to free
        engine->workers.broadcast(&detail::tensor_worker::drop, id);
      } catch (...) {}
    }
  };

  remote_tensor(std::shared_ptr<detail::engine_state> e, std::uint64_t id, std::string name,
                tensor_layout<N> layout, halo_spec<N> halo)
      : ref_(std::make_shared<tensor_ref>(std::move(e), id, std::move(name), std::move(layout),
                                          halo)) {
    (void)detail::tensor_type<T, N>::registered;
  }
  static remote_tensor create(const std::shared_ptr<detail::engine_state>& e, std::string name,
                              tensor_layout<N> layout, halo_spec<N> halo) {
    if (e->stopped)
      throw state_error("tensor_engine::create(" + name + ")", "the engine was stopped");
    remote_tensor t(e, e->next_id++, std::move(name), std::move(layout), halo);
    const detail::tensor_spec spec = t.spec();
    // Waited for: a halo that does not fit is reported here, by every worker alike.
    t.guarded([&] {
      e->value([&] { return e->workers.call(&detail::tensor_worker::create, t.id(), spec); },
               "tensor_engine::create(" + t.context() + ")");
    });
    return t;
  }

  const tensor_ref& ref() const {
    if (!ref_) throw state_error("crown::remote_tensor", "an empty handle (default-constructed)");
    return *ref_;
  }
  std::uint64_t id() const { return ref().id; }
  /// Checked before any command: the engine must still run. `op` names the operation
  /// in the error where it adds something (a point and its rank).
  const std::shared_ptr<detail::engine_state>& engine(const std::string& op = {}) const {
    const tensor_ref& r = ref();
    if (r.engine->stopped)
      throw state_error(context() + op, "used after its mesh stopped (tensor_engine::stop "
                                        "freed its blocks on " +
                                            r.engine->ranks_text() + ")");
    return r.engine;
  }
  std::string context() const {
    const tensor_ref& r = ref();
    return "remote_tensor " + r.name + " (#" + std::to_string(r.id) + ", " +
           detail::index_text(r.layout.shape()) + " on " + r.engine->workers.name() +
           r.layout.mesh().to_string().substr(4) + ")";
  }
  /// Runs f, naming this tensor in the state errors of the actor layer (e.g. a handle
  /// used after its control session ended).
  template <typename F>
  auto guarded(F&& f) const {
    try {
      return f();
    } catch (const actor_error&) {
      throw;
    } catch (const state_error& e) {
      throw state_error(context(), e.what());
    }
  }
  /// One command to every worker, not waited for.
  template <typename M, typename... Args>
  void command(const char* op, M m, Args&&... args) {
    const auto& e = engine();
    guarded(
        [&] { e->keep(e->workers.call(m, std::forward<Args>(args)...), context() + ": " + op); });
  }
  /// One call to every worker whose values the caller waits for.
  template <typename M, typename... Args>
  auto value(const char* op, M m, Args&&... args) const {
    const auto& e = engine();
    return guarded([&] {
      return e->value([&] { return e->workers.call(m, std::forward<Args>(args)...); },
                      context() + ": " + op);
    });
  }
  std::uint64_t same(const remote_tensor& x, const char* op) const {
    const tensor_ref &me = ref(), &other = x.ref();
    if (other.engine != me.engine || other.layout.shape() != me.layout.shape() ||
        other.layout.placements() != me.layout.placements())
      throw argument_error(context() + ": " + op,
                           x.context() + " has another engine, shape or placements");
    return other.id;
  }
  std::uint64_t id_for(const tensor_engine& e, const std::string& what) const {
    if (ref().engine != e.state_)
      throw argument_error(what, context() + " belongs to another engine");
    (void)engine(); // stopped?
    return id();
  }
  detail::tensor_spec spec() const {
    return detail::make_spec<N>(detail::tensor_type_key<T, N>(), ref().name, shape(),
                                layout().placements(), halo());
  }
  std::vector<T> elements(const detail::shard_data& b) const {
    std::vector<T> out(b.elements.size() / sizeof(T));
    if (!out.empty()) std::memcpy(out.data(), b.elements.data(), b.elements.size());
    return out;
  }
  static std::string text(const point& p) {
    std::string t = "{";
    for (std::size_t i = 0; i < p.size(); ++i) t += (i ? ", " : "") + std::to_string(p[i]);
    return t + "}";
  }

  std::shared_ptr<tensor_ref> ref_;
};

} // namespace crown
