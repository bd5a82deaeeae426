// include/crown/topology.hpp — where each rank runs: host, cores, NUMA node, GPU.
#pragma once
#include <crown/config.hpp>
#include <string>
#include <vector>

namespace crown {

/// Where one rank runs, gathered from every rank once at start-up.
struct rank_placement {
  int rank = 0;          ///< rank in the runtime's world
  std::string host;      ///< host name ("name/fakeK" under CROWN_FAKE_HOSTS)
  int host_index = 0;    ///< hosts numbered by their lowest rank
  int local_rank = 0;    ///< rank among the ranks of its host
  int local_size = 0;    ///< ranks on its host
  std::string cpuset;    ///< effective binding as a CPU list, e.g. "0-3,8"
  std::vector<int> numa; ///< NUMA nodes the cpuset touches
  int gpu = -1;          ///< CUDA device chosen for the rank (local_rank % gpus), -1 if none
  bind_policy binding = bind_policy::keep; ///< how the cpuset came about
};

/// What one host has (as this rank sees it through hwloc and CUDA).
struct host_resources {
  int cores = 0;
  int pus = 0; ///< hardware threads
  int numa_nodes = 0;
  int gpus = 0;
  std::vector<std::string> gpu_names;
  int ranks = 0; ///< ranks of this job on the machine (real, not pretend, host)
};

class topology {
public:
  topology(std::vector<rank_placement> all, host_resources host, int my_rank)
      : all_(std::move(all)), host_(std::move(host)), me_(my_rank) {}
  [[nodiscard]] const rank_placement& self() const {
    return all_.at(static_cast<std::size_t>(me_));
  }
  [[nodiscard]] const std::vector<rank_placement>& all() const noexcept { return all_; }
  [[nodiscard]] const host_resources& host() const noexcept { return host_; }
  [[nodiscard]] int num_hosts() const noexcept;
  [[nodiscard]] bool multi_host() const noexcept { return num_hosts() > 1; }
  /// True when this rank's machine runs more ranks than it has cores.
  [[nodiscard]] bool oversubscribed() const noexcept { return host_.ranks > host_.cores; }

private:
  std::vector<rank_placement> all_;
  host_resources host_;
  int me_;
};

/// Runs a small kernel on CUDA device `device` and checks what it computed: true when
/// the GPU really works (false without CUDA, without a driver, or for a bad index).
[[nodiscard]] bool gpu_works(int device);

} // namespace crown
