// The registry of lib/runtime/layer_hooks.hpp.
#include "layer_hooks.hpp"
#include "runtime_state.hpp"
#include <algorithm>
#include <atomic>
#include <string>
#include <vector>

namespace crown::detail {
namespace {
std::vector<layer_stage>& stages() {
  static std::vector<layer_stage> s; // built during static initialisation, read after
  return s;
}
std::atomic<progress_thread_query> g_progress_query{nullptr};
} // namespace

bool register_layer_stage(const layer_stage& stage) {
  auto& s = stages();
  s.insert(std::upper_bound(
               s.begin(), s.end(), stage,
               [](const layer_stage& a, const layer_stage& b) { return a.order < b.order; }),
           stage);
  return true;
}

std::span<const layer_stage> layer_stages() noexcept { return stages(); }

std::shared_ptr<void>& layer_slot(runtime_state& st, std::string_view layer) {
  auto it = st.layer_data.find(layer);
  if (it == st.layer_data.end()) it = st.layer_data.emplace(std::string(layer), nullptr).first;
  return it->second;
}

void set_progress_thread_query(progress_thread_query q) noexcept {
  g_progress_query.store(q, std::memory_order_relaxed);
}

bool progress_thread_serves() noexcept {
  const progress_thread_query q = g_progress_query.load(std::memory_order_relaxed);
  return q != nullptr && q();
}

} // namespace crown::detail
