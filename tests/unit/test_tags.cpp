// The table of point-to-point tag ranges (lib/runtime/tags.hpp): no two kinds of
// Crown message can share a tag.
#include <boost/test/unit_test.hpp>
#include <runtime/tags.hpp>

namespace tags = crown::detail::tags;

BOOST_AUTO_TEST_CASE(ranges_are_disjoint_and_within_the_guaranteed_tag_bound) {
  BOOST_TEST(tags::disjoint_and_valid(tags::all));
  for (std::size_t i = 0; i < tags::all.size(); ++i)
    for (std::size_t j = 0; j < tags::all.size(); ++j)
      if (i != j)
        for (int t : {tags::all[i].first, tags::all[i].last})
          BOOST_TEST(!tags::all[j].contains(t),
                     "tag " << t << " of range " << i << " lies in range " << j);
  // The layout before the table: active-message replies 2..30001 and communicator
  // rendezvous 30000..31999 overlapped; the check rejects it.
  constexpr std::array<tags::tag_range, 4> before{
      {{1, 1}, {2, 30001}, {7001, 7001}, {30000, 31999}}};
  BOOST_TEST(!tags::disjoint_and_valid(before));
}

BOOST_AUTO_TEST_CASE(derived_tags_stay_in_their_ranges) {
  for (std::uint64_t id = 0; id < 100000; id += 7)
    BOOST_TEST(tags::am_reply.contains(tags::am_reply_tag(static_cast<std::uint32_t>(id))));
  BOOST_TEST(tags::am_reply.contains(tags::am_reply_tag(UINT32_MAX)));
  BOOST_TEST(tags::am_reply_tag(0) == tags::am_reply.first);
  for (std::uint64_t id = 0; id < 100000; id += 7)
    BOOST_TEST(tags::am_data.contains(tags::am_data_tag(static_cast<std::uint32_t>(id))));
  BOOST_TEST(tags::am_data.contains(tags::am_data_tag(UINT32_MAX)));
  for (std::size_t hash :
       {std::size_t{0}, std::size_t{1999}, std::size_t{2000}, SIZE_MAX, std::size_t{123456789}})
    BOOST_TEST(tags::rendezvous.contains(tags::rendezvous_tag(hash)));
}
