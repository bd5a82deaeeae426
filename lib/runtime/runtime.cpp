// crown::runtime: MPI initialisation or attachment, start-up agreement, shutdown order.
#include "layer_hooks.hpp"
#include "runtime_state.hpp"
#include "startup_agreement.hpp"
#include "tags.hpp"
#include "trace_control.hpp"
#include <algorithm>
#include <chrono>
#include <crown/build_config.hpp>
#include <crown/detail/fault.hpp>
#include <crown/detail/wait.hpp>
#include <crown/error.hpp>
#include <crown/log.hpp>
#include <cstdlib>
#include <exception>
#include <sys/prctl.h>
#if CROWN_HAVE_UCX
#include <ucp/api/ucp.h>
#endif

namespace crown {
namespace detail {
namespace {
std::atomic<int> g_rank{-1};
std::atomic<int> g_wait_spins{1000};
std::string g_log_host;
std::mutex g_current_mutex;
std::shared_ptr<runtime_state> g_current_state;
runtime* g_current = nullptr;
bool g_was_destroyed = false;

constexpr int default_wait_spins = 1000;

thread_level to_level(int provided) {
  switch (provided) {
  case MPI_THREAD_SINGLE:
    return thread_level::single;
  case MPI_THREAD_FUNNELED:
    return thread_level::funneled;
  case MPI_THREAD_SERIALIZED:
    return thread_level::serialized;
  default:
    return thread_level::multiple;
  }
}

/// Open MPI falls back to osc/pt2pt when no RDMA-capable transport exists, and that
/// component refuses MPI_THREAD_MULTIPLE: window creation then fails. Find out at
/// start-up, so that the failure is explained once rather than met later.
void probe_mpi_rma(runtime_state& st) {
  st.transports.mpi_rma = st.size > 1;
  if (st.size == 1) {
    st.transports.mpi_rma_problem = "a single rank has no peers to reach";
    return;
  }
  if (st.level != thread_level::multiple) return;
  static char byte;
  MPI_Win win = MPI_WIN_NULL;
  int ok = MPI_Win_create(&byte, 1, 1, MPI_INFO_NULL, st.world_comm.get(), &win) == MPI_SUCCESS;
  if (ok) MPI_Win_free(&win);
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, st.world_comm.get()),
            "MPI_Allreduce(RMA probe)");
  if (ok) return;
  st.transports.mpi_rma = false;
  st.transports.mpi_rma_problem =
      "MPI windows cannot be created at MPI_THREAD_MULTIPLE: Open MPI selected osc/pt2pt "
      "(no RDMA-capable transport). Run one-sided traffic over UCX instead (mpirun --mca osc "
      "ucx,sm), or, for SPMD use without the controller, initialise MPI at "
      "MPI_THREAD_SERIALIZED before creating crown::runtime.";
}

std::vector<int> iota_ranks(int n) {
  std::vector<int> r(n);
  for (int i = 0; i < n; ++i) r[i] = i;
  return r;
}

/// {"hosts": H, "procs": P} when every host has P ranks, else {"ranks": N}.
std::pair<std::vector<dim>, std::vector<int>> world_layout(const topology& topo) {
  const auto& all = topo.all();
  const int n = static_cast<int>(all.size());
  const int hosts = topo.num_hosts();
  const bool even = std::all_of(all.begin(), all.end(),
                                [&](const rank_placement& p) { return p.local_size * hosts == n; });
  if (!even) {
    if (current_rank() == 0)
      log(log_level::warn, "hosts run different numbers of ranks (", hosts, " hosts, ", n,
          " ranks): the world mesh is {ranks=", n, "} instead of {hosts, procs}");
    return {{{"ranks", n}}, iota_ranks(n)};
  }
  std::vector<int> ranks(n);
  const int per_host = n / hosts;
  for (const auto& p : all) ranks[p.host_index * per_host + p.local_rank] = p.rank;
  return {{{"hosts", hosts}, {"procs", per_host}}, ranks};
}

osc_choice g_osc;

/// MPI_Init_thread at MPI_THREAD_MULTIPLE. Open MPI 4.1's default one-sided component
/// (osc/rdma) refuses MPI_THREAD_MULTIPLE without an RDMA network (it falls back to
/// osc/pt2pt) and crashes on a compare-and-swap to the calling rank; osc/ucx does
/// neither. So unless the user chose a component, OMPI_MCA_osc=ucx,sm is set for this
/// call only (Open MPI reads it during initialisation) and removed again at once, so
/// that the process environment, and what the application later spawns, stays the
/// user's.
int init_mpi(int* argc, char*** argv, int& provided) {
#ifdef OPEN_MPI
  const char* user = std::getenv("OMPI_MCA_osc");
  g_osc = {user == nullptr, user ? user : "ucx,sm"};
  if (g_osc.set_by_crown) setenv("OMPI_MCA_osc", g_osc.value.c_str(), 1);
  const int rc = MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
  if (g_osc.set_by_crown) unsetenv("OMPI_MCA_osc");
  return rc;
#else
  return MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
#endif
}

} // namespace

const osc_choice& mpi_osc_choice() noexcept { return g_osc; }
int current_rank() noexcept { return g_rank.load(std::memory_order_relaxed); }
void set_current_rank(int rank) noexcept { g_rank.store(rank, std::memory_order_relaxed); }
namespace {
std::atomic<bool> g_mpi_any_thread{false};
std::atomic<std::thread::id> g_mpi_thread{};
} // namespace
bool may_call_mpi_here() noexcept {
  return g_mpi_any_thread.load(std::memory_order_relaxed) ||
         g_mpi_thread.load(std::memory_order_relaxed) == std::this_thread::get_id();
}
void set_mpi_thread(thread_level level) noexcept {
  g_mpi_any_thread.store(level == thread_level::multiple, std::memory_order_relaxed);
  g_mpi_thread.store(std::this_thread::get_id(), std::memory_order_relaxed);
}
const std::string& log_host() noexcept { return g_log_host; }
void set_log_host(std::string host) { g_log_host = std::move(host); }
int wait_spins() noexcept { return g_wait_spins.load(std::memory_order_relaxed); }
namespace {
std::atomic<progress_fn> g_progress{nullptr};
}
progress_fn progress_hook() noexcept { return g_progress.load(std::memory_order_relaxed); }
void set_progress_hook(progress_fn f) noexcept { g_progress.store(f, std::memory_order_relaxed); }
std::atomic<int>& polling_threads() noexcept {
  static std::atomic<int> polling{0};
  return polling;
}
std::atomic<std::uint64_t>& requests_served() noexcept {
  static std::atomic<std::uint64_t> served{0};
  return served;
}
void set_wait_spins(int spins) noexcept { g_wait_spins.store(spins, std::memory_order_relaxed); }

std::shared_ptr<runtime_state> current_state() noexcept {
  const std::lock_guard lock(g_current_mutex);
  return g_current_state;
}

void comm_handle::reset() noexcept {
  if (comm_ == MPI_COMM_NULL) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Comm_free(&comm_);
  comm_ = MPI_COMM_NULL;
}

void runtime_state::check_alive(std::string_view op) const {
  if (!alive.load(std::memory_order_acquire))
    throw state_error(std::string(op), "the crown::runtime this object belongs to was destroyed");
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized)
    throw state_error(std::string(op), "the application finalized MPI while the crown::runtime "
                                       "attached to it was still alive");
}

namespace {
/// True for the world in world order (checked on every collective: no allocation).
bool is_world(std::span<const int> ranks, int size) {
  if (static_cast<int>(ranks.size()) != size) return false;
  for (int i = 0; i < size; ++i)
    if (ranks[static_cast<std::size_t>(i)] != i) return false;
  return true;
}
} // namespace

MPI_Comm runtime_state::comm_for(std::span<const int> ranks) {
  return is_world(ranks, size) ? user_world.get() : comms_for(ranks).user.get();
}

MPI_Comm runtime_state::crown_comm_for(std::span<const int> ranks) {
  return is_world(ranks, size) ? world_comm.get() : comms_for(ranks).crown.get();
}

const runtime_state::mesh_comms& runtime_state::comms_for(std::span<const int> ranks) {
  {
    const std::lock_guard lock(comm_mutex_);
    if (auto it = comms_.find(ranks); it != comms_.end()) return it->second;
  }
  // Created outside the lock: other threads keep using cached communicators while this
  // one waits for the other members. (Two threads of one rank creating the same mesh's
  // communicator at once break MPI's ordering rule for collectives anyway.)
  MPI_Group world_group = MPI_GROUP_NULL, group = MPI_GROUP_NULL;
  check_mpi(MPI_Comm_group(world_comm.get(), &world_group), "MPI_Comm_group");
  check_mpi(MPI_Group_incl(world_group, static_cast<int>(ranks.size()), ranks.data(), &group),
            "MPI_Group_incl");
  // A tag derived from the members makes it unlikely that concurrent creations over
  // overlapping groups (from different threads) match each other's internal messages.
  std::size_t hash = ranks.size();
  for (int r : ranks) hash = hash * 1000003u ^ static_cast<std::size_t>(r);
  // MPI_Comm_create_group blocks inside MPI, where Crown serves no one-sided requests.
  // Meet the other members first in a wait that does serve them (a dissemination
  // barrier over Crown's world communicator), so a member that still waits for this
  // rank to serve its put reaches the creation too instead of deadlocking.
  const int me = static_cast<int>(std::find(ranks.begin(), ranks.end(), rank) - ranks.begin());
  const int n = static_cast<int>(ranks.size());
  const int meet_tag = tags::rendezvous_tag(hash);
  for (int k = 1; k < n; k *= 2) {
    char token = 0, received = 0;
    MPI_Request r[2];
    check_mpi(MPI_Irecv(&received, 1, MPI_CHAR, ranks[(me - k + n) % n], meet_tag, world_comm.get(),
                        &r[0]),
              "MPI_Irecv(communicator rendezvous)");
    check_mpi(
        MPI_Isend(&token, 1, MPI_CHAR, ranks[(me + k) % n], meet_tag, world_comm.get(), &r[1]),
        "MPI_Isend(communicator rendezvous)");
    int done = 0;
    wait_until(wait_site{"communicator rendezvous", ranks[(me - k + n) % n]}, [&] {
      check_mpi(MPI_Testall(2, r, &done, MPI_STATUSES_IGNORE), "MPI_Testall(rendezvous)");
      return done != 0;
    });
  }
  // The user's communicator and Crown's private duplicate, by the same members, at once.
  // (MPI keeps create_group's tag apart from point-to-point tags.)
  MPI_Comm c = MPI_COMM_NULL;
  const int rc =
      MPI_Comm_create_group(world_comm.get(), group, 100 + static_cast<int>(hash % 6000), &c);
  MPI_Group_free(&group);
  MPI_Group_free(&world_group);
  check_mpi(rc, "MPI_Comm_create_group");
  mesh_comms made{comm_handle(c), comm_handle()};
  check_mpi(MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  MPI_Comm mine = MPI_COMM_NULL;
  check_mpi(MPI_Comm_dup(c, &mine), "MPI_Comm_dup(private mesh communicator)");
  made.crown = comm_handle(mine);
  check_mpi(MPI_Comm_set_errhandler(mine, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  const std::lock_guard lock(comm_mutex_);
  return comms_.emplace(std::vector<int>(ranks.begin(), ranks.end()), std::move(made))
      .first->second;
}

crown::mesh runtime_state::make_mesh(std::vector<dim> dims, std::vector<int> ranks) {
  return crown::mesh(shared_from_this(), mesh_shape(std::move(dims), std::move(ranks)));
}

runtime_state::runtime_state() = default;
runtime_state::~runtime_state() = default;

void runtime_state::shutdown() noexcept {
  alive.store(false, std::memory_order_release);
  // The layers above stop first (the progress thread, the device heap, which meets this
  // host's ranks on a communicator freed below, the host heap, whose window goes before
  // the communicator it was made on).
  const auto stages = layer_stages();
  for (auto s = stages.rbegin(); s != stages.rend(); ++s)
    if (s->stop) s->stop(*this);
  trace_finish(); // every thread the layers ran has stopped
  layer_data.clear();
  world.reset(); // the world mesh points back at this state
  {
    const std::lock_guard lock(comm_mutex_);
    comms_.clear();
  }
  host_comm.reset();
  user_world.reset();
  world_comm.reset();
  hwloc.reset();
}

} // namespace detail

std::string_view to_string(thread_level l) {
  switch (l) {
  case thread_level::single:
    return "MPI_THREAD_SINGLE";
  case thread_level::funneled:
    return "MPI_THREAD_FUNNELED";
  case thread_level::serialized:
    return "MPI_THREAD_SERIALIZED";
  case thread_level::multiple:
    return "MPI_THREAD_MULTIPLE";
  }
  return "?";
}

namespace {

void require_no_runtime() {
  if (detail::current_state())
    throw state_error("crown::runtime", "a runtime is already active in this process; create "
                                        "one and reach it through crown::this_runtime()");
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized)
    throw state_error("crown::runtime",
                      "MPI was already finalized in this process and cannot be initialised again");
}

int query_thread_level() {
  int provided = MPI_THREAD_SINGLE;
  MPI_Query_thread(&provided);
  return provided;
}

} // namespace

runtime::runtime() : runtime(nullptr, nullptr) {}
runtime::runtime(int& argc, char**& argv) : runtime(&argc, &argv) {}

runtime::runtime(int* argc, char*** argv) {
  require_no_runtime();
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) {
    start(MPI_COMM_WORLD, false, query_thread_level());
    return;
  }
  int provided = 0;
  const int rc = detail::init_mpi(argc, argv, provided);
  check_mpi(rc, "MPI_Init_thread");
  start(MPI_COMM_WORLD, true, provided);
}

runtime::runtime(MPI_Comm comm) {
  require_no_runtime();
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized)
    throw state_error("crown::runtime(MPI_Comm)",
                      "attaching to a communicator needs MPI initialised by the application");
  if (comm == MPI_COMM_NULL)
    throw argument_error("crown::runtime(MPI_Comm)", "the communicator is MPI_COMM_NULL");
  start(comm, false, query_thread_level());
}

void runtime::start(MPI_Comm comm, bool owns, int provided) {
  auto st = std::make_shared<detail::runtime_state>();
  st->owns_mpi = owns;
  st->level = detail::to_level(provided);
  try {
    // Two duplicates: `dup` carries Crown's own traffic, `user` is what world().comm()
    // hands out, so nothing Crown sends can match a receive the application posts there.
    MPI_Comm dup = MPI_COMM_NULL, user = MPI_COMM_NULL;
    check_mpi(MPI_Comm_dup(comm, &dup), "MPI_Comm_dup(world)");
    st->world_comm = detail::comm_handle(dup);
    check_mpi(MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    check_mpi(MPI_Comm_dup(comm, &user), "MPI_Comm_dup(world for users)");
    st->user_world = detail::comm_handle(user);
    check_mpi(MPI_Comm_set_errhandler(user, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    check_mpi(MPI_Comm_rank(dup, &st->rank), "MPI_Comm_rank");
    check_mpi(MPI_Comm_size(dup, &st->size), "MPI_Comm_size");
    detail::set_current_rank(st->rank);
    detail::set_mpi_thread(st->level);

    std::vector<std::string> warnings;
    detail::agreed_step(dup, "configuration", [&] {
      st->cfg = config::from_environment(&warnings);
      st->hwloc = std::make_unique<detail::hwloc_handle>();
    });
    detail::agreed_step(dup, "configuration agreement", [&] {
      detail::require_same_config(dup, st->cfg);
      if (st->cfg.fault.action != fault_action::none && st->cfg.fault.rank >= st->size)
        throw config_error("CROWN_FAULT", "rank " + std::to_string(st->cfg.fault.rank) +
                                              " is not in the job (" + std::to_string(st->size) +
                                              " ranks)");
    });
    detail::arm_fault(st->cfg.fault, st->rank);
    detail::set_log_level(st->cfg.log);
    if (st->rank == 0)
      for (const auto& w : warnings) log(log_level::warn, w);

    detail::local_discovery found;
    detail::agreed_step(dup, "topology", [&] {
      found = detail::discover_local(dup, st->rank, st->cfg, *st->hwloc);
    });
    st->host_comm = detail::comm_handle(found.host_comm);
    std::vector<rank_placement> placements;
    detail::agreed_step(dup, "placements", [&] {
      placements = detail::gather_placements(dup, found.self, found.host_comm);
    });
    st->topo.emplace(std::move(placements), found.host, st->rank);
    detail::agreed_step(dup, "CROWN_TRACE", [&] {
      detail::trace_open(st->rank, st->size, st->cfg.trace, found.self.host);
    });
    detail::agreed_step(dup, "CROWN_TRACE clocks", [&] { detail::trace_begin(dup); });
    if (st->topo->multi_host()) detail::set_log_host(found.self.host);
    detail::set_wait_spins(st->cfg.wait_spins >= 0      ? st->cfg.wait_spins
                           : st->topo->oversubscribed() ? 0
                                                        : detail::default_wait_spins);
    const double scale = st->cfg.timeout_scale;
    detail::set_wait_limits(st->cfg.wait_warn * scale, st->cfg.wait_timeout * scale, 5 * scale);

    detail::probe_mpi_rma(*st);
    if (!st->transports.mpi_rma && st->topo->multi_host() && st->rank == 0)
      log(log_level::warn, st->transports.mpi_rma_problem);
#if CROWN_HAVE_UCX
    st->transports.ucx = true;
    st->transports.ucx_version = ucp_get_version_string();
#endif
    st->transports.cuda = CROWN_HAVE_CUDA && found.host.gpus > 0;
    st->transports.nccl = CROWN_HAVE_NCCL;
    st->transports.nccl_version = detail::nccl_version();

    // The layers above: the heaps, the progress thread (lib/runtime/layer_hooks.hpp).
    for (const auto& stage : detail::layer_stages()) {
      if (stage.agreed)
        detail::agreed_step(dup, stage.name, [&] { stage.start(*st); });
      else
        stage.start(*st);
    }

    auto [dims, ranks] = detail::world_layout(*st->topo);
    st->world.emplace(st->make_mesh(std::move(dims), std::move(ranks)));
  } catch (...) {
    st->shutdown();
    if (owns) MPI_Finalize();
    throw;
  }
  state_ = std::move(st);
  const std::lock_guard lock(detail::g_current_mutex);
  detail::g_current_state = state_;
  detail::g_current = this;
  log(log_level::debug, "runtime started: ", state_->size, " ranks, ", to_string(state_->level),
      owns ? ", MPI initialised by Crown" : ", attached to the application's MPI");
}

runtime::~runtime() {
  detail::fault_point_reached(fault_point::shutdown); // kill or stop only (config.cpp)
  {
    const std::lock_guard lock(detail::g_current_mutex);
    detail::g_current_state.reset();
    detail::g_current = nullptr;
    detail::g_was_destroyed = true;
  }
  const bool owns = state_->owns_mpi;
  // The layers' last collective steps (the one-sided layer's final barrier).
  const auto stages = detail::layer_stages();
  for (auto s = stages.rbegin(); s != stages.rend(); ++s)
    if (s->finish) s->finish(*state_);
  state_->shutdown(); // our communicators go before MPI does
  detail::set_log_host({});
  state_.reset();
  if (owns) MPI_Finalize();
}

const mesh& runtime::world() const noexcept { return *state_->world; }
int runtime::rank() const noexcept { return state_->rank; }
int runtime::size() const noexcept { return state_->size; }
bool runtime::owns_mpi() const noexcept { return state_->owns_mpi; }
thread_level runtime::thread_support() const noexcept { return state_->level; }
const crown::config& runtime::config() const noexcept { return state_->cfg; }
const crown::topology& runtime::topology() const noexcept { return *state_->topo; }
const transport_support& runtime::transports() const noexcept { return state_->transports; }
int runtime::wait_spins() const noexcept { return detail::wait_spins(); }
bool runtime::active() noexcept { return detail::current_state() != nullptr; }

void runtime::require_thread_level(thread_level needed, std::string_view feature) const {
  if (static_cast<int>(state_->level) >= static_cast<int>(needed)) return;
  throw state_error(std::string(feature),
                    "needs " + std::string(to_string(needed)) + " but MPI provides " +
                        std::string(to_string(state_->level)) +
                        (state_->owns_mpi ? std::string()
                                          : "; initialise MPI with MPI_Init_thread(..., " +
                                                std::string(to_string(needed)) + ", ...)"));
}

runtime& this_runtime() {
  const std::lock_guard lock(detail::g_current_mutex);
  if (!detail::g_current)
    throw state_error("crown::this_runtime()",
                      detail::g_was_destroyed
                          ? "the crown::runtime was already destroyed (MPI use after finalize)"
                          : "no crown::runtime exists yet; construct one first");
  return *detail::g_current;
}

const mesh& world() { return this_runtime().world(); }

} // namespace crown
