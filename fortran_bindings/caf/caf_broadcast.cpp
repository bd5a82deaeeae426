// libcrown_caf's co_broadcast, with what gfortran's co_broadcast of a derived type with
// allocatable components (trans-array.cc, structure_alloc_comps, BCAST_ALLOC_COMP) needs
// besides: it broadcasts each allocatable component's data through a view of its own,
// then
//  - a component of derived type that has allocatable components itself as a whole,
//    descriptors and all, which would leave the source image's addresses here: a derived
//    value received keeps this image's words that held the data address of a view
//    broadcast just before, or a component token;
//  - (gfortran 12) the hidden token of an allocatable scalar component, typed BT_VOID,
//    whose "data" is the token's value, often garbage: a BT_VOID value (also type(c_ptr)
//    and type(c_funptr), addresses that mean nothing on another image) is not broadcast;
//  - an allocatable array component of a derived type with allocatable components, as a
//    whole, also when it is not allocated: a view without data is not broadcast (the
//    component is unallocated on every image, or the program is not conforming).
#include "caf_abi.hpp"
#include "caf_runtime.hpp"
#include "caf_status.hpp"
#include "caf_walk.hpp"
#include <crown/collectives.hpp>
#include <cstring>
#include <deque>
#include <unordered_set>
#include <vector>

namespace {

using namespace crown::caf;

constexpr int bt_void = 10;

/// The data addresses of the last views broadcast on this image (an array of a derived
/// type is broadcast after one view per allocatable component of each element).
class recent_views {
public:
  void add(const void* p) {
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    if (order_.size() == capacity) {
      known_.erase(known_.find(order_.front()));
      order_.pop_front();
    }
    order_.push_back(a);
    known_.insert(a);
  }
  [[nodiscard]] bool holds(std::uintptr_t word) const { return word && known_.count(word); }

private:
  static constexpr std::size_t capacity = 1 << 16;
  std::deque<std::uintptr_t> order_;
  std::unordered_multiset<std::uintptr_t> known_;
};
recent_views g_views;

/// Words of this image's derived values (before the broadcast) that are addresses here.
std::vector<std::pair<std::size_t, std::uintptr_t>> local_addresses(std::span<const std::byte> v) {
  std::vector<std::pair<std::size_t, std::uintptr_t>> kept;
  for (std::size_t at = 0; at + sizeof(std::uintptr_t) <= v.size(); at += sizeof(std::uintptr_t)) {
    std::uintptr_t word;
    std::memcpy(&word, v.data() + at, sizeof word);
    if (g_views.holds(word) || is_component_token(reinterpret_cast<const void*>(word)))
      kept.emplace_back(at, word);
  }
  return kept;
}

} // namespace

extern "C" {

void _gfortran_caf_co_broadcast(descriptor* a, int source_image, int* stat, char* errmsg,
                                std::size_t errmsg_len) {
  guarded(stat, errmsg, errmsg_len, [&] {
    (void)rank_of(source_image, "co_broadcast");
    if (a->dtype.type == bt_void || !a->base_addr) return; // see above; unallocated
    enter_collective(current_team(), "co_broadcast");
    packed_array data(*a);
    const bool derived = a->dtype.type == bt_derived;
    const auto kept = derived ? local_addresses(data.bytes) : decltype(local_addresses({})){};
    crown::co_broadcast(images(), data.bytes, source_image - 1);
    for (const auto& [at, word] : kept) std::memcpy(data.bytes.data() + at, &word, sizeof word);
    data.store(*a);
    if (!derived) g_views.add(a->base_addr);
  });
}

} // extern "C"
