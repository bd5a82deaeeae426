// co_* collectives over a mesh's communicator.
#include "agreement.hpp"
#include <algorithm>
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
  const MPI_Op mpi_op = op == reduction::sum ? MPI_SUM : op == reduction::min ? MPI_MIN : MPI_MAX;
  auto* bytes = static_cast<std::byte*>(data);
  const int me = m.rank();
  in_chunks(count, [&](std::size_t at, int n) {
    void* chunk = bytes + at * elem_size;
    if (!floating && result_image < 0) {
      check_mpi(MPI_Allreduce(MPI_IN_PLACE, chunk, n, type, mpi_op, comm), what);
      return;
    }
    // Computed once at the root and broadcast: bitwise the same on every image.
    const int root = std::max(result_image, 0);
    check_mpi(MPI_Reduce(me == root ? MPI_IN_PLACE : chunk, me == root ? chunk : nullptr, n, type,
                         mpi_op, root, comm),
              what);
    if (result_image < 0) check_mpi(MPI_Bcast(chunk, n, type, root, comm), what);
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
    check_mpi(MPI_Bcast(static_cast<std::byte*>(data) + at, n, MPI_BYTE, source_image, comm), what);
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
  if (result_image < 0)
    check_mpi(MPI_Allgather(data, n, MPI_BYTE, all.data(), n, MPI_BYTE, comm), what);
  else
    check_mpi(MPI_Gather(data, n, MPI_BYTE, all.data(), n, MPI_BYTE, result_image, comm), what);
  return all;
}

} // namespace crown::detail
