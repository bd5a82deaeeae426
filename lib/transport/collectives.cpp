// co_* collectives over a mesh's communicator.
#include "../mesh/crown_comm.hpp"
#include "agreement.hpp"
#include "host_collectives.hpp"
#include "transfer.hpp"
#include <algorithm>
#include <atomic>
#include <climits>
#include <crown/collectives.hpp>
#include <crown/detail/heap.hpp>
#include <crown/trace.hpp>

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
  // `name` is a literal of collectives.hpp ("co_sum"), so the span may keep it.
  const trace_span span("collective", name, {"bytes", static_cast<std::int64_t>(count * elem_size)},
                        {"images", m.size()}, {"root", result_image});
  // The description is built only when needed: on this path, small reductions take
  // well under a microsecond.
  auto what = [&] { return std::string(name) + " on " + m.to_string(); };
  // With CROWN_CHECK=1 the agreement first: an image out of range on one image only is
  // then an error on every image, not one image throwing while the others wait for it.
  if (check_collectives())
    check_same_arguments(m,
                         {{"count", static_cast<long long>(count)},
                          {"element type", static_cast<long long>(tag >> 1)},
                          {"result_image", result_image}},
                         what());
  if (result_image < -1 || result_image >= m.size()) check_image(m, result_image, true, what());
  if (reduce_on_host(m, data, count, type, elem_size, op, result_image)) return;
  MPI_Comm comm = crown_comm(m);
  const MPI_Op mpi_op = op == reduction::sum ? MPI_SUM : op == reduction::min ? MPI_MIN : MPI_MAX;
  auto* bytes = static_cast<std::byte*>(data);
  const int me = m.rank();
  in_chunks(count, [&](std::size_t at, int n) {
    void* chunk = bytes + at * elem_size;
    MPI_Request r;
    if (!floating && result_image < 0) {
      complete(MPI_Iallreduce(MPI_IN_PLACE, chunk, n, type, mpi_op, comm, &r), r, what());
      return;
    }
    // Computed once at the root and broadcast: bitwise the same on every image.
    const int root = std::max(result_image, 0);
    complete(MPI_Ireduce(me == root ? MPI_IN_PLACE : chunk, me == root ? chunk : nullptr, n, type,
                         mpi_op, root, comm, &r),
             r, what());
    if (result_image < 0) complete(MPI_Ibcast(chunk, n, type, root, comm, &r), r, what());
  });
}

void co_broadcast_bytes(const mesh& m, void* data, std::size_t bytes, int source_image,
                        const char* name) {
  const trace_span span("collective", name, {"bytes", static_cast<std::int64_t>(bytes)},
                        {"images", m.size()}, {"root", source_image});
  const std::string what = std::string(name) + " on " + m.to_string();
  MPI_Comm comm = crown_comm(m);
  if (check_collectives()) // first, as in co_reduce_builtin
    check_same_arguments(
        m, {{"bytes", static_cast<long long>(bytes)}, {"source_image", source_image}}, what);
  check_image(m, source_image, false, what);
  in_chunks(bytes, [&](std::size_t at, int n) {
    MPI_Request r;
    complete(MPI_Ibcast(static_cast<std::byte*>(data) + at, n, MPI_BYTE, source_image, comm, &r), r,
             what);
  });
}

std::vector<std::byte> co_gather_bytes(const mesh& m, const void* data, std::size_t bytes,
                                       std::uint64_t tag, int result_image, const char* name) {
  const trace_span span("collective", name, {"bytes", static_cast<std::int64_t>(bytes)},
                        {"images", m.size()}, {"root", result_image});
  const std::string what = std::string(name) + " on " + m.to_string();
  MPI_Comm comm = crown_comm(m);
  if (check_collectives()) // first, as in co_reduce_builtin
    check_same_arguments(m,
                         {{"bytes", static_cast<long long>(bytes)},
                          {"element type", static_cast<long long>(tag >> 1)},
                          {"result_image", result_image}},
                         what);
  check_image(m, result_image, true, what);
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
