// include/crown/tensor/dist_tensor.hpp — dist_tensor<T, N, K>: a global N-d array laid
// over a mesh (tensor_layout), each image's block stored in a coarray of memory kind K
// (host, or the GPU's: memory_kind::cuda) with optional halo (ghost) cells around it, so
// every one-sided path applies.
#pragma once
#include <algorithm>
#include <array>
#include <cmath>
#include <crown/coarray.hpp>
#include <crown/collectives.hpp>
#include <crown/detail/copy.hpp>
#include <crown/detail/device_heap.hpp>
#include <crown/memory_kind.hpp>
#include <crown/sync.hpp>
#include <crown/tensor/layout.hpp>
#include <cstddef>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace crown {

/// Ghost cells around each image's block: `width` per dimension, and whether the
/// dimension wraps around (periodic) or has edges (halos beyond an edge are left
/// alone: the boundary condition is the application's).
template <std::size_t N>
struct halo_spec {
  std::array<std::size_t, N> width{};
  std::array<bool, N> periodic{};
};

namespace detail {

/// Calls f(index) for every index of the box, in row-major order.
template <std::size_t N, typename F>
void for_each_index(const box<N>& b, F&& f) {
  if (b.empty()) return;
  std::array<std::size_t, N> i = b.lo;
  while (true) {
    f(i);
    std::size_t d = N;
    while (d-- > 0) {
      if (++i[d] < b.hi[d]) break;
      i[d] = b.lo[d];
      if (d == 0) return;
    }
  }
}

/// Copies a box of `extent` elements between two row-major blocks (extents `from_ext`,
/// `to_ext`), starting at `from_at` and `to_at`; rows are copied whole.
template <typename T, std::size_t N>
void copy_box(const T* from, const std::array<std::size_t, N>& from_ext,
              const std::array<std::size_t, N>& from_at, T* to,
              const std::array<std::size_t, N>& to_ext, const std::array<std::size_t, N>& to_at,
              const std::array<std::size_t, N>& extent) {
  box<N> rows;
  for (std::size_t d = 0; d + 1 < N; ++d) rows.hi[d] = extent[d];
  rows.hi[N - 1] = extent[N - 1] ? 1 : 0;
  auto offset = [](const std::array<std::size_t, N>& ext, const std::array<std::size_t, N>& at,
                   const std::array<std::size_t, N>& i) {
    std::size_t o = 0;
    for (std::size_t d = 0; d < N; ++d) o = o * ext[d] + at[d] + i[d];
    return o;
  };
  for_each_index(rows, [&](const std::array<std::size_t, N>& i) {
    detail::copy_bytes(to + offset(to_ext, to_at, i), from + offset(from_ext, from_at, i),
                       extent[N - 1] * sizeof(T));
  });
}

} // namespace detail

/// A global array of `shape` over a mesh, with one placement per mesh dimension:
///   dist_tensor<double, 2> u(mesh, {n, n}, {shard(0), shard(1)}, {{1, 1}, {false, false}});
/// Construction, move assignment, redistribute, gather, scatter, the reductions and the
/// halo exchange are collective over the mesh; swap is local; local access is a plain
/// array access.
///
/// With K = memory_kind::cuda every block lives in the device heap of its rank's GPU,
/// with the same placements, halos, redistribution, gather and scatter. data() is the
/// padded block's device pointer, for the caller's kernels; halos and redistribution move
/// on Crown's stream (between mapped peers directly, by copies or by one kernel as
/// CROWN_GPU_HALOS says; through device gets into host buffers for images on other
/// hosts), complete when exchange_halos_start returns.
/// They are not ordered with the caller's streams: synchronise every stream that wrote
/// or reads data() before any collective call of the tensor. fill, get, set and the
/// reductions go through host memory (setup and checks, not inner loops); apply,
/// copy_from and axpy are the caller's kernels on data() instead.
template <typename T, std::size_t N, memory_kind K = memory_kind::host>
class dist_tensor {
  static_assert(N >= 1 && N <= 3, "dist_tensor supports 1 to 3 dimensions");
  static constexpr bool on_device = K == memory_kind::cuda;

public:
  using index_type = std::array<std::size_t, N>;

  /// Throws argument_error for placements that do not fit the mesh or the shape, and
  /// for a halo wider than the smallest block along its dimension.
  dist_tensor(const mesh& m, const index_type& shape, std::vector<placement> placements,
              halo_spec<N> halo = {})
      : layout_(m, shape, std::move(placements)), halo_(checked(layout_, halo)),
        store_(m, padded(layout_, halo_)), image_(m.rank()), own_(layout_.block_of(image_)) {
    plan_halos();
  }
  /// Leaves `o` moved-from: using its elements throws state_error.
  dist_tensor(dist_tensor&& o) noexcept
      : layout_(std::move(o.layout_)), halo_(o.halo_), store_(std::move(o.store_)),
        image_(o.image_), own_(o.own_), transfers_(std::move(o.transfers_)),
        neighbours_(std::move(o.neighbours_)),
        halos_in_flight_(std::exchange(o.halos_in_flight_, false)) {}
  dist_tensor(const dist_tensor&) = delete;
  dist_tensor& operator=(const dist_tensor&) = delete;
  /// Collective over this tensor's mesh, like coarray's: frees the old block (every
  /// member assigns together) and takes `o`'s array, layout and mesh (`u =
  /// u.redistribute(...)`). Throws state_error, before freeing anything, while this
  /// tensor's halo exchange is in flight (other images may still read its block).
  dist_tensor& operator=(dist_tensor&& o) {
    if (this == &o) return *this;
    if (halos_in_flight_)
      throw state_error("dist_tensor::operator=", "the target's halo exchange is in flight "
                                                  "(exchange_halos_finish first)");
    dist_tensor old(std::move(*this)); // freed (collectively) on return
    swap(o);
    return *this;
  }
  /// Exchanges two tensors without communicating (double buffering); every image must
  /// make the same swaps. An exchange in flight goes with its tensor.
  void swap(dist_tensor& o) noexcept {
    std::swap(layout_, o.layout_);
    std::swap(halo_, o.halo_);
    store_.swap(o.store_);
    std::swap(image_, o.image_);
    std::swap(own_, o.own_);
    std::swap(transfers_, o.transfers_);
    std::swap(neighbours_, o.neighbours_);
    std::swap(halos_in_flight_, o.halos_in_flight_);
  }
  friend void swap(dist_tensor& a, dist_tensor& b) noexcept { a.swap(b); }

  [[nodiscard]] const tensor_layout<N>& layout() const noexcept { return layout_; }
  [[nodiscard]] const crown::mesh& mesh() const noexcept { return layout_.mesh(); }
  [[nodiscard]] const index_type& shape() const noexcept { return layout_.shape(); }
  [[nodiscard]] const std::vector<placement>& placements() const noexcept {
    return layout_.placements();
  }
  [[nodiscard]] const halo_spec<N>& halo() const noexcept { return halo_; }

  // ------------------------------------------------------------------ local access
  /// The global indices this image holds (its block; may be empty for trailing parts).
  [[nodiscard]] const box<N>& own() const noexcept { return own_; }
  /// The block with its halos: element (i + width) is the owned element own().lo + i;
  /// halo cells lie at 0..width-1 and beyond own().extent + width.
  [[nodiscard]] view<T, N> padded() const requires(!on_device) { return store_.local(); }
  /// The padded block's first element (row-major, padded_extents()): host memory, or
  /// device memory of this rank's GPU with memory_kind::cuda (for kernels).
  [[nodiscard]] T* data() const { return store_.data(); }
  [[nodiscard]] const index_type& padded_extents() const noexcept { return store_.extents(); }
  /// An owned or halo element by its offset from own().lo (halos at -width .. -1 and
  /// own().extent .. own().extent + width - 1); no checks.
  template <typename... I>
  requires(sizeof...(I) == N && !on_device) [[nodiscard]] T& local(I... offset) const noexcept {
    const std::array<std::ptrdiff_t, N> o{static_cast<std::ptrdiff_t>(offset)...};
    std::size_t at = 0;
    for (std::size_t d = 0; d < N; ++d)
      at = at * store_.extents()[d] +
           static_cast<std::size_t>(o[d] + static_cast<std::ptrdiff_t>(halo_.width[d]));
    return store_.data()[at];
  }

  // ------------------------------------------------------------------ global access
  /// The element at a global index: a local read when this image holds it, else a
  /// remote get from the nearest copy (slow: one transfer per element).
  [[nodiscard]] T get(const index_type& i) const {
    check_index(i, "get");
    const int owner = layout_.owner(i, image_);
    if (owner == image_ && !on_device) return store_.data()[padded_offset(i, own_)];
    return store_.on(owner).get(padded_index(i, layout_.block_of(owner)));
  }
  /// Writes every copy of the element at a global index (local stores, remote puts).
  /// Other images see it after a synchronisation (sync_all on the mesh).
  void set(const index_type& i, const T& value) {
    check_index(i, "set");
    for (int image : layout_.replicas_of(layout_.owner(i, image_))) {
      if (image == image_ && !on_device)
        store_.data()[padded_offset(i, own_)] = value;
      else
        store_.on(image).put(padded_index(i, layout_.block_of(image)), value);
    }
  }

  // ------------------------------------------------------------------ elementwise
  /// Every owned element (not the halos) = value.
  void fill(const T& value) {
    if constexpr (on_device) {
      if (!own_.empty())
        store_.on(image_).put(section_of(own_, own_), std::vector<T>(own_.size(), value));
    } else {
      apply([&](const index_type&, T& x) { x = value; });
    }
  }
  /// f(global index, element) for every owned element, in row-major order.
  template <typename F>
  void apply(F&& f) requires(!on_device) {
    detail::for_each_index(own_, [&](const index_type& i) { f(i, element(i)); });
  }
  /// This = other, element for element (same shape, mesh and placements).
  void copy_from(const dist_tensor& other) requires(!on_device) {
    check_same(other, "copy_from");
    detail::for_each_index(own_, [&](const index_type& i) { element(i) = other.element(i); });
  }
  /// This += a * x (same shape, mesh and placements).
  void axpy(const T& a, const dist_tensor& x) requires(!on_device) {
    check_same(x, "axpy");
    detail::for_each_index(own_, [&](const index_type& i) { element(i) += a * x.element(i); });
  }

  // ------------------------------------------------------------------ reductions
  /// Sum over the global array (each block counted once, whatever its copies).
  [[nodiscard]] T sum() const {
    return reduce(
        T{}, [](T acc, const T& x) { return acc + x; }, [&](T& v) { co_sum(mesh(), v); });
  }
  [[nodiscard]] T max() const {
    return reduce(
        std::numeric_limits<T>::lowest(), [](T acc, const T& x) { return x > acc ? x : acc; },
        [&](T& v) { co_max(mesh(), v); });
  }
  /// sqrt(sum of squares), in double precision.
  [[nodiscard]] double norm2() const {
    double s = 0;
    if (layout_.is_primary(image_))
      for_each_owned([&](const T& e) {
        const auto x = static_cast<double>(e);
        s += x * x;
      });
    co_sum(mesh(), s);
    return std::sqrt(s);
  }

  // ------------------------------------------------------------------ moving data
  /// The same array with other placements (and halos) on the same mesh.
  [[nodiscard]] dist_tensor redistribute(std::vector<placement> placements,
                                         halo_spec<N> halo = {}) const {
    return redistribute(mesh(), std::move(placements), halo);
  }
  /// The same array on another mesh over the same ranks (another shape of them).
  /// Every image gets its new block from the nearest copies of the old blocks.
  [[nodiscard]] dist_tensor redistribute(const crown::mesh& target,
                                         std::vector<placement> placements,
                                         halo_spec<N> halo = {}) const {
    if (!same_ranks(target))
      throw argument_error("dist_tensor::redistribute from " + mesh().to_string() + " to " +
                               target.to_string(),
                           "the meshes must hold the same ranks");
    dist_tensor out(target, shape(), std::move(placements), halo);
    sync_all(mesh()); // every old block is complete
    read_into(out.own_, out.store_.data(), out.store_.extents(), out.storage_at(out.own_.lo));
    sync_all(mesh()); // nobody changes the old blocks while others read them
    return out;
  }
  /// Any region of the global array, row-major into `out` (region.size() elements),
  /// read from the nearest copy of every block it touches: straight from memory for
  /// images on this host, with one-sided gets otherwise. Not collective and not
  /// synchronised: the blocks must be complete (e.g. after sync_all).
  void read(const box<N>& region, std::span<T> out) const {
    for (std::size_t d = 0; d < N; ++d)
      if (region.hi[d] > shape()[d] || region.lo[d] > region.hi[d])
        throw argument_error("dist_tensor" + detail::index_text(shape()) + "::read",
                             "region " + detail::index_text(region.lo) + " to " +
                                 detail::index_text(region.hi) + " is not inside the array");
    if (out.size() != region.size())
      throw argument_error("dist_tensor::read", std::to_string(out.size()) + " elements for a " +
                                                    std::to_string(region.size()) +
                                                    "-element region");
    read_into(region, out.data(), extents_of(region), index_type{});
  }
  /// The whole array, row-major, on `image` (an empty vector elsewhere).
  [[nodiscard]] std::vector<T> gather(int image = 0) const {
    check_image(image, "gather");
    sync_all(mesh());
    std::vector<T> all;
    if (image_ == image) {
      all.resize(layout_.elements());
      read(box<N>{{}, shape()}, all);
    }
    sync_all(mesh());
    return all;
  }
  /// Sets the array from `all` (row-major, the whole shape) held by `image`; the
  /// argument is ignored on the other images.
  void scatter(std::span<const T> all, int image = 0) {
    check_image(image, "scatter");
    // Only `image` knows the size: every image learns it, so all throw or none does.
    std::uint64_t given = image_ == image ? all.size() : 0;
    co_broadcast(mesh(), given, image);
    if (given != layout_.elements())
      throw argument_error("dist_tensor::scatter from image " + std::to_string(image),
                           std::to_string(given) + " elements given for shape " +
                               detail::index_text(shape()) + " (" +
                               std::to_string(layout_.elements()) + " elements)");
    sync_all(mesh()); // nobody still reads its block
    if (image_ == image) {
      std::vector<T> buffer;
      for (int j = 0; j < mesh().size(); ++j) {
        const box<N> b = layout_.block_of(j);
        if (b.empty()) continue;
        buffer.resize(b.size());
        detail::copy_box(all.data(), shape(), b.lo, buffer.data(), extents_of(b), index_type{},
                         extents_of(b));
        store_.on(j).put(section_of(b, b), buffer);
      }
    }
    sync_all(mesh());
  }

  // ------------------------------------------------------------------ halos
  /// Starts filling the halos from the neighbours' blocks (including corners). Between
  /// start and finish, compute what needs no halo, but change no owned element: the
  /// neighbours may be reading them.
  void exchange_halos_start() {
    if (halos_in_flight_)
      throw state_error("dist_tensor::exchange_halos_start", "the previous exchange is not "
                                                             "finished (exchange_halos_finish)");
    sync_images(mesh(), neighbours_); // their blocks are complete
    std::vector<box_copy> same_host;  // batched for a device tensor (copy_or_batch)
    for (halo_transfer& t : transfers_) {
      if (const T* peer = peer_storage(t.source)) { // same host: straight into the halo
        index_type from;
        for (std::size_t d = 0; d < N; ++d) from[d] = t.from[d].begin;
        copy_or_batch(
            {peer, store_.extents(), from, store_.data(), store_.extents(), t.to, t.extent},
            same_host);
        continue;
      }
      t.done = store_.on(t.source).get_async(t.from, std::span<T>(t.buffer));
      t.staged = true;
    }
    try {
      copy_boxes(same_host);
    } catch (...) { // the gets started write into the buffers: done before they go
      for (halo_transfer& t : transfers_)
        if (std::exchange(t.staged, false)) try {
            t.done.wait();
          } catch (...) { // the first error is the one reported
          }
      throw;
    }
    halos_in_flight_ = true;
  }
  /// Non-blocking, between start and finish: true once every halo has arrived (finish
  /// then only copies them in). Drives progress.
  [[nodiscard]] bool exchange_halos_test() {
    if (!halos_in_flight_)
      throw state_error("dist_tensor::exchange_halos_test", "no exchange was started");
    bool all = true;
    for (halo_transfer& t : transfers_) all = (!t.staged || t.done.test()) && all;
    return all;
  }
  /// Waits for the halos and fills them in.
  void exchange_halos_finish() {
    if (!halos_in_flight_)
      throw state_error("dist_tensor::exchange_halos_finish", "no exchange was started");
    std::vector<box_copy> arrived; // as same_host in start
    for (halo_transfer& t : transfers_) {
      if (!std::exchange(t.staged, false)) continue;
      t.done.wait();
      copy_or_batch({t.buffer.data(), t.extent, index_type{}, store_.data(), store_.extents(), t.to,
                     t.extent},
                    arrived);
    }
    copy_boxes(arrived);
    halos_in_flight_ = false;
    sync_images(mesh(), neighbours_); // they may change their blocks again
  }
  void exchange_halos() {
    exchange_halos_start();
    exchange_halos_finish();
  }

private:
  struct halo_transfer {
    int source = 0;        ///< the image whose block fills this halo piece
    section<N> from;       ///< in the source's padded block
    index_type to{};       ///< where it goes in this padded block
    index_type extent{};   ///< its size
    std::vector<T> buffer; ///< packed, for a neighbour on another host
    completion done;
    bool staged = false; ///< a get into `buffer` is in flight
  };

  static halo_spec<N> checked(const tensor_layout<N>& l, const halo_spec<N>& h) {
    for (std::size_t d = 0; d < N; ++d) {
      if (h.width[d] == 0) continue;
      const std::size_t n = l.shape()[d], p = l.parts(d), b = l.block_extents()[d];
      const std::size_t smallest = p == 1 ? n : (n > (p - 1) * b ? n - (p - 1) * b : 0);
      if (h.width[d] > smallest)
        throw argument_error(
            "dist_tensor" + detail::index_text(l.shape()) + " on " + l.mesh().to_string() +
                " with " + detail::placements_text(l.placements()),
            "halo width " + std::to_string(h.width[d]) + " along dimension " + std::to_string(d) +
                " exceeds the smallest block there (" + std::to_string(smallest) + " of " +
                std::to_string(n) + " elements in " + std::to_string(p) + " parts)");
    }
    return h;
  }
  static index_type padded(const tensor_layout<N>& l, const halo_spec<N>& h) {
    index_type e;
    for (std::size_t d = 0; d < N; ++d) e[d] = l.block_extents()[d] + 2 * h.width[d];
    return e;
  }
  static index_type extents_of(const box<N>& b) {
    index_type e;
    for (std::size_t d = 0; d < N; ++d) e[d] = b.extent(d);
    return e;
  }

  /// Where global index i sits in the padded storage of the image holding block b.
  index_type padded_index(const index_type& i, const box<N>& b) const {
    index_type p;
    for (std::size_t d = 0; d < N; ++d) p[d] = i[d] - b.lo[d] + halo_.width[d];
    return p;
  }
  std::size_t padded_offset(const index_type& i, const box<N>& b) const {
    const index_type p = padded_index(i, b);
    std::size_t o = 0;
    for (std::size_t d = 0; d < N; ++d) o = o * store_.extents()[d] + p[d];
    return o;
  }
  index_type storage_at(const index_type& global) const { return padded_index(global, own_); }
  T& element(const index_type& i) const { return store_.data()[padded_offset(i, own_)]; }
  /// The section of `piece` inside the padded storage of the image holding block b.
  section<N> section_of(const box<N>& b, const box<N>& piece) const {
    section<N> s;
    for (std::size_t d = 0; d < N; ++d) {
      s[d].begin = piece.lo[d] - b.lo[d] + halo_.width[d];
      s[d].end = s[d].begin + piece.extent(d);
    }
    return s;
  }
  /// `piece` (a part of image j's block b), packed into `buffer`.
  void fetch(int j, const box<N>& b, const box<N>& piece, std::vector<T>& buffer) const {
    buffer.resize(piece.size());
    store_.on(j).get(section_of(b, piece), std::span<T>(buffer));
  }

  void check_index(const index_type& i, const char* op) const {
    for (std::size_t d = 0; d < N; ++d)
      if (i[d] >= shape()[d])
        throw argument_error("dist_tensor" + detail::index_text(shape()) + "::" + op,
                             "global index " + detail::index_text(i) +
                                 " is out of range along "
                                 "dimension " +
                                 std::to_string(d));
  }
  void check_image(int image, const char* op) const {
    if (image < 0 || image >= mesh().size())
      throw argument_error(std::string("dist_tensor::") + op,
                           "image " + std::to_string(image) + " is out of range [0, " +
                               std::to_string(mesh().size()) + ")");
  }
  void check_same(const dist_tensor& o, const char* op) const {
    if (o.shape() != shape() || o.placements() != placements() || !(o.mesh() == mesh()))
      throw argument_error(std::string("dist_tensor::") + op,
                           "shapes or distributions differ: " + detail::index_text(shape()) + " " +
                               detail::placements_text(placements()) + " on " + mesh().to_string() +
                               " and " + detail::index_text(o.shape()) + " " +
                               detail::placements_text(o.placements()) + " on " +
                               o.mesh().to_string());
  }
  bool same_ranks(const crown::mesh& other) const {
    std::vector<int> a(mesh().begin(), mesh().end()), b(other.begin(), other.end());
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    return a == b;
  }
  template <typename Combine, typename Across>
  T reduce(T identity, Combine combine, Across across) const {
    T v = identity;
    if (layout_.is_primary(image_)) for_each_owned([&](const T& e) { v = combine(v, e); });
    across(v);
    return v;
  }
  /// f(element) for every owned element in row-major order (a device block is read
  /// into host memory first).
  template <typename F>
  void for_each_owned(F&& f) const {
    if constexpr (on_device) {
      std::vector<T> host(own_.size());
      if (!own_.empty()) store_.on(image_).get(section_of(own_, own_), std::span<T>(host));
      for (const T& e : host) f(e);
    } else {
      detail::for_each_index(own_, [&](const index_type& i) { f(element(i)); });
    }
  }
  /// A box copy between blocks of this kind's memory and host memory (either side):
  /// `extent` elements from `from_at` of `from` (extents `from_ext`) to `to_at` of `to`.
  struct box_copy {
    const T* from;
    index_type from_ext, from_at;
    T* to;
    index_type to_ext, to_at, extent;
  };
  /// Copies every box; a device tensor's in one call (one wait for them all).
  static void copy_boxes(std::span<const box_copy> boxes) {
    if constexpr (on_device) {
      std::vector<detail::box_copy> device(boxes.size());
      for (std::size_t k = 0; k < boxes.size(); ++k) {
        const box_copy& b = boxes[k];
        detail::box_copy& c = device[k];
        c.from = b.from;
        c.to = b.to;
        std::copy(b.from_ext.begin(), b.from_ext.end(), c.from_ext);
        std::copy(b.from_at.begin(), b.from_at.end(), c.from_at);
        std::copy(b.to_ext.begin(), b.to_ext.end(), c.to_ext);
        std::copy(b.to_at.begin(), b.to_at.end(), c.to_at);
        std::copy(b.extent.begin(), b.extent.end(), c.extent);
      }
      if (!device.empty()) detail::device_copy_boxes(sizeof(T), N, device);
    } else {
      for (const box_copy& b : boxes)
        detail::copy_box(b.from, b.from_ext, b.from_at, b.to, b.to_ext, b.to_at, b.extent);
    }
  }

  /// A host tensor copies `b` at once; a device tensor's boxes wait in `batch` for one
  /// copy_boxes call (one wait for them all).
  static void copy_or_batch(const box_copy& b, std::vector<box_copy>& batch) {
    if constexpr (on_device)
      batch.push_back(b);
    else
      copy_boxes({&b, 1});
  }

  /// Copies `region` into the block `to` (extents `to_ext`), placing region.lo at `at`
  /// (a device tensor's pieces in one copy_boxes call, after every fetch).
  void read_into(const box<N>& region, T* to, const index_type& to_ext,
                 const index_type& at) const {
    std::vector<box_copy> batch;
    // Pieces off this host: a host tensor reuses one buffer, a device tensor's batch
    // needs one per piece (a vector's move keeps its data where it is).
    std::vector<std::vector<T>> fetched;
    for (int j = 0; j < mesh().size(); ++j) {
      const box<N> b = layout_.block_of(j);
      if (b.empty() || layout_.owner(b.lo, image_) != j) continue; // the nearest copy only
      const box<N> piece = b.intersect(region);
      if (piece.empty()) continue;
      index_type place;
      for (std::size_t d = 0; d < N; ++d) place[d] = at[d] + piece.lo[d] - region.lo[d];
      if (const T* peer = peer_storage(j)) { // same host: one copy, no staging
        copy_or_batch({peer, store_.extents(), padded_index(piece.lo, b), to, to_ext, place,
                       extents_of(piece)},
                      batch);
        continue;
      }
      std::vector<T>& buffer =
          on_device || fetched.empty() ? fetched.emplace_back() : fetched.front();
      fetch(j, b, piece, buffer);
      copy_or_batch(
          {buffer.data(), extents_of(piece), index_type{}, to, to_ext, place, extents_of(piece)},
          batch);
    }
    copy_boxes(batch);
  }
  /// Image j's stored block when this rank reaches it with loads (host) or copies
  /// (device: a mapped peer), else nullptr.
  const T* peer_storage(int j) const {
    const int rank = mesh().ranks()[static_cast<std::size_t>(j)];
    if constexpr (on_device)
      return reinterpret_cast<const T*>(detail::device_peer_address(rank, store_.block().offset));
    else
      return reinterpret_cast<const T*>(detail::heap_peer_address(rank, store_.block().offset));
  }

  /// Works out once which piece of which neighbour fills each part of the halo.
  void plan_halos() {
    bool any = false;
    for (std::size_t w : halo_.width) any = any || w > 0;
    if (!any || own_.empty()) return;
    std::array<int, N> dir;
    dir.fill(-1);
    while (true) {
      add_transfer(dir);
      std::size_t d = N;
      while (d-- > 0 && ++dir[d] > 1) dir[d] = -1;
      if (d == static_cast<std::size_t>(-1)) break;
    }
    std::sort(neighbours_.begin(), neighbours_.end());
    neighbours_.erase(std::unique(neighbours_.begin(), neighbours_.end()), neighbours_.end());
  }
  void add_transfer(const std::array<int, N>& dir) {
    box<N> wrapped; // the global indices this halo piece shows
    halo_transfer t;
    bool centre = true;
    for (std::size_t d = 0; d < N; ++d) {
      const std::size_t w = halo_.width[d], n = shape()[d];
      if (dir[d] == 0) {
        wrapped.lo[d] = own_.lo[d];
        wrapped.hi[d] = own_.hi[d];
        t.to[d] = w;
        t.extent[d] = own_.extent(d);
        continue;
      }
      centre = false;
      if (w == 0) return;
      const bool low = dir[d] < 0;
      const bool outside = low ? own_.lo[d] < w : own_.hi[d] + w > n;
      if (outside && !halo_.periodic[d]) return; // an edge: the application's boundary
      const std::size_t start = low ? (own_.lo[d] + n - w) % n : (own_.hi[d]) % n;
      wrapped.lo[d] = start;
      wrapped.hi[d] = start + w;
      t.to[d] = low ? 0 : w + own_.extent(d);
      t.extent[d] = w;
    }
    if (centre) return;
    t.source = layout_.owner(wrapped.lo, image_);
    t.from = section_of(layout_.block_of(t.source), wrapped);
    if (!peer_storage(t.source)) t.buffer.resize(wrapped.size());
    if (t.source != image_) neighbours_.push_back(t.source);
    transfers_.push_back(std::move(t));
  }

  tensor_layout<N> layout_;
  halo_spec<N> halo_;
  coarray<T, N, K> store_;
  int image_;
  box<N> own_;
  std::vector<halo_transfer> transfers_;
  std::vector<int> neighbours_;
  bool halos_in_flight_ = false;
};

} // namespace crown
