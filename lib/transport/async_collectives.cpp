// co_*_async: nonblocking reductions and broadcasts on a mesh's private communicator.
#include "async_collectives.hpp"
#include "../mesh/crown_comm.hpp"
#include "agreement.hpp"
#include "transfer.hpp"
#include <climits>
#include <crown/detail/wait.hpp>
#include <crown/error.hpp>
#include <crown/log.hpp>
#include <cstring>
#include <string>
#include <vector>

namespace crown::detail {
namespace {

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
    backoff pause;
    while (!r.advance()) pause.pause();
  } catch (const std::exception& e) {
    log(log_level::error, "a collective that was never waited on failed: ", e.what());
  }
}

/// One nonblocking MPI collective (exact reductions, broadcasts).
class single_request final : public collective_request {
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

/// Floating-point reduction in two stages, so that every image computes the same
/// expression in image order: an all-to-all hands image i block i of every image's
/// (padded) data; image i folds its blocks in image order; an all-gather hands every
/// image every folded block; the result is copied out.
class staged_reduction final : public collective_request, public deferred_stage {
public:
  staged_reduction(const mesh& m, void* data, std::size_t count, std::size_t elem, fold_fn fold,
                   const char* name)
      : what_(describe(name, m)), data_(static_cast<std::byte*>(data)), count_(count), elem_(elem),
        fold_(fold), images_(m.size()),
        peer_(m.ranks()[static_cast<std::size_t>((m.rank() + 1) % m.size())]) {
    comm_ = crown_comm(m); // starts any stage deferred on it: collectives stay in order
    const std::size_t block =
        (count + static_cast<std::size_t>(images_) - 1) / static_cast<std::size_t>(images_);
    block_bytes_ = block * elem;
    block_elems_ = block;
    const int n = checked_int(block_bytes_, what_, "bytes per image");
    const std::size_t total = block_bytes_ * static_cast<std::size_t>(images_);
    buffer_.assign(total, std::byte{0}); // the padding is folded too, and never copied out
    std::memcpy(buffer_.data(), data_, count * elem);
    blocks_.resize(total);
    check_mpi(
        MPI_Ialltoall(buffer_.data(), n, MPI_BYTE, blocks_.data(), n, MPI_BYTE, comm_, &request_),
        what_ + ": MPI_Ialltoall");
    defer_stage(comm_, this);
  }
  ~staged_reduction() override {
    if (stage_ != done) finish_quietly(*this);
    forget_stage(comm_, this);
  }

  bool advance() override {
    if (stage_ == exchanging) {
      if (!test()) return false;
      forget_stage(comm_, this); // started here, not by the next collective
      gather();
    }
    if (stage_ == gathering && test()) {
      std::memcpy(data_, buffer_.data(), count_ * elem_);
      stage_ = done;
    }
    return stage_ == done;
  }
  void start_next_stage() override {
    if (stage_ != exchanging) return;
    wait_request(request_, what_.c_str());
    gather();
  }
  [[nodiscard]] int peer() const noexcept override { return peer_; }

private:
  enum stage { exchanging, gathering, done };
  bool test() {
    int finished = 0;
    check_mpi(MPI_Test(&request_, &finished, MPI_STATUS_IGNORE), what_ + ": MPI_Test");
    return finished != 0;
  }
  /// Folds this image's blocks in image order, then starts the all-gather.
  void gather() {
    folded_.assign(blocks_.begin(), blocks_.begin() + static_cast<std::ptrdiff_t>(block_bytes_));
    for (int j = 1; j < images_; ++j)
      fold_(folded_.data(), blocks_.data() + static_cast<std::size_t>(j) * block_bytes_,
            block_elems_);
    const int n = static_cast<int>(block_bytes_);
    check_mpi(
        MPI_Iallgather(folded_.data(), n, MPI_BYTE, buffer_.data(), n, MPI_BYTE, comm_, &request_),
        what_ + ": MPI_Iallgather");
    stage_ = gathering;
  }

  std::string what_;
  std::byte* data_;
  std::size_t count_, elem_;
  fold_fn fold_;
  int images_, peer_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  std::size_t block_bytes_ = 0, block_elems_ = 0;
  std::vector<std::byte> buffer_, blocks_, folded_;
  MPI_Request request_ = MPI_REQUEST_NULL;
  stage stage_ = exchanging;
};

} // namespace

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
  if (fold) return std::make_unique<staged_reduction>(m, data, count, elem_size, fold, name);
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
  if (source_image < 0 || source_image >= m.size())
    throw argument_error(what, "image " + std::to_string(source_image) + " is out of range [0, " +
                                   std::to_string(m.size()) + ")");
  if (check_collectives())
    check_same_arguments(
        m, {{"bytes", static_cast<long long>(bytes)}, {"source_image", source_image}}, what);
  if (m.size() == 1 || bytes == 0) return nullptr;
  const int n = checked_int(bytes, what, "bytes");
  auto r =
      std::make_unique<single_request>(what, m.ranks()[static_cast<std::size_t>(source_image)]);
  check_mpi(MPI_Ibcast(data, n, MPI_BYTE, source_image, comm, r->request()), what + ": MPI_Ibcast");
  return r;
}

} // namespace crown::detail
