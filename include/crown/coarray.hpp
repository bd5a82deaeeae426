// include/crown/coarray.hpp — coarray<T, N>: an N-d block on every image of a mesh.
#pragma once
#include <array>
#include <bit>
#include <crown/completion.hpp>
#include <crown/detail/checked.hpp>
#include <crown/detail/fault.hpp>
#include <crown/detail/heap.hpp>
#include <crown/detail/types.hpp>
#include <crown/error.hpp>
#include <crown/memory_kind.hpp>
#include <crown/mesh.hpp>
#include <crown/runtime.hpp>
#include <crown/section.hpp>
#include <crown/view.hpp>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

namespace crown {

template <typename T, std::size_t N, memory_kind K>
class coarray;
template <typename T, std::size_t N, memory_kind K>
class image_ref;
class event;
template <typename T, std::size_t N, memory_kind K>
void put_notify(const image_ref<T, N, K>& target, std::span<const T> src, event& notify);

/// A remote reference to one image's block: `a.on(img)` or `a[img]`. Every transfer
/// is blocking: a put returns once the data is at the target (remote completion), a
/// get once it is here. Visibility to the target's own loads needs a synchronisation
/// (sync_all, sync_images, an event, a lock) on the target afterwards.
template <typename T, std::size_t N, memory_kind K = memory_kind::host>
class image_ref {
public:
  using index_type = std::array<std::size_t, N>;

  /// The whole block, element for element (src.size() == elements per image).
  void put(std::span<const T> src) const {
    detail::fault_point_reached(fault_point::put);
    check_count(src.size(), "put");
    detail::remote_put(rank_, a_->block_.offset, src.data(), src.size_bytes());
  }
  void get(std::span<T> dst) const {
    check_count(dst.size(), "get");
    detail::remote_get(rank_, a_->block_.offset, dst.data(), dst.size_bytes());
  }
  /// Asynchronous whole-block transfers: see crown::completion for local and remote
  /// completion. Keep `src`/`dst` alive and untouched until local completion.
  [[nodiscard]] completion put_async(std::span<const T> src) const {
    detail::fault_point_reached(fault_point::put);
    check_count(src.size(), "put_async");
    return start(true, const_cast<T*>(src.data()), src.size_bytes());
  }
  [[nodiscard]] completion get_async(std::span<T> dst) const {
    check_count(dst.size(), "get_async");
    return start(false, dst.data(), dst.size_bytes());
  }

  /// One element.
  void put(const index_type& i, const T& value) const {
    detail::fault_point_reached(fault_point::put);
    detail::remote_put(rank_, element_offset(i, "put"), &value, sizeof(T));
  }
  [[nodiscard]] T get(const index_type& i) const {
    T value;
    detail::remote_get(rank_, element_offset(i, "get"), &value, sizeof(T));
    return value;
  }
  /// A strided section; `src`/`dst` hold its elements packed in row-major order.
  void put(const section<N>& s, std::span<const T> src) const {
    detail::fault_point_reached(fault_point::put);
    detail::remote_put_strided(rank_, layout(s, src.size(), "put"), src.data());
  }
  void get(const section<N>& s, std::span<T> dst) const {
    detail::remote_get_strided(rank_, layout(s, dst.size(), "get"), dst.data());
  }
  /// Asynchronous sections, completed like the whole-block ones.
  [[nodiscard]] completion put_async(const section<N>& s, std::span<const T> src) const {
    detail::fault_point_reached(fault_point::put);
    completion c;
    detail::start_transfer_strided(true, rank_, layout(s, src.size(), "put_async"),
                                   const_cast<T*>(src.data()), c);
    return c;
  }
  [[nodiscard]] completion get_async(const section<N>& s, std::span<T> dst) const {
    completion c;
    detail::start_transfer_strided(false, rank_, layout(s, dst.size(), "get_async"), dst.data(), c);
    return c;
  }

  // Atomics on one element (int32/int64 all operations; float/double define, ref,
  // fetch_add, swap, compare_and_swap). With the whole mesh on one host they are CPU
  // atomics; otherwise every atomic on the coarray, the owner's too, goes through
  // the transport, so atomics never mix two mechanisms on one word.
  void atomic_define(const index_type& i, T v) const requires detail::atomic_capable<T> {
    atomic(i, detail::atomic_op::store, v);
  }
  [[nodiscard]] T atomic_ref(const index_type& i) const requires detail::atomic_capable<T> {
    return atomic(i, detail::atomic_op::load, T{});
  }
  T fetch_add(const index_type& i, T v) const requires detail::atomic_capable<T> {
    return atomic(i, detail::atomic_op::add, v);
  }
  T fetch_and(const index_type& i,
              T v) const requires std::is_integral_v<T> && detail::atomic_capable<T> {
    return atomic(i, detail::atomic_op::bit_and, v);
  }
  T fetch_or(const index_type& i,
             T v) const requires std::is_integral_v<T> && detail::atomic_capable<T> {
    return atomic(i, detail::atomic_op::bit_or, v);
  }
  T fetch_xor(const index_type& i,
              T v) const requires std::is_integral_v<T> && detail::atomic_capable<T> {
    return atomic(i, detail::atomic_op::bit_xor, v);
  }
  T swap(const index_type& i, T v) const requires detail::atomic_capable<T> {
    return atomic(i, detail::atomic_op::swap, v);
  }
  /// Returns the previous value; the swap happened iff it equals `expected`.
  T compare_and_swap(const index_type& i, T expected,
                     T desired) const requires detail::atomic_capable<T> {
    return atomic(i, detail::atomic_op::compare_swap, desired, expected);
  }

  [[nodiscard]] int image() const noexcept { return image_; }
  [[nodiscard]] int world_rank() const noexcept { return rank_; }

private:
  friend class coarray<T, N, K>;
  friend void put_notify<T, N, K>(const image_ref& target, std::span<const T> src, event& notify);
  image_ref(const coarray<T, N, K>* a, int image, int rank) : a_(a), image_(image), rank_(rank) {}

  std::string what(const char* op) const {
    return std::string(op) + " on image " + std::to_string(image_) + " of coarray<" +
           detail::type_name<T>() + "," + std::to_string(N) + ">";
  }
  void check_count(std::size_t n, const char* op) const {
    if (n != a_->size())
      throw argument_error(what(op), std::to_string(n) + " elements given for a block of " +
                                         std::to_string(a_->size()));
  }
  std::uint64_t element_offset(const index_type& i, const char* op) const {
    std::size_t linear = 0;
    for (std::size_t d = 0; d < N; ++d) {
      if (i[d] >= a_->extents_[d])
        throw argument_error(what(op), "index " + std::to_string(i[d]) + " of dimension " +
                                           std::to_string(d) + " is out of range [0, " +
                                           std::to_string(a_->extents_[d]) + ")");
      linear = linear * a_->extents_[d] + i[d];
    }
    // The extents were checked against the block when it was allocated; this keeps a
    // wrong block (or a wrong element size) from reaching into a neighbour's memory.
    if (linear >= a_->block_.bytes / sizeof(T))
      throw argument_error(what(op), "element " + std::to_string(linear) +
                                         " lies outside the block of " +
                                         std::to_string(a_->block_.bytes) + " bytes");
    return a_->block_.offset + linear * sizeof(T);
  }
  detail::strided layout(const section<N>& s, std::size_t given, const char* op) const {
    const auto l = detail::section_layout(s, a_->extents_, sizeof(T), a_->block_, what(op));
    std::size_t count = 1;
    for (const auto& t : s) count = detail::saturating_mul(count, t.count());
    if (given != count)
      throw argument_error(what(op) + " section " + detail::section_text(s),
                           "the section has " + std::to_string(count) + " elements but " +
                               std::to_string(given) + " were given");
    return l;
  }
  completion start(bool put, T* buffer, std::size_t bytes) const {
    completion c;
    detail::start_transfer(put, rank_, a_->block_.offset, buffer, bytes, c);
    return c;
  }
  T atomic(const index_type& i, detail::atomic_op op, T operand, T compare = T{}) const {
    using bits_t = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
    const std::uint64_t result = detail::remote_atomic(
        rank_, element_offset(i, "atomic"), op, sizeof(T), std::is_floating_point_v<T>,
        std::bit_cast<bits_t>(operand), std::bit_cast<bits_t>(compare), a_->block_.cpu_atomics);
    return std::bit_cast<T>(static_cast<bits_t>(result));
  }

  const coarray<T, N, K>* a_;
  int image_;
  int rank_;
};

/// An N-d block of T (N = 1..3) on every image of a mesh, in the symmetric heap.
/// Construction, destruction and move assignment are collective over the mesh's members
/// (freeing synchronises first, as Fortran's deallocate does); swap is local. Elements
/// start zeroed. The local block is reached at full speed through data()/local(); other
/// images through on(image). Images are numbered 0..num_images()-1 in mesh order. The
/// memory kind is part of the type: host memory today; cuda arrives with the GPU heap.
template <typename T, std::size_t N = 1, memory_kind K = memory_kind::host>
class coarray {
  static_assert(std::is_trivially_copyable_v<T>, "coarray elements must be trivially copyable");
  static_assert(N >= 1 && N <= 3, "coarray supports 1 to 3 dimensions");

public:
  using extents_type = std::array<std::size_t, N>;

  /// Throws resource_error (every member alike) when the block cannot exist: more
  /// than 2^64 bytes, or more than the heap holds.
  coarray(const mesh& m, const extents_type& extents) : mesh_(m), extents_(extents) {
    std::string what = name() + "(";
    for (std::size_t d = 0; d < N; ++d) {
      if (d) what += ',';
      what += std::to_string(extents[d]);
    }
    what += ')';
    block_ = detail::heap_allocate(m, detail::extents_bytes(extents, sizeof(T)),
                                   detail::type_tag<T, N>(), what, K);
    data_ = reinterpret_cast<T*>(detail::heap_address(block_.offset));
  }
  coarray(const mesh& m, std::size_t n) requires(N == 1) : coarray(m, extents_type{n}) {}
  explicit coarray(const extents_type& extents) : coarray(crown::world(), extents) {}
  explicit coarray(std::size_t n) requires(N == 1) : coarray(crown::world(), extents_type{n}) {}

  ~coarray() {
    if (data_) detail::heap_release(mesh_, block_);
  }
  coarray(const coarray&) = delete;
  coarray& operator=(const coarray&) = delete;
  coarray(coarray&& o) noexcept
      : mesh_(o.mesh_), extents_(o.extents_), block_(o.block_),
        data_(std::exchange(o.data_, nullptr)) {}
  /// Collective over this coarray's mesh (when it holds a block): frees that block as
  /// the destructor would, so every member must assign together; then takes `o`'s
  /// block, extents and mesh (which may be another mesh) and leaves `o` moved-from.
  coarray& operator=(coarray&& o) noexcept {
    if (this != &o) {
      if (data_) detail::heap_release(mesh_, block_);
      data_ = nullptr;
      swap(o);
    }
    return *this;
  }
  /// Exchanges the two coarrays' blocks, extents and meshes without communicating.
  /// Every image must make the same swaps (names refer to blocks by heap offset), as
  /// in double buffering: `std::swap(u, v)` or `u.swap(v)` after a sync_all.
  void swap(coarray& o) noexcept {
    std::swap(mesh_, o.mesh_);
    std::swap(extents_, o.extents_);
    std::swap(block_, o.block_);
    std::swap(data_, o.data_);
  }
  friend void swap(coarray& a, coarray& b) noexcept { a.swap(b); }

  [[nodiscard]] const mesh& team() const noexcept { return mesh_; }
  [[nodiscard]] int this_image() const { return mesh_.rank(); }
  [[nodiscard]] int num_images() const noexcept { return mesh_.size(); }
  [[nodiscard]] const extents_type& extents() const noexcept { return extents_; }
  /// Elements per image.
  [[nodiscard]] std::size_t size() const noexcept { return detail::element_count(extents_); }

  /// The local block.
  [[nodiscard]] T* data() const { return live(); }
  [[nodiscard]] view<T, N> local() const { return {live(), extents_}; }
  [[nodiscard]] std::span<T> flat() const { return {live(), size()}; }
  template <typename... I>
  requires(sizeof...(I) == N) [[nodiscard]] T& operator()(I... index) const noexcept {
    return view<T, N>(data_, extents_)(index...);
  }

  /// A reference to image `image`'s block; throws argument_error outside [0, num_images()).
  [[nodiscard]] image_ref<T, N, K> on(int image) const {
    live();
    if (image < 0 || image >= mesh_.size())
      throw argument_error("coarray<" + detail::type_name<T>() + "," + std::to_string(N) + "> on " +
                               mesh_.to_string() + ": access to image " + std::to_string(image),
                           "image out of range [0, " + std::to_string(mesh_.size()) + ")");
    return image_ref<T, N, K>(this, image, mesh_.ranks()[static_cast<std::size_t>(image)]);
  }
  [[nodiscard]] image_ref<T, N, K> operator[](int image) const { return on(image); }

  /// Heap placement, for code that builds on coarrays (events, locks, tensors).
  [[nodiscard]] const detail::heap_block& block() const noexcept { return block_; }

private:
  friend class image_ref<T, N, K>;
  std::string name() const {
    return "coarray<" + detail::type_name<T>() + "," + std::to_string(N) + ">";
  }
  T* live() const {
    if (!data_) throw state_error(name(), "used after it was moved from");
    return data_;
  }

  mesh mesh_;
  extents_type extents_;
  detail::heap_block block_{};
  T* data_ = nullptr;
};

} // namespace crown
#include <crown/device_coarray.hpp> // memory_kind::cuda: the device heap
