// include/crown/block_collectives.hpp — all_gather and reduce_scatter: one block per image.
#pragma once
#include <crown/coarray.hpp>
#include <crown/detail/copy.hpp>
#include <crown/detail/types.hpp>
#include <crown/mesh.hpp>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <span>
#include <type_traits>
#include <vector>

namespace crown {

namespace detail {

/// Checks every argument of a block collective (names the rank and the values) and, with
/// CROWN_CHECK=1, that every member passed the same counts and element type. `count` is
/// the elements each image contributes (all_gather) or receives (reduce_scatter);
/// `given`/`expected` the local sizes of the other buffer. The local buffers
/// [a, a + a_bytes) and [b, b + b_bytes) must not overlap.
void check_block_collective(const mesh& m, std::size_t count, std::size_t given,
                            std::size_t expected, std::uint64_t tag, const void* a,
                            std::size_t a_bytes, const void* b, std::size_t b_bytes,
                            const char* name, const char* given_what);

/// Throws argument_error naming the numbers when [first, first + count) leaves a block
/// of `size` elements.
void check_coarray_range(const mesh& m, std::size_t first, std::size_t count, std::size_t size,
                         const char* name);

/// Every image's `bytes` from `mine` into `all` in image order (an all-gather on the
/// mesh's private communicator, in pieces below 2 GiB).
void all_gather_bytes(const mesh& m, const void* mine, std::size_t bytes, void* all,
                      const char* name);
/// Block i (of `block` bytes) of every image's `in` into `received` on image i, image j's
/// at j * block (an all-to-all on the mesh's private communicator).
void exchange_blocks(const mesh& m, const void* in, std::size_t block, void* received,
                     const char* name);

/// For heap data at the same offset on every member (a coarray): after a sync_all
/// that makes every member's block final, calls visit(ctx, image, data) for each image
/// in image order with that image's `bytes` at `offset` (read in place where the
/// image's memory is mapped here, else fetched into a buffer aligned to 64 bytes), and
/// synchronises again before returning, so that no member changes its block while
/// another still reads it.
using block_visitor = void (*)(void* ctx, int image, const std::byte* data);
void visit_image_blocks(const mesh& m, std::uint64_t offset, std::size_t bytes, block_visitor visit,
                        void* ctx);

/// out = fold of `blocks` (n blocks of out.size() elements, one per image) in image order.
template <typename T, typename Op>
void fold_in_image_order(const T* const* blocks, int n, std::span<T> out, Op& op) {
  std::vector<T> acc(blocks[0], blocks[0] + out.size());
  for (int j = 1; j < n; ++j)
    for (std::size_t k = 0; k < out.size(); ++k) acc[k] = op(acc[k], blocks[j][k]);
  detail::copy_bytes(out.data(), acc.data(), out.size_bytes());
}

} // namespace detail

/// All-gather: every image of `m` contributes `mine` (the same number of elements, c,
/// on every image) and every image receives all contributions in `all`, image i's at
/// all[i*c, (i+1)*c). all.size() must be m.size() * c; `mine` and `all` must not
/// overlap. Collective over the members; the copies are bitwise exact.
template <typename T>
void all_gather(const mesh& m, std::span<const T> mine, std::span<T> all) {
  static_assert(std::is_trivially_copyable_v<T>);
  detail::check_block_collective(m, mine.size(), all.size(),
                                 mine.size() * static_cast<std::size_t>(m.size()),
                                 detail::type_tag<T, 1>(), mine.data(), mine.size_bytes(),
                                 all.data(), all.size_bytes(), "all_gather", "the result holds");
  detail::all_gather_bytes(m, mine.data(), mine.size_bytes(), all.data(), "all_gather");
}

/// All-gather of a coarray's blocks over its mesh: image i's elements [first, first + c)
/// of its block (c = all.size() / images) land at all[i*c, (i+1)*c) on every image, read
/// one-sidedly (in place from same-host images). Those elements must not change during
/// the call (it synchronises before and after, like sync_all, so puts completed before it
/// are seen). Without `first`, the whole block (c = a.size()).
template <typename T, std::size_t N, memory_kind K>
requires(K != memory_kind::cuda) // device coarrays: crown/device_collectives.hpp
    void all_gather(const coarray<T, N, K>& a, std::size_t first, std::span<T> all) {
  const mesh& m = a.team();
  const std::size_t c = all.size() / static_cast<std::size_t>(m.size());
  detail::check_coarray_range(m, first, c, a.size(), "all_gather of a coarray");
  detail::check_block_collective(m, c, all.size(), c * static_cast<std::size_t>(m.size()),
                                 detail::type_tag<T, N>(), a.data() + first, c * sizeof(T),
                                 all.data(), all.size_bytes(), "all_gather of a coarray",
                                 "the result holds");
  struct target {
    T* all;
    std::size_t count;
  } t{all.data(), c};
  detail::visit_image_blocks(
      m, a.block().offset + first * sizeof(T), c * sizeof(T),
      [](void* ctx, int image, const std::byte* data) {
        auto* t = static_cast<target*>(ctx);
        detail::copy_bytes(t->all + static_cast<std::size_t>(image) * t->count, data,
                           t->count * sizeof(T));
      },
      &t);
}
template <typename T, std::size_t N, memory_kind K>
requires(K != memory_kind::cuda) void all_gather(const coarray<T, N, K>& a, std::span<T> all) {
  detail::check_block_collective(
      a.team(), a.size(), all.size(), a.size() * static_cast<std::size_t>(a.team().size()),
      detail::type_tag<T, N>(), a.data(), a.size() * sizeof(T), all.data(), all.size_bytes(),
      "all_gather of a coarray", "the result holds");
  all_gather(a, 0, all);
}

/// Reduce-scatter: `in` holds m.size() blocks of c = out.size() elements (the same c on
/// every image); image i receives in `out` the element-wise reduction of block i of
/// every image's `in`, folded in image order:
///   out[k] = op(...op(op(in_0[i*c + k], in_1[i*c + k]), in_2[i*c + k])..., in_{n-1}[i*c + k])
/// where in_j is image j's `in`. Every path computes exactly that expression, so the
/// result does not depend on the transport or the number of hosts (floating point
/// included), and `op` need not be commutative. Default: sum. `in` and `out` must not
/// overlap.
template <typename T, typename Op = std::plus<>>
void reduce_scatter(const mesh& m, std::span<const T> in, std::span<T> out, Op op = {}) {
  static_assert(std::is_trivially_copyable_v<T>);
  const std::size_t c = out.size();
  const int n = m.size();
  detail::check_block_collective(m, c, in.size(), c * static_cast<std::size_t>(n),
                                 detail::type_tag<T, 1>(), in.data(), in.size_bytes(), out.data(),
                                 out.size_bytes(), "reduce_scatter", "the input holds");
  std::vector<T> received(c * static_cast<std::size_t>(n));
  detail::exchange_blocks(m, in.data(), c * sizeof(T), received.data(), "reduce_scatter");
  if (c == 0) return;
  std::vector<const T*> blocks(static_cast<std::size_t>(n));
  for (int j = 0; j < n; ++j) blocks[static_cast<std::size_t>(j)] = received.data() + j * c;
  detail::fold_in_image_order(blocks.data(), n, out, op);
}

/// Reduce-scatter of a coarray's blocks over its mesh: elements [first, first + n*c) of
/// each block (n images, c = out.size()) hold n pieces of c elements; image i receives the
/// fold, in image order, of piece i of every image's block, read one-sidedly (in place
/// from same-host images). Synchronises before and after, like all_gather of a coarray.
/// Without `first`, the whole block (a.size() == n * c).
template <typename T, std::size_t N, memory_kind K, typename Op = std::plus<>>
requires(K != memory_kind::cuda) void reduce_scatter(const coarray<T, N, K>& a, std::size_t first,
                                                     std::span<T> out, Op op = {}) {
  const mesh& m = a.team();
  const std::size_t c = out.size(), span = c * static_cast<std::size_t>(m.size());
  detail::check_coarray_range(m, first, span, a.size(), "reduce_scatter of a coarray");
  detail::check_block_collective(m, c, span, span, detail::type_tag<T, N>(), a.data() + first,
                                 span * sizeof(T), out.data(), out.size_bytes(),
                                 "reduce_scatter of a coarray", "the coarray's range holds");
  struct fold {
    std::vector<T> acc;
    Op* op;
  } f{std::vector<T>(c), &op};
  const std::uint64_t piece =
      a.block().offset + (first + static_cast<std::uint64_t>(m.rank()) * c) * sizeof(T);
  detail::visit_image_blocks(
      m, piece, c * sizeof(T),
      [](void* ctx, int image, const std::byte* data) {
        auto* f = static_cast<fold*>(ctx);
        const std::size_t count = f->acc.size();
        if (image == 0) {
          std::memcpy(f->acc.data(), data, count * sizeof(T));
          return;
        }
        const T* v = reinterpret_cast<const T*>(data); // the heap or a 64-byte aligned buffer
        for (std::size_t k = 0; k < count; ++k) f->acc[k] = (*f->op)(f->acc[k], v[k]);
      },
      &f);
  if (c > 0) std::memcpy(out.data(), f.acc.data(), c * sizeof(T));
}
template <typename T, std::size_t N, memory_kind K, typename Op = std::plus<>>
requires(K != memory_kind::cuda) void reduce_scatter(const coarray<T, N, K>& a, std::span<T> out,
                                                     Op op = {}) {
  detail::check_block_collective(
      a.team(), out.size(), a.size(), out.size() * static_cast<std::size_t>(a.team().size()),
      detail::type_tag<T, N>(), a.data(), a.size() * sizeof(T), out.data(), out.size_bytes(),
      "reduce_scatter of a coarray", "the coarray's block holds");
  reduce_scatter(a, 0, out, op);
}

} // namespace crown
