// include/crown/coarray.hpp — coarray<T, N>: an N-d block on every image of a mesh.
#pragma once
#include <array>
#include <bit>
#include <crown/completion.hpp>
#include <crown/detail/checked.hpp>
#include <crown/detail/device_heap.hpp>
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

namespace detail {

/// What every image_ref shares, whatever memory it reaches: the target, the names in
/// its errors, counts, indices and sections checked against the block, and the named
/// atomics (each memory kind's image_ref supplies atomic(i, op, operand, compare)).
template <typename T, std::size_t N, memory_kind K>
class image_ref_common {
public:
  using index_type = std::array<std::size_t, N>;

  // Atomics on one element (int32/int64 all operations; float/double define, ref,
  // fetch_add, swap, compare_and_swap).
  void atomic_define(const index_type& i, T v) const requires atomic_capable<T> {
    atomic(i, atomic_op::store, v);
  }
  [[nodiscard]] T atomic_ref(const index_type& i) const requires atomic_capable<T> {
    return atomic(i, atomic_op::load, T{});
  }
  T fetch_add(const index_type& i, T v) const requires atomic_capable<T> {
    return atomic(i, atomic_op::add, v);
  }
  T fetch_and(const index_type& i, T v) const requires std::is_integral_v<T> && atomic_capable<T> {
    return atomic(i, atomic_op::bit_and, v);
  }
  T fetch_or(const index_type& i, T v) const requires std::is_integral_v<T> && atomic_capable<T> {
    return atomic(i, atomic_op::bit_or, v);
  }
  T fetch_xor(const index_type& i, T v) const requires std::is_integral_v<T> && atomic_capable<T> {
    return atomic(i, atomic_op::bit_xor, v);
  }
  T swap(const index_type& i, T v) const requires atomic_capable<T> {
    return atomic(i, atomic_op::swap, v);
  }
  /// Returns the previous value; the swap happened iff it equals `expected`.
  T compare_and_swap(const index_type& i, T expected, T desired) const requires atomic_capable<T> {
    return atomic(i, atomic_op::compare_swap, desired, expected);
  }

  [[nodiscard]] int image() const noexcept { return image_; }
  [[nodiscard]] int world_rank() const noexcept { return rank_; }

protected:
  image_ref_common(const coarray<T, N, K>* a, int image, int rank)
      : a_(a), image_(image), rank_(rank) {}

  std::string what(const char* op) const {
    return std::string(op) + " on image " + std::to_string(image_) + " of " + a_->name();
  }
  void check_count(std::size_t n, const char* op) const {
    if (n != a_->size())
      throw argument_error(what(op), std::to_string(n) + " elements given for a block of " +
                                         std::to_string(a_->size()));
  }
  std::uint64_t element_offset(const index_type& i, const char* op) const {
    const auto& extents = a_->extents();
    std::size_t linear = 0;
    for (std::size_t d = 0; d < N; ++d) {
      if (i[d] >= extents[d])
        throw argument_error(what(op), "index " + std::to_string(i[d]) + " of dimension " +
                                           std::to_string(d) + " is out of range [0, " +
                                           std::to_string(extents[d]) + ")");
      linear = linear * extents[d] + i[d];
    }
    // The extents were checked against the block when it was allocated; this keeps a
    // wrong block (or a wrong element size) from reaching into a neighbour's memory.
    if (linear >= a_->block().bytes / sizeof(T))
      throw argument_error(what(op), "element " + std::to_string(linear) +
                                         " lies outside the block of " +
                                         std::to_string(a_->block().bytes) + " bytes");
    return a_->block().offset + linear * sizeof(T);
  }
  strided layout(const section<N>& s, std::size_t given, const char* op) const {
    const auto l =
        section_layout(s, a_->extents(), sizeof(T), a_->block(), [&] { return what(op); });
    std::size_t count = 1;
    for (const auto& t : s) count = saturating_mul(count, t.count());
    if (given != count)
      throw argument_error(what(op) + " section " + section_text(s),
                           "the section has " + std::to_string(count) + " elements but " +
                               std::to_string(given) + " were given");
    return l;
  }

  const coarray<T, N, K>* a_;
  int image_;
  int rank_;

private:
  template <typename, std::size_t, memory_kind>
  friend class crown::image_ref; // element_offset of another coarray (put_signal's flag)
  T atomic(const index_type& i, atomic_op op, T operand, T compare = T{}) const {
    return static_cast<const image_ref<T, N, K>&>(*this).atomic(i, op, operand, compare);
  }
};

/// What every coarray shares, whatever memory holds its blocks: the collective
/// allocation and release, moves and swaps, the mesh, the extents and on(image).
template <typename T, std::size_t N, memory_kind K>
class coarray_common {
  static_assert(std::is_trivially_copyable_v<T>, "coarray elements must be trivially copyable");
  static_assert(N >= 1 && N <= 3, "coarray supports 1 to 3 dimensions");

public:
  using extents_type = std::array<std::size_t, N>;

  ~coarray_common() { release(); }
  coarray_common(const coarray_common&) = delete;
  coarray_common& operator=(const coarray_common&) = delete;
  coarray_common(coarray_common&& o) noexcept
      : mesh_(o.mesh_), extents_(o.extents_), block_(o.block_),
        data_(std::exchange(o.data_, nullptr)) {}
  /// Collective over this coarray's mesh (when it holds a block): frees that block as
  /// the destructor would, so every member must assign together; then takes `o`'s
  /// block, extents and mesh (which may be another mesh) and leaves `o` moved-from.
  coarray_common& operator=(coarray_common&& o) noexcept {
    if (this != &o) {
      release();
      swap(o);
    }
    return *this;
  }
  /// Exchanges the two coarrays' blocks, extents and meshes without communicating.
  /// Every image must make the same swaps (names refer to blocks by heap offset), as
  /// in double buffering: `std::swap(u, v)` or `u.swap(v)` after a sync_all.
  void swap(coarray_common& o) noexcept {
    std::swap(mesh_, o.mesh_);
    std::swap(extents_, o.extents_);
    std::swap(block_, o.block_);
    std::swap(data_, o.data_);
  }

  [[nodiscard]] const mesh& team() const noexcept { return mesh_; }
  [[nodiscard]] int this_image() const { return mesh_.rank(); }
  [[nodiscard]] int num_images() const noexcept { return mesh_.size(); }
  [[nodiscard]] const extents_type& extents() const noexcept { return extents_; }
  /// Elements per image.
  [[nodiscard]] std::size_t size() const noexcept { return element_count(extents_); }

  /// The local block (for device memory: a device pointer, not for the host to read).
  [[nodiscard]] T* data() const { return live(); }
  [[nodiscard]] std::span<T> flat() const { return {live(), size()}; }

  /// A reference to image `image`'s block; throws argument_error outside [0, num_images()).
  [[nodiscard]] image_ref<T, N, K> on(int image) const {
    live();
    if (image < 0 || image >= mesh_.size())
      throw argument_error(name() + " on " + mesh_.to_string() + ": access to image " +
                               std::to_string(image),
                           "image out of range [0, " + std::to_string(mesh_.size()) + ")");
    return image_ref<T, N, K>(static_cast<const coarray<T, N, K>*>(this), image,
                              mesh_.ranks()[static_cast<std::size_t>(image)]);
  }
  [[nodiscard]] image_ref<T, N, K> operator[](int image) const { return on(image); }

  /// Heap placement, for code that builds on coarrays (events, locks, tensors).
  [[nodiscard]] const heap_block& block() const noexcept { return block_; }
  /// "coarray<double,2>" (",cuda>" for device memory), as errors name it.
  [[nodiscard]] std::string name() const {
    return "coarray<" + type_name<T>() + "," + std::to_string(N) +
           (K == memory_kind::cuda ? ",cuda>" : ">");
  }

protected:
  /// Throws resource_error (every member alike) when the block cannot exist: more
  /// than 2^64 bytes, or more than the heap holds.
  coarray_common(const mesh& m, const extents_type& extents) : mesh_(m), extents_(extents) {
    std::string what = name() + "(";
    for (std::size_t d = 0; d < N; ++d) {
      if (d) what += ',';
      what += std::to_string(extents[d]);
    }
    what += ')';
    const std::size_t bytes = extents_bytes(extents, sizeof(T));
    if constexpr (K == memory_kind::cuda) {
      block_ = device_allocate(m, bytes, type_tag<T, N>(), what);
      data_ = reinterpret_cast<T*>(device_address(block_.offset));
    } else {
      block_ = heap_allocate(m, bytes, type_tag<T, N>(), what, K);
      data_ = reinterpret_cast<T*>(heap_address(block_.offset));
    }
  }
  T* live() const {
    if (!data_) throw state_error(name(), "used after it was moved from");
    return data_;
  }

  mesh mesh_;
  extents_type extents_;
  heap_block block_{};
  T* data_ = nullptr;

private:
  void release() noexcept {
    if (!data_) return;
    if constexpr (K == memory_kind::cuda)
      device_release(mesh_, block_);
    else
      heap_release(mesh_, block_);
    data_ = nullptr;
  }
};

} // namespace detail

/// A remote reference to one image's block: `a.on(img)` or `a[img]`. Every transfer
/// is blocking: a put returns once the data is at the target (remote completion), a
/// get once it is here. Visibility to the target's own loads needs a synchronisation
/// (sync_all, sync_images, an event, a lock) on the target afterwards. Atomics: with
/// the whole mesh on one host they are CPU atomics; otherwise every atomic on the
/// coarray, the owner's too, goes through the transport, so atomics never mix two
/// mechanisms on one word.
template <typename T, std::size_t N, memory_kind K = memory_kind::host>
class image_ref : public detail::image_ref_common<T, N, K> {
  using common = detail::image_ref_common<T, N, K>;
  using common::a_;
  using common::rank_;

public:
  using typename common::index_type;

  /// The whole block, element for element (src.size() == elements per image).
  void put(std::span<const T> src) const {
    detail::fault_point_reached(fault_point::put);
    this->check_count(src.size(), "put");
    detail::remote_put(rank_, a_->block().offset, src.data(), src.size_bytes());
  }
  void get(std::span<T> dst) const {
    this->check_count(dst.size(), "get");
    detail::remote_get(rank_, a_->block().offset, dst.data(), dst.size_bytes());
  }
  /// Asynchronous whole-block transfers: see crown::completion for local and remote
  /// completion. Keep `src`/`dst` alive and untouched until local completion.
  [[nodiscard]] completion put_async(std::span<const T> src) const {
    detail::fault_point_reached(fault_point::put);
    this->check_count(src.size(), "put_async");
    return start(true, const_cast<T*>(src.data()), src.size_bytes());
  }
  [[nodiscard]] completion get_async(std::span<T> dst) const {
    this->check_count(dst.size(), "get_async");
    return start(false, dst.data(), dst.size_bytes());
  }

  /// One element.
  void put(const index_type& i, const T& value) const {
    detail::fault_point_reached(fault_point::put);
    detail::remote_put(rank_, this->element_offset(i, "put"), &value, sizeof(T));
  }
  [[nodiscard]] T get(const index_type& i) const {
    T value;
    detail::remote_get(rank_, this->element_offset(i, "get"), &value, sizeof(T));
    return value;
  }
  /// A strided section; `src`/`dst` hold its elements packed in row-major order.
  void put(const section<N>& s, std::span<const T> src) const {
    detail::fault_point_reached(fault_point::put);
    detail::remote_put_strided(rank_, this->layout(s, src.size(), "put"), src.data());
  }
  void get(const section<N>& s, std::span<T> dst) const {
    detail::remote_get_strided(rank_, this->layout(s, dst.size(), "get"), dst.data());
  }
  /// Asynchronous sections, completed like the whole-block ones.
  [[nodiscard]] completion put_async(const section<N>& s, std::span<const T> src) const {
    detail::fault_point_reached(fault_point::put);
    completion c;
    detail::start_transfer_strided(true, rank_, this->layout(s, src.size(), "put_async"),
                                   const_cast<T*>(src.data()), c);
    return c;
  }
  [[nodiscard]] completion get_async(const section<N>& s, std::span<T> dst) const {
    completion c;
    detail::start_transfer_strided(false, rank_, this->layout(s, dst.size(), "get_async"),
                                   dst.data(), c);
    return c;
  }

private:
  friend class detail::coarray_common<T, N, K>;
  friend class detail::image_ref_common<T, N, K>;
  friend void put_notify<T, N, K>(const image_ref& target, std::span<const T> src, event& notify);
  image_ref(const coarray<T, N, K>* a, int image, int rank) : common(a, image, rank) {}

  completion start(bool put, T* buffer, std::size_t bytes) const {
    completion c;
    detail::start_transfer(put, rank_, a_->block().offset, buffer, bytes, c);
    return c;
  }
  T atomic(const index_type& i, detail::atomic_op op, T operand, T compare = T{}) const {
    using bits_t = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
    const std::uint64_t result = detail::remote_atomic(
        rank_, this->element_offset(i, "atomic"), op, sizeof(T), std::is_floating_point_v<T>,
        std::bit_cast<bits_t>(operand), std::bit_cast<bits_t>(compare), a_->block().cpu_atomics);
    return std::bit_cast<T>(static_cast<bits_t>(result));
  }
};

/// An N-d block of T (N = 1..3) on every image of a mesh, in the symmetric heap.
/// Construction, destruction and move assignment are collective over the mesh's members
/// (freeing synchronises first, as Fortran's deallocate does); swap is local. Elements
/// start zeroed. The local block is reached at full speed through data()/local(); other
/// images through on(image). Images are numbered 0..num_images()-1 in mesh order. The
/// memory kind is part of the type: host memory here, device memory in
/// crown/device_coarray.hpp.
template <typename T, std::size_t N = 1, memory_kind K = memory_kind::host>
class coarray : public detail::coarray_common<T, N, K> {
  using common = detail::coarray_common<T, N, K>;

public:
  using typename common::extents_type;

  coarray(const mesh& m, const extents_type& extents) : common(m, extents) {}
  coarray(const mesh& m, std::size_t n) requires(N == 1) : common(m, extents_type{n}) {}
  explicit coarray(const extents_type& extents) : common(crown::world(), extents) {}
  explicit coarray(std::size_t n) requires(N == 1) : common(crown::world(), extents_type{n}) {}
  friend void swap(coarray& a, coarray& b) noexcept { a.swap(b); }

  [[nodiscard]] view<T, N> local() const { return {this->live(), this->extents_}; }
  template <typename... I>
  requires(sizeof...(I) == N) [[nodiscard]] T& operator()(I... index) const noexcept {
    return view<T, N>(this->data_, this->extents_)(index...);
  }
};

} // namespace crown
#include <crown/device_coarray.hpp> // memory_kind::cuda: the device heap
