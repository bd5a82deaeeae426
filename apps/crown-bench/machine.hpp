// apps/crown-bench/machine.hpp — what the figures were measured on: a "# machine" line
// under the CSV header (the CPU, its copy features, glibc, MPI, the load average) and
// the load average again when the run ends. Figures of one CPU do not carry over to
// another (glibc's memcpy picks its method by the CPU's features), and a figure taken
// while other work ran is not one.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <gnu/libc-version.h>
#include <mpi.h>
#include <sstream>
#include <string>
#include <unistd.h>

namespace crown_bench {

/// "AMD EPYC, family 25 model 17, erms fsrm" from /proc/cpuinfo's first processor.
inline std::string cpu_description() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, name = "unknown CPU", family, model, features;
  const auto value = [](const std::string& l) {
    const auto colon = l.find(':');
    return colon == std::string::npos || colon + 2 > l.size() ? std::string() : l.substr(colon + 2);
  };
  while (std::getline(in, line) && !line.empty()) { // the first processor's block only
    if (line.rfind("model name", 0) == 0)
      name = value(line);
    else if (line.rfind("cpu family", 0) == 0)
      family = value(line);
    else if (line.rfind("model\t", 0) == 0)
      model = value(line);
    else if (line.rfind("flags", 0) == 0) {
      std::istringstream flags(value(line));
      for (std::string f; flags >> f;)
        if (f == "erms" || f == "fsrm" || f == "avx2" || f == "avx512f") features += " " + f;
    }
  }
  std::string d = name;
  if (!family.empty()) d += ", family " + family + " model " + model;
  return d + (features.empty() ? std::string(", no erms") : "," + features);
}

inline std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen;
  in >> one >> five >> fifteen;
  return one + " " + five + " " + fifteen;
}

/// The "# machine" line, and a "# load average" line at exit.
inline void print_machine() {
  char mpi[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  MPI_Get_library_version(mpi, &length); // callable before MPI_Init
  std::string library(mpi, static_cast<std::size_t>(length));
  library = library.substr(0, library.find_first_of(",\n"));
  std::printf("# machine: %s; %ld CPUs online; glibc %s; %s; load average %s\n",
              cpu_description().c_str(), sysconf(_SC_NPROCESSORS_ONLN), gnu_get_libc_version(),
              library.c_str(), load_average().c_str());
  std::atexit([] {
    std::printf("# load average at the end: %s\n", load_average().c_str());
    std::fflush(stdout);
  });
}

} // namespace crown_bench
