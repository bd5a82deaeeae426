// Crown initialises MPI itself and finalises it when the runtime goes.
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <crown/crown.hpp>
#include <harness/crown_test.hpp>
#include <optional>
#include <string>
#include <vector>

namespace {
/// The value Open MPI's "osc" selection variable had at MPI_Init (MPI_T), or "".
std::string osc_selection() {
  std::string value;
#ifdef OPEN_MPI
  int provided = 0, count = 0;
  if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) return value;
  MPI_T_cvar_get_num(&count);
  for (int i = 0; i < count; ++i) {
    char name[256], desc[1024];
    int name_len = sizeof name, desc_len = sizeof desc, verbosity = 0, bind = 0, scope = 0;
    MPI_Datatype type;
    MPI_T_enum values;
    MPI_T_cvar_get_info(i, name, &name_len, &verbosity, &type, &values, desc, &desc_len, &bind,
                        &scope);
    if (std::string(name) != "osc" || type != MPI_CHAR) continue;
    MPI_T_cvar_handle h;
    int n = 0;
    MPI_T_cvar_handle_alloc(i, nullptr, &h, &n);
    std::vector<char> text(static_cast<std::size_t>(std::max(n, 1)) + 1, '\0');
    MPI_T_cvar_read(h, text.data());
    MPI_T_cvar_handle_free(&h);
    value = text.data();
  }
  MPI_T_finalize();
#endif
  return value;
}

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
  const char* osc_before = std::getenv("OMPI_MCA_osc");
  const std::string user_osc = osc_before ? osc_before : "";
  {
    crown::runtime rt(argc, argv);
    BOOST_TEST(rt.owns_mpi());
    // Crown asks Open MPI for osc/ucx only for its own MPI_Init_thread and leaves the
    // process environment as it found it.
    const char* osc = std::getenv("OMPI_MCA_osc");
    if (!osc_before) BOOST_TEST(osc == nullptr, "OMPI_MCA_osc is still set to " << osc);
    if (osc_before) BOOST_TEST((osc && user_osc == osc));
#ifdef OPEN_MPI
    // ... and MPI_Init_thread saw it: osc/ucx serves the windows.
    BOOST_TEST(osc_selection() == (osc_before ? user_osc : std::string("ucx,sm")));
#endif
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
