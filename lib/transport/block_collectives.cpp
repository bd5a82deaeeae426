// all_gather and reduce_scatter: argument checks and the data movement under the templates.
#include "../mesh/crown_comm.hpp"
#include "agreement.hpp"
#include "test_hooks.hpp"
#include "transfer.hpp"
#include <algorithm>
#include <climits>
#include <crown/block_collectives.hpp>
#include <crown/detail/heap.hpp>
#include <crown/runtime.hpp>
#include <crown/sync.hpp>
#include <crown/trace.hpp>
#include <cstdlib>
#include <memory>
#include <new>
#include <string>

namespace crown::detail {
namespace {

/// `bytes` contiguous bytes spread `extent` apart: one image's piece of a chunk (RAII).
class spread_bytes {
public:
  spread_bytes(std::size_t bytes, std::size_t extent, const std::string& what) {
    MPI_Datatype run = MPI_DATATYPE_NULL;
    check_mpi(MPI_Type_contiguous(static_cast<int>(bytes), MPI_BYTE, &run),
              what + ": MPI_Type_contiguous");
    const int rc = MPI_Type_create_resized(run, 0, static_cast<MPI_Aint>(extent), &type_);
    MPI_Type_free(&run);
    check_mpi(rc, what + ": MPI_Type_create_resized");
    check_mpi(MPI_Type_commit(&type_), what + ": MPI_Type_commit");
  }
  ~spread_bytes() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && type_ != MPI_DATATYPE_NULL) MPI_Type_free(&type_);
  }
  spread_bytes(const spread_bytes&) = delete;
  spread_bytes& operator=(const spread_bytes&) = delete;
  [[nodiscard]] MPI_Datatype get() const noexcept { return type_; }

private:
  MPI_Datatype type_ = MPI_DATATYPE_NULL;
};

/// Largest piece one MPI call moves per image (MPI counts are int; tests lower it
/// through set_transfer_chunk_bytes to exercise the pieces).
std::size_t piece_bytes() { return std::min<std::size_t>(INT_MAX, transfer_chunk_bytes()); }

bool overlap(const void* a, std::size_t a_bytes, const void* b, std::size_t b_bytes) {
  if (a_bytes == 0 || b_bytes == 0) return false;
  const auto* x = static_cast<const std::byte*>(a);
  const auto* y = static_cast<const std::byte*>(b);
  return x < y + b_bytes && y < x + a_bytes;
}

} // namespace

void check_block_collective(const mesh& m, std::size_t count, std::size_t given,
                            std::size_t expected, std::uint64_t tag, const void* a,
                            std::size_t a_bytes, const void* b, std::size_t b_bytes,
                            const char* name, const char* given_what) {
  // The description is built only when needed: small calls take a few microseconds.
  auto what = [&] { return std::string(name) + " on " + m.to_string(); };
  // With CROWN_CHECK=1 first, so that a size wrong on one image only is an error on
  // every image rather than one image throwing while the others wait for it.
  if (check_collectives())
    check_same_arguments(m,
                         {{"count", static_cast<long long>(count)},
                          {"element type", static_cast<long long>(tag >> 1)},
                          {"size of the other buffer", static_cast<long long>(given)}},
                         what());
  if (given != expected)
    throw argument_error(what(), std::string(given_what) + " " + std::to_string(given) +
                                     " elements but needs " + std::to_string(expected) + " (" +
                                     std::to_string(m.size()) + " images x " +
                                     std::to_string(count) + ")");
  if (overlap(a, a_bytes, b, b_bytes))
    throw argument_error(what(), "the input and the result overlap (" + std::to_string(a_bytes) +
                                     " and " + std::to_string(b_bytes) + " bytes)");
}

void check_coarray_range(const mesh& m, std::size_t first, std::size_t count, std::size_t size,
                         const char* name) {
  if (first > size || count > size - first)
    throw argument_error(std::string(name) + " on " + m.to_string(),
                         "elements [" + std::to_string(first) + ", " +
                             std::to_string(first + count) + ") lie outside the block of " +
                             std::to_string(size));
}

namespace {

/// One MPI collective per piece of an image's `bytes` (MPI counts are int): call(at,
/// len, count, type) moves bytes [at, at + len) of every image's block, described on the
/// spread-out side as `count` elements of `type` (bytes MPI_BYTEs when one piece is
/// enough, else one type of len bytes with an extent of a whole block).
template <typename What, typename Call>
void in_pieces(std::size_t bytes, What&& what, Call&& call) {
  const std::size_t piece = piece_bytes();
  if (bytes <= piece) {
    call(std::size_t{0}, bytes, static_cast<int>(bytes), MPI_BYTE);
    return;
  }
  for (std::size_t at = 0; at < bytes; at += piece) {
    const std::size_t len = std::min(piece, bytes - at);
    const spread_bytes spread(len, bytes, what());
    call(at, len, 1, spread.get());
  }
}

/// Checks a started (or finished: `request` null) MPI collective and waits for it,
/// serving one-sided requests meanwhile; the message is built only on failure.
template <typename What>
void checked(int rc, MPI_Request& request, What&& what, const char* call) {
  if (rc != MPI_SUCCESS) check_mpi(rc, what() + ": " + call);
  if (request != MPI_REQUEST_NULL) wait_request(request, call);
}

} // namespace

// Crown's collectives use nonblocking MPI so that no rank sits inside MPI while another
// waits for it to serve a one-sided request. Where every rank reaches every heap by
// load/store nobody needs serving, and the blocking collectives are faster here
// (Open MPI's tuned components against libnbc: 2x for a 256 KiB all-gather).
void all_gather_bytes(const mesh& m, const void* mine, std::size_t bytes, void* all,
                      const char* name) {
  const trace_span span("collective", name, {"bytes", static_cast<std::int64_t>(bytes)},
                        {"images", m.size()});
  auto what = [&] { return std::string(name) + " on " + m.to_string(); };
  MPI_Comm comm = crown_comm(m);
  const bool blocking = world_shares_memory();
  in_pieces(bytes, what, [&](std::size_t at, std::size_t len, int count, MPI_Datatype type) {
    const auto* from = static_cast<const std::byte*>(mine) + at;
    auto* to = static_cast<std::byte*>(all) + at;
    const int n = static_cast<int>(len);
    MPI_Request r = MPI_REQUEST_NULL;
    checked(blocking ? MPI_Allgather(from, n, MPI_BYTE, to, count, type, comm)
                     : MPI_Iallgather(from, n, MPI_BYTE, to, count, type, comm, &r),
            r, what, "MPI_Iallgather");
  });
}

void exchange_blocks(const mesh& m, const void* in, std::size_t block, void* received,
                     const char* name) {
  const trace_span span("collective", name, {"bytes", static_cast<std::int64_t>(block)},
                        {"images", m.size()});
  auto what = [&] { return std::string(name) + " on " + m.to_string(); };
  MPI_Comm comm = crown_comm(m);
  const bool blocking = world_shares_memory();
  in_pieces(block, what, [&](std::size_t at, std::size_t, int count, MPI_Datatype type) {
    const auto* from = static_cast<const std::byte*>(in) + at;
    auto* to = static_cast<std::byte*>(received) + at;
    MPI_Request r = MPI_REQUEST_NULL;
    checked(blocking ? MPI_Alltoall(from, count, type, to, count, type, comm)
                     : MPI_Ialltoall(from, count, type, to, count, type, comm, &r),
            r, what, "MPI_Ialltoall");
  });
}

void visit_image_blocks(const mesh& m, std::uint64_t offset, std::size_t bytes, block_visitor visit,
                        void* ctx) {
  const trace_span span("collective", "coarray_blocks", {"bytes", static_cast<std::int64_t>(bytes)},
                        {"images", m.size()});
  // As sync_all: this image's transfers are complete, every member has arrived, and
  // what others put into this image's heap is visible to its loads.
  sync_all(m);
  const int me = this_runtime().rank();
  // A buffer only for images reached through a transport, aligned for any element type.
  struct free_delete {
    void operator()(void* p) const noexcept { std::free(p); }
  };
  std::unique_ptr<std::byte, free_delete> fetched;
  for (int j = 0; j < m.size(); ++j) {
    const int rank = m.ranks()[static_cast<std::size_t>(j)];
    const std::byte* data = rank == me ? heap_address(offset) : heap_peer_address(rank, offset);
    if (!data) {
      if (!fetched) {
        fetched.reset(static_cast<std::byte*>(std::aligned_alloc(64, (bytes + 64) / 64 * 64)));
        if (!fetched) throw std::bad_alloc();
      }
      remote_get(rank, offset, fetched.get(), bytes);
      data = fetched.get();
    }
    visit(ctx, j, data);
  }
  crown_barrier(m); // nobody changes its block while another may still read it
}

} // namespace crown::detail
