// include/crown/runtime.hpp — Crown's lifetime: MPI, configuration, topology, world mesh.
#pragma once
#include <crown/config.hpp>
#include <crown/mesh.hpp>
#include <crown/topology.hpp>
#include <functional>
#include <memory>
#include <mpi.h>
#include <string>
#include <string_view>

namespace crown {

class controller;

enum class thread_level { single, funneled, serialized, multiple };
[[nodiscard]] std::string_view to_string(thread_level);

/// What the job can use to move data; fixed at start-up, printed by crown-info.
struct transport_support {
  bool shm = true;             ///< same-host load/store (always)
  bool mpi_rma = false;        ///< MPI windows can be created on the world
  std::string mpi_rma_problem; ///< why not, and what to do instead
  bool ucx = false;            ///< built with UCX
  std::string ucx_version;
  bool cuda = false; ///< built with CUDA and a GPU is visible
  bool nccl = false; ///< built with NCCL
  std::string nccl_version;
  bool progress_thread = false; ///< Crown's progress thread runs (CROWN_PROGRESS_THREAD)
  /// The backend that reaches peers off this rank's host (the same on every rank):
  /// "ucx", "mpi" (one MPI window), "am" (active messages over two-sided MPI), or
  /// "none" (every peer shares memory, or no transport could start), and why.
  std::string heap_transport = "none";
  std::string heap_transport_why;
  /// Who serves other ranks' one-sided requests: "thread" (the progress thread, also
  /// while the rank computes or blocks in its own MPI calls), "crown-calls" (only this
  /// rank's Crown calls), or "none-needed" (loads and stores only), and why.
  std::string progress = "none-needed";
  std::string progress_why;
  /// How device memory (memory_kind::cuda) on other hosts is reached: "staged" (requests
  /// its owner serves, the bytes through page-locked host memory in pipelined chunks) or
  /// "none", and why (what the probe found of CUDA-aware MPI and UCX).
  std::string device_offhost = "none";
  std::string device_offhost_why = "built without CUDA";
};

/// One per process, alive for as long as Crown is used.
///
/// Either initialises MPI itself (asking for MPI_THREAD_MULTIPLE) and then finalises
/// it on destruction, or attaches to an MPI the application already initialised, at
/// whatever thread level it has, and leaves finalisation to the application.
/// Constructing a second runtime while one is alive, or any runtime after MPI was
/// finalised, throws state_error. Meshes that outlive the runtime keep their pure
/// operations; anything that communicates throws state_error.
///
/// Thread safety: construct and destroy from one thread. With MPI_THREAD_MULTIPLE,
/// the const accessors and mesh operations may be called from any thread; mesh
/// communicators are created under a lock, but collective calls on one mesh must
/// still be issued in the same order on every member (MPI's rule).
class runtime {
public:
  runtime();
  runtime(int& argc, char**& argv);
  /// Attaches to an initialised MPI and uses `comm` (duplicated) as the world.
  explicit runtime(MPI_Comm comm);
  ~runtime();
  runtime(const runtime&) = delete;
  runtime& operator=(const runtime&) = delete;

  [[nodiscard]] const mesh& world() const noexcept;
  [[nodiscard]] int rank() const noexcept; ///< rank in world()
  [[nodiscard]] int size() const noexcept; ///< ranks in world()
  [[nodiscard]] bool owns_mpi() const noexcept;
  [[nodiscard]] thread_level thread_support() const noexcept;
  [[nodiscard]] const crown::config& config() const noexcept;
  [[nodiscard]] const crown::topology& topology() const noexcept;
  [[nodiscard]] const transport_support& transports() const noexcept;
  /// Busy polls before a Crown wait yields its core (CROWN_WAIT_SPINS, or 0 when
  /// oversubscribed, else 1000).
  [[nodiscard]] int wait_spins() const noexcept;
  /// Throws state_error naming `feature` unless MPI runs at `needed` or above.
  void require_thread_level(thread_level needed, std::string_view feature) const;

  /// The single controller: rank 0 runs `fn`, every other rank serves actor commands
  /// until fn returns or throws; then every rank stops its actors and returns the same
  /// exit code (0, or 1 when fn or a broadcast failed). Collective over the world.
  /// Launch N workers with -np N+1. See crown/actor.hpp.
  int control(const std::function<void(controller&)>& fn);

  /// True while a runtime exists in this process.
  [[nodiscard]] static bool active() noexcept;

private:
  runtime(int* argc, char*** argv);
  void start(MPI_Comm comm, bool owns, int provided);
  std::shared_ptr<detail::runtime_state> state_;
};

/// The live runtime; throws state_error if there is none (not yet, or destroyed).
[[nodiscard]] runtime& this_runtime();
/// The live runtime's world mesh.
[[nodiscard]] const mesh& world();

} // namespace crown
