// Every rank's placement, checked against what hwloc and the OS say directly.
#include <boost/test/unit_test.hpp>
#include <crown/crown.hpp>
#include <crown/detail/wait.hpp>
#include <hwloc.h>
#include <map>
#include <memory>
#include <set>
#include <unistd.h>

namespace {

struct hw {
  hwloc_topology_t topo = nullptr;
  hw() {
    hwloc_topology_init(&topo);
    hwloc_topology_load(topo);
  }
  ~hw() { hwloc_topology_destroy(topo); }
};

std::string list_of(hwloc_const_bitmap_t set) {
  char* text = nullptr;
  hwloc_bitmap_list_asprintf(&text, set);
  std::string s(text);
  free(text);
  return s;
}

std::string current_binding(const hw& h) {
  std::unique_ptr<hwloc_bitmap_s, void (*)(hwloc_bitmap_t)> set(hwloc_bitmap_alloc(),
                                                                hwloc_bitmap_free);
  // The main thread's: the process's binding also holds the progress thread's CPUs
  // (CROWN_PROGRESS_CPUS=host: every CPU of this host's ranks).
  hwloc_get_cpubind(h.topo, set.get(), HWLOC_CPUBIND_THREAD);
  return list_of(set.get());
}

std::string real_host() {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  return name;
}

const crown::runtime& rt() { return crown::this_runtime(); }

} // namespace

BOOST_AUTO_TEST_CASE(every_rank_has_a_consistent_placement) {
  const auto& all = rt().topology().all();
  BOOST_TEST_REQUIRE(all.size() == static_cast<std::size_t>(rt().size()));
  std::map<int, std::set<int>> local_ranks; // host index -> local ranks seen
  std::map<int, int> local_sizes;
  std::map<int, std::string> host_names;
  for (std::size_t i = 0; i < all.size(); ++i) {
    const auto& p = all[i];
    BOOST_TEST(p.rank == static_cast<int>(i));
    BOOST_TEST(p.local_rank >= 0);
    BOOST_TEST(p.local_rank < p.local_size);
    BOOST_TEST(local_ranks[p.host_index].insert(p.local_rank).second);
    BOOST_TEST(local_sizes.emplace(p.host_index, p.local_size).first->second == p.local_size);
    auto [it, fresh] = host_names.emplace(p.host_index, p.host);
    BOOST_TEST(it->second == p.host); // one name per host index
  }
  for (const auto& [host, ranks] : local_ranks) {
    BOOST_TEST(static_cast<int>(ranks.size()) == local_sizes[host]);
    BOOST_TEST(*ranks.rbegin() == static_cast<int>(ranks.size()) - 1);
  }
  BOOST_TEST(rt().topology().num_hosts() == static_cast<int>(host_names.size()));
  // hosts are numbered by their lowest rank
  BOOST_TEST(all[0].host_index == 0);
}

BOOST_AUTO_TEST_CASE(fake_hosts_split_the_machine_block_wise) {
  const int k = rt().config().fake_hosts;
  const auto& me = rt().topology().self();
  BOOST_TEST(rt().topology().num_hosts() == k);
  BOOST_TEST(rt().topology().multi_host() == (k > 1));
  if (k == 1) {
    BOOST_TEST(me.host == real_host());
    BOOST_TEST(me.local_size == rt().size());
  } else {
    // rank r of n (all on one real host) lands on pretend host r*k/n
    const int expected_host = rt().rank() * k / rt().size();
    BOOST_TEST(me.host == real_host() + "/fake" + std::to_string(expected_host));
    BOOST_TEST(me.host_index == expected_host);
  }
}

BOOST_AUTO_TEST_CASE(cpuset_and_numa_report_the_real_binding) {
  hw h;
  const auto& me = rt().topology().self();
  BOOST_TEST(me.cpuset == current_binding(h));
  BOOST_TEST((me.binding == rt().config().bind));
  BOOST_TEST(!me.numa.empty());
  const int numa_nodes = hwloc_get_nbobjs_by_type(h.topo, HWLOC_OBJ_NUMANODE);
  BOOST_TEST(rt().topology().host().numa_nodes == numa_nodes);
  BOOST_TEST(rt().topology().host().cores == hwloc_get_nbobjs_by_type(h.topo, HWLOC_OBJ_CORE));
  BOOST_TEST(rt().topology().host().pus ==
             hwloc_bitmap_weight(hwloc_topology_get_allowed_cpuset(h.topo)));
  for (int n : me.numa) BOOST_TEST(hwloc_get_numanode_obj_by_os_index(h.topo, n) != nullptr);
}

BOOST_AUTO_TEST_CASE(binding_policy_is_applied) {
  hw h;
  const auto& me = rt().topology().self();
  const int cores = hwloc_get_nbobjs_by_type(h.topo, HWLOC_OBJ_CORE);
  switch (rt().config().bind) {
  case crown::bind_policy::keep:
    break; // whatever mpirun chose, reported above
  case crown::bind_policy::none:
    BOOST_TEST(me.cpuset == list_of(hwloc_topology_get_allowed_cpuset(h.topo)));
    break;
  case crown::bind_policy::core: {
    // spread: local rank i of n on core i*cores/n (n <= cores)
    const int core =
        me.local_size <= cores ? me.local_rank * cores / me.local_size : me.local_rank % cores;
    BOOST_TEST(me.cpuset == list_of(hwloc_get_obj_by_type(h.topo, HWLOC_OBJ_CORE, core)->cpuset));
    break;
  }
  case crown::bind_policy::numa: {
    const int nodes = hwloc_get_nbobjs_by_type(h.topo, HWLOC_OBJ_NUMANODE);
    const int node =
        me.local_size <= nodes ? me.local_rank * nodes / me.local_size : me.local_rank % nodes;
    BOOST_TEST(me.cpuset ==
               list_of(hwloc_get_obj_by_type(h.topo, HWLOC_OBJ_NUMANODE, node)->cpuset));
    break;
  }
  }
}

BOOST_AUTO_TEST_CASE(gpus_are_assigned_round_robin_by_local_rank) {
  const auto& me = rt().topology().self();
  const int gpus = rt().topology().host().gpus;
  BOOST_TEST(static_cast<int>(rt().topology().host().gpu_names.size()) == gpus);
  if (gpus == 0) {
    BOOST_TEST(me.gpu == -1);
    BOOST_TEST(!rt().transports().cuda);
  } else {
    BOOST_TEST(me.gpu >= 0);
    BOOST_TEST(me.gpu < gpus);
  }
}

BOOST_AUTO_TEST_CASE(waits_yield_at_once_when_ranks_outnumber_cores) {
  const auto& topo = rt().topology();
  // all ranks of these tests share one real machine
  BOOST_TEST(topo.host().ranks == crown::this_runtime().size());
  BOOST_TEST(topo.oversubscribed() == (crown::this_runtime().size() > topo.host().cores));
  const int configured = rt().config().wait_spins;
  const int expected = configured >= 0 ? configured : topo.oversubscribed() ? 0 : 1000;
  BOOST_TEST(crown::detail::wait_spins() == expected);
}

BOOST_AUTO_TEST_CASE(log_lines_name_the_host_only_when_there_are_several) {
  std::vector<std::string> lines;
  crown::detail::set_log_sink([&](std::string_view l) { lines.emplace_back(l); });
  crown::log(crown::log_level::error, "disk full");
  crown::detail::set_log_sink({});
  const auto& me = rt().topology().self();
  const std::string rank = "rank " + std::to_string(rt().rank());
  const std::string where = rt().topology().multi_host() ? rank + "@" + me.host : rank;
  BOOST_TEST_REQUIRE(lines.size() == 1u);
  BOOST_TEST(lines[0] == "[crown error " + where + "] disk full\n");
}
