// co_*_async: nonblocking reductions and broadcasts on a mesh's private communicator.
#include "async_collectives.hpp"
#include "../mesh/crown_comm.hpp"
#include "../runtime/runtime_state.hpp"
#include "agreement.hpp"
#include "async_op.hpp"
#include "transfer.hpp"
#include <atomic>
#include <climits>
#include <crown/async_collectives.hpp>
#include <crown/detail/copy.hpp>
#include <crown/detail/wait.hpp>
#include <crown/error.hpp>
#include <crown/log.hpp>
#include <cstring>
#include <string>
#include <vector>

namespace crown::detail {
namespace {

std::atomic<int> g_in_flight{0};

/// Counts a collective as in flight for progress_collectives while it lives.
class in_flight {
public:
  in_flight() noexcept { g_in_flight.fetch_add(1, std::memory_order_relaxed); }
  ~in_flight() { g_in_flight.fetch_sub(1, std::memory_order_relaxed); }
  in_flight(const in_flight&) = delete;
  in_flight& operator=(const in_flight&) = delete;
};

std::string describe(const char* name, const mesh& m) {
  return std::string(name) + " on " + m.to_string();
}

int checked_int(std::size_t n, const std::string& what, const char* unit) {
  if (n > static_cast<std::size_t>(INT_MAX))
    throw argument_error(what, std::to_string(n) + " " + unit +
                                   " in one piece; the asynchronous collectives move at most " +
                                   std::to_string(INT_MAX) + " (use the blocking one)");
  return static_cast<int>(n);
}

/// Finishes `r` in a destructor: the other members take part regardless, and MPI may
/// still use the buffers.
void finish_quietly(collective_request& r) noexcept {
  try {
    backoff pause(wait_site{"a collective nobody waited on"});
    while (!r.advance()) pause.pause();
  } catch (const std::exception& e) {
    log(log_level::error, "a collective that was never waited on failed: ", e.what());
  }
}

/// One nonblocking MPI collective (exact reductions, broadcasts).
class single_request final : public collective_request {
  in_flight counted_;

public:
  single_request(std::string what, int peer) : what_(std::move(what)), peer_(peer) {}
  ~single_request() override {
    if (request_ != MPI_REQUEST_NULL) finish_quietly(*this);
  }
  MPI_Request* request() noexcept { return &request_; }
  bool advance() override {
    if (request_ == MPI_REQUEST_NULL) return true;
    int done = 0;
    check_mpi(MPI_Test(&request_, &done, MPI_STATUS_IGNORE), what_ + ": MPI_Test");
    return done != 0;
  }
  [[nodiscard]] int peer() const noexcept override { return peer_; }

private:
  std::string what_;
  int peer_;
  MPI_Request request_ = MPI_REQUEST_NULL;
};

/// Floating-point reduction that every image computes the same way: one all-gather
/// of every image's data, then each image folds the n contributions in image order
/// into the caller's buffer, ((x0 op x1) op x2) ... One collective, so nothing depends
/// on when each image tests; the price is n times the data in memory and traffic.
class gathered_reduction final : public collective_request {
  in_flight counted_;

public:
  gathered_reduction(const mesh& m, void* data, std::size_t count, std::size_t elem, fold_fn fold,
                     const char* name)
      : what_(describe(name, m)), data_(static_cast<std::byte*>(data)), count_(count),
        bytes_(count * elem), fold_(fold), images_(m.size()),
        peer_(m.ranks()[static_cast<std::size_t>((m.rank() + 1) % m.size())]) {
    const int n = checked_int(bytes_, what_, "bytes per image");
    all_.resize(bytes_ * static_cast<std::size_t>(images_));
    check_mpi(
        MPI_Iallgather(data_, n, MPI_BYTE, all_.data(), n, MPI_BYTE, crown_comm(m), &request_),
        what_ + ": MPI_Iallgather");
  }
  ~gathered_reduction() override {
    if (!done_) finish_quietly(*this);
  }

  bool advance() override {
    if (done_) return true;
    int finished = 0;
    check_mpi(MPI_Test(&request_, &finished, MPI_STATUS_IGNORE), what_ + ": MPI_Test");
    if (!finished) return false;
    copy_bytes(data_, all_.data(), bytes_);
    for (int j = 1; j < images_; ++j)
      fold_(data_, all_.data() + static_cast<std::size_t>(j) * bytes_, count_);
    done_ = true;
    return true;
  }
  [[nodiscard]] int peer() const noexcept override { return peer_; }

private:
  std::string what_;
  std::byte* data_;
  std::size_t count_, bytes_;
  fold_fn fold_;
  int images_, peer_;
  std::vector<std::byte> all_;
  MPI_Request request_ = MPI_REQUEST_NULL;
  bool done_ = false;
};

} // namespace

void progress_collectives() noexcept {
  // Idle, one poll in 64 still enters MPI: Open MPI finishes the last step of a message
  // this rank received (the acknowledgement to its sender, when no shared-memory
  // fragment was free) only inside some MPI call here, and the sender waits for it.
  thread_local unsigned idle = 0;
  if ((g_in_flight.load(std::memory_order_relaxed) == 0 && (++idle & 63) != 0) ||
      !may_call_mpi_here())
    return;
  int flag = 0; // an unmatched probe runs one round of MPI's progress engine
  MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_SELF, &flag, MPI_STATUS_IGNORE);
}

std::unique_ptr<collective_request> start_reduction(const mesh& m, void* data, std::size_t count,
                                                    MPI_Datatype type, std::size_t elem_size,
                                                    reduction op, fold_fn fold, const char* name) {
  if (check_collectives())
    check_same_arguments(m,
                         {{"count", static_cast<long long>(count)},
                          {"element size", static_cast<long long>(elem_size)}},
                         describe(name, m));
  if (m.size() == 1 || count == 0) {
    (void)crown_comm(m); // members only, as everywhere
    return nullptr;
  }
  if (fold) return std::make_unique<gathered_reduction>(m, data, count, elem_size, fold, name);
  const std::string what = describe(name, m);
  const int n = checked_int(count, what, "elements");
  auto r = std::make_unique<single_request>(
      what, m.ranks()[static_cast<std::size_t>((m.rank() + 1) % m.size())]);
  const MPI_Op mpi_op = op == reduction::sum ? MPI_SUM : op == reduction::min ? MPI_MIN : MPI_MAX;
  check_mpi(MPI_Iallreduce(MPI_IN_PLACE, data, n, type, mpi_op, crown_comm(m), r->request()),
            what + ": MPI_Iallreduce");
  return r;
}

std::unique_ptr<collective_request> start_broadcast(const mesh& m, void* data, std::size_t bytes,
                                                    int source_image, const char* name) {
  const std::string what = describe(name, m);
  MPI_Comm comm = crown_comm(m);
  if (check_collectives()) // first: an image wrong on one image only fails on every image
    check_same_arguments(
        m, {{"bytes", static_cast<long long>(bytes)}, {"source_image", source_image}}, what);
  if (source_image < 0 || source_image >= m.size())
    throw argument_error(what, "image " + std::to_string(source_image) + " is out of range [0, " +
                                   std::to_string(m.size()) + ")");
  if (m.size() == 1 || bytes == 0) return nullptr;
  const int n = checked_int(bytes, what, "bytes");
  auto r =
      std::make_unique<single_request>(what, m.ranks()[static_cast<std::size_t>(source_image)]);
  check_mpi(MPI_Ibcast(data, n, MPI_BYTE, source_image, comm, r->request()), what + ": MPI_Ibcast");
  return r;
}

namespace {
/// What crown::completion holds for a collective: tests advance it; local and remote
/// completion are the same (the result is in place).
class collective_op final : public async_op {
public:
  explicit collective_op(std::unique_ptr<collective_request> r)
      : async_op(r->peer()), r_(std::move(r)) {}
  bool test_local() override { return test(); }
  bool test_remote() override { return test(); }

private:
  bool test() {
    if (failed_) return true; // its error was thrown once
    try {
      return r_->advance();
    } catch (...) {
      failed_ = true;
      throw;
    }
  }
  std::unique_ptr<collective_request> r_;
  bool failed_ = false;
};

completion hold(std::unique_ptr<collective_request> r) {
  completion c;
  if (r) c.add(async_handle(new collective_op(std::move(r))));
  return c;
}
} // namespace

completion co_reduce_async(const mesh& m, void* data, std::size_t count, MPI_Datatype type,
                           std::size_t elem_size, reduction op, fold_fn fold, const char* name) {
  return hold(start_reduction(m, data, count, type, elem_size, op, fold, name));
}

completion co_broadcast_async_bytes(const mesh& m, void* data, std::size_t bytes, int source_image,
                                    const char* name) {
  return hold(start_broadcast(m, data, bytes, source_image, name));
}

} // namespace crown::detail
