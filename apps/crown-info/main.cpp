// crown-info: where every rank runs and what it can use. Run under mpirun or srun.
//   crown-info [--json] [--check-gpu] [--thread-level single|funneled|serialized|multiple]
#include <crown/crown.hpp>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct host_numbers {
  int cores, pus, numa_nodes, gpus, gpu_ok;
};

std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::vector<std::string> transports_of(const crown::runtime& rt, const crown::rank_placement& p) {
  const auto& t = rt.transports();
  std::vector<std::string> out{"shm"};
  if (t.mpi_rma) out.emplace_back("mpi-rma");
  if (t.ucx) out.emplace_back("ucx");
  if (CROWN_HAVE_CUDA && p.gpu >= 0) out.emplace_back("cuda");
  if (t.nccl && p.gpu >= 0) out.emplace_back("nccl");
  return out;
}

std::string joined(const std::vector<std::string>& items, const char* separator) {
  std::string s;
  for (const auto& i : items) s += (s.empty() ? "" : separator) + i;
  return s;
}

std::string numa_list(const std::vector<int>& numa) {
  std::vector<std::string> items;
  for (int n : numa) items.push_back(std::to_string(n));
  return joined(items, ",");
}

void print_text(const crown::runtime& rt, const std::vector<host_numbers>& hosts, bool checked) {
  const auto& topo = rt.topology();
  std::printf("crown %s: %d ranks on %d host%s, %s, world %s, wait spins %d\n",
              CROWN_VERSION_STRING, rt.size(), topo.num_hosts(), topo.num_hosts() == 1 ? "" : "s",
              std::string(to_string(rt.thread_support())).c_str(), rt.world().to_string().c_str(),
              rt.wait_spins());
  std::vector<bool> shown(topo.num_hosts());
  for (const auto& p : topo.all()) {
    if (shown[p.host_index]) continue;
    shown[p.host_index] = true;
    const auto& h = hosts[p.rank];
    std::printf("host %s: %d cores, %d hardware threads, %d NUMA nodes, %d GPUs\n", p.host.c_str(),
                h.cores, h.pus, h.numa_nodes, h.gpus);
  }
  const auto& t = rt.transports();
  std::printf("one-sided off-host: %s (%s)\n", t.heap_transport.c_str(),
              t.heap_transport_why.c_str());
  std::printf("progress: %s (%s)\n", t.progress.c_str(), t.progress_why.c_str());
  std::printf("device memory off-host: %s (%s)\n", t.device_offhost.c_str(),
              t.device_offhost_why.c_str());
  if (t.progress == "crown-calls") std::printf("note: %s\n", crown::detail::unserved_consequence);
  if (!t.mpi_rma && rt.size() > 1) std::printf("note: %s\n", t.mpi_rma_problem.c_str());
  for (const auto& p : topo.all()) {
    std::string gpu = p.gpu < 0 ? "none" : std::to_string(p.gpu);
    if (checked && p.gpu >= 0) gpu += hosts[p.rank].gpu_ok ? "(works)" : "(FAILED self-test)";
    std::printf("rank %d: host=%s local=%d/%d cpuset=%s numa=%s gpu=%s binding=%s transports=%s "
                "device_link=%s\n",
                p.rank, p.host.c_str(), p.local_rank, p.local_size, p.cpuset.c_str(),
                numa_list(p.numa).c_str(), gpu.c_str(), std::string(to_string(p.binding)).c_str(),
                joined(transports_of(rt, p), ",").c_str(), crown::device_link(p.rank));
  }
}

void print_json(const crown::runtime& rt, const std::vector<host_numbers>& hosts, bool checked) {
  const auto& topo = rt.topology();
  std::ostringstream os;
  os << "{\n  \"version\": " << json_string(CROWN_VERSION_STRING) << ",\n  \"ranks\": " << rt.size()
     << ",\n  \"hosts\": " << topo.num_hosts()
     << ",\n  \"thread_level\": " << json_string(to_string(rt.thread_support()))
     << ",\n  \"world\": " << json_string(rt.world().to_string())
     << ",\n  \"wait_spins\": " << rt.wait_spins()
     << ",\n  \"mpi_rma_problem\": " << json_string(rt.transports().mpi_rma_problem)
     << ",\n  \"heap_transport\": " << json_string(rt.transports().heap_transport)
     << ",\n  \"heap_transport_why\": " << json_string(rt.transports().heap_transport_why)
     << ",\n  \"progress\": " << json_string(rt.transports().progress)
     << ",\n  \"progress_why\": " << json_string(rt.transports().progress_why)
     << ",\n  \"device_offhost\": " << json_string(rt.transports().device_offhost)
     << ",\n  \"device_offhost_why\": " << json_string(rt.transports().device_offhost_why)
     << ",\n  \"placements\": [";
  for (const auto& p : topo.all()) {
    const auto& h = hosts[p.rank];
    std::vector<std::string> transports;
    for (const auto& t : transports_of(rt, p)) transports.push_back(json_string(t));
    os << (p.rank ? "," : "") << "\n    {\"rank\": " << p.rank
       << ", \"host\": " << json_string(p.host) << ", \"host_index\": " << p.host_index
       << ", \"local_rank\": " << p.local_rank << ", \"local_size\": " << p.local_size
       << ", \"cpuset\": " << json_string(p.cpuset) << ", \"numa\": [" << numa_list(p.numa)
       << "], \"gpu\": " << p.gpu;
    if (checked) os << ", \"gpu_works\": " << (h.gpu_ok ? "true" : "false");
    os << ", \"binding\": " << json_string(to_string(p.binding)) << ", \"cores\": " << h.cores
       << ", \"pus\": " << h.pus << ", \"numa_nodes\": " << h.numa_nodes << ", \"gpus\": " << h.gpus
       << ", \"transports\": [" << joined(transports, ", ")
       << "], \"device_link\": " << json_string(crown::device_link(p.rank)) << "}";
  }
  os << "\n  ]\n}\n";
  std::fputs(os.str().c_str(), stdout);
}

/// MPI_THREAD_* for a --thread-level name, or -1.
int thread_level_named(const char* name) {
  const char* names[] = {"single", "funneled", "serialized", "multiple"};
  const int levels[] = {MPI_THREAD_SINGLE, MPI_THREAD_FUNNELED, MPI_THREAD_SERIALIZED,
                        MPI_THREAD_MULTIPLE};
  for (int i = 0; i < 4; ++i)
    if (!std::strcmp(name, names[i])) return levels[i];
  return -1;
}

/// With --thread-level, MPI is initialised here at that level, as an application that
/// attaches Crown would, and finalised after the runtime is gone.
struct application_mpi {
  explicit application_mpi(int level) : owned(level >= 0) {
    int provided = 0;
    if (owned) MPI_Init_thread(nullptr, nullptr, level, &provided);
  }
  ~application_mpi() {
    if (owned) MPI_Finalize();
  }
  bool owned;
};

int run(bool json, bool check_gpu) {
  try {
    crown::runtime rt;
    const auto& me = rt.topology().self();
    const auto& host = rt.topology().host();
    const host_numbers mine{host.cores, host.pus, host.numa_nodes, host.gpus,
                            check_gpu && crown::gpu_works(me.gpu)};
    // The world communicator is in mesh order; index the results by rank.
    std::vector<host_numbers> gathered(rt.size()), all(rt.size());
    crown::check_mpi(
        MPI_Gather(&mine, 5, MPI_INT, gathered.data(), 5, MPI_INT, 0, rt.world().comm()),
        "MPI_Gather(host numbers)");
    for (int i = 0; i < rt.size(); ++i) all[rt.world().ranks()[i]] = gathered[i];
    if (rt.rank() == 0) (json ? print_json : print_text)(rt, all, check_gpu);
    std::fflush(stdout);
  } catch (const crown::error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  bool json = false, check_gpu = false;
  int level = -1; // Crown initialises MPI (at MPI_THREAD_MULTIPLE)
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--json")) {
      json = true;
    } else if (!std::strcmp(argv[i], "--check-gpu")) {
      check_gpu = true;
    } else if (!std::strcmp(argv[i], "--thread-level") && i + 1 < argc &&
               thread_level_named(argv[i + 1]) >= 0) {
      level = thread_level_named(argv[++i]);
    } else {
      std::fprintf(stderr,
                   "usage: %s [--json] [--check-gpu] [--thread-level LEVEL]\n"
                   "  one line per rank: host, local rank, cpuset, NUMA nodes, GPU, transports;\n"
                   "  the job's off-host transport and progress, and why\n"
                   "  --json          one JSON document instead\n"
                   "  --check-gpu     run a small kernel on each rank's GPU\n"
                   "  --thread-level  single|funneled|serialized|multiple: initialise MPI at that\n"
                   "                  level first, as an application that attaches Crown would\n",
                   argv[0]);
      return std::strcmp(argv[i], "--help") ? 2 : 0;
    }
  }
  const application_mpi mpi(level);
  return run(json, check_gpu);
}
