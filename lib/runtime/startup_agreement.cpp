// Agreement of start-up steps and of the configuration across every rank.
#include "startup_agreement.hpp"
#include <climits>
#include <crown/error.hpp>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace crown::detail {
namespace {

int rank_in(MPI_Comm comm) {
  int r = 0;
  check_mpi(MPI_Comm_rank(comm, &r), "MPI_Comm_rank");
  return r;
}

/// `text` of rank `root` on every rank (two broadcasts).
std::string broadcast_text(MPI_Comm comm, std::string text, int root) {
  unsigned long long size = text.size();
  check_mpi(MPI_Bcast(&size, 1, MPI_UNSIGNED_LONG_LONG, root, comm), "MPI_Bcast(text size)");
  text.resize(size);
  check_mpi(MPI_Bcast(text.data(), static_cast<int>(size), MPI_CHAR, root, comm),
            "MPI_Bcast(text)");
  return text;
}

std::string number(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", v);
  return text;
}

} // namespace

void agree(MPI_Comm world, const std::exception_ptr& failure, std::string_view step) {
  const int me = rank_in(world);
  int first_failed = failure ? me : INT_MAX;
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &first_failed, 1, MPI_INT, MPI_MIN, world),
            "MPI_Allreduce(start-up agreement)");
  if (first_failed == INT_MAX) return;
  // "context\0message" of the first failure when it is a config_error, else empty.
  std::string report;
  if (me == first_failed) try {
      std::rethrow_exception(failure);
    } catch (const config_error& e) {
      report = e.context() + '\0' + e.message();
    } catch (...) {}
  report = broadcast_text(world, std::move(report), first_failed);
  if (failure) std::rethrow_exception(failure);
  if (const auto split = report.find('\0'); split != std::string::npos)
    throw config_error(report.substr(0, split),
                       "on rank " + std::to_string(first_failed) + ": " + report.substr(split + 1));
  throw state_error("crown::runtime start-up (" + std::string(step) + ")",
                    "failed on rank " + std::to_string(first_failed) + "; see its message");
}

std::string canonical_value(const config& c, std::string_view name) {
  if (name == "CROWN_LOG") return std::string(to_string(c.log));
  if (name == "CROWN_BIND") return std::string(to_string(c.bind));
  if (name == "CROWN_FAKE_HOSTS") return std::to_string(c.fake_hosts);
  if (name == "CROWN_WAIT_SPINS") return c.wait_spins < 0 ? "auto" : std::to_string(c.wait_spins);
  if (name == "CROWN_HEAP_SIZE") return std::to_string(c.heap_size);
  if (name == "CROWN_SHM") return c.shm ? "1" : "0";
  if (name == "CROWN_CHECK") return c.check < 0 ? "default" : std::to_string(c.check);
  if (name == "CROWN_TRANSPORT") return std::string(to_string(c.transport));
  if (name == "CROWN_FANOUT") return std::to_string(c.fanout);
  if (name == "CROWN_WATCHDOG") return number(c.watchdog);
  if (name == "CROWN_TIMEOUT_SCALE") return number(c.timeout_scale);
  if (name == "CROWN_MAILBOX_SIZE") return std::to_string(c.mailbox_size);
  if (name == "CROWN_ACTOR_STDOUT") return c.actor_stdout ? "1" : "0";
  if (name == "CROWN_PROGRESS_THREAD") return c.progress_thread ? "1" : "0";
  if (name == "CROWN_PROGRESS_CPUS") return c.progress_cpus;
  if (name == "CROWN_TRACE") return c.trace;
  if (name == "CROWN_SINGLE_COPY") return c.single_copy ? "auto" : "0";
  if (name == "CROWN_WAIT_WARN") return number(c.wait_warn);
  if (name == "CROWN_WAIT_TIMEOUT") return number(c.wait_timeout);
  if (name == "CROWN_CALL_TIMEOUT") return number(c.call_timeout);
  if (name == "CROWN_STOP_GRACE") return number(c.stop_grace);
  if (name == "CROWN_FAULT") return to_string(c.fault);
  if (name == "CROWN_GPU_HEAP_SIZE") return std::to_string(c.gpu_heap_size);
  if (name == "CROWN_GPU_MAPPING") return std::string(to_string(c.gpu_mapping));
  if (name == "CROWN_GPU_COLLECTIVES") return std::string(to_string(c.gpu_collectives));
  if (name == "CROWN_GPU_HALOS") return std::string(to_string(c.gpu_halos));
  if (name == "CROWN_GEMM") return std::string(to_string(c.gemm));
  throw std::logic_error("canonical_value: unknown variable " + std::string(name));
}

void require_same_config(MPI_Comm world, const config& c) {
  std::vector<std::string_view> names;
  std::vector<std::string> mine;
  std::string joined; // rank 0's values, each ended by '\0'
  for (const config_variable& v : config_variables())
    if (!v.per_rank) {
      names.push_back(v.name);
      mine.push_back(canonical_value(c, v.name));
      joined += mine.back() + '\0';
    }
  const int me = rank_in(world);
  joined = broadcast_text(world, std::move(joined), 0);
  // Per variable: the first rank whose value differs from rank 0's.
  std::vector<int> first_differing(names.size(), INT_MAX);
  const char* theirs = joined.c_str();
  for (std::size_t i = 0; i < names.size(); theirs += std::strlen(theirs) + 1, ++i)
    if (mine[i] != theirs) first_differing[i] = me;
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, first_differing.data(),
                          static_cast<int>(first_differing.size()), MPI_INT, MPI_MIN, world),
            "MPI_Allreduce(configuration)");
  theirs = joined.c_str();
  for (std::size_t i = 0; i < names.size(); theirs += std::strlen(theirs) + 1, ++i) {
    const int r = first_differing[i];
    if (r == INT_MAX) continue;
    const std::string other = broadcast_text(world, mine[i], r);
    throw config_error(std::string(names[i]), "differs between ranks: rank 0 has " +
                                                  std::string(theirs) + ", rank " +
                                                  std::to_string(r) + " has " + other + " (here " +
                                                  mine[i] + "); every rank needs the same value");
  }
}

} // namespace crown::detail
