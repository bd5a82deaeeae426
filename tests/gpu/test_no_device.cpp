// A memory_kind::cuda coarray where some rank has no device heap is a crown::error on
// every rank naming the rank and the cause. Runs everywhere: without a GPU (CI), where
// the cause is that no GPU is visible (or that Crown was built without CUDA), and with
// CROWN_GPU_HEAP_SIZE=0 on any machine, and with a device heap that failed at start-up
// (CROWN_FAULT's gpu_heap point: on a GPU machine the heaps that came up are freed). On
// a GPU machine without those variables the allocation must succeed instead.
#include <boost/test/unit_test.hpp>
#include <crown/crown.hpp>
#include <cstdlib>
#include <harness/crown_test.hpp>

namespace {

bool heap_turned_off() {
  const char* v = std::getenv("CROWN_GPU_HEAP_SIZE");
  return v && std::string(v) == "0";
}

/// CROWN_FAULT=throw:rank=1:at=gpu_heap: the device heap "failed" on rank 1 at start-up,
/// so no rank has one (the settings were left alone: the runtime started without).
bool heap_failed_on_purpose() {
  const char* v = std::getenv("CROWN_FAULT");
  return v && std::string(v).find("at=gpu_heap") != std::string::npos;
}

bool every_rank_has_a_gpu() {
  int gpus = crown::this_runtime().topology().host().gpus;
  MPI_Allreduce(MPI_IN_PLACE, &gpus, 1, MPI_INT, MPI_MIN, crown_test::w().comm());
  return gpus > 0 && CROWN_HAVE_CUDA;
}

} // namespace

BOOST_AUTO_TEST_CASE(cuda_allocation_without_a_device_heap_names_rank_and_cause) {
  if (every_rank_has_a_gpu() && !heap_turned_off() && !heap_failed_on_purpose()) {
    crown::coarray<int, 1, crown::memory_kind::cuda> a(crown_test::w(), 16);
    BOOST_TEST(a.data() != nullptr);
    return;
  }
  const std::string m = crown_test::what_of<crown::error>(
      [] { crown::coarray<int, 1, crown::memory_kind::cuda> a(crown_test::w(), 16); });
  BOOST_TEST_INFO(m);
  BOOST_TEST(m.starts_with("crown::state_error: rank " + std::to_string(crown_test::me()) +
                           ": coarray<int32_t,1,cuda>"));
  if (CROWN_HAVE_CUDA)
    BOOST_TEST((m.find(" on mesh{") != std::string::npos &&
                m.find("memory_kind::cuda needs a device heap on every member, but image 0 (rank "
                       "0) has none: ") != std::string::npos));
  const std::string cause =
      heap_turned_off()  ? "CROWN_GPU_HEAP_SIZE=0 turned the device heap off"
      : !CROWN_HAVE_CUDA ? "built without CUDA"
      : heap_failed_on_purpose()
          ? "the device heap failed at start-up on rank 1: crown::state_error: rank 1: "
            "CROWN_FAULT: injected exception at gpu_heap on rank 1; Crown runs without one"
          : "no GPU is visible to this rank (cudaGetDeviceCount";
  BOOST_TEST(m.find(cause) != std::string::npos);
}

BOOST_AUTO_TEST_CASE(the_failed_allocation_leaves_the_runtime_usable) {
  if (every_rank_has_a_gpu() && !heap_turned_off() && !heap_failed_on_purpose()) return;
  for (int i = 0; i < 2; ++i)
    BOOST_CHECK_THROW(
        (crown::coarray<double, 2, crown::memory_kind::cuda>(crown_test::w(), {4, 4})),
        crown::error);
  crown::coarray<int> host(crown_test::w(), 4); // host memory still works
  host.on(crown_test::right()).put({1}, crown_test::me());
  crown::sync_all();
  BOOST_TEST(host(1) == crown_test::left());
  BOOST_TEST(crown::detail::device_address(0) == nullptr);
  BOOST_TEST(crown::detail::device_ordinal() == -1);
}
