// include/crown/device_coarray.hpp — coarray<T, N, memory_kind::cuda>: an N-d block in
// GPU memory on every image, in the device symmetric heap (CROWN_GPU_HEAP_SIZE).
// Included by coarray.hpp; the same API as host coarrays, plus stream-ordered
// transfers and a kernel view (device()).
#pragma once
#include <crown/coarray.hpp>
#include <crown/detail/device_heap.hpp>
#include <crown/device/coarray_view.hpp>

namespace crown {

/// A remote reference to one image's device block: `a.on(img)`. Sources and
/// destinations may be host or device memory. Blocking transfers return once the data
/// is at the target (put) or here (get); the *_async ones return a completion (local
/// and remote completion coincide: the copy writes the target's memory itself); the
/// ones that take a `stream` are enqueued on it and complete in its order. Images on
/// other hosts are not reachable yet (state_error naming both hosts).
template <typename T, std::size_t N>
class image_ref<T, N, memory_kind::cuda> {
public:
  using index_type = std::array<std::size_t, N>;

  void put(std::span<const T> src) const {
    check_count(src.size(), "put");
    detail::device_put(rank_, a_->block_.offset, src.data(), src.size_bytes());
  }
  void get(std::span<T> dst) const {
    check_count(dst.size(), "get");
    detail::device_get(rank_, a_->block_.offset, dst.data(), dst.size_bytes());
  }
  [[nodiscard]] completion put_async(std::span<const T> src) const {
    return start(true, const_cast<T*>(src.data()), src.size(), false, nullptr, "put_async");
  }
  [[nodiscard]] completion get_async(std::span<T> dst) const {
    return start(false, dst.data(), dst.size(), false, nullptr, "get_async");
  }
  /// Enqueued on `stream` (a cudaStream_t): ordered after the stream's earlier work (a
  /// kernel that produced `src`), before its later work. `src`/`dst` are device or
  /// page-locked host memory.
  [[nodiscard]] completion put_async(std::span<const T> src, CUstream_st* stream) const {
    return start(true, const_cast<T*>(src.data()), src.size(), true, stream, "put_async");
  }
  [[nodiscard]] completion get_async(std::span<T> dst, CUstream_st* stream) const {
    return start(false, dst.data(), dst.size(), true, stream, "get_async");
  }

  void put(const index_type& i, const T& value) const {
    detail::device_put(rank_, element_offset(i, "put"), &value, sizeof(T));
  }
  [[nodiscard]] T get(const index_type& i) const {
    T value;
    detail::device_get(rank_, element_offset(i, "get"), &value, sizeof(T));
    return value;
  }
  /// A strided section; `src`/`dst` hold its elements packed in row-major order.
  void put(const section<N>& s, std::span<const T> src) const {
    detail::device_put_strided(rank_, layout(s, src.size(), "put"), src.data());
  }
  void get(const section<N>& s, std::span<T> dst) const {
    detail::device_get_strided(rank_, layout(s, dst.size(), "get"), dst.data());
  }
  [[nodiscard]] completion put_async(const section<N>& s, std::span<const T> src,
                                     CUstream_st* stream = nullptr) const {
    completion c;
    detail::device_start_strided(true, rank_, layout(s, src.size(), "put_async"),
                                 const_cast<T*>(src.data()), stream != nullptr, stream, c);
    return c;
  }
  [[nodiscard]] completion get_async(const section<N>& s, std::span<T> dst,
                                     CUstream_st* stream = nullptr) const {
    completion c;
    detail::device_start_strided(false, rank_, layout(s, dst.size(), "get_async"), dst.data(),
                                 stream != nullptr, stream, c);
    return c;
  }

  // Atomics on one element, executed by the GPU (system scope): atomic with each other
  // and with kernels' atomics through device() views, the owner's too.
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
  T compare_and_swap(const index_type& i, T expected,
                     T desired) const requires detail::atomic_capable<T> {
    return atomic(i, detail::atomic_op::compare_swap, desired, expected);
  }

  /// Put-with-notify into a device flag: puts `src`, then adds `add` to the int64
  /// element `flag` of `flags` on the same image, once the data is there (a kernel
  /// there waits with view.wait_until(flag, cmp::ge, n)).
  template <std::size_t M>
  void put_signal(std::span<const T> src, const coarray<std::int64_t, M, memory_kind::cuda>& flags,
                  const std::array<std::size_t, M>& flag, std::int64_t add = 1) const {
    check_count(src.size(), "put_signal");
    const std::uint64_t word =
        flags.on(flags.team().index_of(rank_)).element_offset(flag, "put_signal (flag)");
    detail::device_put_notify(rank_, a_->block_.offset, src.data(), src.size_bytes(), word, add,
                              true, false);
  }

  [[nodiscard]] int image() const noexcept { return image_; }
  [[nodiscard]] int world_rank() const noexcept { return rank_; }

private:
  friend class coarray<T, N, memory_kind::cuda>;
  template <typename, std::size_t, memory_kind>
  friend class image_ref;
  friend void put_notify<T, N, memory_kind::cuda>(const image_ref& target, std::span<const T> src,
                                                  event& notify);
  image_ref(const coarray<T, N, memory_kind::cuda>* a, int image, int rank)
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
    std::size_t linear = 0;
    for (std::size_t d = 0; d < N; ++d) {
      if (i[d] >= a_->extents_[d])
        throw argument_error(what(op), "index " + std::to_string(i[d]) + " of dimension " +
                                           std::to_string(d) + " is out of range [0, " +
                                           std::to_string(a_->extents_[d]) + ")");
      linear = linear * a_->extents_[d] + i[d];
    }
    if (linear >= a_->block_.bytes / sizeof(T)) // as the host coarray: never past the block
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
  completion start(bool put, T* buffer, std::size_t n, bool ordered, CUstream_st* stream,
                   const char* op) const {
    check_count(n, op);
    completion c;
    detail::device_start(put, rank_, a_->block_.offset, buffer, n * sizeof(T), ordered, stream, c);
    return c;
  }
  T atomic(const index_type& i, detail::atomic_op op, T operand, T compare = T{}) const {
    using bits_t = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
    const std::uint64_t result = detail::device_atomic(
        rank_, element_offset(i, "atomic"), op, sizeof(T), std::is_floating_point_v<T>,
        std::bit_cast<bits_t>(operand), std::bit_cast<bits_t>(compare));
    return std::bit_cast<T>(static_cast<bits_t>(result));
  }

  const coarray<T, N, memory_kind::cuda>* a_;
  int image_;
  int rank_;
};

/// An N-d block of T in device memory on every image of a mesh: the device symmetric
/// heap of each member's GPU. Construction and destruction are collective over the
/// members; elements start zeroed. data() is the local block's device pointer (for
/// kernels and cudaMemcpy); device() is the view kernels use to reach every image of
/// this host; on(image) moves data from the host side. A member without a device heap
/// (no GPU, CROWN_GPU_HEAP_SIZE=0, built without CUDA) makes construction throw on
/// every member, naming it and why.
template <typename T, std::size_t N>
class coarray<T, N, memory_kind::cuda> {
  static_assert(std::is_trivially_copyable_v<T>, "coarray elements must be trivially copyable");
  static_assert(N >= 1 && N <= 3, "coarray supports 1 to 3 dimensions");

public:
  using extents_type = std::array<std::size_t, N>;

  coarray(const mesh& m, const extents_type& extents) : mesh_(m), extents_(extents) {
    block_ = detail::device_allocate(m, detail::extents_bytes(extents, sizeof(T)),
                                     detail::type_tag<T, N>(), name());
    data_ = reinterpret_cast<T*>(detail::device_address(block_.offset));
  }
  coarray(const mesh& m, std::size_t n) requires(N == 1) : coarray(m, extents_type{n}) {}
  explicit coarray(const extents_type& extents) : coarray(crown::world(), extents) {}
  explicit coarray(std::size_t n) requires(N == 1) : coarray(crown::world(), extents_type{n}) {}

  ~coarray() {
    if (data_) detail::device_release(mesh_, block_);
  }
  coarray(const coarray&) = delete;
  coarray& operator=(const coarray&) = delete;
  coarray(coarray&& o) noexcept
      : mesh_(o.mesh_), extents_(o.extents_), block_(o.block_),
        data_(std::exchange(o.data_, nullptr)) {}

  [[nodiscard]] const mesh& team() const noexcept { return mesh_; }
  [[nodiscard]] int this_image() const { return mesh_.rank(); }
  [[nodiscard]] int num_images() const noexcept { return mesh_.size(); }
  [[nodiscard]] const extents_type& extents() const noexcept { return extents_; }
  [[nodiscard]] std::size_t size() const noexcept {
    std::size_t n = 1;
    for (std::size_t e : extents_) n *= e;
    return n;
  }

  /// The local block's device pointer (not dereferenceable on the host).
  [[nodiscard]] T* data() const { return live(); }
  [[nodiscard]] std::span<T> flat() const { return {live(), size()}; }

  [[nodiscard]] image_ref<T, N, memory_kind::cuda> on(int image) const {
    live();
    if (image < 0 || image >= mesh_.size())
      throw argument_error(name() + " on " + mesh_.to_string() + ": access to image " +
                               std::to_string(image),
                           "image out of range [0, " + std::to_string(mesh_.size()) + ")");
    return {this, image, mesh_.ranks()[static_cast<std::size_t>(image)]};
  }
  [[nodiscard]] image_ref<T, N, memory_kind::cuda> operator[](int image) const { return on(image); }

  /// The kernel view of every image's block (see crown/device.cuh). Throws
  /// argument_error when an image lies on another host: kernels reach this host only.
  [[nodiscard]] device::coarray_view<T, N> device() const {
    device::coarray_view<T, N> v{};
    v.bases = static_cast<T* const*>(
        detail::device_view_table(mesh_, block_.offset, "device() of " + name()));
    for (std::size_t d = 0; d < N; ++d) v.extents[d] = extents_[d];
    v.this_image = mesh_.rank();
    v.num_images = mesh_.size();
    return v;
  }

  [[nodiscard]] const detail::heap_block& block() const noexcept { return block_; }

private:
  friend class image_ref<T, N, memory_kind::cuda>;
  std::string name() const {
    return "coarray<" + detail::type_name<T>() + "," + std::to_string(N) + ",cuda>";
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
