// include/crown/engine/worker.hpp — (internal) the actor that holds a tensor engine's
// dist_tensors on one rank, in a table by id, and runs the controller's commands on them.
// Every command reaches every worker in the order the controller sent it, so the
// collective ones (create, redistribute, halos, kernels, drop) meet in one order.
#pragma once
#include <crown/actor/controller.hpp>
#include <crown/engine/functions.hpp>
#include <crown/tensor/dist_tensor.hpp>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace crown::detail {

/// A tensor's layout as it travels in a command.
struct tensor_spec {
  std::string type; ///< tensor_type_key<T, N>()
  std::string name;
  std::vector<std::size_t> shape, halo_width;
  std::vector<int> placements; ///< -1: replicate, else the tensor dimension a shard splits
  std::vector<std::uint8_t> periodic;
  template <class Ar>
  void serialize(Ar& ar) {
    ar(type, name, shape, halo_width, placements, periodic);
  }
};

/// One worker's block of a tensor: its global box and its elements, row-major.
struct shard_data {
  std::vector<std::size_t> lo, hi;
  std::vector<std::uint8_t> elements; ///< raw bytes of T
  template <class Ar>
  void serialize(Ar& ar) {
    ar(lo, hi, elements);
  }
};

template <typename T, std::size_t N>
std::string tensor_type_key() {
  return typeid(dist_tensor<T, N>).name();
}

template <typename T>
std::vector<std::uint8_t> raw_bytes(const T* data, std::size_t count) {
  static_assert(std::is_trivially_copyable_v<T>, "remote tensors hold trivially copyable types");
  std::vector<std::uint8_t> out(count * sizeof(T));
  if (count) std::memcpy(out.data(), data, out.size());
  return out;
}
template <typename T>
T from_raw(const std::vector<std::uint8_t>& bytes) {
  T value{};
  if (bytes.size() != sizeof(T))
    throw malformed_message(std::to_string(bytes.size()) + " bytes for a " +
                            std::to_string(sizeof(T)) + "-byte element");
  std::memcpy(&value, bytes.data(), sizeof(T));
  return value;
}

/// A tensor in a worker's table, its element type and rank hidden.
class tensor_slot {
public:
  explicit tensor_slot(std::string name) : name_(std::move(name)) {}
  virtual ~tensor_slot() = default;
  tensor_slot(const tensor_slot&) = delete;
  tensor_slot& operator=(const tensor_slot&) = delete;
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  virtual void fill(const std::vector<std::uint8_t>& value) = 0;
  virtual void apply(const std::string& function) = 0;
  virtual void axpy(const std::vector<std::uint8_t>& a, tensor_slot& x) = 0;
  virtual void copy_from(tensor_slot& x) = 0;
  [[nodiscard]] virtual std::unique_ptr<tensor_slot> redistribute(const tensor_spec& to) = 0;
  virtual void exchange_halos() = 0;
  virtual void reduce_along(const std::string& dim, int op) = 0;
  [[nodiscard]] virtual std::vector<std::uint8_t> sum() = 0;
  [[nodiscard]] virtual std::vector<std::uint8_t> max() = 0;
  [[nodiscard]] virtual double norm2() = 0;
  /// This worker's block; empty where `primary_only` and this is not its primary copy.
  [[nodiscard]] virtual shard_data block(bool primary_only) = 0;
  /// Runs a kernel on `all` (this slot first, every one of this slot's type).
  virtual void run(const std::string& kernel, std::span<tensor_slot* const> all,
                   std::span<const double> scalars) = 0;

protected:
  std::string name_;
};

inline std::vector<placement> placements_of(const tensor_spec& s) {
  std::vector<placement> p;
  for (int d : s.placements) p.push_back(d < 0 ? replicate() : shard(static_cast<std::size_t>(d)));
  return p;
}
template <std::size_t N>
halo_spec<N> halo_of(const tensor_spec& s) {
  halo_spec<N> h;
  for (std::size_t d = 0; d < N && d < s.halo_width.size(); ++d) {
    h.width[d] = s.halo_width[d];
    h.periodic[d] = s.periodic.at(d) != 0;
  }
  return h;
}

template <typename T, std::size_t N>
class typed_slot final : public tensor_slot {
public:
  typed_slot(std::string name, dist_tensor<T, N>&& t)
      : tensor_slot(std::move(name)), t_(std::move(t)) {}
  static std::unique_ptr<tensor_slot> make(const tensor_spec& s, const mesh& m) {
    std::array<std::size_t, N> shape{};
    for (std::size_t d = 0; d < N; ++d) shape[d] = s.shape.at(d);
    return std::make_unique<typed_slot>(
        s.name, dist_tensor<T, N>(m, shape, placements_of(s), halo_of<N>(s)));
  }

  void fill(const std::vector<std::uint8_t>& value) override { t_.fill(from_raw<T>(value)); }
  void apply(const std::string& function) override {
    t_.apply(find_function<element_function<T, N>>(function, "element function", context()));
  }
  void axpy(const std::vector<std::uint8_t>& a, tensor_slot& x) override {
    t_.axpy(from_raw<T>(a), same_type(x).t_);
  }
  void copy_from(tensor_slot& x) override { t_.copy_from(same_type(x).t_); }
  std::unique_ptr<tensor_slot> redistribute(const tensor_spec& to) override {
    return std::make_unique<typed_slot>(to.name,
                                        t_.redistribute(placements_of(to), halo_of<N>(to)));
  }
  void exchange_halos() override { t_.exchange_halos(); }
  void reduce_along(const std::string& dim, int op) override {
    // Copies along a replicated dimension hold the same box: combine them element-wise.
    const mesh along = t_.mesh().sub(std::span<const std::string>(&dim, 1));
    std::vector<T> mine(t_.own().size());
    std::size_t k = 0;
    t_.apply([&](const auto&, T& x) { mine[k++] = x; });
    if (op == static_cast<int>(reduce_op::sum))
      co_sum(along, std::span<T>(mine));
    else if (op == static_cast<int>(reduce_op::min))
      co_min(along, std::span<T>(mine));
    else
      co_max(along, std::span<T>(mine));
    k = 0;
    t_.apply([&](const auto&, T& x) { x = mine[k++]; });
  }
  std::vector<std::uint8_t> sum() override {
    const T s = t_.sum();
    return raw_bytes(&s, 1);
  }
  std::vector<std::uint8_t> max() override {
    const T s = t_.max();
    return raw_bytes(&s, 1);
  }
  double norm2() override { return t_.norm2(); }
  shard_data block(bool primary_only) override {
    shard_data out;
    const box<N> own = t_.own();
    out.lo.assign(own.lo.begin(), own.lo.end());
    out.hi.assign(own.hi.begin(), own.hi.end());
    if (primary_only && !t_.layout().is_primary(t_.mesh().rank())) {
      out.hi = out.lo; // an empty box: the primary copy sends it
      return out;
    }
    std::vector<T> elements;
    elements.reserve(own.size());
    t_.apply([&](const auto&, T& x) { elements.push_back(x); });
    out.elements = raw_bytes(elements.data(), elements.size());
    return out;
  }
  void run(const std::string& kernel, std::span<tensor_slot* const> all,
           std::span<const double> scalars) override {
    const auto f = find_function<kernel_function<T, N>>(kernel, "kernel", context());
    std::vector<dist_tensor<T, N>*> tensors;
    for (tensor_slot* s : all) tensors.push_back(&same_type(*s).t_);
    f(tensors, scalars);
  }

private:
  std::string context() const { return "remote_tensor " + name_; }
  typed_slot& same_type(tensor_slot& x) const {
    auto* t = dynamic_cast<typed_slot*>(&x);
    if (!t)
      throw argument_error(context(),
                           "remote_tensor " + x.name() + " holds another element type or rank");
    return *t;
  }
  dist_tensor<T, N> t_;
};

using slot_factory = std::unique_ptr<tensor_slot> (*)(const tensor_spec&, const mesh&);
inline std::map<std::string, slot_factory>& tensor_types() {
  static std::map<std::string, slot_factory> types;
  return types;
}
/// Registered on every rank before main when remote_tensor<T, N> is used anywhere.
template <typename T, std::size_t N>
struct tensor_type {
  static inline const bool registered =
      (tensor_types()[tensor_type_key<T, N>()] = &typed_slot<T, N>::make, true);
};

/// The actor: one per rank of a tensor engine's mesh.
class tensor_worker {
public:
  tensor_worker() = default;
  tensor_worker(const tensor_worker&) = delete;
  tensor_worker& operator=(const tensor_worker&) = delete;
  /// Frees the tensors in id order: every worker frees them together (collectively).
  ~tensor_worker() {
    while (!table_.empty()) table_.erase(table_.begin());
  }
  void create(std::uint64_t id, const tensor_spec& spec) {
    const auto it = tensor_types().find(spec.type);
    if (it == tensor_types().end())
      throw argument_error("remote_tensor " + spec.name, "element type not registered here");
    table_[id] = it->second(spec, this_actor().mesh);
  }
  void drop(std::uint64_t id) { table_.erase(id); }
  void fill(std::uint64_t id, const std::vector<std::uint8_t>& value) { slot(id).fill(value); }
  void apply(std::uint64_t id, const std::string& function) { slot(id).apply(function); }
  void axpy(std::uint64_t y, const std::vector<std::uint8_t>& a, std::uint64_t x) {
    slot(y).axpy(a, slot(x));
  }
  void copy(std::uint64_t to, std::uint64_t from) { slot(to).copy_from(slot(from)); }
  void redistribute(std::uint64_t from, std::uint64_t id, const tensor_spec& to) {
    table_[id] = slot(from).redistribute(to);
  }
  void exchange_halos(std::uint64_t id) { slot(id).exchange_halos(); }
  void reduce_along(std::uint64_t id, const std::string& dim, int op) {
    slot(id).reduce_along(dim, op);
  }
  void run(const std::string& kernel, const std::vector<std::uint64_t>& ids,
           const std::vector<double>& scalars) {
    std::vector<tensor_slot*> all;
    for (std::uint64_t id : ids) all.push_back(&slot(id));
    all.front()->run(kernel, all, scalars);
  }
  std::vector<std::uint8_t> sum(std::uint64_t id) { return slot(id).sum(); }
  std::vector<std::uint8_t> max(std::uint64_t id) { return slot(id).max(); }
  double norm2(std::uint64_t id) { return slot(id).norm2(); }
  shard_data block(std::uint64_t id, bool primary_only) { return slot(id).block(primary_only); }
  static constexpr auto endpoints = crown::endpoints(
      &tensor_worker::create, &tensor_worker::drop, &tensor_worker::fill, &tensor_worker::apply,
      &tensor_worker::axpy, &tensor_worker::copy, &tensor_worker::redistribute,
      &tensor_worker::exchange_halos, &tensor_worker::reduce_along, &tensor_worker::run,
      &tensor_worker::sum, &tensor_worker::max, &tensor_worker::norm2, &tensor_worker::block);

private:
  tensor_slot& slot(std::uint64_t id) {
    const auto it = table_.find(id);
    if (it == table_.end())
      throw state_error("tensor engine " + this_actor().name,
                        "no tensor #" + std::to_string(id) + " here (freed)");
    return *it->second;
  }
  std::map<std::uint64_t, std::unique_ptr<tensor_slot>> table_;
};

} // namespace crown::detail
