// lib/runtime/runtime_state.hpp — what a live runtime holds; shared by lib/ only.
#pragma once
#include "gpu.hpp"
#include <algorithm>
#include <atomic>
#include <crown/runtime.hpp>
#include <hwloc.h>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace crown::detail {

/// Rank of this process in the current (or last) runtime's world; -1 before any.
int current_rank() noexcept;
void set_current_rank(int rank) noexcept;
/// Whether the calling thread may call MPI on its own initiative: any thread at
/// MPI_THREAD_MULTIPLE, else only the thread that started the runtime (Crown's waits on
/// other threads then leave MPI alone). Set at the runtime's start.
bool may_call_mpi_here() noexcept;
void set_mpi_thread(thread_level level) noexcept;
/// Host name for log lines; empty unless the job spans several hosts.
const std::string& log_host() noexcept;
void set_log_host(std::string host);

/// Owns an hwloc topology (RAII).
struct hwloc_handle {
  hwloc_topology_t topo = nullptr;
  hwloc_handle();
  ~hwloc_handle();
  hwloc_handle(const hwloc_handle&) = delete;
  hwloc_handle& operator=(const hwloc_handle&) = delete;
};

/// Frees an MPI communicator unless MPI is already finalised (RAII).
class comm_handle {
public:
  explicit comm_handle(MPI_Comm c = MPI_COMM_NULL) noexcept : comm_(c) {}
  ~comm_handle() { reset(); }
  comm_handle(const comm_handle&) = delete;
  comm_handle& operator=(const comm_handle&) = delete;
  comm_handle(comm_handle&& o) noexcept : comm_(o.comm_) { o.comm_ = MPI_COMM_NULL; }
  comm_handle& operator=(comm_handle&& o) noexcept {
    if (this != &o) {
      reset();
      comm_ = o.comm_;
      o.comm_ = MPI_COMM_NULL;
    }
    return *this;
  }
  [[nodiscard]] MPI_Comm get() const noexcept { return comm_; }
  /// Gives up ownership without freeing.
  MPI_Comm release() noexcept { return std::exchange(comm_, MPI_COMM_NULL); }
  void reset() noexcept;

private:
  MPI_Comm comm_;
};

/// Result of host discovery and binding on this rank (before gathering).
struct local_discovery {
  rank_placement self;
  host_resources host;
  MPI_Comm host_comm = MPI_COMM_NULL; ///< ranks of this (possibly pretend) host
};

/// What CROWN_FAKE_HOSTS appends to the real host name: "name/fakeK".
inline constexpr std::string_view pretend_host_mark = "/fake";
/// The real host of a placement's host name (itself unless a pretend host's).
inline std::string real_host_of(const std::string& host) {
  return host.substr(0, host.find(pretend_host_mark));
}

/// Discovers this rank's host (honouring CROWN_FAKE_HOSTS), applies the binding
/// policy, and returns what it found. Collective over `world`.
local_discovery discover_local(MPI_Comm world, int world_rank, const config& cfg,
                               const hwloc_handle& hw);
/// Gathers every rank's placement (collective) and numbers the hosts.
std::vector<rank_placement> gather_placements(MPI_Comm world, const rank_placement& self,
                                              MPI_Comm host_comm);

struct runtime_state : std::enable_shared_from_this<runtime_state> {
  runtime_state();
  ~runtime_state();
  runtime_state(const runtime_state&) = delete;
  runtime_state& operator=(const runtime_state&) = delete;
  /// Crown's private duplicate of the world: start-up, the transports, rendezvous and
  /// every internal message and collective on the world. Never handed to users.
  comm_handle world_comm;
  comm_handle user_world; ///< a second duplicate: what world().comm() hands to users
  comm_handle host_comm;
  int rank = 0;
  int size = 0;
  bool owns_mpi = false;
  thread_level level = thread_level::single;
  crown::config cfg;
  std::unique_ptr<hwloc_handle> hwloc;
  std::optional<crown::topology> topo;
  transport_support transports;
  std::optional<crown::mesh> world;
  /// What the layers above keep per runtime (the heaps, the progress thread), by layer:
  /// lib/runtime/layer_hooks.hpp. Emptied at shutdown, before the communicators go.
  std::map<std::string, std::shared_ptr<void>, std::less<>> layer_data;
  std::atomic<bool> alive{true};

  /// Throws state_error unless the runtime is still alive.
  void check_alive(std::string_view op) const;
  /// The user's communicator of `ranks` (in that order: mesh::comm()), created on first
  /// use by the members alone and cached until shutdown.
  MPI_Comm comm_for(std::span<const int> ranks);
  /// Crown's private duplicate of comm_for(ranks), made at the same time by the same
  /// members: Crown's own barriers, collectives and messages on that mesh.
  MPI_Comm crown_comm_for(std::span<const int> ranks);
  /// crown_comm_for(m.ranks()) after the checks mesh::comm() makes (alive, member).
  static MPI_Comm crown_comm_of(const crown::mesh& m);
  /// A mesh over this runtime (used by runtime and mesh code).
  crown::mesh make_mesh(std::vector<dim> dims, std::vector<int> ranks);
  void shutdown() noexcept;

private:
  struct mesh_comms {
    comm_handle user;  ///< mesh::comm()
    comm_handle crown; ///< Crown's own traffic
  };
  const mesh_comms& comms_for(std::span<const int> ranks);
  std::mutex comm_mutex_;
  /// Rank lists compared with spans too, so a lookup builds no vector.
  struct ranks_less {
    using is_transparent = void;
    bool operator()(std::span<const int> a, std::span<const int> b) const noexcept {
      return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end());
    }
  };
  std::map<std::vector<int>, mesh_comms, ranks_less> comms_;
};

/// How Open MPI's one-sided component was chosen for this process: by Crown for its
/// own MPI_Init_thread (`set_by_crown`; "ucx,sm"), or left to the user (the value they
/// set, possibly none). Meaningful under Open MPI only.
struct osc_choice {
  bool set_by_crown = false;
  std::string value;
};
const osc_choice& mpi_osc_choice() noexcept;

/// The live runtime's state, or nullptr.
std::shared_ptr<runtime_state> current_state() noexcept;

} // namespace crown::detail
