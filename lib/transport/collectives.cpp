// co_* collectives over a mesh's communicator.
#include "agreement.hpp"
#include "transfer.hpp"
#include <algorithm>
#include <atomic>
#include <climits>
#include <crown/collectives.hpp>
#include <crown/detail/heap.hpp>

namespace crown::detail {
namespace {

void check_image(const mesh& m, int image, bool allow_all, const std::string& op) {
  if ((allow_all && image == -1) || (image >= 0 && image < m.size())) return;
  throw argument_error(op, "image " + std::to_string(image) + " is out of range [0, " +
                               std::to_string(m.size()) + ")");
}

/// Calls f(offset, count) over pieces of at most INT_MAX elements (MPI counts are int).
template <typename F>
void in_chunks(std::size_t count, F&& f) {
  for (std::size_t done = 0; done < count || (count == 0 && done == 0);) {
    const std::size_t n = std::min<std::size_t>(count - done, INT_MAX);
    f(done, static_cast<int>(n));
    done += n;
    if (count == 0) break;
  }
}

constexpr std::size_t shared_threshold = 4096; // bytes; below, MPI latency wins

template <typename T>
void reduce_shared_typed(const std::vector<T*>& images, std::size_t begin, std::size_t end,
                         reduction op) {
  // Block by block through a small stack buffer: no allocation, and each block of every
  // image's copy is read once and written once.
  constexpr std::size_t block = 2048;
  T acc[block];
  for (std::size_t b = begin; b < end; b += block) {
    const std::size_t len = std::min(block, end - b);
    std::copy(images[0] + b, images[0] + b + len, acc);
    for (std::size_t j = 1; j < images.size(); ++j) {
      const T* in = images[j] + b;
      if (op == reduction::sum)
        for (std::size_t i = 0; i < len; ++i) acc[i] = static_cast<T>(acc[i] + in[i]);
      else if (op == reduction::min)
        for (std::size_t i = 0; i < len; ++i) acc[i] = std::min(acc[i], in[i]);
      else
        for (std::size_t i = 0; i < len; ++i) acc[i] = std::max(acc[i], in[i]);
    }
    for (T* out : images) std::copy(acc, acc + len, out + b);
  }
}

/// Reduction of heap data when every member shares memory: each image reduces its
/// share of the elements over all images' copies, in image order (so the bits do not
/// depend on who computes), and writes the result into every copy. Returns false
/// (on every member alike) when some member cannot take this path.
bool reduce_shared(const mesh& m, void* data, std::size_t count, MPI_Datatype type,
                   std::size_t elem_size, reduction op) {
  const std::int64_t offset = heap_offset_of(data, count * elem_size);
  bool shared = offset >= 0;
  for (int r : m) shared = shared && heap_peer_address(r, 0) != nullptr;
  // One allreduce: the entry synchronisation and the agreement on the path.
  long long mine[2] = {shared ? offset : -1, shared ? -offset : 1};
  MPI_Request r;
  complete(MPI_Iallreduce(MPI_IN_PLACE, mine, 2, MPI_LONG_LONG, MPI_MAX, m.comm(), &r), r,
           "co_* (shared path agreement)");
  if (mine[0] < 0 || mine[0] != -mine[1]) return false;
  std::atomic_thread_fence(std::memory_order_acquire);
  const std::size_t n = static_cast<std::size_t>(m.size()), me = static_cast<std::size_t>(m.rank());
  const std::size_t share = (count + n - 1) / n;
  const std::size_t begin = std::min(count, me * share), end = std::min(count, begin + share);
  std::vector<std::byte*> images;
  for (int r : m) images.push_back(heap_peer_address(r, static_cast<std::uint64_t>(offset)));
  auto typed = [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    std::vector<T*> p;
    for (std::byte* b : images) p.push_back(reinterpret_cast<T*>(b));
    reduce_shared_typed(p, begin, end, op);
  };
  if (type == MPI_DOUBLE)
    typed(static_cast<double*>(nullptr));
  else if (type == MPI_FLOAT)
    typed(static_cast<float*>(nullptr));
  else if (type == MPI_INT32_T)
    typed(static_cast<std::int32_t*>(nullptr));
  else if (type == MPI_INT64_T)
    typed(static_cast<std::int64_t*>(nullptr));
  else if (type == MPI_UINT32_T)
    typed(static_cast<std::uint32_t*>(nullptr));
  else if (type == MPI_UINT64_T)
    typed(static_cast<std::uint64_t*>(nullptr));
  std::atomic_thread_fence(std::memory_order_release);
  m.barrier(); // nobody reads the result before every share is written
  return true;
}

bool shared_type(MPI_Datatype t) {
  return t == MPI_DOUBLE || t == MPI_FLOAT || t == MPI_INT32_T || t == MPI_INT64_T ||
         t == MPI_UINT32_T || t == MPI_UINT64_T;
}

} // namespace

void co_reduce_builtin(const mesh& m, void* data, std::size_t count, MPI_Datatype type,
                       std::size_t elem_size, bool floating, reduction op, int result_image,
                       std::uint64_t tag, const char* name) {
  const std::string what = std::string(name) + " on " + m.to_string();
  MPI_Comm comm = m.comm();
  check_image(m, result_image, true, what);
  if (check_collectives())
    check_same_arguments(m,
                         {{"count", static_cast<long long>(count)},
                          {"element type", static_cast<long long>(tag >> 1)},
                          {"result_image", result_image}},
                         what);
  if (result_image < 0 && count * elem_size >= shared_threshold && shared_type(type) &&
      reduce_shared(m, data, count, type, elem_size, op))
    return;
  const MPI_Op mpi_op = op == reduction::sum ? MPI_SUM : op == reduction::min ? MPI_MIN : MPI_MAX;
  auto* bytes = static_cast<std::byte*>(data);
  const int me = m.rank();
  in_chunks(count, [&](std::size_t at, int n) {
    void* chunk = bytes + at * elem_size;
    MPI_Request r;
    if (!floating && result_image < 0) {
      complete(MPI_Iallreduce(MPI_IN_PLACE, chunk, n, type, mpi_op, comm, &r), r, what);
      return;
    }
    // Computed once at the root and broadcast: bitwise the same on every image.
    const int root = std::max(result_image, 0);
    complete(MPI_Ireduce(me == root ? MPI_IN_PLACE : chunk, me == root ? chunk : nullptr, n, type,
                         mpi_op, root, comm, &r),
             r, what);
    if (result_image < 0) complete(MPI_Ibcast(chunk, n, type, root, comm, &r), r, what);
  });
}

void co_broadcast_bytes(const mesh& m, void* data, std::size_t bytes, int source_image,
                        const char* name) {
  const std::string what = std::string(name) + " on " + m.to_string();
  MPI_Comm comm = m.comm();
  check_image(m, source_image, false, what);
  if (check_collectives())
    check_same_arguments(
        m, {{"bytes", static_cast<long long>(bytes)}, {"source_image", source_image}}, what);
  in_chunks(bytes, [&](std::size_t at, int n) {
    MPI_Request r;
    complete(MPI_Ibcast(static_cast<std::byte*>(data) + at, n, MPI_BYTE, source_image, comm, &r), r,
             what);
  });
}

std::vector<std::byte> co_gather_bytes(const mesh& m, const void* data, std::size_t bytes,
                                       std::uint64_t tag, int result_image, const char* name) {
  const std::string what = std::string(name) + " on " + m.to_string();
  MPI_Comm comm = m.comm();
  check_image(m, result_image, true, what);
  if (check_collectives())
    check_same_arguments(m,
                         {{"bytes", static_cast<long long>(bytes)},
                          {"element type", static_cast<long long>(tag >> 1)},
                          {"result_image", result_image}},
                         what);
  if (bytes > INT_MAX)
    throw argument_error(what, "co_reduce with a user operation handles at most 2 GiB per image");
  const int n = static_cast<int>(bytes);
  const bool receives = result_image < 0 || m.rank() == result_image;
  std::vector<std::byte> all(receives ? bytes * static_cast<std::size_t>(m.size()) : 0);
  MPI_Request r;
  if (result_image < 0)
    complete(MPI_Iallgather(data, n, MPI_BYTE, all.data(), n, MPI_BYTE, comm, &r), r, what);
  else
    complete(MPI_Igather(data, n, MPI_BYTE, all.data(), n, MPI_BYTE, result_image, comm, &r), r,
             what);
  return all;
}

} // namespace crown::detail
