// The actor types this process can construct, by key; demangled type names.
#include "control.hpp"
#include <crown/actor/registry.hpp>
#include <cstdlib>
#include <cxxabi.h>
#include <map>
#include <mutex>

namespace crown::detail {
namespace {

std::mutex g_registry_mutex;
std::map<std::string, actor_type>& registry() {
  static std::map<std::string, actor_type> types;
  return types;
}

} // namespace

std::string exception_type() {
  const std::type_info* t = abi::__cxa_current_exception_type();
  return t ? demangle(t->name()) : std::string("unknown exception");
}

std::string demangle(const char* mangled) {
  int status = 0;
  char* readable = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string s = status == 0 && readable ? readable : mangled;
  std::free(readable);
  return s;
}

void register_actor_type(const std::string& key, actor_type t) {
  const std::lock_guard lock(g_registry_mutex);
  registry().emplace(key, std::move(t));
}

const actor_type* find_actor_type(const std::string& key) {
  const std::lock_guard lock(g_registry_mutex);
  const auto it = registry().find(key);
  return it == registry().end() ? nullptr : &it->second;
}

} // namespace crown::detail
