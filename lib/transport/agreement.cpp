// Collective argument checks on Crown's private communicator of a mesh, and the names
// of element types.
#include "agreement.hpp"
#include "../mesh/crown_comm.hpp"
#include "transfer.hpp"
#include <crown/detail/types.hpp>
#include <crown/error.hpp>
#include <cstring>
#include <cxxabi.h>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace crown::detail {
namespace {

std::mutex g_names_mutex;
std::map<std::uint64_t, std::string>& type_names() {
  static std::map<std::uint64_t, std::string> names;
  return names;
}

std::string demangled(const char* mangled) {
  int status = 0;
  const std::unique_ptr<char, decltype(&std::free)> text(
      abi::__cxa_demangle(mangled, nullptr, nullptr, &status), &std::free);
  return status == 0 && text ? std::string(text.get()) : std::string(mangled);
}

/// The argument names that hold type tags (>> 1): their mismatches are named by type.
bool is_type_tag(const argument& a) { return std::strcmp(a.name, "element type") == 0; }

/// This rank's text for argument value `v`: the type's name for a type tag.
std::string text_of(const argument& a, long long v) {
  if (is_type_tag(a))
    if (std::string name = type_tag_name(static_cast<std::uint64_t>(v)); !name.empty()) return name;
  return std::to_string(v);
}

/// Every member's text for `a` (collective, the rare path only): names are exchanged
/// when a type differs, because a hash means nothing on another rank.
std::vector<std::string> texts_of(const mesh& m, const argument& a, MPI_Comm comm,
                                  const std::string& op) {
  constexpr std::size_t width = 160;
  std::string mine = text_of(a, a.value);
  mine.resize(width - 1); // NUL-padded, cut where too long
  std::vector<char> all(width * static_cast<std::size_t>(m.size()));
  MPI_Request r;
  complete(MPI_Iallgather(mine.c_str(), static_cast<int>(width), MPI_CHAR, all.data(),
                          static_cast<int>(width), MPI_CHAR, comm, &r),
           r, "MPI_Allgather(" + op + " type names)");
  std::vector<std::string> texts;
  for (int i = 0; i < m.size(); ++i) texts.emplace_back(all.data() + width * i);
  return texts;
}

} // namespace

std::uint64_t register_type_tag(std::uint64_t tag, const std::type_info& type,
                                std::size_t dims) noexcept {
  try {
    std::string name = demangled(type.name());
    if (dims > 1) name += " in " + std::to_string(dims) + " dimensions";
    const std::lock_guard lock(g_names_mutex);
    type_names().emplace(tag, name);
    type_names().emplace(tag >> 1, std::move(name));
  } catch (...) { // a missing name costs only a less readable message
  }
  return tag;
}

std::string type_tag_name(std::uint64_t tag_or_half) {
  const std::lock_guard lock(g_names_mutex);
  const auto it = type_names().find(tag_or_half);
  return it == type_names().end() ? std::string() : it->second;
}

void check_same_arguments(const mesh& m, std::initializer_list<argument> args,
                          const std::string& op) {
  MPI_Comm comm = crown_comm(m);
  const std::size_t n = args.size();
  std::vector<long long> bounds; // {max v..., max -v...}
  for (const auto& a : args) bounds.push_back(a.value);
  for (const auto& a : args) bounds.push_back(-a.value);
  MPI_Request r;
  complete(MPI_Iallreduce(MPI_IN_PLACE, bounds.data(), static_cast<int>(bounds.size()),
                          MPI_LONG_LONG, MPI_MAX, comm, &r),
           r, "MPI_Allreduce(" + op + " argument check)");
  bool same = true;
  for (std::size_t i = 0; i < n; ++i) same = same && bounds[i] == -bounds[n + i];
  if (same) return;
  // Rare path: find who differs, so the message can name a rank.
  std::vector<long long> mine, all(n * static_cast<std::size_t>(m.size()));
  for (const auto& a : args) mine.push_back(a.value);
  complete(MPI_Iallgather(mine.data(), static_cast<int>(n), MPI_LONG_LONG, all.data(),
                          static_cast<int>(n), MPI_LONG_LONG, comm, &r),
           r, "MPI_Allgather(" + op + " argument check)");
  // The first argument that differs anywhere (the same one on every member, so the
  // name exchange is collective); every member differs from someone there.
  for (std::size_t i = 0; i < n; ++i) {
    const argument& a = args.begin()[i];
    int differs = -1;
    for (int k = 0; k < m.size() && differs < 0; ++k)
      if (all[static_cast<std::size_t>(k) * n + i] != all[i]) differs = k;
    if (differs < 0) continue;
    const std::vector<std::string> texts =
        is_type_tag(a) ? texts_of(m, a, comm, op) : std::vector<std::string>{};
    for (int k = 0; k < m.size(); ++k) {
      const long long theirs = all[static_cast<std::size_t>(k) * n + i];
      if (theirs == mine[i]) continue;
      const auto at = static_cast<std::size_t>(k);
      const std::string here = texts.empty() ? std::to_string(mine[i]) : texts[m.rank()];
      const std::string there = texts.empty() ? std::to_string(theirs) : texts[at];
      throw argument_error(op, std::string(a.name) + " is " + here + " here but " + there +
                                   " on rank " + std::to_string(m.ranks()[at]));
    }
  }
  throw argument_error(op, "arguments differ between members"); // unreachable in practice
}

} // namespace crown::detail
