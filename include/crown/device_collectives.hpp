// include/crown/device_collectives.hpp — co_sum, co_min, co_max, co_broadcast, all_gather
// and reduce_scatter of device coarrays (coarray<T, N, memory_kind::cuda>).
#pragma once
#include <crown/block_collectives.hpp>
#include <crown/collectives.hpp>
#include <crown/detail/device_collectives.hpp>
#include <crown/device_coarray.hpp>
#include <functional>

namespace crown {

namespace detail {

template <typename T, std::size_t N>
device_collective device_call(const coarray<T, N, memory_kind::cuda>& a,
                              device_collective_kind kind, CUstream_st* stream, const char* name) {
  device_collective c;
  c.kind = kind;
  c.team = &a.team();
  c.offset = a.block().offset;
  c.count = a.size();
  c.elem = sizeof(T);
  c.type_tag = type_tag<T, N>();
  c.stream = stream;
  c.name = name;
  return c;
}

template <typename T, std::size_t N>
void device_reduce(coarray<T, N, memory_kind::cuda>& a, reduction op, int result_image,
                   CUstream_st* stream, const char* name) {
  device_collective c = device_call(a, device_collective_kind::reduce, stream, name);
  c.type = device_number_of<T>();
  c.op = op;
  c.image = result_image;
  c.host = [](const device_collective& d, void* in, void*) {
    co_builtin(*d.team, std::span<T>(static_cast<T*>(in), d.count), d.op, d.image, d.name);
  };
  run_device_collective(c);
}

} // namespace detail

// Collective over the coarray's mesh, blocking: each returns once its result is in
// place on every image that receives one. Elements combine in image order,
//   ((x_0 op x_1) op x_2) ... op x_{n-1},
// on every path, so a result is bitwise the host co_* / reduce_scatter of the same data
// on one host, and the same on every image. The path (device_collectives_path) is
// chosen once per mesh: Crown's fold kernel over the same-host peer mappings (ranks that
// share a GPU: NCCL refuses them), NCCL where every image has a GPU of its own, or the
// host collectives over staged copies (CROWN_GPU_COLLECTIVES overrides the choice).
//
// Streams: the collective's device work runs on `stream` (nullptr: Crown's stream),
// after that stream's earlier work; kernels of other streams that wrote a block must
// have completed. Like sync_all, puts completed before the call are seen. Results of
// all_gather and reduce_scatter may go to device, page-locked or pageable host memory
// (not overlapping the block).

/// Sum over the images, element-wise, of the whole block: into every image, or only
/// into `result_image` (the others' blocks are left as they were).
template <typename T, std::size_t N>
requires detail::is_device_number<T>
void co_sum(coarray<T, N, memory_kind::cuda>& a, int result_image = -1,
            CUstream_st* stream = nullptr) {
  detail::device_reduce(a, detail::reduction::sum, result_image, stream, "co_sum");
}
template <typename T, std::size_t N>
requires detail::is_device_number<T>
void co_min(coarray<T, N, memory_kind::cuda>& a, int result_image = -1,
            CUstream_st* stream = nullptr) {
  detail::device_reduce(a, detail::reduction::min, result_image, stream, "co_min");
}
template <typename T, std::size_t N>
requires detail::is_device_number<T>
void co_max(coarray<T, N, memory_kind::cuda>& a, int result_image = -1,
            CUstream_st* stream = nullptr) {
  detail::device_reduce(a, detail::reduction::max, result_image, stream, "co_max");
}

/// Copies `source_image`'s block into every image's block.
template <typename T, std::size_t N>
void co_broadcast(coarray<T, N, memory_kind::cuda>& a, int source_image,
                  CUstream_st* stream = nullptr) {
  detail::device_collective c =
      detail::device_call(a, detail::device_collective_kind::broadcast, stream, "co_broadcast");
  c.image = source_image;
  c.host = [](const detail::device_collective& d, void* in, void*) {
    co_broadcast(*d.team, std::span<T>(static_cast<T*>(in), d.count), d.image);
  };
  detail::run_device_collective(c);
}

/// Every image's whole block into `all` on every image, image i's at all[i*c, (i+1)*c)
/// (c = a.size(); all.size() must be images * c).
template <typename T, std::size_t N>
void all_gather(const coarray<T, N, memory_kind::cuda>& a, std::span<T> all,
                CUstream_st* stream = nullptr) {
  detail::device_collective c =
      detail::device_call(a, detail::device_collective_kind::all_gather, stream, "all_gather");
  c.result = all.data();
  c.result_count = all.size();
  c.host = [](const detail::device_collective& d, void* in, void* out) {
    all_gather(*d.team, std::span<const T>(static_cast<const T*>(in), d.count),
               std::span<T>(static_cast<T*>(out), d.result_count));
  };
  detail::run_device_collective(c);
}

/// Each block holds images pieces of c = out.size() elements; image i receives in `out`
/// the sum, in image order, of piece i of every image's block (a.size() must be
/// images * c).
template <typename T, std::size_t N>
requires detail::is_device_number<T>
void reduce_scatter(const coarray<T, N, memory_kind::cuda>& a, std::span<T> out,
                    CUstream_st* stream = nullptr) {
  detail::device_collective c = detail::device_call(
      a, detail::device_collective_kind::reduce_scatter, stream, "reduce_scatter");
  c.type = detail::device_number_of<T>();
  c.result = out.data();
  c.result_count = out.size();
  c.host = [](const detail::device_collective& d, void* in, void* out_) {
    reduce_scatter(*d.team, std::span<const T>(static_cast<const T*>(in), d.count),
                   std::span<T>(static_cast<T*>(out_), d.result_count), std::plus<>{});
  };
  detail::run_device_collective(c);
}

/// The path device collectives take on `m`: collective the first time per mesh (every
/// member calls it), then remembered. `why`, when given, gets one line saying why.
inline device_path device_collectives_path(const mesh& m, std::string* why = nullptr) {
  return detail::device_collectives_path(m, why);
}

} // namespace crown
