// UCX transport: registration and address exchange at start-up, RMA and atomics after.
#include "ucx_transport.hpp"
#include "progress_thread.hpp"
#include <crown/detail/wait.hpp>
#include <crown/error.hpp>
#include <cstring>
#include <exception>
#include <optional>
#include <poll.h>
#include <string>

namespace crown::detail {
namespace {

std::string ucx_problem(const char* call, ucs_status_t status) {
  std::string s = call;
  s += ": ";
  s += ucs_status_string(status);
  return s;
}

/// Every rank's variable-length blob, concatenated, with offsets and lengths per rank.
void gather_blobs(MPI_Comm world, const void* mine, int bytes, std::vector<std::byte>& all,
                  std::vector<int>& at, std::vector<int>& len) {
  int size = 0;
  MPI_Comm_size(world, &size);
  len.assign(static_cast<std::size_t>(size), 0);
  check_mpi(MPI_Allgather(&bytes, 1, MPI_INT, len.data(), 1, MPI_INT, world),
            "MPI_Allgather(UCX blob sizes)");
  at.assign(static_cast<std::size_t>(size), 0);
  int total = 0;
  for (int r = 0; r < size; ++r) {
    at[static_cast<std::size_t>(r)] = total;
    total += len[static_cast<std::size_t>(r)];
  }
  all.resize(static_cast<std::size_t>(total));
  check_mpi(
      MPI_Allgatherv(mine, bytes, MPI_BYTE, all.data(), len.data(), at.data(), MPI_BYTE, world),
      "MPI_Allgatherv(UCX blobs)");
}

/// The UCX opcode of a bitwise read-modify-write.
ucp_atomic_op_t ucx_bitwise(atomic_op op) {
  return op == atomic_op::bit_and  ? UCP_ATOMIC_OP_AND
         : op == atomic_op::bit_or ? UCP_ATOMIC_OP_OR
                                   : UCP_ATOMIC_OP_XOR;
}

} // namespace

ucx_transport::ucx_transport(MPI_Comm world, std::byte* heap, std::size_t heap_size) {
  check_mpi(MPI_Comm_size(world, &size_), "MPI_Comm_size");
  check_mpi(MPI_Comm_rank(world, &rank_), "MPI_Comm_rank");
  // Local set-up first; the ranks agree on its outcome before anything collective.
  std::string problem;
  ucp_address_t* address = nullptr;
  std::size_t address_len = 0;
  void* rkey = nullptr;
  std::size_t rkey_len = 0;
  auto step = [&](const char* call, ucs_status_t status) {
    if (status != UCS_OK && problem.empty()) problem = ucx_problem(call, status);
    return problem.empty();
  };
  ucp_config_t* cfg = nullptr;
  if (step("ucp_config_read", ucp_config_read(nullptr, nullptr, &cfg))) {
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_ESTIMATED_NUM_EPS;
    // WAKEUP gives the worker an event fd the idle progress thread sleeps on.
    params.features = UCP_FEATURE_RMA | UCP_FEATURE_AMO32 | UCP_FEATURE_AMO64 | UCP_FEATURE_WAKEUP;
    params.estimated_num_eps = static_cast<std::size_t>(size_);
    step("ucp_init", ucp_init(&params, cfg, &context_));
    ucp_config_release(cfg);
  }
  if (problem.empty()) {
    ucp_worker_params_t params{};
    params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    // The progress thread and callers share it. Crown serialises their calls itself
    // (worker_gate_, a mutex that sleeps), so UCX's own spinlock, which spins on a
    // descheduled holder when threads outnumber cores, meets at most UCX's async thread
    // (kept safe by MULTI).
    params.thread_mode = UCS_THREAD_MODE_MULTI;
    step("ucp_worker_create", ucp_worker_create(context_, &params, &worker_));
  }
  if (problem.empty()) {
    ucp_mem_map_params_t params{};
    params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    params.address = heap;
    params.length = heap_size;
    if (step("ucp_mem_map(heap)", ucp_mem_map(context_, &params, &memory_)))
      step("ucp_rkey_pack", ucp_rkey_pack(context_, memory_, &rkey, &rkey_len));
  }
  if (problem.empty())
    step("ucp_worker_get_address", ucp_worker_get_address(worker_, &address, &address_len));
  if (problem.empty() && ucp_worker_get_efd(worker_, &event_fd_) != UCS_OK)
    event_fd_ = -1; // the progress thread naps instead

  int ok = problem.empty();
  MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, world);
  if (ok) {
    try {
      gather_blobs(world, address, static_cast<int>(address_len), addresses_, address_at_,
                   address_len_);
      gather_blobs(world, rkey, static_cast<int>(rkey_len), rkeys_, rkey_at_, rkey_len_);
      bases_.resize(static_cast<std::size_t>(size_));
      const auto mine = reinterpret_cast<std::uint64_t>(heap);
      check_mpi(MPI_Allgather(&mine, 1, MPI_UINT64_T, bases_.data(), 1, MPI_UINT64_T, world),
                "MPI_Allgather(UCX heap addresses)");
    } catch (const std::exception& e) {
      problem = e.what();
    }
  }
  if (address) ucp_worker_release_address(worker_, address);
  if (rkey) ucp_rkey_buffer_release(rkey);
  if (!ok || !problem.empty()) {
    release();
    throw state_error("UCX transport",
                      problem.empty() ? "UCX could not be set up on another rank" : problem);
  }
  peers_ = std::make_unique<peer[]>(static_cast<std::size_t>(size_));
  packed_ = std::make_unique<active_messages>(world, heap, heap_size);
}

ucx_transport::~ucx_transport() {
  packed_.reset();
  release();
}

void ucx_transport::release() noexcept {
  if (peers_) {
    // Flush-mode close: our operations are complete already (every call waits for
    // remote completion), and the runtime's final barrier keeps peers progressing.
    std::vector<ucs_status_ptr_t> closing;
    ucp_request_param_t param{};
    for (int r = 0; r < size_; ++r) {
      peer& p = peers_[static_cast<std::size_t>(r)];
      if (p.rkey) ucp_rkey_destroy(p.rkey);
      if (p.ep) closing.push_back(ucp_ep_close_nbx(p.ep, &param));
    }
    for (ucs_status_ptr_t c : closing) {
      if (!UCS_PTR_IS_PTR(c)) continue;
      while (ucp_request_check_status(c) == UCS_INPROGRESS) ucp_worker_progress(worker_);
      ucp_request_free(c);
    }
    peers_.reset();
  }
  if (memory_) ucp_mem_unmap(context_, memory_);
  if (worker_) ucp_worker_destroy(worker_);
  if (context_) ucp_cleanup(context_);
  memory_ = nullptr;
  worker_ = nullptr;
  context_ = nullptr;
}

ucx_transport::peer& ucx_transport::connect(int rank) {
  peer& p = peers_[static_cast<std::size_t>(rank)];
  if (p.ready.load(std::memory_order_acquire)) return p;
  const std::lock_guard lock(connecting_);
  if (p.ready.load(std::memory_order_relaxed)) return p;
  const auto r = static_cast<std::size_t>(rank);
  const auto fail = [&](const char* call, ucs_status_t s) {
    throw error("UCX connection to rank " + std::to_string(rank), ucx_problem(call, s));
  };
  const auto serial = worker_gate_.hold();
  if (!p.ep) { // a later try reuses an endpoint whose key failed to unpack
    ucp_ep_params_t params{};
    params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    params.address = reinterpret_cast<const ucp_address_t*>(addresses_.data() + address_at_[r]);
    if (const ucs_status_t s = ucp_ep_create(worker_, &params, &p.ep); s != UCS_OK) {
      p.ep = nullptr;
      fail("ucp_ep_create", s);
    }
  }
  if (const ucs_status_t s = ucp_ep_rkey_unpack(p.ep, rkeys_.data() + rkey_at_[r], &p.rkey);
      s != UCS_OK) {
    p.rkey = nullptr;
    fail("ucp_ep_rkey_unpack", s);
  }
  p.base = bases_[r];
  p.ready.store(true, std::memory_order_release);
  return p;
}

void ucx_transport::wait(ucs_status_ptr_t request, int rank, const char* what) {
  if (request == nullptr) return;
  ucs_status_t status = UCS_PTR_STATUS(request);
  if (UCS_PTR_IS_PTR(request)) {
    backoff pause(wait_site{what, rank, nullptr, true});
    while ((status = status_of(request)) == UCS_INPROGRESS) {
      progress_worker();
      pause.pause();
    }
    const auto serial = worker_gate_.hold();
    ucp_request_free(request);
  }
  if (status != UCS_OK)
    throw error(std::string(what) + " to rank " + std::to_string(rank) + " over UCX",
                ucs_status_string(status));
}

namespace {
/// Many small runs (a strided section): one active message beats a put per run.
bool pack_instead(std::span<const run> runs) {
  if (runs.size() < 8) return false;
  std::size_t total = 0;
  for (const run& r : runs) total += r.bytes;
  return total / runs.size() < 1024;
}
} // namespace

ucs_status_t ucx_transport::status_of(ucs_status_ptr_t request) {
  if (!UCS_PTR_IS_PTR(request)) return UCS_PTR_STATUS(request);
  const auto serial = worker_gate_.hold();
  return ucp_request_check_status(request);
}

/// One transfer's UCX requests: the puts or gets (local completion), and for puts the
/// endpoint flush issued right after them (remote completion).
class ucx_transfer final : public async_op, public deferrable {
public:
  ucx_transfer(ucx_transport& t, int rank, bool put)
      : async_op(rank), t_(t), rank_(rank), put_(put) {}
  ~ucx_transfer() override {
    const auto serial = t_.worker_gate_.hold();
    for (ucs_status_ptr_t r : requests_) release(r);
    release(flush_);
    if (own_rkey_) ucp_rkey_destroy(own_rkey_);
  }

  /// Issues every run, at `base` + its offset under `rkey` (the peer's heap when
  /// null); stops at the first that fails to start (its error is kept). `packed_rkey`:
  /// memory the peer registered apart from its heap; the key unpacked here is the
  /// operation's, destroyed with it.
  void issue(std::span<const run> runs, std::byte* packed, std::uint64_t base,
             std::span<const std::byte> packed_rkey) {
    ucx_transport::peer& p = t_.connect(rank_);
    ucp_request_param_t param{};
    const auto serial = t_.worker_gate_.hold();
    ucp_rkey_h rkey = p.rkey;
    if (packed_rkey.empty()) {
      base = p.base;
    } else {
      if (const ucs_status_t s = ucp_ep_rkey_unpack(p.ep, packed_rkey.data(), &own_rkey_);
          s != UCS_OK) {
        own_rkey_ = nullptr;
        throw error(what(), ucx_problem("ucp_ep_rkey_unpack(remote_buffer)", s));
      }
      rkey = own_rkey_;
    }
    for (const run& r : runs) {
      const std::uint64_t remote = base + r.offset;
      ucs_status_ptr_t s = put_ ? ucp_put_nbx(p.ep, packed, r.bytes, remote, rkey, &param)
                                : ucp_get_nbx(p.ep, packed, r.bytes, remote, rkey, &param);
      if (s != nullptr) requests_.push_back(s);
      if (UCS_PTR_IS_ERR(s)) break;
      packed += r.bytes;
    }
    // The flush also ends whatever started before a failure, so the caller's buffer is
    // never left in use once the operation reports its error.
    if (put_ || failed()) flush_ = ucp_ep_flush_nbx(p.ep, &param);
  }

  void issue(std::span<const run> runs, std::byte* packed) override { issue(runs, packed, 0, {}); }

  bool test_local() override {
    if (done_local_) return true;
    if (!issued()) t_.deferred_.issue_all(); // not waiting for the thread
    if (const std::exception_ptr failure = take_start_failure()) {
      done_local_ = reported_ = true;
      std::rethrow_exception(failure);
    }
    t_.progress_worker();
    for (ucs_status_ptr_t r : requests_)
      if (t_.status_of(r) == UCS_INPROGRESS) return false;
    if (failed() && t_.status_of(flush_) == UCS_INPROGRESS) return false; // buffer still in use
    done_local_ = true;
    throw_failure();
    return true;
  }
  bool test_remote() override {
    if (!test_local()) return false;
    const ucs_status_t s = t_.status_of(flush_);
    if (s == UCS_INPROGRESS) return false;
    if (s != UCS_OK && !reported_) {
      reported_ = true;
      throw error(what(), ucs_status_string(s));
    }
    return true;
  }

private:
  bool failed() const {
    for (ucs_status_ptr_t r : requests_)
      if (UCS_PTR_IS_ERR(r)) return true;
    return false;
  }
  void throw_failure() {
    for (ucs_status_ptr_t r : requests_)
      if (const ucs_status_t s = t_.status_of(r); s != UCS_OK && !reported_) {
        reported_ = true;
        throw error(what(), ucs_status_string(s));
      }
  }
  std::string what() const {
    return std::string(put_ ? "put" : "get") + " to rank " + std::to_string(rank_) + " over UCX";
  }
  static void release(ucs_status_ptr_t r) noexcept {
    if (UCS_PTR_IS_PTR(r)) ucp_request_free(r);
  }

  ucx_transport& t_;
  int rank_;
  bool put_;
  bool done_local_ = false, reported_ = false;
  std::vector<ucs_status_ptr_t> requests_;
  ucs_status_ptr_t flush_ = nullptr;
  ucp_rkey_h own_rkey_ = nullptr;
};

async_handle ucx_transport::start(bool put, int rank, std::span<const run> runs,
                                  std::byte* packed) {
  if (pack_strided_.load(std::memory_order_relaxed) && pack_instead(runs))
    return packed_->start(put, rank, runs, packed);
  auto* op = new ucx_transfer(*this, rank, put);
  async_handle handle(op);
  // A large transfer, or any behind one still queued (they keep their order), goes to
  // the progress thread, which writes its bytes while the caller goes on.
  if (deferred_.take(*op, runs, packed)) {
    if (event_fd_ >= 0) ucp_worker_signal(worker_); // the thread may sleep on the event fd
    return handle;
  }
  op->issue(runs, packed);
  return handle;
}

async_handle ucx_transport::start_registered(bool put, int rank, std::uint64_t address,
                                             std::span<const std::byte> rkey,
                                             std::span<const run> runs, std::byte* packed) {
  auto* op = new ucx_transfer(*this, rank, put);
  async_handle handle(op);
  op->issue(runs, packed, address, rkey);
  return handle;
}

ucx_transport::registration ucx_transport::register_memory(void* address, std::size_t bytes) {
  ucp_mem_map_params_t params{};
  params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  params.address = address;
  params.length = bytes;
  registration r;
  const auto serial = worker_gate_.hold();
  if (const ucs_status_t s = ucp_mem_map(context_, &params, &r.memory); s != UCS_OK)
    throw resource_error("remote_buffer of " + std::to_string(bytes) + " bytes",
                         ucx_problem("ucp_mem_map", s));
  void* packed = nullptr;
  std::size_t packed_len = 0;
  if (const ucs_status_t s = ucp_rkey_pack(context_, r.memory, &packed, &packed_len); s != UCS_OK) {
    ucp_mem_unmap(context_, r.memory);
    throw resource_error("remote_buffer of " + std::to_string(bytes) + " bytes",
                         ucx_problem("ucp_rkey_pack", s));
  }
  const auto* at = static_cast<const std::byte*>(packed);
  r.rkey.assign(at, at + packed_len);
  ucp_rkey_buffer_release(packed);
  return r;
}

void ucx_transport::unregister_memory(ucp_mem_h memory) noexcept {
  const auto serial = worker_gate_.hold();
  ucp_mem_unmap(context_, memory);
}

std::uint64_t ucx_transport::atomic(int rank, std::uint64_t offset, atomic_op op, int width,
                                    bool floating, std::uint64_t operand, std::uint64_t compare) {
  deferred_.issue_all(); // in the order they were started
  peer& p = connect(rank);
  const std::uint64_t address = p.base + offset;
  // One fetching atomic: x is UCX's operand; the reply buffer holds CSWAP's new value
  // on the way in and the old word on the way out.
  auto fetching = [&](ucp_atomic_op_t code, std::uint64_t x, std::uint64_t in) {
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_REPLY_BUFFER;
    param.datatype = ucp_dt_make_contig(static_cast<std::size_t>(width));
    auto x32 = static_cast<std::uint32_t>(x), reply32 = static_cast<std::uint32_t>(in);
    std::uint64_t reply64 = in;
    param.reply_buffer = width == 4 ? static_cast<void*>(&reply32) : static_cast<void*>(&reply64);
    const void* operand_at = width == 4 ? static_cast<const void*>(&x32) : &x;
    ucs_status_ptr_t request = nullptr;
    {
      const auto serial = worker_gate_.hold();
      request = ucp_atomic_op_nbx(p.ep, code, operand_at, 1, address, p.rkey, &param);
    }
    wait(request, rank, "atomic");
    return width == 4 ? std::uint64_t{reply32} : reply64;
  };
  const auto loop = [&] { // for what UCX cannot do in one call
    return compare_and_swap_loop(
        op, width, floating, operand, [&] { return fetching(UCP_ATOMIC_OP_OR, 0, 0); },
        [&](std::uint64_t expected, std::uint64_t desired) {
          return fetching(UCP_ATOMIC_OP_CSWAP, expected, desired);
        });
  };
  switch (op) {
  case atomic_op::load:
    return fetching(UCP_ATOMIC_OP_OR, 0, 0);
  case atomic_op::compare_swap:
    return fetching(UCP_ATOMIC_OP_CSWAP, compare, operand);
  case atomic_op::add:
    return floating ? loop() : fetching(UCP_ATOMIC_OP_ADD, operand, 0); // no float atomics
  case atomic_op::bit_and:
  case atomic_op::bit_or:
  case atomic_op::bit_xor:
    // UCX 1.13's self transport applies fetching and/or/xor with the old value as the
    // operand (12 xor 5 leaves 0), so a rank's atomics on its own heap loop instead.
    return rank == rank_ ? loop() : fetching(ucx_bitwise(op), operand, 0);
  default: // store, swap
    return fetching(UCP_ATOMIC_OP_SWAP, operand, 0);
  }
}

void ucx_transport::fence() {
  deferred_.issue_all(); // what was started before the fence goes before it
  const auto serial = worker_gate_.hold();
  ucp_worker_fence(worker_);
}

void ucx_transport::quiet() {
  deferred_.issue_all();
  packed_->quiet();
  ucp_request_param_t param{};
  ucs_status_ptr_t request = nullptr;
  {
    const auto serial = worker_gate_.hold();
    request = ucp_worker_flush_nbx(worker_, &param);
  }
  wait(request, -1, "quiet");
}

bool ucx_transport::progress() noexcept {
  const bool ucx = progress_without_mpi();
  return packed_->progress() || ucx;
}

bool ucx_transport::lists_cuda_memory() const noexcept {
  ucp_context_attr_t attr{};
  attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
  return ucp_context_query(context_, &attr) == UCS_OK &&
         (attr.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0;
}

bool ucx_transport::progress_without_mpi() noexcept {
  deferred_.issue_all();
  return progress_worker();
}

bool ucx_transport::progress_worker() noexcept {
  return worker_gate_.run([this]() noexcept { return ucp_worker_progress(worker_) != 0; });
}

void ucx_transport::idle_wait(std::chrono::microseconds limit) noexcept {
  const bool armed = event_fd_ >= 0 && worker_gate_.run([this]() noexcept {
    return ucp_worker_arm(worker_) == UCS_OK; // UCS_ERR_BUSY: events pending
  });
  if (!armed) return backend::idle_wait(limit);
  pollfd fd{event_fd_, POLLIN, 0};
  const timespec wait{static_cast<time_t>(limit.count() / 1000000),
                      static_cast<long>(limit.count() % 1000000) * 1000};
  (void)ppoll(&fd, 1, &wait, nullptr);
}

} // namespace crown::detail
