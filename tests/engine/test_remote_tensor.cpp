// The tensor engine: remote tensors created and programmed from the controller (rank 0)
// on the other ranks. Every result is fetched to the controller and checked against a
// serial reference computed there; bad input must raise a clear error and hang nothing.
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <crown/crown.hpp>
#include <cstdint>
#include <functional>
#include <harness/crown_test.hpp>
#include <numeric>
#include <stdexcept>
#include <vector>

using namespace crown_test; // n(), what_of()

namespace {

using index2 = std::array<std::size_t, 2>;
using index1 = std::array<std::size_t, 1>;

// Integer-valued doubles: every sum below is exact, whatever its order.
double ramp_value(const index2& i) { return static_cast<double>(i[0] * 100 + i[1]); }
void ramp(const index2& i, double& x) { x = ramp_value(i); }
void square(const index2&, double& x) { x = x * x; }
void count(const index1& i, std::int64_t& x) { x = static_cast<std::int64_t>(3 * i[0] + 1); }
/// v = left + right neighbour of u (its halos), for every owned element.
void neighbours(std::span<crown::dist_tensor<std::int64_t, 1>* const> t, std::span<const double>) {
  crown::dist_tensor<std::int64_t, 1>&u = *t[0], &v = *t[1];
  for (std::ptrdiff_t i = 0; i < static_cast<std::ptrdiff_t>(u.own().extent(0)); ++i)
    v.local(i) = u.local(i - 1) + u.local(i + 1);
}
/// Adds the worker's index in the tensor's mesh times scalars[0] to every element: copies
/// of a replicated tensor then differ, as partial results do.
void add_image(std::span<crown::dist_tensor<double, 2>* const> t, std::span<const double> s) {
  const double k = s[0] * t[0]->mesh().rank();
  t[0]->apply([k](const index2&, double& x) { x += k; });
}
/// Throws on every worker alike (no collective: nobody waits for another).
void refuse(std::span<crown::dist_tensor<double, 2>* const>, std::span<const double>) {
  throw std::runtime_error("refused by the kernel");
}
const bool registered = crown::register_element_function<double, 2>("test.ramp", &ramp) &&
                        crown::register_element_function<double, 2>("test.square", &square) &&
                        crown::register_element_function<std::int64_t, 1>("test.count", &count) &&
                        crown::register_kernel<std::int64_t, 1>("test.neighbours", &neighbours) &&
                        crown::register_kernel<double, 2>("test.add_image", &add_image) &&
                        crown::register_kernel<double, 2>("test.refuse", &refuse);

void control(const std::function<void(crown::controller&)>& fn, int expected = 0) {
  BOOST_TEST(registered);
  BOOST_TEST(crown::this_runtime().control(fn) == expected);
}
int workers() { return n() - 1; }

/// The workers as {dp, tp} = {2, workers/2} when they pair up, else one dimension.
crown::proc_mesh two_dims(crown::controller& c) {
  const int k = workers();
  return k % 2 == 0 ? c.workers().reshape({{"dp", 2}, {"tp", k / 2}})
                    : c.workers().reshape({{"dp", 1}, {"tp", k}});
}

std::vector<double> ramp_reference(std::size_t rows, std::size_t cols) {
  std::vector<double> r;
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t j = 0; j < cols; ++j) r.push_back(ramp_value({i, j}));
  return r;
}

} // namespace

BOOST_AUTO_TEST_CASE(fill_apply_axpy_and_fetch_match_a_serial_reference) {
  control([](crown::controller& c) {
    crown::tensor_engine e(c.workers());
    auto u = e.create<double, 2>("u", {13, 7}, {crown::shard(0)});
    auto v = e.create<double, 2>("v", {13, 7}, {crown::shard(0)});
    u.apply("test.ramp");
    v.fill(2.0);
    v.axpy(0.5, u); // v = 2 + u / 2
    const std::vector<double> ref = ramp_reference(13, 7);
    BOOST_TEST(u.fetch() == ref, boost::test_tools::per_element());
    std::vector<double> expect;
    for (double x : ref) expect.push_back(2.0 + 0.5 * x);
    BOOST_TEST(v.fetch() == expect, boost::test_tools::per_element());
    v.copy_from(u);
    v.apply("test.square");
    std::vector<double> squares;
    for (double x : ref) squares.push_back(x * x);
    BOOST_TEST(v.fetch() == squares, boost::test_tools::per_element());
  });
}

BOOST_AUTO_TEST_CASE(sum_max_and_norm2_return_one_value_each) {
  control([](crown::controller& c) {
    crown::tensor_engine e(two_dims(c));
    auto u = e.create<double, 2>("u", {9, 11}, {crown::replicate(), crown::shard(1)});
    u.apply("test.ramp");
    const std::vector<double> ref = ramp_reference(9, 11);
    double squares = 0;
    for (double x : ref) squares += x * x;
    BOOST_TEST(u.sum() == std::accumulate(ref.begin(), ref.end(), 0.0)); // each block once
    BOOST_TEST(u.max() == 810.0);
    BOOST_TEST(u.fetch() == ref, boost::test_tools::per_element()); // one copy of each block
    BOOST_TEST(u.norm2() == std::sqrt(squares));
  });
}

BOOST_AUTO_TEST_CASE(fetch_shard_returns_the_block_of_that_point) {
  control([](crown::controller& c) {
    crown::tensor_engine e(two_dims(c));
    auto u = e.create<double, 2>("u", {10, 9}, {crown::shard(0), crown::shard(1)});
    u.apply("test.ramp");
    for (int j = 0; j < e.mesh().size(); ++j) {
      const crown::box<2> b = u.layout().block_of(j);
      std::vector<double> expect;
      for (std::size_t r = b.lo[0]; r < b.hi[0]; ++r)
        for (std::size_t s = b.lo[1]; s < b.hi[1]; ++s) expect.push_back(ramp_value({r, s}));
      BOOST_TEST(u.fetch_shard(u.layout().coords_of(j)) == expect,
                 boost::test_tools::per_element());
    }
  });
}

BOOST_AUTO_TEST_CASE(redistribute_keeps_the_array_in_a_new_layout) {
  control([](crown::controller& c) {
    crown::tensor_engine e(c.workers());
    auto u = e.create<double, 2>("u", {11, 6}, {crown::shard(0)});
    u.apply("test.ramp");
    auto w = u.redistribute({crown::shard(1)}, {}, "w");
    u.fill(-1.0); // the new tensor has its own blocks
    BOOST_TEST(w.name() == "w");
    BOOST_TEST(w.fetch() == ramp_reference(11, 6), boost::test_tools::per_element());
    const crown::box<2> last = w.layout().block_of(workers() - 1);
    BOOST_TEST(w.fetch_shard({workers() - 1}).size() == last.size());
  });
}

BOOST_AUTO_TEST_CASE(halos_exchanged_by_command_feed_a_kernel) {
  control([](crown::controller& c) {
    crown::tensor_engine e(c.workers());
    const std::size_t len = 4 * static_cast<std::size_t>(workers()) + 1;
    const crown::halo_spec<1> periodic{{1}, {true}};
    auto u = e.create<std::int64_t, 1>("u", {len}, {crown::shard(0)}, periodic);
    auto v = e.create<std::int64_t, 1>("v", {len}, {crown::shard(0)}, periodic);
    u.apply("test.count");
    u.exchange_halos();
    e.run("test.neighbours", {}, u, v);
    const auto got = v.fetch();
    for (std::size_t i = 0; i < len; ++i) {
      const auto at = [&](std::size_t k) { return static_cast<std::int64_t>(3 * (k % len) + 1); };
      BOOST_TEST(got[i] == at(i + len - 1) + at(i + 1));
    }
  });
}

BOOST_AUTO_TEST_CASE(reduce_combines_the_copies_along_a_mesh_dimension) {
  control([](crown::controller& c) {
    crown::tensor_engine e(two_dims(c));
    const int dp = e.mesh().dims()[0].size, tp = e.mesh().dims()[1].size;
    auto u = e.create<double, 2>("u", {5, 8}, {crown::replicate(), crown::shard(1)});
    u.apply("test.ramp");
    e.run("test.add_image", {1.0}, u); // copy (d, t) holds x + (d * tp + t)
    u.reduce("dp");
    const std::vector<double> ref = ramp_reference(5, 8);
    for (int t = 0; t < tp; ++t) {
      const crown::box<2> b = u.layout().block_of(t);
      for (int d = 0; d < dp; ++d) { // every copy along dp holds the sum of them all
        const auto got = u.fetch_shard({d, t});
        std::size_t k = 0;
        for (std::size_t r = b.lo[0]; r < b.hi[0]; ++r)
          for (std::size_t s = b.lo[1]; s < b.hi[1]; ++s) {
            double expect = 0;
            for (int dd = 0; dd < dp; ++dd) expect += ref[r * 8 + s] + (dd * tp + t);
            BOOST_TEST(got.at(k++) == expect);
          }
      }
    }
    BOOST_TEST(what_of<crown::argument_error>([&] {
                 u.reduce("tp", crown::reduce_op::min);
               }).find("the tensor is sharded along 'tp', not replicated") != std::string::npos);
    BOOST_TEST(what_of<crown::argument_error>([&] {
                 u.reduce("pp");
               }).find("no dimension 'pp' in mesh{dp=") != std::string::npos);
  });
}

BOOST_AUTO_TEST_CASE(a_handle_after_its_mesh_stopped_names_the_tensor_and_the_ranks) {
  control([](crown::controller& c) {
    crown::tensor_engine e(c.workers());
    auto u = e.create<double, 2>("u", {4, 4}, {crown::shard(0)});
    u.fill(1.0);
    e.stop();
    for (const auto& what : {what_of<crown::state_error>([&] { u.fill(2.0); }),
                             what_of<crown::state_error>([&] { (void)u.fetch(); }),
                             what_of<crown::state_error>([&] { (void)u.fetch_shard({0}); })}) {
      BOOST_TEST(what.find("remote_tensor u (#1, [4, 4] on tensor_engine{workers=") !=
                 std::string::npos);
      BOOST_TEST(what.find("used after its mesh stopped") != std::string::npos);
      BOOST_TEST(what.find("blocks on ranks 1") != std::string::npos);
    }
    BOOST_TEST(what_of<crown::state_error>([&] {
                 (void)u.fetch_shard({0});
               }).find("fetch_shard {0} (rank 1): used after its mesh stopped") !=
               std::string::npos);
    BOOST_TEST(what_of<crown::state_error>([&] { e.wait(); }).find("the engine was stopped") !=
               std::string::npos);
  });
}

BOOST_AUTO_TEST_CASE(a_shard_that_does_not_exist_names_the_tensor_and_the_point) {
  control([](crown::controller& c) {
    crown::tensor_engine e(c.workers());
    auto u = e.create<double, 2>("grid", {4, 4}, {crown::shard(0)});
    const std::string beyond =
        what_of<crown::argument_error>([&] { (void)u.fetch_shard({workers()}); });
    BOOST_TEST(beyond.find("remote_tensor grid") != std::string::npos);
    BOOST_TEST(beyond.find("fetch_shard: point {" + std::to_string(workers()) +
                           "} is not in mesh{workers=" + std::to_string(workers()) +
                           "}: no such shard") != std::string::npos);
    const std::string two = what_of<crown::argument_error>([&] { (void)u.fetch_shard({0, 0}); });
    BOOST_TEST(two.find("point {0, 0} is not in") != std::string::npos);
    // Nothing was sent: the tensor still answers.
    u.fill(3.0);
    BOOST_TEST(u.sum() == 48.0);
  });
}

BOOST_AUTO_TEST_CASE(bad_functions_and_mismatched_tensors_are_refused_on_the_controller) {
  control([](crown::controller& c) {
    crown::tensor_engine e(c.workers());
    auto u = e.create<double, 2>("u", {4, 4}, {crown::shard(0)});
    auto small = e.create<double, 2>("small", {2, 4}, {crown::shard(1)});
    BOOST_TEST(what_of<crown::argument_error>([&] {
                 u.apply("nope");
               }).find("no element function is registered as 'nope'") != std::string::npos);
    BOOST_TEST(what_of<crown::argument_error>([&] { u.apply("test.count"); })
                   .find("the element function 'test.count' is registered for another element "
                         "type or rank") != std::string::npos);
    BOOST_TEST(what_of<crown::argument_error>([&] {
                 e.run("test.neighbours", {}, u);
               }).find("registered for another element type or rank") != std::string::npos);
    BOOST_TEST(what_of<crown::argument_error>([&] {
                 u.axpy(1.0, small);
               }).find("remote_tensor small (#2, [2, 4]") != std::string::npos);
    BOOST_TEST(what_of<crown::argument_error>([&] {
                 (void)e.create<double, 2>("bad", {4, 4}, {crown::shard(0), crown::shard(1)});
               }).find("2 placements for 1 mesh dimensions") != std::string::npos);
    BOOST_TEST(what_of<crown::state_error>([] {
                 crown::remote_tensor<double, 1>().fill(0);
               }).find("an empty handle") != std::string::npos);
    // A halo wider than a block: every worker refuses it alike, before allocating.
    if (workers() > 1) {
      const std::string wide = what_of<crown::actor_error>([&] {
        (void)e.create<double, 2>("wide", {4, 4}, {crown::shard(0)}, {{3, 0}, {false, false}});
      });
      BOOST_TEST(wide.find("halo width 3 along dimension 0 exceeds the smallest block") !=
                 std::string::npos);
    }
    u.fill(1.0);
    BOOST_TEST(u.sum() == 16.0); // the engine still works
  });
}

BOOST_AUTO_TEST_CASE(a_handle_after_its_control_session_names_the_tensor) {
  crown::remote_tensor<double, 2> kept;
  control([&](crown::controller& c) {
    crown::tensor_engine e(c.workers());
    kept = e.create<double, 2>("kept", {4, 4}, {crown::shard(0)});
  });
  if (crown::world().rank() == 0) {
    const std::string what = what_of<crown::state_error>([&] { kept.fill(1.0); });
    BOOST_TEST(what.find("remote_tensor kept") != std::string::npos);
    BOOST_TEST(what.find("control session has ended") != std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(a_failed_command_is_reported_by_the_next_wait_naming_it) {
  control([](crown::controller& c) {
    crown::tensor_engine e(c.workers());
    auto u = e.create<double, 2>("u", {4, 4}, {crown::shard(0)});
    u.fill(1.0);
    e.run("test.refuse", {}, u); // not waited for
    const std::string what = what_of<crown::actor_error>([&] { (void)u.sum(); });
    BOOST_TEST(what.find("tensor_engine::run(test.refuse)") != std::string::npos);
    BOOST_TEST(what.find("on rank 1") != std::string::npos);
    BOOST_TEST(what.find("refused by the kernel") != std::string::npos);
    BOOST_TEST(u.sum() == 16.0); // reported once; the engine goes on
    e.run("test.refuse", {}, u);
    BOOST_TEST(what_of<crown::actor_error>([&] { e.stop(); }).find("refused by the kernel") !=
               std::string::npos);
    BOOST_TEST(what_of<crown::state_error>([&] {
                 u.fill(0.0);
               }).find("used after its mesh stopped") != std::string::npos);
  });
}
