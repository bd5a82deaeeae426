// include/crown/config.hpp — CROWN_* environment variables, parsed and validated once.
#pragma once
#include <cstddef>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace crown {

enum class log_level { error, warn, info, debug, trace };
/// How ranks are bound to cores. `keep` leaves the launcher's binding alone.
enum class bind_policy { keep, core, numa, none };
/// The path to ranks that are not reachable by load/store (CROWN_TRANSPORT).
enum class transport_choice { automatic, mpi, am, ucx };
/// How ranks of one host map each other's device heap (CROWN_GPU_MAPPING).
enum class gpu_mapping_choice { automatic, vmm, ipc };
/// How co_* and the block collectives of device coarrays move data (CROWN_GPU_COLLECTIVES).
enum class gpu_collectives_choice { automatic, peer, nccl, host };
/// How dist_tensor's device box copies (halos, redistribution) move between device
/// blocks of one host (CROWN_GPU_HALOS).
enum class gpu_halos_choice { copies, kernel };
/// Where the training stack's GEMMs run (CROWN_GEMM).
enum class gemm_choice { automatic, cpu, cublas };

/// CROWN_FAULT: a fault injected on purpose, for tests of how jobs end.
enum class fault_action { none, kill, stop, raise };
/// Where an injected fault strikes (the first time the rank gets there, or the count-th).
enum class fault_point {
  startup,
  put,
  co_sum,
  sync_all,
  call,
  shutdown,
  step,
  checkpoint,
  gpu_heap,
  gpu_collective
};
struct fault_spec {
  fault_action action = fault_action::none; ///< kill: SIGKILL; stop: SIGSTOP; raise: throws
  int rank = -1;                            ///< the world rank it strikes
  fault_point at = fault_point::startup;
  long count = 1; ///< strikes at the count-th arrival at `at`
};

/// One documented variable: docs/configuration.md's table lists exactly these.
struct config_variable {
  std::string_view name;
  std::string_view default_value;
  std::string_view description;
  /// May differ between ranks (it tunes one rank only); every other variable must have
  /// the same value on every rank, which start-up checks.
  bool per_rank = false;
};

/// Every CROWN_* variable Crown reads.
[[nodiscard]] std::span<const config_variable> config_variables();

struct config {
  log_level log = log_level::warn;
  bind_policy bind = bind_policy::keep;
  int fake_hosts = 1;  ///< CROWN_FAKE_HOSTS: split each real host into this many pretend hosts
  int wait_spins = -1; ///< CROWN_WAIT_SPINS: busy polls before a wait yields; -1 = automatic
  std::size_t heap_size = std::size_t{128} << 20; ///< CROWN_HEAP_SIZE: symmetric heap per rank
  bool shm = true; ///< CROWN_SHM: load/store between ranks of one host (0: always the transport)
  /// CROWN_CHECK: -1 default (allocation checks only), 0 none, 1 also collective arguments
  int check = -1;
  transport_choice transport = transport_choice::automatic; ///< CROWN_TRANSPORT
  /// CROWN_PROGRESS_THREAD: a thread that drives one-sided progress while the
  /// application computes outside Crown: -1 auto (wherever MPI_THREAD_MULTIPLE allows
  /// it and a rank is reached through a transport), 0 never, 1 always (an error
  /// without MPI_THREAD_MULTIPLE)
  int progress_thread = -1;
  /// CROWN_PROGRESS_CPUS: where the progress thread may run: "host" (any CPU a rank of
  /// this host is bound to), "rank" (this rank's binding) or a CPU list ("0-3,8")
  std::string progress_cpus = "host";
  int fanout = 16; ///< CROWN_FANOUT: children per node of the controller's command tree
  /// CROWN_WATCHDOG: seconds without a heartbeat after which the controller declares a
  /// serving rank hung and aborts the job (0: never; else at least 1 s with the scale)
  double watchdog = 30;
  double timeout_scale = 1; ///< CROWN_TIMEOUT_SCALE: multiplies every Crown timeout
  /// CROWN_MAILBOX_SIZE: bytes of each rank's mailbox for controller messages from its
  /// host (0: all over MPI)
  std::size_t mailbox_size = std::size_t{256} << 10;
  /// CROWN_ACTOR_STDOUT: actors' stdout travels to the controller, tagged (0: printed locally)
  bool actor_stdout = false;
  /// CROWN_WAIT_WARN: seconds after which any Crown wait logs the rank and what it waits
  /// for (0: never)
  double wait_warn = 60;
  /// CROWN_WAIT_TIMEOUT: seconds after which any Crown wait ends the job, naming the
  /// rank and what it waits for (0: never)
  double wait_timeout = 0;
  /// CROWN_CALL_TIMEOUT: seconds a controller's get() waits before it throws
  /// timeout_error, as get(timeout) does (0: no limit)
  double call_timeout = 0;
  /// CROWN_STOP_GRACE: seconds for the ranks to agree to stop on SIGTERM/SIGUSR1
  /// (crown::stop_signals reads the variable itself, before the runtime exists).
  double stop_grace = 10;
  fault_spec fault; ///< CROWN_FAULT: none, or kill|stop|throw:rank=R:at=POINT[:count=N]
  /// CROWN_SINGLE_COPY: large host-local co_* may read other processes' memory with
  /// process_vm_readv (auto); false: staged copies only, no ptrace rights asked for
  bool single_copy = true;
  /// CROWN_GPU_HEAP_SIZE: device symmetric heap per rank (0: none)
  std::size_t gpu_heap_size = std::size_t{1} << 30;
  gpu_mapping_choice gpu_mapping = gpu_mapping_choice::automatic; ///< CROWN_GPU_MAPPING
  /// CROWN_GPU_COLLECTIVES
  gpu_collectives_choice gpu_collectives = gpu_collectives_choice::automatic;
  gpu_halos_choice gpu_halos = gpu_halos_choice::copies; ///< CROWN_GPU_HALOS
  gemm_choice gemm = gemm_choice::automatic;             ///< CROWN_GEMM
  /// CROWN_TRACE: the directory each rank writes its trace file to (empty: no tracing)
  std::string trace;

  /// Parses the given variables (name -> value). Invalid values throw config_error
  /// naming the variable, the value and what is allowed; unknown CROWN_* names are
  /// returned in `warnings` with the closest known name.
  static config parse(const std::map<std::string, std::string>& variables,
                      std::vector<std::string>* warnings = nullptr);
  /// parse() over the process environment.
  static config from_environment(std::vector<std::string>* warnings = nullptr);
};

[[nodiscard]] std::string_view to_string(log_level);
[[nodiscard]] std::string_view to_string(bind_policy);
[[nodiscard]] std::string_view to_string(transport_choice);
[[nodiscard]] std::string_view to_string(fault_point);
/// "none", or "kill:rank=1:at=put:count=1" (CROWN_FAULT's canonical spelling).
[[nodiscard]] std::string to_string(const fault_spec&);
[[nodiscard]] std::string_view to_string(gpu_mapping_choice);
[[nodiscard]] std::string_view to_string(gpu_collectives_choice);
[[nodiscard]] std::string_view to_string(gpu_halos_choice);
[[nodiscard]] std::string_view to_string(gemm_choice);

} // namespace crown
