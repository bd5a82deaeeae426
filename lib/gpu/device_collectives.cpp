// Collectives of device coarrays (include/crown/detail/device_collectives.hpp): Crown's
// fold kernel over the same-host peer mappings, NCCL, or the host collectives over
// staged copies, chosen once per mesh (collective_path.cpp).
#include "../mesh/crown_comm.hpp"
#include "../transport/image_share.hpp"
#include "../transport/transfer.hpp"
#include "collective_path.hpp"
#include "cuda_error.hpp"
#include "device_fold.hpp"
#include "device_heap.hpp"
#include <crown/block_collectives.hpp>
#include <crown/build_config.hpp>
#include <crown/detail/fault.hpp>
#include <crown/trace.hpp>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <vector>
#if CROWN_HAVE_NCCL
#include <nccl.h>
#endif

namespace crown::detail {
namespace {

#if CROWN_HAVE_NCCL
void check_nccl(ncclResult_t rc, const std::string& what) {
  if (rc != ncclSuccess)
    throw state_error(what, std::string("NCCL: ") + ncclGetErrorString(rc) + " (" +
                                std::to_string(static_cast<int>(rc)) + ")");
}

/// A communicator of NCCL over one mesh (RAII).
class nccl_comm {
public:
  nccl_comm(const mesh& m, int device, const std::string& what) {
    struct {
      ncclUniqueId id;
      int rc; // image 0's ncclGetUniqueId: the others must not wait for an id that never comes
    } start{};
    if (m.rank() == 0) start.rc = static_cast<int>(ncclGetUniqueId(&start.id));
    MPI_Request r;
    complete(MPI_Ibcast(&start, sizeof start, MPI_BYTE, 0, crown_comm(m), &r), r,
             "MPI_Bcast(" + what + ": NCCL id)");
    check_nccl(static_cast<ncclResult_t>(start.rc), what + ": ncclGetUniqueId on image 0");
    const ncclUniqueId& id = start.id;
    const device_guard on(device);
    check_nccl(ncclCommInitRank(&comm_, m.size(), id, m.rank()), what + ": ncclCommInitRank");
  }
  ~nccl_comm() {
    if (comm_) (void)ncclCommDestroy(comm_);
  }
  /// After a failure its state is unknown (a later call would pair with the wrong one
  /// on another image): NCCL's work on it stops, and later calls on the mesh refuse.
  void abort(const std::string& why) noexcept {
    if (comm_) (void)ncclCommAbort(comm_);
    comm_ = nullptr;
    aborted_why_ = why;
  }
  nccl_comm(const nccl_comm&) = delete;
  nccl_comm& operator=(const nccl_comm&) = delete;
  /// The communicator; state_error naming the earlier failure once aborted.
  [[nodiscard]] ncclComm_t get(const std::string& what) const {
    if (!comm_)
      throw state_error(what, "this mesh's NCCL communicator was aborted after an earlier "
                              "failure (" +
                                  aborted_why_ + ")");
    return comm_;
  }

private:
  ncclComm_t comm_ = nullptr;
  std::string aborted_why_;
};
#else
class nccl_comm {};
#endif

/// What a mesh decided, kept until the runtime ends.
struct mesh_paths {
  device_path_choice choice;
  std::unique_ptr<nccl_comm> nccl;
};

std::mutex g_mutex;
std::map<std::vector<int>, mesh_paths> g_meshes;

/// This rank's GPU as the driver names it to every process on every host: its UUID, one
/// per GPU or MIG instance (MIG instances share one PCI bus id, and containers sharing a
/// GPU may name their hosts differently). Two images with the same one share a GPU.
std::string gpu_identity(int device, const std::string& what) {
  cudaDeviceProp p{};
  check_cuda(cudaGetDeviceProperties(&p, device), what + ": cudaGetDeviceProperties");
  std::string hex;
  for (const char byte : p.uuid.bytes) {
    char two[3];
    std::snprintf(two, sizeof two, "%02x", static_cast<unsigned>(static_cast<unsigned char>(byte)));
    hex += two;
  }
  return "GPU-" + hex;
}

/// Collective over `m` on its first call: the facts (agreed), the choice, NCCL's
/// communicator where chosen.
mesh_paths& paths_of(const mesh& m, device_heap& h, const std::string& what) {
  const auto ranks = m.ranks();
  std::vector<int> key(ranks.begin(), ranks.end());
  {
    const std::lock_guard lock(g_mutex);
    if (auto it = g_meshes.find(key); it != g_meshes.end()) return it->second;
  }
  // Collective, so without the lock: a thread deciding for another mesh must not wait
  // for this mesh's ranks (on another rank the two threads may meet in the other order).

  device_path_facts f;
  f.images = m.size();
  f.nccl_built = CROWN_HAVE_NCCL;
  if (const auto st = current_state()) f.setting = st->cfg.gpu_collectives;
  int unmapped = m.size();
  for (int i = 0; i < m.size() && unmapped == m.size(); ++i)
    if (!h.peer(key[static_cast<std::size_t>(i)], 0)) unmapped = i;
  MPI_Request r;
  complete(MPI_Iallreduce(MPI_IN_PLACE, &unmapped, 1, MPI_INT, MPI_MIN, crown_comm(m), &r), r,
           "MPI_Allreduce(" + what + ": mappings)");
  f.unmapped_image = unmapped == m.size() ? -1 : unmapped;
  constexpr std::size_t id_bytes = 320;
  char mine[id_bytes] = {};
  const std::string id = gpu_identity(h.device(), what);
  std::memcpy(mine, id.data(), std::min(id.size(), id_bytes - 1));
  std::vector<char> all(id_bytes * key.size());
  all_gather_bytes(m, mine, id_bytes, all.data(), "device collectives: GPU identities");
  std::vector<std::string> gpus;
  for (std::size_t i = 0; i < key.size(); ++i) gpus.emplace_back(all.data() + i * id_bytes);
  const auto [a, b] = first_shared_gpu(gpus);
  f.shared_gpu_images[0] = a;
  f.shared_gpu_images[1] = b;

  mesh_paths p{choose_device_path(f), nullptr};
  if (p.choice.path == device_path::nccl) p.nccl = std::make_unique<nccl_comm>(m, h.device(), what);
  const std::lock_guard lock(g_mutex);
  return g_meshes.emplace(std::move(key), std::move(p)).first->second; // entries stay put
}

/// Device scratch on `stream`'s order (cudaMallocAsync: no device-wide synchronisation,
/// which would wait behind a user kernel spinning in wait_until).
class stream_buffer {
public:
  stream_buffer(std::size_t bytes, cudaStream_t s, const std::string& what) : stream_(s) {
    if (bytes)
      check_cuda(cudaMallocAsync(&p_, bytes, s),
                 what + ": cudaMallocAsync(" + std::to_string(bytes) + " bytes)");
  }
  ~stream_buffer() {
    if (p_) (void)cudaFreeAsync(p_, stream_);
  }
  stream_buffer(const stream_buffer&) = delete;
  stream_buffer& operator=(const stream_buffer&) = delete;
  [[nodiscard]] std::byte* get() const noexcept { return static_cast<std::byte*>(p_); }

private:
  void* p_ = nullptr;
  cudaStream_t stream_;
};

bool is_local_device_memory(const void* p, int device) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return (a.type == cudaMemoryTypeDevice && a.device == device) || a.type == cudaMemoryTypeManaged;
}

/// One collective under way on this image.
struct call {
  const device_collective& c;
  device_heap& h;
  std::string what;
  cudaStream_t s;
  int me;
  int n;
  std::vector<int> ranks;
  std::size_t bytes; ///< this image's elements taking part

  [[nodiscard]] std::byte* block() const { return h.local(c.offset); }
  [[nodiscard]] std::byte* block_of(int image) const {
    return h.peer(ranks[static_cast<std::size_t>(image)], c.offset);
  }
  void sync() const { check_cuda(cudaStreamSynchronize(s), what + ": cudaStreamSynchronize"); }
  void copy(void* dst, const void* src, std::size_t len, const char* which) const {
    if (len)
      check_cuda(cudaMemcpyAsync(dst, src, len, cudaMemcpyDefault, s),
                 what + ": cudaMemcpyAsync(" + std::to_string(len) + " bytes, " + which + ")");
  }
  void fold(void* out, const fold_sources& src, std::size_t count) const {
    check_cuda(launch_fold(s, static_cast<int>(c.type), static_cast<int>(c.op), out, src, count, n),
               what + ": the fold kernel (" + std::to_string(count) + " elements)");
  }
  /// Runs `step` (this image's share of a phase), waits for its work on the stream,
  /// then meets every image as a barrier would: a failure on any image (its exception)
  /// is thrown on every image, naming the first that failed, where a
  /// barrier would leave the others waiting for the image that threw.
  template <typename Step>
  void then_meet(Step&& step, const char* phase) const {
    std::string problem;
    std::exception_ptr mine;
    try {
      step();
      sync();
    } catch (const std::exception& e) { // crown::error, or std::bad_alloc
      problem = e.what();
      mine = std::current_exception();
      // What this image enqueued before it failed lands before anyone goes on (a late
      // copy into another image's block would overwrite what that image does next).
      (void)cudaStreamSynchronize(s);
      (void)cudaGetLastError();
    }
    const mesh& m = *c.team;
    const auto [first, text] = first_member_problem(m, crown_comm(m), problem, what + ": " + phase);
    if (mine) std::rethrow_exception(mine); // this image's own error, as it was thrown
    if (first >= 0) throw state_error(what, image_and_rank(m, first) + " failed: " + text);
  }
  /// Puts finished before the call are in every block, and this image's own work on
  /// the stream is done, before any image reads another's block.
  void meet() const {
    then_meet([&] { h.local_backend().quiet(); }, "start");
  }
  /// then_meet for a path's first phase, where CROWN_FAULT's gpu_collective strikes.
  template <typename Step>
  void first_phase(Step&& step, const char* phase) const {
    then_meet(
        [&] {
          fault_point_reached(fault_point::gpu_collective);
          step();
        },
        phase);
  }
};

// --- Crown's kernels over the peer mappings (every image on this host) ---

void peer_reduce(const call& k) {
  const auto [b, e] =
      image_share(k.c.count, static_cast<std::size_t>(k.n), static_cast<std::size_t>(k.me));
  const std::size_t len = (e - b) * k.c.elem, at = b * k.c.elem;
  std::optional<stream_buffer> folded;
  k.first_phase( // every image has read every block
      [&] {
        const auto* table =
            static_cast<const std::byte* const*>(k.h.view_table(k.c.offset, k.ranks, k.what));
        folded.emplace(len, k.s, k.what);
        if (len) k.fold(folded->get(), {table, nullptr, 0, at}, e - b);
      },
      "fold");
  k.then_meet( // every share is in place
      [&] {
        for (int t = 0; t < k.n; ++t)
          if (k.c.image < 0 || t == k.c.image)
            k.copy(k.block_of(t) + at, folded->get(), len, "to an image");
      },
      "copies to the images");
}

void peer_broadcast(const call& k) {
  k.first_phase( // the source's block is read before it may change
      [&] {
        if (k.me != k.c.image) k.copy(k.block(), k.block_of(k.c.image), k.bytes, "from the source");
      },
      "copy from the source");
}

void peer_all_gather(const call& k) {
  k.first_phase(
      [&] {
        for (int j = 0; j < k.n; ++j)
          k.copy(static_cast<std::byte*>(k.c.result) + static_cast<std::size_t>(j) * k.bytes,
                 k.block_of(j), k.bytes, "from an image");
      },
      "copies from the images");
}

void peer_reduce_scatter(const call& k) {
  const std::size_t len = k.c.result_count * k.c.elem;
  const bool direct = is_local_device_memory(k.c.result, k.h.device());
  std::optional<stream_buffer> staged;
  k.first_phase(
      [&] {
        const auto* table =
            static_cast<const std::byte* const*>(k.h.view_table(k.c.offset, k.ranks, k.what));
        staged.emplace(direct ? 0 : len, k.s, k.what);
        void* out = direct ? k.c.result : staged->get();
        if (len)
          k.fold(out, {table, nullptr, 0, static_cast<std::size_t>(k.me) * len}, k.c.result_count);
        if (!direct) k.copy(k.c.result, out, len, "to the result");
      },
      "fold");
}

// --- NCCL (one GPU per image) ---

#if CROWN_HAVE_NCCL
ncclDataType_t nccl_type(device_number t) {
  switch (t) {
  case device_number::i32:
    return ncclInt32;
  case device_number::u32:
    return ncclUint32;
  case device_number::i64:
    return ncclInt64;
  case device_number::u64:
    return ncclUint64;
  case device_number::f32:
    return ncclFloat32;
  default:
    return ncclFloat64;
  }
}

ncclRedOp_t nccl_op(reduction op) {
  return op == reduction::sum ? ncclSum : op == reduction::min ? ncclMin : ncclMax;
}

bool integral(device_number t) { return t != device_number::f32 && t != device_number::f64; }

/// Waits for this image's NCCL work as every Crown wait does (progress, CROWN_WAIT_WARN
/// and CROWN_WAIT_TIMEOUT name it) and watches the communicator: an error NCCL finds
/// while its kernels run (a peer gone, a network failure) is thrown here instead of a
/// cudaStreamSynchronize that never returns.
void nccl_sync(const call& k, ncclComm_t comm) {
  wait_for_gpu(
      [&] {
        const cudaError_t rc = cudaStreamQuery(k.s);
        if (rc != cudaErrorNotReady) return rc;
        ncclResult_t async = ncclSuccess;
        check_nccl(ncclCommGetAsyncError(comm, &async), k.what + ": ncclCommGetAsyncError");
        if (async != ncclInProgress) check_nccl(async, k.what + ": NCCL, while it ran");
        return rc;
      },
      k.what + ": cudaStreamQuery", wait_site{"an NCCL collective on the GPU", -1, k.c.team});
}

/// Send/receive pairs in one NCCL group (zero-length pieces skipped alike on both sides).
class nccl_group {
public:
  nccl_group(const call& k, ncclComm_t comm) : k_(k), comm_(comm) {
    check_nccl(ncclGroupStart(), k.what + ": ncclGroupStart");
  }
  ~nccl_group() {
    if (open_) (void)ncclGroupEnd(); // after a throw: this thread leaves the group
  }
  nccl_group(const nccl_group&) = delete;
  nccl_group& operator=(const nccl_group&) = delete;
  void send(const void* p, std::size_t len, int to) {
    if (len) check_nccl(ncclSend(p, len, ncclChar, to, comm_, k_.s), k_.what + ": ncclSend");
  }
  void recv(void* p, std::size_t len, int from) {
    if (len) check_nccl(ncclRecv(p, len, ncclChar, from, comm_, k_.s), k_.what + ": ncclRecv");
  }
  void end() {
    open_ = false;
    check_nccl(ncclGroupEnd(), k_.what + ": ncclGroupEnd");
  }

private:
  const call& k_;
  ncclComm_t comm_;
  bool open_ = true;
};

/// Image j's piece j of every block lands at out + j * piece; then out_fold = their fold in
/// image order. `share(j)` gives image j's [begin, end) in elements.
template <typename Share>
void nccl_exchange_and_fold(const call& k, ncclComm_t comm, Share share, std::byte* received,
                            void* folded) {
  const auto [b, e] = share(k.me);
  const std::size_t mine = (e - b) * k.c.elem;
  nccl_group g(k, comm);
  for (int j = 0; j < k.n; ++j) {
    const auto [bj, ej] = share(j);
    g.send(k.block() + bj * k.c.elem, (ej - bj) * k.c.elem, j);
    g.recv(received + static_cast<std::size_t>(j) * mine, mine, j);
  }
  g.end();
  if (mine) k.fold(folded, {nullptr, received, mine, 0}, e - b);
}

void nccl_reduce(const call& k, ncclComm_t comm) {
  if (integral(k.c.type)) { // exact in any order: NCCL's own reduction
    const auto t = nccl_type(k.c.type);
    if (k.c.image < 0)
      check_nccl(ncclAllReduce(k.block(), k.block(), k.c.count, t, nccl_op(k.c.op), comm, k.s),
                 k.what + ": ncclAllReduce");
    else
      check_nccl(
          ncclReduce(k.block(), k.block(), k.c.count, t, nccl_op(k.c.op), k.c.image, comm, k.s),
          k.what + ": ncclReduce");
    return nccl_sync(k, comm);
  }
  // Floating point in image order: an all-to-all of shares, the fold, the shares back.
  const auto share = [&](int j) {
    return image_share(k.c.count, static_cast<std::size_t>(k.n), static_cast<std::size_t>(j));
  };
  const auto [b, e] = share(k.me);
  const std::size_t mine = (e - b) * k.c.elem;
  stream_buffer received(mine * static_cast<std::size_t>(k.n), k.s, k.what);
  stream_buffer folded(mine, k.s, k.what);
  nccl_exchange_and_fold(k, comm, share, received.get(), folded.get());
  nccl_group g(k, comm);
  for (int j = 0; j < k.n; ++j) {
    if (k.c.image < 0 || j == k.c.image) g.send(folded.get(), mine, j);
    if (k.c.image < 0 || k.me == k.c.image) {
      const auto [bj, ej] = share(j);
      g.recv(k.block() + bj * k.c.elem, (ej - bj) * k.c.elem, j);
    }
  }
  g.end();
  nccl_sync(k, comm);
}

void nccl_broadcast(const call& k, ncclComm_t comm) {
  check_nccl(ncclBroadcast(k.block(), k.block(), k.bytes, ncclChar, k.c.image, comm, k.s),
             k.what + ": ncclBroadcast");
  nccl_sync(k, comm);
}

void nccl_all_gather(const call& k, ncclComm_t comm) {
  const std::size_t all = k.bytes * static_cast<std::size_t>(k.n);
  const bool direct = is_local_device_memory(k.c.result, k.h.device());
  stream_buffer staged(direct ? 0 : all, k.s, k.what);
  void* out = direct ? k.c.result : staged.get();
  check_nccl(ncclAllGather(k.block(), out, k.bytes, ncclChar, comm, k.s),
             k.what + ": ncclAllGather");
  if (!direct) k.copy(k.c.result, out, all, "to the result");
  nccl_sync(k, comm);
}

void nccl_reduce_scatter(const call& k, ncclComm_t comm) {
  const std::size_t len = k.c.result_count * k.c.elem;
  const bool direct = is_local_device_memory(k.c.result, k.h.device());
  stream_buffer staged(direct ? 0 : len, k.s, k.what);
  void* out = direct ? k.c.result : staged.get();
  if (integral(k.c.type)) {
    check_nccl(ncclReduceScatter(k.block(), out, k.c.result_count, nccl_type(k.c.type),
                                 nccl_op(k.c.op), comm, k.s),
               k.what + ": ncclReduceScatter");
  } else {
    const std::size_t c = k.c.result_count;
    stream_buffer received(len * static_cast<std::size_t>(k.n), k.s, k.what);
    nccl_exchange_and_fold(
        k, comm,
        [c](int j) {
          return std::pair<std::size_t, std::size_t>{static_cast<std::size_t>(j) * c,
                                                     static_cast<std::size_t>(j + 1) * c};
        },
        received.get(), out);
  }
  if (!direct) k.copy(k.c.result, out, len, "to the result");
  nccl_sync(k, comm);
}

void run_nccl(const call& k, ncclComm_t comm) {
  switch (k.c.kind) {
  case device_collective_kind::reduce:
    return nccl_reduce(k, comm);
  case device_collective_kind::broadcast:
    return nccl_broadcast(k, comm);
  case device_collective_kind::all_gather:
    return nccl_all_gather(k, comm);
  case device_collective_kind::reduce_scatter:
    return nccl_reduce_scatter(k, comm);
  }
}
#endif

// --- The host collectives over staged copies ---

void run_host(const call& k) {
  std::vector<std::byte> in(k.bytes), out(k.c.result_count * k.c.elem);
  // Agreed: an image whose copy failed must not leave the others in the host collective.
  k.first_phase([&] { k.copy(in.data(), k.block(), k.bytes, "to host memory"); }, "copy to host");
  k.c.host(k.c, in.data(), out.data());
  const bool receives =
      k.c.kind == device_collective_kind::broadcast ||
      (k.c.kind == device_collective_kind::reduce && (k.c.image < 0 || k.c.image == k.me));
  // Agreed too: an image that returned before another had its result back in place
  // could put into that image's block while the late copy still overwrites it.
  k.then_meet(
      [&] {
        if (receives) k.copy(k.block(), in.data(), k.bytes, "from host memory");
        if (!out.empty()) k.copy(k.c.result, out.data(), out.size(), "to the result");
      },
      "results in place");
}

/// What only this image can check: a result overlapping its block, a stream of another
/// GPU (kernels and NCCL calls on it would fail on this image alone).
std::string local_problem(const device_collective& c, device_heap& h) {
  if (c.result && c.result_count) {
    const auto* r = static_cast<const std::byte*>(c.result);
    const std::byte* blk = h.local(c.offset);
    if (r < blk + c.count * c.elem && blk < r + c.result_count * c.elem)
      return "the result overlaps the coarray's block";
  }
  return stream_device_problem(c.stream, h.device());
}

void run_peer(const call& k) {
  switch (k.c.kind) {
  case device_collective_kind::reduce:
    return peer_reduce(k);
  case device_collective_kind::broadcast:
    return peer_broadcast(k);
  case device_collective_kind::all_gather:
    return peer_all_gather(k);
  case device_collective_kind::reduce_scatter:
    return peer_reduce_scatter(k);
  }
}

} // namespace

device_path device_collectives_path(const mesh& m, std::string* why) {
  const std::string what = "device collectives on " + m.to_string();
  require_device_heaps(m, crown_comm(m), what); // crown_comm throws for non-members
  device_heap& h = active_device_heap(what);
  const mesh_paths& p = paths_of(m, h, what);
  if (why) *why = p.choice.why;
  return p.choice.path;
}

void run_device_collective(const device_collective& c) {
  const mesh& m = *c.team;
  const std::string what = device_collective_what(c);
  // A bad argument on one image is an error on every image (one allreduce), not one
  // image throwing while the others wait for it in the first agreement. A missing
  // device heap is said after it, on this image alone: a device coarray exists only
  // where every member has one (device_allocate agrees it).
  std::string problem = device_collective_problem(c);
  device_heap* h = find_device_heap();
  if (problem.empty() && h) problem = local_problem(c, *h);
  if (const auto [first, text] = first_member_problem(m, crown_comm(m), problem, what); first >= 0)
    throw argument_error(what, !problem.empty() ? problem : image_and_rank(m, first) + ": " + text);
  if (!h) h = &active_device_heap(what); // throws naming why there is none
  const trace_span span("collective", c.name,
                        {"bytes", static_cast<std::int64_t>(c.count * c.elem)},
                        {"images", m.size()}, {"root", c.image});
  mesh_paths& p = paths_of(m, *h, what);
  const auto ranks = m.ranks();
  const call k{c,
               *h,
               what,
               c.stream ? c.stream : h->stream(),
               m.rank(),
               m.size(),
               std::vector<int>(ranks.begin(), ranks.end()),
               c.count * c.elem};
  const device_guard on(h->device());
  k.meet();
  switch (p.choice.path) {
  case device_path::peer:
    return run_peer(k);
  case device_path::nccl:
#if CROWN_HAVE_NCCL
  {
    // Agreed at the end, as the other paths are: the result is in place on every image
    // when any returns, and a failure anywhere aborts every image's communicator. The
    // failing image aborts before then_meet drains its stream: NCCL's kernels on a
    // failed communicator end only then.
    nccl_comm& nccl = *p.nccl;
    ncclComm_t comm = nccl.get(what);
    const auto abort_on_failure = [&](auto&& step) {
      try {
        step();
      } catch (const std::exception& e) {
        nccl.abort(e.what());
        throw;
      }
    };
    abort_on_failure([&] {
      k.then_meet([&] { abort_on_failure([&] { run_nccl(k, comm); }); }, "results in place");
    });
    return;
  }
#else
    break;
#endif
  case device_path::host:
    return run_host(k);
  }
}

void forget_device_collectives() noexcept {
  const std::lock_guard lock(g_mutex);
  g_meshes.clear();
}

} // namespace crown::detail
