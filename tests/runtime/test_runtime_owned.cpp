// Crown initialises MPI itself and finalises it when the runtime goes.
#include <boost/test/unit_test.hpp>
#include <crown/crown.hpp>
#include <harness/crown_test.hpp>
#include <optional>

namespace {
template <typename F>
std::string state_error_of(F&& f) {
  return crown_test::what_of<crown::state_error>(std::forward<F>(f));
}
} // namespace

BOOST_AUTO_TEST_CASE(owns_mpi_from_init_to_finalize) {
  auto& suite = boost::unit_test::framework::master_test_suite();
  int argc = suite.argc;
  char** argv = suite.argv;
  BOOST_TEST(state_error_of([] { (void)crown::world(); }).find("no crown::runtime exists yet") !=
             std::string::npos);
  std::optional<crown::mesh> kept;
  {
    crown::runtime rt(argc, argv);
    BOOST_TEST(rt.owns_mpi());
    const char* osc = std::getenv("OMPI_MCA_osc"); // chosen for Open MPI, unless the user had
    BOOST_TEST((osc && std::string(osc) == "ucx,sm"));
    BOOST_TEST((rt.thread_support() == crown::thread_level::multiple));
    int size = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    BOOST_TEST(rt.size() == size);
    BOOST_TEST(state_error_of([] { crown::runtime again; }).find("already active") !=
               std::string::npos);
    kept = rt.world().reshape({{"all", -1}});
    kept->barrier();
  }
  int finalized = 0;
  MPI_Finalized(&finalized);
  BOOST_TEST(finalized == 1);
  BOOST_TEST(state_error_of([] { (void)crown::this_runtime(); }).find("already destroyed") !=
             std::string::npos);
  BOOST_TEST(state_error_of([] { crown::runtime again; }).find("cannot be initialised again") !=
             std::string::npos);
  BOOST_TEST(kept->to_string().starts_with("mesh{all="));
  // one-sided memory after finalize: a clear error, not a crash
  std::int64_t x = 1;
  BOOST_TEST(state_error_of([&] {
               crown::detail::remote_put(0, 0, &x, sizeof x);
             }).find("no crown::runtime is active") != std::string::npos);
  BOOST_TEST(state_error_of([] { (void)crown::allocate<int>(4); }).find("no crown::runtime") !=
             std::string::npos);
  BOOST_TEST(state_error_of([&] { (void)kept->comm(); }).find("was destroyed") !=
             std::string::npos);
}
