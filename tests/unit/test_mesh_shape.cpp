// Mesh arithmetic as a plain value: no MPI, no runtime, no mpirun.
#include <boost/test/unit_test.hpp>
#include <crown/error.hpp>
#include <crown/mesh_shape.hpp>
#include <harness/crown_test.hpp>
#include <numeric>
#include <sstream>

using crown::dim;
using crown::mesh_shape;
using crown::point;
using crown_test::what_of;

namespace {
/// A 2 x 3 x 4 shape over the ranks 100..123 (any non-negative ids will do).
mesh_shape shape_234() {
  std::vector<int> ranks(24);
  std::iota(ranks.begin(), ranks.end(), 100);
  return mesh_shape({{"a", 2}, {"b", 3}, {"c", 4}}, ranks);
}
} // namespace

BOOST_AUTO_TEST_CASE(points_and_ranks_round_trip_row_major) {
  const mesh_shape s = shape_234();
  BOOST_TEST(s.size() == 24);
  BOOST_TEST(s.size("b") == 3);
  BOOST_TEST(s.rank_at({1, 2, 3}) == 100 + (1 * 3 + 2) * 4 + 3);
  for (int r = 100; r < 124; ++r) BOOST_TEST(s.rank_at(s.point_of(r)) == r);
  BOOST_TEST((s.point_of(105) == point{0, 1, 1}));
  BOOST_TEST(s.index_of(123) == 23);
  BOOST_TEST(s.index_of(7) == -1);
  BOOST_TEST(s.to_string() == "mesh{a=2,b=3,c=4}");
  std::ostringstream os;
  os << s;
  BOOST_TEST(os.str() == "mesh{a=2,b=3,c=4}");
}

BOOST_AUTO_TEST_CASE(reshape_infers_one_size_and_keeps_the_ranks) {
  const mesh_shape s = shape_234();
  const mesh_shape r = s.reshape({{"dp", -1}, {"tp", 6}});
  BOOST_TEST(r.size("dp") == 4);
  BOOST_TEST(r.rank_at({3, 5}) == 123);
  BOOST_TEST(r == mesh_shape({{"dp", 4}, {"tp", 6}}, {s.ranks().begin(), s.ranks().end()}));
}

BOOST_AUTO_TEST_CASE(slices_fix_or_keep_a_dimension) {
  const mesh_shape s = shape_234();
  const mesh_shape fixed = s.slice("b", 1); // a x c, b = 1
  BOOST_TEST(fixed.ndim() == 2u);
  BOOST_TEST(fixed.size() == 8);
  BOOST_TEST(fixed.rank_at({1, 2}) == s.rank_at({1, 1, 2}));
  const mesh_shape kept = s.slice("c", crown::range{1, 3}); // c stays, size 2
  BOOST_TEST(kept.size("c") == 2);
  BOOST_TEST(kept.rank_at({1, 2, 0}) == s.rank_at({1, 2, 1}));
  const std::vector<std::string> keep{"b"};
  const mesh_shape line = s.through({1, 0, 3}, keep); // varies along b only
  BOOST_TEST(line.size() == 3);
  for (int j = 0; j < 3; ++j) BOOST_TEST(line.rank_at({j}) == s.rank_at({1, j, 3}));
}

BOOST_AUTO_TEST_CASE(bad_shapes_and_points_name_the_cause) {
  const mesh_shape s = shape_234();
  using crown::argument_error;
  BOOST_TEST(what_of<argument_error>([] {
               mesh_shape({{"x", 3}}, {0, 1});
             }).find("sizes {x=3} do not multiply to 2 ranks") != std::string::npos);
  BOOST_TEST(what_of<argument_error>([] {
               mesh_shape({{"x", 2}}, {4, 4});
             }).find("rank 4 is listed twice") != std::string::npos);
  BOOST_TEST(what_of<argument_error>([] {
               mesh_shape({{"x", 2}}, {0, -1});
             }).find("rank -1 is negative") != std::string::npos);
  BOOST_TEST(what_of<argument_error>([] {
               mesh_shape({{"x", 1}, {"x", 2}}, {0, 1});
             }).find("dimension \"x\" appears twice") != std::string::npos);
  BOOST_TEST(what_of<argument_error>([&] {
               (void)s.size("z");
             }).find("unknown dimension \"z\" (dimensions: a, b, c)") != std::string::npos);
  BOOST_TEST(what_of<argument_error>([&] {
               (void)s.rank_at({0, 3, 0});
             }).find("coordinate 3 of dimension \"b\" is out of range [0, 3)") !=
             std::string::npos);
  BOOST_TEST(what_of<argument_error>([&] {
               (void)s.point_of(5);
             }).find("rank 5 is not in this mesh") != std::string::npos);
  BOOST_TEST(what_of<argument_error>([&] {
               (void)s.slice("a", crown::range{1, 1});
             }).find("empty slice") != std::string::npos);
}
