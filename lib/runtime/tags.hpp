// lib/runtime/tags.hpp — every point-to-point tag Crown uses, in one table.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>

namespace crown::detail::tags {

/// Tags [first, last], inclusive.
struct tag_range {
  int first;
  int last;
  [[nodiscard]] constexpr int count() const noexcept { return last - first + 1; }
  [[nodiscard]] constexpr bool contains(int tag) const noexcept {
    return tag >= first && tag <= last;
  }
};

// Each range lives on communicators only Crown holds (the per-mesh private duplicates,
// the private world, the active-message transport's own duplicate), and no two ranges
// meet, so no message of one kind can ever match a receive of another even where two
// kinds share a communicator. Active messages number their replies and payloads by
// request id: an origin has at most 16000 requests in flight to one target before an
// id's tags come round again. The actor channel numbers its tags on a communicator of
// its own (lib/actor/channel.cpp) and is not part of this table.
inline constexpr int am_tag_ids = 16000;
inline constexpr tag_range am_request{1, 1};                            ///< active-message requests
inline constexpr tag_range am_reply{2, 1 + am_tag_ids};                 ///< their replies, by id
inline constexpr tag_range am_data{2 + am_tag_ids, 1 + 2 * am_tag_ids}; ///< payloads apart
inline constexpr tag_range sync_images{32002, 32002};                   ///< sync_images tokens
/// The refusal of an active-message request too short to show its id (no reply tag).
inline constexpr tag_range am_unreadable{32003, 32003};
inline constexpr tag_range rendezvous{32004, 32767}; ///< meeting before a communicator is made
inline constexpr tag_range clock_sync{0, 0};         ///< CROWN_TRACE's clock ping-pongs
inline constexpr int mpi_tag_ub_minimum = 32767;     ///< every MPI allows tags up to this

inline constexpr std::array<tag_range, 7> all{am_request,    am_reply,   am_data,   sync_images,
                                              am_unreadable, rendezvous, clock_sync};

template <std::size_t N>
constexpr bool disjoint_and_valid(const std::array<tag_range, N>& ranges) {
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    if (ranges[i].first < 0 || ranges[i].last < ranges[i].first ||
        ranges[i].last > mpi_tag_ub_minimum)
      return false;
    for (std::size_t j = i + 1; j < ranges.size(); ++j)
      if (ranges[i].first <= ranges[j].last && ranges[j].first <= ranges[i].last) return false;
  }
  return true;
}
static_assert(disjoint_and_valid(all), "Crown's tag ranges overlap or exceed MPI_TAG_UB");

/// The reply tag of active-message request `id`: concurrent calls from several threads
/// of one rank never take each other's reply.
constexpr int am_reply_tag(std::uint32_t id) noexcept {
  return am_reply.first + static_cast<int>(id % static_cast<std::uint32_t>(am_tag_ids));
}
/// The tag of request `id`'s payload or data when it travels apart from the request.
constexpr int am_data_tag(std::uint32_t id) noexcept {
  return am_data.first + static_cast<int>(id % static_cast<std::uint32_t>(am_tag_ids));
}

/// The rendezvous tag of a communicator creation, derived from a hash of its members so
/// that creations over different rank lists rarely share one.
constexpr int rendezvous_tag(std::size_t member_hash) noexcept {
  return rendezvous.first +
         static_cast<int>(member_hash % static_cast<std::size_t>(rendezvous.count()));
}

} // namespace crown::detail::tags
