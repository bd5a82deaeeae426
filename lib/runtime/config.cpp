// CROWN_* environment variables: the documented table, parsing, typo warnings.
#include "cpu_list.hpp"
#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <cmath>
#include <crown/config.hpp>
#include <crown/error.hpp>
#include <cstdint>
#include <limits>
#include <sstream>
#include <unistd.h>

extern char** environ;

namespace crown {
namespace {

constexpr std::uint64_t max_heap_bytes = std::uint64_t{1} << 44; ///< 16 TiB per rank
constexpr double min_watchdog_seconds = 1;

constexpr std::array<config_variable, 27> variables{{
    {"CROWN_LOG", "warn", "Log level: error, warn, info, debug or trace.", true},
    {"CROWN_BIND", "keep",
     "Binding: keep (the launcher's), core (one core per rank), numa (one NUMA node per rank), "
     "none (every core of the host)."},
    {"CROWN_FAKE_HOSTS", "1",
     "Split the ranks of each real host into this many pretend hosts (block-wise by local rank), "
     "so multi-host code paths run on one machine."},
    {"CROWN_WAIT_SPINS", "auto",
     "Busy polls before a waiting rank yields its core; auto = 1000, or 0 when a host's ranks "
     "outnumber its hardware threads.",
     true},
    {"CROWN_HEAP_SIZE", "128M",
     "Symmetric heap per rank, in bytes with an optional K, M, G or T suffix (1M to 16T). "
     "Reserved at start-up in /dev/shm (as a file without a name), within the memory and "
     "cgroup limits."},
    {"CROWN_SHM", "1",
     "1: ranks of one host reach each other's heap with loads, stores and memcpy. 0: every "
     "remote access goes through the cross-host transport (a correctness mode)."},
    {"CROWN_CHECK", "default",
     "Argument agreement checks: default checks that collective allocations match on every "
     "rank; 1 also checks counts and types of co_* collectives; 0 checks nothing."},
    {"CROWN_TRANSPORT", "auto",
     "Path to ranks not reachable by load/store: ucx (UCX RMA and atomics driven by Crown's "
     "progress engine), mpi (one MPI window, MPI RMA), am (active messages over two-sided MPI), "
     "auto (ucx when built with UCX and it starts, else mpi when MPI can create the window, "
     "else am)."},
    {"CROWN_FANOUT", "16",
     "Children per node of the tree along which the controller's commands fan out and "
     "replies come back (1 to 65535)."},
    {"CROWN_WATCHDOG", "30",
     "Seconds a serving rank may go without a heartbeat (sent every tenth of this by a "
     "thread, also while an endpoint runs) before the controller declares it hung, names "
     "it and aborts the job; 0 turns the watchdog off, otherwise 1 to 1e7 (and at least 1 "
     "times CROWN_TIMEOUT_SCALE). Needs MPI_THREAD_MULTIPLE."},
    {"CROWN_TIMEOUT_SCALE", "1",
     "Multiplies every Crown timeout (the watchdog's), for slow or oversubscribed machines; "
     "0.1 to 1000."},
    {"CROWN_WAIT_WARN", "60",
     "Seconds after which any Crown wait (barriers, sync_images, events, locks, collectives, "
     "transfers, active-message replies) logs the rank, the operation and the rank it waits "
     "on where known; 0 never, otherwise 0.1 to 1e7, times CROWN_TIMEOUT_SCALE."},
    {"CROWN_WAIT_TIMEOUT", "0",
     "Seconds after which any Crown wait ends the job (MPI_Abort), naming the rank, the "
     "operation and the rank it waits on where known; 0 never, otherwise 1 to 1e7, times "
     "CROWN_TIMEOUT_SCALE (at least 1 s)."},
    {"CROWN_CALL_TIMEOUT", "0",
     "Seconds a controller's future::get() and controller::flush() wait for the actors "
     "before they throw timeout_error, as get(timeout) does; after a timed-out call, leaving "
     "runtime::control waits at most the watchdog's time for the actors, then names the "
     "outstanding calls and ends the job. 0 no limit, otherwise 1 to 1e7, times "
     "CROWN_TIMEOUT_SCALE."},
    {"CROWN_STOP_GRACE", "10",
     "Seconds within which the ranks must agree to stop after SIGTERM or SIGUSR1 "
     "(crown::stop_signals: checkpoint and leave) before the process ends by that signal "
     "as if not handled (a peer died); 0 never, otherwise 1 to 86400."},
    {"CROWN_FAULT", "none",
     "Fault injection for tests: kill, stop or throw, on one rank, the first (or count-th) "
     "time it reaches a point: kill|stop|throw:rank=R:at=startup|put|co_sum|sync_all|call|"
     "shutdown|step|checkpoint|gpu_heap|gpu_collective[:count=N]. none: off."},
    {"CROWN_MAILBOX_SIZE", "256K",
     "Each rank's mailbox for controller messages from ranks of its host (calls, replies, "
     "port messages), taken from its symmetric heap while runtime::control runs: a message "
     "between two ranks of one host is then one copy in and one copy out, with no MPI call. "
     "Bytes with an optional K, M or G suffix, 64K to 16T (a power of two is used); 0: every "
     "controller message travels over MPI."},
    {"CROWN_ACTOR_STDOUT", "0",
     "1: what actors write to stdout (printf, std::cout) in constructors and endpoints "
     "reaches the controller's stdout, tagged with actor mesh and point and collapsed like "
     "their log lines; 0: each serving rank prints it itself (mpirun forwards it untagged)."},
    {"CROWN_PROGRESS_THREAD", "auto",
     "auto: a background thread drives one-sided progress wherever MPI_THREAD_MULTIPLE "
     "allows it and some rank is reached through a transport, so that a rank computing "
     "outside Crown or blocked in its own MPI calls still serves other ranks' puts, gets "
     "and atomics; it naps when idle (under 2% of a core). 1: required (an error without "
     "MPI_THREAD_MULTIPLE). 0: never; ranks then serve only inside Crown calls.",
     true},
    {"CROWN_PROGRESS_CPUS", "host",
     "Where the progress thread may run. host: on any CPU that a rank of this host is bound "
     "to, so that it can use the core of a rank that waits instead of taking the core its "
     "own rank computes on (launchers bind each rank to one core); rank: this rank's "
     "binding only; a CPU list such as 0-3,8: those CPUs (a core kept free for progress).",
     true},
    {"CROWN_SINGLE_COPY", "auto",
     "auto: co_* of more than 64 KiB of ordinary memory on one host read the other "
     "processes' buffers with one kernel copy (process_vm_readv), where ptrace rules allow "
     "it (under Yama ptrace_scope 1 each rank then allows any process of its user to read "
     "it: PR_SET_PTRACER_ANY) and it measures faster, else staged copies; 0: staged copies "
     "only, never ptrace rights (like Open MPI's btl_vader_single_copy_mechanism=none, "
     "UCX_TLS=^cma)."},
    {"CROWN_GPU_HEAP_SIZE", "1G",
     "Device symmetric heap per rank (memory_kind::cuda coarrays), in bytes with an optional "
     "K, M, G or T suffix (1M to 16T), reserved at start-up on the rank's GPU when one is "
     "visible; 0: no device heap."},
    {"CROWN_GPU_MAPPING", "auto",
     "How ranks of one host map each other's device heap: vmm (CUDA virtual memory with "
     "file-descriptor handles passed over a Unix socket), ipc (legacy CUDA IPC handles "
     "exchanged over MPI), auto (vmm where every rank of the host supports it, else ipc)."},
    {"CROWN_GPU_COLLECTIVES", "auto",
     "How co_sum/co_min/co_max/co_broadcast/all_gather/reduce_scatter of device coarrays move "
     "data: peer (Crown's kernels over the same-host peer mappings), nccl (NCCL, one GPU per "
     "image), host (staged through host memory and the host collectives), auto (nccl where "
     "every image has a GPU of its own and Crown was built with NCCL, else peer where every "
     "image is mapped here, else host)."},
    {"CROWN_GPU_HALOS", "copies",
     "How dist_tensor's device box copies (halos, redistribution, read and gather) move "
     "between device blocks of one host: copies (cudaMemcpyAsync/cudaMemcpy2DAsync per plane "
     "on Crown's stream, one wait for all), kernel (one kernel over every box through the "
     "peer mappings, one wait). Boxes with a host side are copied either way.",
     true},
    {"CROWN_GEMM", "auto",
     "Where crown::parallel's GEMMs run: cpu (OpenBLAS), cublas (cuBLAS on the rank's GPU, "
     "operands copied there and back; an error where Crown was built without cuBLAS or no "
     "GPU is visible), auto (cuBLAS for products of at least 2^27 multiply-adds where a GPU "
     "is visible, else OpenBLAS; a GEMM failing on the GPU is said once and sends the rest "
     "to OpenBLAS)."},
    {"CROWN_TRACE", "",
     "A directory (created if missing): each rank writes a Chrome/Perfetto trace of its puts, "
     "gets, collectives, waits, actor calls and progress-thread naps there as "
     "crown-trace.<rank>.json when its runtime ends; crown-trace-merge joins them on rank 0's "
     "clock. Empty: no tracing (docs/tracing.md)."},
}};

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

template <typename Enum, std::size_t N>
Enum parse_choice(std::string_view name, const std::string& value,
                  const std::array<Enum, N>& choices) {
  std::string allowed;
  for (Enum c : choices) {
    if (value == to_string(c)) return c;
    allowed += (allowed.empty() ? "" : ", ") + std::string(to_string(c));
  }
  throw config_error(std::string(name), "invalid value '" + value + "' (allowed: " + allowed + ")");
}

int parse_int(std::string_view name, const std::string& value, int minimum) {
  int v = 0;
  const char* end = value.data() + value.size();
  auto [ptr, ec] = std::from_chars(value.data(), end, v);
  if (ec != std::errc() || ptr != end || v < minimum)
    throw config_error(std::string(name), "invalid value '" + value + "' (expected an integer >= " +
                                              std::to_string(minimum) + ")");
  return v;
}

/// A finite number in [minimum, maximum], or 0 where `zero_allowed` (nan and inf are
/// refused: every comparison with nan is false, which once switched the watchdog off).
double parse_number(std::string_view name, const std::string& value, double minimum, double maximum,
                    bool zero_allowed) {
  double v = -1;
  const char* end = value.data() + value.size();
  auto [ptr, ec] = std::from_chars(value.data(), end, v);
  if (ec != std::errc() || ptr != end || !std::isfinite(v) ||
      !((v >= minimum && v <= maximum) || (zero_allowed && v == 0))) {
    std::ostringstream allowed;
    allowed << (zero_allowed ? "0 or " : "") << "a number from " << minimum << " to " << maximum;
    throw config_error(std::string(name),
                       "invalid value '" + value + "' (expected " + allowed.str() + ")");
  }
  return v;
}

/// kill|stop|throw:rank=R:at=POINT[:count=N], or none. Every field is checked; the
/// rank against the job's size later, at start-up.
fault_spec parse_fault(std::string_view name, const std::string& value) {
  fault_spec f;
  if (value == "none") return f;
  const auto bad = [&](const std::string& why) {
    return config_error(std::string(name),
                        "invalid value '" + value + "' (" + why +
                            "; expected none or kill|stop|throw:rank=R:at=startup|put|co_sum|"
                            "sync_all|call|shutdown[:count=N])");
  };
  std::vector<std::string> parts;
  for (std::size_t at = 0;;) {
    const std::size_t colon = value.find(':', at);
    parts.push_back(value.substr(at, colon - at));
    if (colon == std::string::npos) break;
    at = colon + 1;
  }
  const std::string& action = parts[0];
  f.action = action == "kill"    ? fault_action::kill
             : action == "stop"  ? fault_action::stop
             : action == "throw" ? fault_action::raise
                                 : throw bad("unknown action '" + action + "'");
  bool have_rank = false, have_point = false, have_count = false;
  for (std::size_t i = 1; i < parts.size(); ++i) {
    const std::string& p = parts[i];
    const auto eq = p.find('=');
    const std::string key = p.substr(0, eq), v = eq == std::string::npos ? "" : p.substr(eq + 1);
    const auto integer = [&](long minimum) {
      long n = 0;
      const auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
      if (v.empty() || ec != std::errc() || ptr != v.data() + v.size() || n < minimum ||
          n > std::numeric_limits<int>::max())
        throw bad(key + " must be an integer from " + std::to_string(minimum));
      return n;
    };
    if (key == "rank" && !have_rank) {
      f.rank = static_cast<int>(integer(0));
      have_rank = true;
    } else if (key == "count" && !have_count) {
      f.count = integer(1);
      have_count = true;
    } else if (key == "at" && !have_point) {
      constexpr std::array points{fault_point::startup,  fault_point::put,
                                  fault_point::co_sum,   fault_point::sync_all,
                                  fault_point::call,     fault_point::shutdown,
                                  fault_point::step,     fault_point::checkpoint,
                                  fault_point::gpu_heap, fault_point::gpu_collective};
      const auto it = std::find_if(points.begin(), points.end(),
                                   [&](fault_point q) { return to_string(q) == v; });
      if (it == points.end()) throw bad("unknown point '" + v + "'");
      f.at = *it;
      have_point = true;
    } else {
      throw bad("unexpected or repeated field '" + p + "'");
    }
  }
  if (!have_rank || !have_point) throw bad("rank= and at= are required");
  if (f.action == fault_action::raise && f.at == fault_point::shutdown)
    throw bad("nothing can throw at shutdown (a destructor); kill or stop there");
  return f;
}

bool parse_flag(std::string_view name, const std::string& value) {
  if (value != "0" && value != "1")
    throw config_error(std::string(name), "invalid value '" + value + "' (allowed: 0, 1)");
  return value == "1";
}

/// Bytes with an optional K/M/G/T suffix, within [1M, max_heap_bytes]. Compared
/// before shifting, so that no value wraps around (4398046511105M once became 4 MiB
/// per host after the multiplication by the number of ranks).
std::size_t parse_bytes(std::string_view name, const std::string& value,
                        std::uint64_t minimum = std::uint64_t{1} << 20) {
  std::size_t digits = 0;
  while (digits < value.size() && value[digits] >= '0' && value[digits] <= '9') ++digits;
  const std::string suffix = value.substr(digits);
  const int shift = suffix.empty()                   ? 0
                    : suffix == "K" || suffix == "k" ? 10
                    : suffix == "M" || suffix == "m" ? 20
                    : suffix == "G" || suffix == "g" ? 30
                    : suffix == "T" || suffix == "t" ? 40
                                                     : -1;
  std::uint64_t v = 0;
  const auto [ptr, ec] = std::from_chars(value.data(), value.data() + digits, v);
  if (digits == 0 || ec != std::errc() || shift < 0 || v > (max_heap_bytes >> shift) ||
      (v << shift) < minimum)
    throw config_error(std::string(name),
                       "invalid value '" + value + "' (expected bytes from " +
                           (minimum >> 20 ? std::to_string(minimum >> 20) + "M"
                                          : std::to_string(minimum >> 10) + "K") +
                           " to 16T, e.g. 512M or 2G)");
  return static_cast<std::size_t>(v << shift);
}

} // namespace

std::span<const config_variable> config_variables() { return variables; }

std::string_view to_string(log_level l) {
  constexpr std::array<std::string_view, 5> names{"error", "warn", "info", "debug", "trace"};
  return names.at(static_cast<std::size_t>(l));
}

std::string_view to_string(transport_choice t) {
  constexpr std::array<std::string_view, 4> names{"auto", "mpi", "am", "ucx"};
  return names.at(static_cast<std::size_t>(t));
}

std::string_view to_string(fault_point p) {
  constexpr std::array<std::string_view, 10> names{
      "startup",  "put",  "co_sum",     "sync_all", "call",
      "shutdown", "step", "checkpoint", "gpu_heap", "gpu_collective"};
  return names.at(static_cast<std::size_t>(p));
}

std::string to_string(const fault_spec& f) {
  if (f.action == fault_action::none) return "none";
  const char* action = f.action == fault_action::kill   ? "kill"
                       : f.action == fault_action::stop ? "stop"
                                                        : "throw";
  return std::string(action) + ":rank=" + std::to_string(f.rank) +
         ":at=" + std::string(to_string(f.at)) + ":count=" + std::to_string(f.count);
}

std::string_view to_string(gpu_mapping_choice m) {
  constexpr std::array<std::string_view, 3> names{"auto", "vmm", "ipc"};
  return names.at(static_cast<std::size_t>(m));
}

std::string_view to_string(gpu_collectives_choice c) {
  constexpr std::array<std::string_view, 4> names{"auto", "peer", "nccl", "host"};
  return names.at(static_cast<std::size_t>(c));
}

std::string_view to_string(gpu_halos_choice h) {
  constexpr std::array<std::string_view, 2> names{"copies", "kernel"};
  return names.at(static_cast<std::size_t>(h));
}

std::string_view to_string(gemm_choice g) {
  constexpr std::array<std::string_view, 3> names{"auto", "cpu", "cublas"};
  return names.at(static_cast<std::size_t>(g));
}

std::string_view to_string(bind_policy b) {
  constexpr std::array<std::string_view, 4> names{"keep", "core", "numa", "none"};
  return names.at(static_cast<std::size_t>(b));
}

config config::parse(const std::map<std::string, std::string>& vars,
                     std::vector<std::string>* warnings) {
  config c;
  for (const auto& [name, value] : vars) {
    if (!name.starts_with("CROWN_")) continue;
    if (name == "CROWN_LOG") {
      c.log = parse_choice(name, value,
                           std::array{log_level::error, log_level::warn, log_level::info,
                                      log_level::debug, log_level::trace});
    } else if (name == "CROWN_BIND") {
      c.bind = parse_choice(
          name, value,
          std::array{bind_policy::keep, bind_policy::core, bind_policy::numa, bind_policy::none});
    } else if (name == "CROWN_FAKE_HOSTS") {
      c.fake_hosts = parse_int(name, value, 1);
    } else if (name == "CROWN_WAIT_SPINS") {
      c.wait_spins = value == "auto" ? -1 : parse_int(name, value, 0);
    } else if (name == "CROWN_TRANSPORT") {
      c.transport = parse_choice(name, value,
                                 std::array{transport_choice::automatic, transport_choice::mpi,
                                            transport_choice::am, transport_choice::ucx});
    } else if (name == "CROWN_HEAP_SIZE") {
      c.heap_size = parse_bytes(name, value);
    } else if (name == "CROWN_GPU_HEAP_SIZE") {
      c.gpu_heap_size = value == "0" ? 0 : parse_bytes(name, value);
    } else if (name == "CROWN_MAILBOX_SIZE") {
      c.mailbox_size =
          value == "0" ? 0 : std::bit_floor(parse_bytes(name, value, std::uint64_t{64} << 10));
    } else if (name == "CROWN_GPU_MAPPING") {
      c.gpu_mapping = parse_choice(name, value,
                                   std::array{gpu_mapping_choice::automatic,
                                              gpu_mapping_choice::vmm, gpu_mapping_choice::ipc});
    } else if (name == "CROWN_GPU_COLLECTIVES") {
      c.gpu_collectives =
          parse_choice(name, value,
                       std::array{gpu_collectives_choice::automatic, gpu_collectives_choice::peer,
                                  gpu_collectives_choice::nccl, gpu_collectives_choice::host});
    } else if (name == "CROWN_GPU_HALOS") {
      c.gpu_halos =
          parse_choice(name, value, std::array{gpu_halos_choice::copies, gpu_halos_choice::kernel});
    } else if (name == "CROWN_GEMM") {
      c.gemm = parse_choice(
          name, value, std::array{gemm_choice::automatic, gemm_choice::cpu, gemm_choice::cublas});
    } else if (name == "CROWN_SHM") {
      c.shm = parse_flag(name, value);
    } else if (name == "CROWN_FANOUT") {
      c.fanout = parse_int(name, value, 1);
      if (c.fanout > 65535)
        throw config_error(name, "invalid value '" + value + "' (expected 1 to 65535)");
    } else if (name == "CROWN_WATCHDOG") {
      c.watchdog = parse_number(name, value, min_watchdog_seconds, 1e7, true);
    } else if (name == "CROWN_TIMEOUT_SCALE") {
      c.timeout_scale = parse_number(name, value, 0.1, 1000, false);
    } else if (name == "CROWN_WAIT_WARN") {
      c.wait_warn = parse_number(name, value, 0.1, 1e7, true);
    } else if (name == "CROWN_WAIT_TIMEOUT") {
      c.wait_timeout = parse_number(name, value, min_watchdog_seconds, 1e7, true);
    } else if (name == "CROWN_CALL_TIMEOUT") {
      c.call_timeout = parse_number(name, value, min_watchdog_seconds, 1e7, true);
    } else if (name == "CROWN_FAULT") {
      c.fault = parse_fault(name, value);
    } else if (name == "CROWN_STOP_GRACE") {
      c.stop_grace = parse_number(name, value, 1, 86400, true);
    } else if (name == "CROWN_SINGLE_COPY") {
      if (value != "auto" && value != "0")
        throw config_error(name, "invalid value '" + value + "' (allowed: auto, 0)");
      c.single_copy = value == "auto";
    } else if (name == "CROWN_TRACE") {
      c.trace = value; // any path; whether it can be written is checked at start-up
    } else if (name == "CROWN_ACTOR_STDOUT") {
      c.actor_stdout = parse_flag(name, value);
    } else if (name == "CROWN_PROGRESS_THREAD") {
      c.progress_thread = value == "auto" ? -1 : parse_flag(name, value);
    } else if (name == "CROWN_PROGRESS_CPUS") {
      // A list names CPUs of this machine (a CPU it lacks would silently leave the
      // thread where its rank is bound).
      const long cpus = std::max(1L, sysconf(_SC_NPROCESSORS_CONF));
      const auto listed = detail::parse_cpu_list(value);
      if (value != "host" && value != "rank" &&
          (!listed ||
           std::any_of(listed->begin(), listed->end(), [&](int c) { return c >= cpus; })))
        throw config_error(name, "invalid value '" + value +
                                     "' (allowed: host, rank, or a list of CPUs 0-" +
                                     std::to_string(cpus - 1) + " such as 0-3,8)");
      c.progress_cpus = value;
    } else if (name == "CROWN_CHECK") {
      c.check = value == "default" ? -1 : parse_int(name, value, 0);
      if (c.check > 1) throw config_error(name, "invalid value '" + value + "' (allowed: 0, 1)");
    } else if (warnings) {
      const auto closest =
          std::min_element(variables.begin(), variables.end(), [&](const auto& a, const auto& b) {
            return edit_distance(name, a.name) < edit_distance(name, b.name);
          });
      std::string w = "unknown environment variable " + name + " is ignored";
      if (edit_distance(name, closest->name) <= 3)
        w += " (did you mean " + std::string(closest->name) + "?)";
      warnings->push_back(std::move(w));
    }
  }
  // A watchdog shorter than a second aborts healthy jobs on busy machines.
  if (c.watchdog > 0 && c.watchdog * c.timeout_scale < min_watchdog_seconds) {
    std::ostringstream m;
    m << "CROWN_WATCHDOG=" << c.watchdog << " x CROWN_TIMEOUT_SCALE=" << c.timeout_scale << " is "
      << c.watchdog * c.timeout_scale << " s; the watchdog needs at least " << min_watchdog_seconds
      << " s (0 turns it off)";
    throw config_error("CROWN_WATCHDOG", m.str());
  }
  // A timeout that ends the job must not be shorter than a busy machine's hiccup.
  if (c.wait_timeout > 0 && c.wait_timeout * c.timeout_scale < min_watchdog_seconds) {
    std::ostringstream m;
    m << "CROWN_WAIT_TIMEOUT=" << c.wait_timeout << " x CROWN_TIMEOUT_SCALE=" << c.timeout_scale
      << " is " << c.wait_timeout * c.timeout_scale << " s; it needs at least "
      << min_watchdog_seconds << " s (0 turns it off)";
    throw config_error("CROWN_WAIT_TIMEOUT", m.str());
  }
  return c;
}

config config::from_environment(std::vector<std::string>* warnings) {
  std::map<std::string, std::string> vars;
  for (char** e = environ; e && *e; ++e) {
    const std::string_view entry(*e);
    const auto eq = entry.find('=');
    if (entry.starts_with("CROWN_") && eq != std::string_view::npos)
      vars.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return parse(vars, warnings);
}

} // namespace crown
