// Needs a GPU (the harness skips it where none is visible): discovery and a real kernel.
#include <boost/test/unit_test.hpp>
#include <crown/crown.hpp>

BOOST_AUTO_TEST_CASE(every_rank_gets_a_working_gpu) {
  const auto& rt = crown::this_runtime();
  const auto& me = rt.topology().self();
  const auto& host = rt.topology().host();
  BOOST_TEST_REQUIRE(host.gpus > 0);
  BOOST_TEST(me.gpu == me.local_rank % host.gpus);
  BOOST_TEST(!host.gpu_names.at(me.gpu).empty());
  BOOST_TEST(rt.transports().cuda);
  BOOST_TEST(crown::gpu_works(me.gpu));     // a kernel ran and its results came back
  BOOST_TEST(!crown::gpu_works(host.gpus)); // a device that does not exist
}
