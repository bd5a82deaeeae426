// Every mesh operation, valid and invalid, on whatever world this run has.
#include <boost/test/unit_test.hpp>
#include <crown/crown.hpp>
#include <harness/crown_test.hpp>
#include <numeric>
#include <sstream>

namespace {

const crown::mesh& w() { return crown::world(); }
int n() { return crown::this_runtime().size(); }
int me() { return crown::this_runtime().rank(); }

template <typename F>
std::string argument_error_of(F&& f) {
  return crown_test::what_of<crown::argument_error>(std::forward<F>(f));
}

/// Sum of world ranks over a mesh, through its communicator.
int sum_over(const crown::mesh& m) {
  int v = me();
  crown::check_mpi(MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_SUM, m.comm()), "allreduce");
  return v;
}

/// A 2-D view of the world every rank count has: {row=n/c, col=c}, c = 2 when n is even.
crown::mesh grid() {
  const int c = n() % 2 == 0 ? 2 : 1;
  return w().reshape({{"row", -1}, {"col", c}});
}

} // namespace

BOOST_AUTO_TEST_CASE(world_mesh_is_hosts_by_procs_unless_ragged) {
  const int k = crown::this_runtime().config().fake_hosts;
  std::ostringstream os;
  os << w();
  if (n() % k == 0) {
    BOOST_TEST(os.str() ==
               "mesh{hosts=" + std::to_string(k) + ",procs=" + std::to_string(n() / k) + "}");
    // ranks of one host are contiguous along procs
    for (int h = 0; h < k; ++h)
      for (int p = 0; p < n() / k; ++p) {
        const int r = w().rank_at({h, p});
        BOOST_TEST(crown::this_runtime().topology().all()[r].host_index == h);
        BOOST_TEST(crown::this_runtime().topology().all()[r].local_rank == p);
      }
  } else {
    BOOST_TEST(os.str() == "mesh{ranks=" + std::to_string(n()) + "}");
  }
  std::vector<int> sorted(w().begin(), w().end());
  std::sort(sorted.begin(), sorted.end());
  std::vector<int> expected(n());
  std::iota(expected.begin(), expected.end(), 0);
  BOOST_TEST(sorted == expected, "the world mesh holds every rank once");
}

BOOST_AUTO_TEST_CASE(point_and_rank_convert_both_ways) {
  const auto g = grid();
  for (int r : g) BOOST_TEST(g.rank_at(g.point_of(r)) == r);
  const int c = g.size("col");
  BOOST_TEST((g.coords() == crown::point{g.rank() / c, g.rank() % c}));
  BOOST_TEST(g.coordinate("col") == g.rank() % c);
  BOOST_TEST(g.rank_at(g.coords()) == me());
  BOOST_TEST(g.index_of(n()) == -1);
  BOOST_TEST(!g.contains(-1));
}

BOOST_AUTO_TEST_CASE(reshape_infers_one_size_and_rejects_bad_shapes) {
  const auto g = grid();
  BOOST_TEST(g.size() == n());
  BOOST_TEST(g.ndim() == 2u);
  BOOST_TEST(g.size("row") * g.size("col") == n());
  BOOST_TEST(g.to_string() == "mesh{row=" + std::to_string(g.size("row")) +
                                  ",col=" + std::to_string(g.size("col")) + "}");
  BOOST_TEST((std::vector<int>(g.begin(), g.end()) == std::vector<int>(w().begin(), w().end())));

  auto m = argument_error_of([] { (void)w().reshape({{"dp", n() + 1}}); });
  BOOST_TEST(m.find("sizes {dp=" + std::to_string(n() + 1) + "} do not multiply to " +
                    std::to_string(n()) + " ranks") != std::string::npos,
             m);
  m = argument_error_of([] { (void)w().reshape({{"dp", -1}, {"tp", -1}}); });
  BOOST_TEST(m.find("\"tp\" has size -1") != std::string::npos, m);
  m = argument_error_of([] { (void)w().reshape({{"dp", 0}}); });
  BOOST_TEST(m.find("\"dp\" has size 0") != std::string::npos, m);
  m = argument_error_of([] { (void)w().reshape({{"dp", -1}, {"dp", 1}}); });
  BOOST_TEST(m.find("\"dp\" appears twice") != std::string::npos, m);
  m = argument_error_of([] { (void)w().reshape({{"dp", n() + 1}, {"tp", -1}}); });
  BOOST_TEST(m.find("do not multiply") != std::string::npos, m);
}

BOOST_AUTO_TEST_CASE(slice_by_index_drops_the_dimension) {
  const auto g = grid();
  for (int c = 0; c < g.size("col"); ++c) {
    const auto column = g.slice("col", c);
    BOOST_TEST(column.to_string() == "mesh{row=" + std::to_string(g.size("row")) + "}");
    for (int r = 0; r < g.size("row"); ++r) BOOST_TEST(column.rank_at({r}) == g.rank_at({r, c}));
    BOOST_TEST(column.is_member() == (g.coordinate("col") == c));
  }
  const auto one = g.slice("row", 0).slice("col", 0); // down to a single point
  BOOST_TEST(one.to_string() == "mesh{}");
  BOOST_TEST(one.size() == 1);
  BOOST_TEST(one.rank_at({}) == g.rank_at({0, 0}));
}

BOOST_AUTO_TEST_CASE(slice_by_range_keeps_the_dimension) {
  const auto g = grid();
  const int rows = g.size("row");
  const auto tail = g.slice("row", crown::range{rows / 2, rows});
  BOOST_TEST(tail.size("row") == rows - rows / 2);
  BOOST_TEST(tail.size("col") == g.size("col"));
  for (int r = 0; r < tail.size("row"); ++r)
    for (int c = 0; c < g.size("col"); ++c)
      BOOST_TEST(tail.rank_at({r, c}) == g.rank_at({rows / 2 + r, c}));
  // the same ranks, built explicitly, give an equal mesh
  const crown::mesh explicit_mesh(tail.dims(), std::vector<int>(tail.begin(), tail.end()));
  BOOST_TEST((explicit_mesh == tail));
  BOOST_TEST((tail == g) == (rows / 2 == 0));         // equal only when the slice keeps every row
  BOOST_TEST((g == w()) == (g.dims() == w().dims())); // same ranks, equal only if dims match
}

BOOST_AUTO_TEST_CASE(bad_slices_name_the_dimension_and_sizes) {
  const auto g = grid();
  const int rows = g.size("row");
  auto m = argument_error_of([&] { (void)g.slice("depth", 0); });
  BOOST_TEST(m.find("unknown dimension \"depth\" (dimensions: row, col)") != std::string::npos, m);
  m = argument_error_of([&] { (void)g.slice("row", rows); });
  BOOST_TEST(m.find(".slice(\"row\", " + std::to_string(rows) + "): index out of range [0, " +
                    std::to_string(rows) + ")") != std::string::npos,
             m);
  m = argument_error_of([&] { (void)g.slice("row", -1); });
  BOOST_TEST(m.find("index out of range") != std::string::npos, m);
  m = argument_error_of([&] { (void)g.slice("row", crown::range{1, 1}); });
  BOOST_TEST(m.find("empty slice") != std::string::npos, m);
  m = argument_error_of([&] { (void)g.slice("row", crown::range{0, rows + 1}); });
  BOOST_TEST(m.find("range out of [0, " + std::to_string(rows) + ")") != std::string::npos, m);
  m = argument_error_of([&] { (void)g.size("tp"); });
  BOOST_TEST(m.find("unknown dimension \"tp\"") != std::string::npos, m);
  m = argument_error_of([&] { (void)g.rank_at({0}); });
  BOOST_TEST(m.find("point has 1 coordinates, mesh has 2 dimensions") != std::string::npos, m);
  m = argument_error_of([&] { (void)g.rank_at({0, g.size("col")}); });
  BOOST_TEST(m.find("coordinate " + std::to_string(g.size("col")) + " of dimension \"col\"") !=
                 std::string::npos,
             m);
  m = argument_error_of([&] { (void)g.point_of(n()); });
  BOOST_TEST(m.find("is not in this mesh") != std::string::npos, m);
}

BOOST_AUTO_TEST_CASE(sub_meshes_communicate_among_their_members) {
  const auto g = grid();
  const auto row = g.sub({"col"}); // my row: varies along col
  const auto col = g.sub({"row"});
  BOOST_TEST(row.to_string() == "mesh{col=" + std::to_string(g.size("col")) + "}");
  BOOST_TEST(col.to_string() == "mesh{row=" + std::to_string(g.size("row")) + "}");
  BOOST_TEST(row.contains(me()));
  BOOST_TEST(col.contains(me()));
  int expected_row = 0, expected_col = 0;
  for (int r : row) expected_row += r;
  for (int r : col) expected_col += r;
  BOOST_TEST(sum_over(row) == expected_row);
  BOOST_TEST(sum_over(col) == expected_col);
  int comm_size = 0, comm_rank = 0;
  MPI_Comm_size(row.comm(), &comm_size);
  MPI_Comm_rank(row.comm(), &comm_rank);
  BOOST_TEST(comm_size == row.size());
  BOOST_TEST(comm_rank == row.rank()); // communicator order = mesh order
  // created once: the same ranks give the same communicator, even from another mesh object
  const crown::mesh again(row.dims(), std::vector<int>(row.begin(), row.end()));
  BOOST_TEST((again.comm() == row.comm()));
  BOOST_TEST((g.sub({"row", "col"}) == g));
  const auto m = argument_error_of([&] { (void)g.sub({"tp"}); });
  BOOST_TEST(m.find("unknown dimension \"tp\"") != std::string::npos, m);
  row.barrier();
  w().barrier();
}

BOOST_AUTO_TEST_CASE(only_members_create_a_communicator) {
  // For each rank e, the others build the mesh without e and communicate over it while
  // e stays out: creation must not need e (MPI_Comm_create_group over members only).
  for (int excluded = 0; excluded < n() && n() > 1; ++excluded) {
    std::vector<int> others;
    for (int r = 0; r < n(); ++r)
      if (r != excluded) others.push_back(r);
    const crown::mesh m({{"others", n() - 1}}, others);
    if (me() == excluded) {
      BOOST_TEST(!m.is_member());
      auto e = argument_error_of([&] { (void)m.comm(); });
      BOOST_TEST(e.find("rank " + std::to_string(me()) + " is not a member of this mesh") !=
                     std::string::npos,
                 e);
      e = argument_error_of([&] { (void)m.rank(); });
      BOOST_TEST(e.find("not a member") != std::string::npos, e);
      e = argument_error_of([&] { (void)m.reshape({{"a", -1}}); });
      BOOST_TEST(e.find("mesh{others=" + std::to_string(n() - 1) + "}.reshape(): rank") !=
                     std::string::npos,
                 e);
      e = argument_error_of([&] { (void)m.sub({"others"}); });
      BOOST_TEST(e.find("not a member") != std::string::npos, e);
      BOOST_TEST(m.slice("others", 0).size() == 1); // pure operations work for anyone
    } else {
      const int total = n() * (n() - 1) / 2 - excluded;
      BOOST_TEST(sum_over(m) == total);
      m.barrier();
    }
  }
  w().barrier();
}

BOOST_AUTO_TEST_CASE(explicit_meshes_reject_bad_rank_lists) {
  auto m = argument_error_of([] { (void)crown::mesh({{"x", 1}}, {n()}); });
  BOOST_TEST(m.find("rank " + std::to_string(n()) + " is outside the world [0, " +
                    std::to_string(n()) + ")") != std::string::npos,
             m);
  m = argument_error_of([] { (void)crown::mesh({{"x", 2}}, {0, 0}); });
  BOOST_TEST(m.find("rank 0 is listed twice") != std::string::npos, m);
  m = argument_error_of([] { (void)crown::mesh({{"x", 2}}, {0}); });
  BOOST_TEST(m.find("do not multiply to 1 ranks") != std::string::npos, m);
  m = argument_error_of([] { (void)crown::mesh({{"", 1}}, {0}); });
  BOOST_TEST(m.find("empty name") != std::string::npos, m);
}

BOOST_AUTO_TEST_CASE(mesh_communicators_return_errors_instead_of_aborting) {
  const auto row = grid().sub({"col"});
  int v = 0;
  const int rc = MPI_Send(&v, 1, MPI_INT, row.size(), 0, row.comm());
  BOOST_TEST(rc != MPI_SUCCESS);
  BOOST_CHECK_THROW(crown::check_mpi(rc, "send past the row"), crown::mpi_error);
}
