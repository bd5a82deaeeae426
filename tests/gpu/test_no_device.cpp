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
      !CROWN_HAVE_CUDA    ? "built without CUDA" // before any setting: nothing to turn off
      : heap_turned_off() ? "CROWN_GPU_HEAP_SIZE=0 turned the device heap off"
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

BOOST_AUTO_TEST_CASE(a_device_tensor_without_device_heaps_names_the_cause) {
  if (every_rank_has_a_gpu() && !heap_turned_off() && !heap_failed_on_purpose()) return;
  const crown::mesh m = crown_test::w().reshape({{"x", crown_test::n()}});
  const std::string e = crown_test::what_of<crown::state_error>([&] {
    crown::dist_tensor<double, 2, crown::memory_kind::cuda> t(m, {8, 8}, {crown::shard(0)},
                                                              {{1, 1}, {true, true}});
  });
  BOOST_TEST(e.find("coarray<double,2,cuda>") != std::string::npos, e);
  BOOST_TEST(e.find(CROWN_HAVE_CUDA ? "memory_kind::cuda needs a device heap on every member"
                                    : "built without CUDA") != std::string::npos,
             e);
  // The host tensor of the same layout is unaffected.
  crown::dist_tensor<double, 2> host(m, {8, 8}, {crown::shard(0)}, {{1, 1}, {true, true}});
  host.fill(1.0);
  BOOST_TEST(host.sum() == 64.0);
}

BOOST_AUTO_TEST_CASE(device_collectives_check_their_arguments_before_the_device) {
  if (every_rank_has_a_gpu() && !heap_turned_off() && !heap_failed_on_purpose()) return;
  using crown::detail::device_collective_kind;
  const crown::mesh& w = crown_test::w();
  const int n = w.size();
  crown::detail::device_collective c;
  c.team = &w;
  c.count = 8;
  c.elem = sizeof(double);
  c.type_tag = crown::detail::type_tag<double, 1>();
  c.type = crown::detail::device_number_of<double>();
  c.name = "co_sum";
  const std::string head = "crown::argument_error: rank " + std::to_string(crown_test::me()) +
                           ": co_sum of a device coarray on " + w.to_string() + ": ";
  auto message = [&] {
    return crown_test::what_of<crown::error>([&] { crown::detail::run_device_collective(c); });
  };
  c.image = n;
  BOOST_TEST(message() == head + "result image " + std::to_string(n) + " is out of range [-1, " +
                              std::to_string(n) + ")");
  c.image = -2;
  BOOST_TEST(
      message().ends_with("result image -2 is out of range [-1, " + std::to_string(n) + ")"));
  c.kind = device_collective_kind::broadcast;
  c.image = -1;
  BOOST_TEST(message().ends_with("source image -1 is out of range [0, " + std::to_string(n) + ")"));
  c.kind = device_collective_kind::all_gather;
  c.result_count = 8 * static_cast<std::size_t>(n) + 1;
  BOOST_TEST(message().ends_with("the result holds " + std::to_string(c.result_count) +
                                 " elements but needs " + std::to_string(8 * n) + " (" +
                                 std::to_string(n) + " images x 8)"));
  c.kind = device_collective_kind::reduce_scatter;
  c.result_count = 3;
  BOOST_TEST(message().ends_with("the coarray's block holds 8 elements but needs " +
                                 std::to_string(3 * n) + " (" + std::to_string(n) +
                                 " images x 3)"));
  // A null result where one is needed.
  c.kind = device_collective_kind::all_gather;
  c.result_count = 8 * static_cast<std::size_t>(n);
  BOOST_TEST(message().ends_with("the result is a null pointer (" + std::to_string(c.result_count) +
                                 " elements)"));
  // Wrong on image 0 alone: every image hears of it (the others do not wait for image 0
  // in the collective), naming image 0; without CUDA the others meet the build first.
  c.kind = device_collective_kind::reduce;
  c.result_count = 0;
  c.image = crown_test::me() == 0 ? n : -1;
  const std::string alone = message();
  BOOST_TEST_INFO(alone);
  const std::string out_of_range =
      "result image " + std::to_string(n) + " is out of range [-1, " + std::to_string(n) + ")";
  if (crown::detail::check_collectives() && n > 1) { // CROWN_CHECK=1: the agreement says it
    BOOST_TEST(alone.find(": image is ") != std::string::npos);
  } else if (crown_test::me() == 0) {
    BOOST_TEST(alone == head + out_of_range);
  } else if (CROWN_HAVE_CUDA) {
    BOOST_TEST(alone ==
               head + "image 0 (rank " + std::to_string(w.ranks()[0]) + "): " + out_of_range);
  } else {
    BOOST_TEST(alone.find("built without CUDA") != std::string::npos);
  }
  // CROWN_CHECK=1: calls that differ in their reduction (co_sum here, co_max there) or
  // their coarray fail on every image, naming the difference and a rank.
  c.image = -1;
  if (crown::detail::check_collectives() && n > 1) {
    c.op = crown_test::me() == 0 ? crown::detail::reduction::sum : crown::detail::reduction::max;
    const std::string other = std::to_string(crown_test::me() == 0 ? w.ranks()[1] : w.ranks()[0]);
    const std::string differ = message();
    BOOST_TEST_INFO(differ);
    BOOST_TEST(differ.starts_with(head));
    BOOST_TEST(differ.find(": reduction is ") != std::string::npos);
    BOOST_TEST(differ.ends_with(" on rank " + other));
    c.op = crown::detail::reduction::sum;
    c.offset = crown_test::me() == 0 ? 0 : 64;
    BOOST_TEST(message().find(": block offset is ") != std::string::npos);
    c.offset = 0;
  }
  // Good arguments meet the missing device heap, named like a cuda allocation names it.
  const std::string m = message();
  BOOST_TEST_INFO(m);
  BOOST_TEST(m.starts_with("crown::state_error: rank " + std::to_string(crown_test::me()) +
                           ": co_sum of a device coarray on " + w.to_string()));
  BOOST_TEST((m.find("device heap") != std::string::npos ||
              m.find("built without CUDA") != std::string::npos));
  BOOST_CHECK_THROW((void)crown::device_collectives_path(w), crown::state_error);
}
