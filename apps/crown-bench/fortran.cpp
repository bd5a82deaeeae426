// crown-bench fortran: native coarray Fortran on libcrown_caf beside the same program on
// OpenCoarrays. crown-caf-bench (apps/crown-bench/caf_bench.f90) is built against both
// runtimes; scripts/bench-fortran runs each on 2 images and hands their figures here,
// which prints them as crown-bench CSV (group "fortran", baseline "opencoarrays").
// Reads files only: no MPI, no runtime.
#include "bench.hpp"
#include <map>
#include <stdexcept>

namespace crown_bench {
namespace {

struct figure {
  std::string unit, value; ///< value as printed (a number, or heat2d's checksum)
};
/// One run's figures by "op,bytes", in the order printed.
struct figures {
  std::vector<std::string> order;
  std::map<std::string, figure> by_key;
};

/// Reads `caf,op,bytes,unit,value` lines; anything else (launcher chatter) is skipped.
figures read_figures(const std::string& file, const char* flag) {
  std::FILE* f = std::fopen(file.c_str(), "r");
  if (!f) throw std::runtime_error(std::string(flag) + " " + file + ": cannot open the file");
  figures out;
  char op[64], unit[16], value[64];
  unsigned long long bytes = 0;
  char line[512];
  while (std::fgets(line, sizeof line, f)) {
    if (std::sscanf(line, "caf,%63[^,],%llu,%15[^,],%63s", op, &bytes, unit, value) != 4) continue;
    const std::string key = std::string(op) + "," + std::to_string(bytes);
    if (!out.by_key.count(key)) out.order.push_back(key);
    out.by_key[key] = {unit, value};
  }
  std::fclose(f);
  if (out.order.empty())
    throw std::runtime_error(std::string(flag) + " " + file +
                             ": no `caf,op,bytes,unit,value` lines");
  return out;
}

double number(const std::string& text, const std::string& what) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end) throw std::runtime_error(what + ": not a number: " + text);
  return v;
}

} // namespace

void fortran(const options& o) {
  const figures crown = read_figures(o.crown_file, "--crown");
  const figures base = read_figures(o.baseline_file, "--baseline");
  print_header();
  for (const std::string& key : crown.order) {
    const figure& c = crown.by_key.at(key);
    const auto b = base.by_key.find(key);
    const std::string op = key.substr(0, key.find(','));
    const std::size_t bytes = std::stoull(key.substr(key.find(',') + 1));
    if (op == "heat2d_checksum") { // bitwise the same field, whichever runtime moved it
      if (b == base.by_key.end())
        throw std::runtime_error("OpenCoarrays printed no heat2d checksum to compare with");
      if (b->second.value != c.value)
        throw std::runtime_error("heat2d checksums differ: Crown " + c.value + ", OpenCoarrays " +
                                 b->second.value);
      continue;
    }
    if (b == base.by_key.end() || b->second.unit != c.unit) {
      std::fprintf(stderr, "crown-bench fortran: OpenCoarrays has no %s figure; left out\n",
                   key.c_str());
      continue;
    }
    print_line("fortran", op.c_str(), bytes, c.unit.c_str(), number(c.value, key), "opencoarrays",
               number(b->second.value, key));
  }
}

} // namespace crown_bench
