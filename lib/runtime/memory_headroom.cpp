// Memory a process may still commit: /proc/meminfo and the cgroup limits above it.
#include "memory_headroom.hpp"
#include <charconv>
#include <fstream>
#include <sstream>
#include <string_view>

namespace crown::detail {
namespace {

/// The first number in `path`, or nothing ("max", absent file, unreadable).
bool read_number(const std::string& path, std::uint64_t& value) {
  std::ifstream in(path);
  std::string word;
  if (!(in >> word)) return false;
  const auto [end, ec] = std::from_chars(word.data(), word.data() + word.size(), value);
  return ec == std::errc() && end == word.data() + word.size();
}

/// The value of `key` in a "key value" file (memory.stat, meminfo), or 0.
std::uint64_t keyed_number(const std::string& path, std::string_view key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string name;
    std::uint64_t value = 0;
    if (fields >> name >> value && (name == key || name == std::string(key) + ":")) return value;
  }
  return 0;
}

struct cgroup_files {
  std::string root;     ///< mount point of the hierarchy
  std::string path;     ///< this process's cgroup below it
  const char* limit;    ///< memory.max or memory.limit_in_bytes
  const char* usage;    ///< memory.current or memory.usage_in_bytes
  const char* inactive; ///< key in memory.stat of reclaimable file pages
};

/// Lowers `h` to the room under the limits of `g`'s cgroup and its ancestors.
void apply_limits(const cgroup_files& g, memory_headroom& h) {
  std::string dir = g.root + (g.path == "/" ? "" : g.path);
  for (;;) {
    std::uint64_t limit = 0, usage = 0;
    if (read_number(dir + "/" + g.limit, limit) && read_number(dir + "/" + g.usage, usage)) {
      const std::uint64_t inactive = keyed_number(dir + "/memory.stat", g.inactive);
      const std::uint64_t used = usage > inactive ? usage - inactive : 0;
      const std::uint64_t room = limit > used ? limit - used : 0;
      if (room < h.bytes) h = {room, "the memory limit of cgroup " + dir};
    }
    if (dir.size() <= g.root.size()) return;
    dir.erase(dir.rfind('/'));
  }
}

} // namespace

memory_headroom current_memory_headroom() {
  memory_headroom h;
  if (const std::uint64_t kib = keyed_number("/proc/meminfo", "MemAvailable"); kib > 0)
    h = {kib << 10, "MemAvailable in /proc/meminfo"};
  std::ifstream cgroups("/proc/self/cgroup");
  std::string line;
  while (std::getline(cgroups, line)) { // "hierarchy:controllers:path"
    const auto first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    if (controllers.empty()) // v2 (unified)
      apply_limits({"/sys/fs/cgroup", path, "memory.max", "memory.current", "inactive_file"}, h);
    else if (("," + controllers + ",").find(",memory,") != std::string::npos)
      apply_limits({"/sys/fs/cgroup/memory", path, "memory.limit_in_bytes", "memory.usage_in_bytes",
                    "total_inactive_file"},
                   h);
  }
  return h;
}

} // namespace crown::detail
