// The one-sided layer's part in crown::runtime's lifetime (lib/runtime/layer_hooks.hpp):
// the host symmetric heap and its cross-host transport, the device heap, the host
// collectives' settings and the progress thread start in this order after the topology,
// and stop in reverse at shutdown; a last barrier that serves one-sided requests comes
// before any of them stops.
#include "../gpu/device_startup.hpp"
#include "../mesh/crown_comm.hpp"
#include "../runtime/cpu_list.hpp"
#include "../runtime/layer_hooks.hpp"
#include "../runtime/runtime_state.hpp"
#include "heap_state.hpp"
#include "host_collectives.hpp"
#include "progress_nap.hpp"
#include "progress_thread.hpp"
#include "symmetric_heap.hpp"
#include <algorithm>
#include <atomic>
#include <crown/detail/fault.hpp>
#include <crown/detail/heap.hpp>
#include <crown/detail/wait.hpp>
#include <crown/error.hpp>
#include <crown/log.hpp>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

namespace crown::detail {
namespace {

constexpr std::string_view layer = "onesided";

/// What the one-sided layer keeps per runtime.
struct onesided_state {
  std::unique_ptr<symmetric_heap> heap; ///< host symmetric heap
  std::jthread progress_thread;         ///< CROWN_PROGRESS_THREAD=1; stopped first
  std::vector<int> progress_cpus;       ///< CROWN_PROGRESS_CPUS (empty: the rank's binding)
};

onesided_state& state_of(runtime_state& st) { return layer_data<onesided_state>(st, layer); }

std::atomic<bool> g_osc_warned{false};

/// Says (rank 0, info) what init_mpi chose, and warns (rank 0, once per process) when
/// one-sided traffic goes through an MPI window under a component other than osc/ucx.
void report_osc(runtime_state& st) {
#ifdef OPEN_MPI
  if (st.rank != 0) return;
  const osc_choice& chosen = mpi_osc_choice();
  if (st.owns_mpi && chosen.set_by_crown)
    log(log_level::info, "MPI_Init_thread ran with OMPI_MCA_osc=", chosen.value,
        " (set by Crown for that call only; the environment is restored)");
  const auto& heap = state_of(st).heap;
  const backend* b = heap ? heap->transport() : nullptr;
  if (!b || std::strcmp(b->name(), "mpi") != 0) return;
  std::string osc = st.owns_mpi ? chosen.value : "";
  if (!st.owns_mpi)
    if (const char* v = std::getenv("OMPI_MCA_osc")) osc = v;
  if (osc.find("ucx") != std::string::npos || g_osc_warned.exchange(true)) return;
  log(log_level::warn, "one-sided traffic goes through an MPI window under Open MPI's default "
                       "osc component, whose compare-and-swap to the calling rank crashes in "
                       "Open MPI 4.1 (Crown's atomics, events and locks use it): launch with "
                       "--mca osc ucx,sm");
#else
  (void)st;
#endif
}

/// The CPUs CROWN_PROGRESS_CPUS names: for "host", every CPU that a rank of this real
/// host (pretend hosts share it) is bound to; empty for "rank".
std::vector<int> progress_cpus(const runtime_state& st) {
  const std::string& choice = st.cfg.progress_cpus;
  if (choice == "rank" || !st.topo) return {};
  if (choice != "host") return parse_cpu_list(choice).value_or(std::vector<int>{});
  const std::string mine = real_host_of(st.topo->self().host);
  std::vector<int> cpus;
  for (const rank_placement& p : st.topo->all())
    if (real_host_of(p.host) == mine)
      if (auto listed = parse_cpu_list(p.cpuset))
        cpus.insert(cpus.end(), listed->begin(), listed->end());
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

/// Who serves other ranks' one-sided requests on this rank, and why (every rank
/// decides alike: same thread level, same transport, same settings).
struct progress_plan {
  bool thread = false;      ///< a progress thread may run
  bool without_mpi = false; ///< ... one that makes no MPI call (below MULTIPLE)
  std::string why;
};

progress_plan plan_progress(const runtime_state& st, const symmetric_heap& heap) {
  const backend* b = heap.transport();
  if (!b) return {false, false, "loads and stores need no progress"};
  const std::string name = b->name();
  const std::string level(to_string(st.level));
  switch (st.level) {
  case thread_level::multiple:
    return {true, false, level + ": the thread drives the " + name + " transport, MPI included"};
  case thread_level::single:
    return {false, false, "MPI_THREAD_SINGLE allows no thread but the main one"};
  default:
    if (b->serves_without_mpi())
      return {true, true,
              level + ": the thread makes no MPI call; the " + name +
                  " transport serves requests without one"};
    return {false, false,
            level + " lets no second thread call MPI, and the " + name +
                " transport needs an MPI call to serve a request (CROWN_TRANSPORT=ucx does not)"};
  }
}

void launch(onesided_state& mine, const progress_plan& plan) {
  // Nothing the target could serve only inside MPI may go out once the thread serves.
  if (plan.without_mpi) mine.heap->transport()->serve_without_mpi();
  mine.progress_thread = launch_progress_thread(*mine.heap, mine.progress_cpus, plan.without_mpi);
}

/// Starts the progress thread where the plan allows one and CROWN_PROGRESS_THREAD wants
/// it, and says (rank 0, info) which transport and which progress this job got, and why.
void start_progress_thread(runtime_state& st) {
  auto& mine = state_of(st);
  const int wanted = st.cfg.progress_thread; // -1 auto
  const progress_plan plan = plan_progress(st, *mine.heap);
  auto& t = st.transports;
  t.progress = !mine.heap->has_transport() ? "none-needed" : "crown-calls";
  t.progress_why = plan.why;
  if (wanted == 1 && !plan.thread && mine.heap->has_transport())
    throw config_error("CROWN_PROGRESS_THREAD", "a progress thread cannot run here: " + plan.why +
                                                    " (MPI provides " +
                                                    std::string(to_string(st.level)) + ")");
  if (wanted == 0 && plan.thread) t.progress_why = "CROWN_PROGRESS_THREAD=0";
  if (plan.thread && wanted != 0) {
    mine.progress_cpus = progress_cpus(st);
    launch(mine, plan);
    t.progress_thread = true;
    t.progress = "thread";
  }
  if (st.rank != 0) return;
  log(log_level::info, "one-sided transport off-host: ", t.heap_transport, " (",
      t.heap_transport_why, "); progress: ", t.progress, " (", t.progress_why, ")",
      t.progress == "crown-calls" ? ": " : "",
      t.progress == "crown-calls" ? unserved_consequence : "");
}

void stop_progress_thread(runtime_state& st) noexcept {
  auto& thread = state_of(st).progress_thread;
  if (thread.joinable()) {
    thread.request_stop();
    wake_progress_thread();
    thread.join();
  }
}

// Every stop below may run after a failed start, whatever its stage reached.
const bool registered = [] {
  set_progress_thread_query([]() noexcept { return progress_thread_running(); });
  register_layer_stage({
      .order = 100,
      .name = "symmetric heap",
      .start = [](runtime_state& st) { state_of(st).heap = std::make_unique<symmetric_heap>(st); },
      // A last barrier that serves one-sided requests, so that no rank leaves while
      // another still waits for it to answer one (active messages).
      .finish =
          [](runtime_state& st) noexcept {
            const auto& heap = state_of(st).heap;
            if (st.size <= 1 || !heap || !heap->messages()) return;
            try {
              crown_barrier(*st.world);
            } catch (const std::exception& e) {
              log(log_level::error, "final barrier failed: ", e.what());
            }
          },
      // The window goes before the communicator it was made on.
      .stop = [](runtime_state& st) noexcept { state_of(st).heap.reset(); },
  });
  register_layer_stage({
      .order = 200,
      .name = "symmetric heap transport",
      .start =
          [](runtime_state& st) {
            state_of(st).heap->connect(st);
            fault_point_reached(fault_point::startup); // the heap exists: a kill must leak nothing
          },
  });
  register_layer_stage({
      .order = 250,
      .name = "heap installation",
      .agreed = false,
      .start = [](runtime_state& st) { install_heap(state_of(st).heap.get(), st.cfg); },
      .stop = [](runtime_state& st) noexcept { install_heap(nullptr, st.cfg); },
  });
  register_layer_stage({
      .order = 300,
      .name = "device heap",
      .start = [](runtime_state& st) { start_device_heap(st); },
      // Meets this host's ranks on a communicator freed after the stages stop.
      .stop = [](runtime_state&) noexcept { stop_device_heap(); },
  });
  register_layer_stage({
      .order = 400,
      .name = "progress thread",
      .agreed = false,
      .start =
          [](runtime_state& st) {
            configure_host_collectives(st.cfg);
            start_progress_thread(st);
            report_osc(st);
          },
      .stop = stop_progress_thread,
  });
  return true;
}();

} // namespace

bool set_progress_thread(bool on) {
  const auto st = current_state();
  if (!st) throw state_error("set_progress_thread", "no crown::runtime is active");
  auto& mine = state_of(*st);
  if (!on) stop_progress_thread(*st);
  if (on && !mine.progress_thread.joinable())
    if (const progress_plan plan = plan_progress(*st, *mine.heap); plan.thread) launch(mine, plan);
  auto& t = st->transports;
  t.progress_thread = mine.progress_thread.joinable();
  if (mine.heap->has_transport()) t.progress = t.progress_thread ? "thread" : "crown-calls";
  return t.progress_thread;
}

} // namespace crown::detail

/// Keeps this file in a program linked against a static libcrown, which would otherwise
/// drop it (nothing calls into it): lib/CMakeLists.txt passes --undefined for it.
extern "C" int crown_onesided_runtime_stages() { return crown::detail::registered ? 1 : 0; }
