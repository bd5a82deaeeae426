// Host discovery (MPI_Comm_split_type + CROWN_FAKE_HOSTS), hwloc binding, placement gathering.
#include "runtime_state.hpp"
#include <algorithm>
#include <cerrno>
#include <crown/error.hpp>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <unistd.h>

namespace crown {

int topology::num_hosts() const noexcept {
  int hosts = 0;
  for (const auto& p : all_) hosts = std::max(hosts, p.host_index + 1);
  return hosts;
}

bool gpu_works(int device) { return device >= 0 && detail::gpu_self_test(device); }

namespace detail {
namespace {

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

std::string cpuset_list(hwloc_const_bitmap_t set) {
  char* text = nullptr;
  if (hwloc_bitmap_list_asprintf(&text, set) < 0 || !text) return "?";
  std::string s(text);
  std::free(text);
  return s;
}

/// Block placement of `local_rank` of `local_size` onto `n` objects: spread when
/// ranks are fewer than objects, round-robin when they are more.
int block_index(int local_rank, int local_size, int n) {
  return local_size <= n ? local_rank * n / local_size : local_rank % n;
}

void apply_binding(const hwloc_handle& hw, bind_policy policy, int local_rank, int local_size) {
  if (policy == bind_policy::keep) return;
  hwloc_const_cpuset_t target = hwloc_topology_get_allowed_cpuset(hw.topo);
  if (policy != bind_policy::none) {
    const hwloc_obj_type_t type = policy == bind_policy::core ? HWLOC_OBJ_CORE : HWLOC_OBJ_NUMANODE;
    const int n = hwloc_get_nbobjs_by_type(hw.topo, type);
    if (n <= 0)
      throw topology_error("CROWN_BIND=" + std::string(to_string(policy)),
                           "hwloc found no objects of that kind on this host");
    target = hwloc_get_obj_by_type(hw.topo, type,
                                   static_cast<unsigned>(block_index(local_rank, local_size, n)))
                 ->cpuset;
  }
  if (hwloc_set_cpubind(hw.topo, target, HWLOC_CPUBIND_PROCESS) != 0)
    throw topology_error("CROWN_BIND=" + std::string(to_string(policy)),
                         "hwloc_set_cpubind to " + cpuset_list(target) +
                             " failed: " + std::strerror(errno));
}

int comm_rank(MPI_Comm c) {
  int r = 0;
  check_mpi(MPI_Comm_rank(c, &r), "MPI_Comm_rank");
  return r;
}
int comm_size(MPI_Comm c) {
  int s = 0;
  check_mpi(MPI_Comm_size(c, &s), "MPI_Comm_size");
  return s;
}

constexpr char field_separator = '\x1f';

std::string encode(const rank_placement& p, int leader) {
  std::ostringstream os;
  os << p.rank << field_separator << p.host << field_separator << p.local_rank << field_separator
     << p.local_size << field_separator << p.cpuset << field_separator;
  for (std::size_t i = 0; i < p.numa.size(); ++i) os << (i ? "," : "") << p.numa[i];
  os << field_separator << p.gpu << field_separator << static_cast<int>(p.binding)
     << field_separator << leader;
  return os.str();
}

rank_placement decode(const std::string& text, int& leader) {
  std::vector<std::string> f;
  std::string item;
  std::istringstream is(text);
  while (std::getline(is, item, field_separator)) f.push_back(item);
  if (f.size() != 9) throw state_error("topology", "malformed placement record '" + text + "'");
  rank_placement p;
  p.rank = std::stoi(f[0]);
  p.host = f[1];
  p.local_rank = std::stoi(f[2]);
  p.local_size = std::stoi(f[3]);
  p.cpuset = f[4];
  std::istringstream numa(f[5]);
  while (std::getline(numa, item, ',')) p.numa.push_back(std::stoi(item));
  p.gpu = std::stoi(f[6]);
  p.binding = static_cast<bind_policy>(std::stoi(f[7]));
  leader = std::stoi(f[8]);
  return p;
}

} // namespace

hwloc_handle::hwloc_handle() {
  if (hwloc_topology_init(&topo) != 0 || hwloc_topology_load(topo) != 0) {
    if (topo) hwloc_topology_destroy(topo);
    throw topology_error("hwloc",
                         std::string("cannot load the host topology: ") + std::strerror(errno));
  }
}

hwloc_handle::~hwloc_handle() { hwloc_topology_destroy(topo); }

local_discovery discover_local(MPI_Comm world, int world_rank, const config& cfg,
                               const hwloc_handle& hw) {
  local_discovery d;
  MPI_Comm real_host = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, world_rank, MPI_INFO_NULL, &real_host),
            "MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)");
  comm_handle real_host_owner(real_host);
  const int real_local_rank = comm_rank(real_host);
  const int real_local_size = comm_size(real_host);
  d.self.rank = world_rank;
  d.self.host = host_name();

  comm_handle host_owner; // freed if anything below throws
  if (cfg.fake_hosts > 1) {
    if (real_local_size < cfg.fake_hosts)
      throw config_error("CROWN_FAKE_HOSTS=" + std::to_string(cfg.fake_hosts),
                         "host " + d.self.host + " runs only " + std::to_string(real_local_size) +
                             " ranks; every pretend host needs at least one");
    const int color = real_local_rank * cfg.fake_hosts / real_local_size;
    check_mpi(MPI_Comm_split(real_host, color, real_local_rank, &d.host_comm),
              "MPI_Comm_split(CROWN_FAKE_HOSTS)");
    host_owner = comm_handle(d.host_comm);
    d.self.host += std::string(pretend_host_mark) + std::to_string(color);
  } else {
    check_mpi(MPI_Comm_dup(real_host, &d.host_comm), "MPI_Comm_dup(host)");
    host_owner = comm_handle(d.host_comm);
  }
  check_mpi(MPI_Comm_set_errhandler(d.host_comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  d.self.local_rank = comm_rank(d.host_comm);
  d.self.local_size = comm_size(d.host_comm);

  // Binding concerns the real hardware, so it uses the real host-local rank.
  apply_binding(hw, cfg.bind, real_local_rank, real_local_size);
  d.self.binding = cfg.bind;
  hwloc_bitmap_t bound = hwloc_bitmap_alloc();
  if (hwloc_get_cpubind(hw.topo, bound, HWLOC_CPUBIND_PROCESS) != 0)
    hwloc_bitmap_copy(bound, hwloc_topology_get_allowed_cpuset(hw.topo));
  d.self.cpuset = cpuset_list(bound);
  const int numa_nodes = hwloc_get_nbobjs_by_type(hw.topo, HWLOC_OBJ_NUMANODE);
  for (int i = 0; i < numa_nodes; ++i) {
    hwloc_obj_t node = hwloc_get_obj_by_type(hw.topo, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(i));
    if (hwloc_bitmap_intersects(node->cpuset, bound))
      d.self.numa.push_back(static_cast<int>(node->os_index));
  }
  hwloc_bitmap_free(bound);

  const gpu_inventory gpus = discover_gpus();
  d.host.cores = hwloc_get_nbobjs_by_type(hw.topo, HWLOC_OBJ_CORE);
  d.host.pus = hwloc_bitmap_weight(hwloc_topology_get_allowed_cpuset(hw.topo));
  d.host.numa_nodes = numa_nodes;
  d.host.gpus = gpus.count;
  d.host.gpu_names = gpus.names;
  d.host.ranks = real_local_size;
  d.self.gpu = gpus.count > 0 ? real_local_rank % gpus.count : -1;
  (void)host_owner.release(); // the caller owns it now
  return d;
}

std::vector<rank_placement> gather_placements(MPI_Comm world, const rank_placement& self,
                                              MPI_Comm host_comm) {
  int leader = self.rank;
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &leader, 1, MPI_INT, MPI_MIN, host_comm),
            "MPI_Allreduce(host leader)");
  const std::string mine = encode(self, leader);
  const int n = comm_size(world);
  std::vector<int> lengths(n), offsets(n);
  const int my_length = static_cast<int>(mine.size());
  check_mpi(MPI_Allgather(&my_length, 1, MPI_INT, lengths.data(), 1, MPI_INT, world),
            "MPI_Allgather(placement sizes)");
  int total = 0;
  for (int i = 0; i < n; ++i) {
    offsets[i] = total;
    total += lengths[i];
  }
  std::string all(total, '\0');
  check_mpi(MPI_Allgatherv(mine.data(), my_length, MPI_CHAR, all.data(), lengths.data(),
                           offsets.data(), MPI_CHAR, world),
            "MPI_Allgatherv(placements)");

  std::vector<rank_placement> out;
  std::vector<int> leaders(n);
  for (int i = 0; i < n; ++i) out.push_back(decode(all.substr(offsets[i], lengths[i]), leaders[i]));
  std::vector<int> distinct = leaders;
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  for (int i = 0; i < n; ++i)
    out[i].host_index = static_cast<int>(
        std::lower_bound(distinct.begin(), distinct.end(), leaders[i]) - distinct.begin());
  return out;
}

} // namespace detail
} // namespace crown
