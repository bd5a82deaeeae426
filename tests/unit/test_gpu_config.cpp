// CROWN_GPU_HEAP_SIZE and CROWN_GPU_MAPPING: parsing, limits, canonical values; and the
// kernel view's host-side type. No MPI, no GPU.
#include <boost/test/unit_test.hpp>
#include <crown/config.hpp>
#include <crown/device/coarray_view.hpp>
#include <crown/error.hpp>
#include <harness/crown_test.hpp>
#include <runtime/startup_agreement.hpp>
#include <type_traits>

using crown::config;

namespace {
std::string message_of(const std::map<std::string, std::string>& vars) {
  return crown_test::what_of<crown::config_error>([&] { (void)config::parse(vars); });
}
} // namespace

BOOST_AUTO_TEST_CASE(gpu_heap_size_defaults_to_one_gib_and_zero_turns_it_off) {
  BOOST_TEST(config::parse({}).gpu_heap_size == std::size_t{1} << 30);
  BOOST_TEST(config::parse({{"CROWN_GPU_HEAP_SIZE", "0"}}).gpu_heap_size == 0u);
  BOOST_TEST(config::parse({{"CROWN_GPU_HEAP_SIZE", "256M"}}).gpu_heap_size == std::size_t{256}
                                                                                   << 20);
  BOOST_TEST(config::parse({{"CROWN_GPU_HEAP_SIZE", "16T"}}).gpu_heap_size == std::size_t{1} << 44);
  BOOST_TEST(config::parse({{"CROWN_GPU_HEAP_SIZE", "1048576"}}).gpu_heap_size == std::size_t{1}
                                                                                      << 20);
}

BOOST_AUTO_TEST_CASE(gpu_heap_size_refuses_what_the_host_heap_refuses) {
  for (auto bad :
       {"00", "-1", "1048575", "17T", "4398046511105M", "1.5G", "1GB", "", "G", "nan", "off"})
    BOOST_TEST(message_of({{"CROWN_GPU_HEAP_SIZE", bad}})
                       .find("CROWN_GPU_HEAP_SIZE: invalid value '" + std::string(bad) +
                             "' (expected bytes from 1M to 16T") != std::string::npos,
               bad);
}

BOOST_AUTO_TEST_CASE(gpu_mapping_is_auto_vmm_or_ipc) {
  BOOST_TEST((config::parse({}).gpu_mapping == crown::gpu_mapping_choice::automatic));
  for (auto m : {"auto", "vmm", "ipc"})
    BOOST_TEST(crown::to_string(config::parse({{"CROWN_GPU_MAPPING", m}}).gpu_mapping) == m);
  BOOST_TEST(message_of({{"CROWN_GPU_MAPPING", "nvlink"}}) ==
             "crown::config_error: rank ?: CROWN_GPU_MAPPING: invalid value 'nvlink' (allowed: "
             "auto, vmm, ipc)");
}

BOOST_AUTO_TEST_CASE(gpu_settings_must_agree_by_canonical_value) {
  const config a = config::parse({{"CROWN_GPU_HEAP_SIZE", "1024M"}});
  const config b = config::parse({{"CROWN_GPU_HEAP_SIZE", "1G"}});
  BOOST_TEST(crown::detail::canonical_value(a, "CROWN_GPU_HEAP_SIZE") ==
             crown::detail::canonical_value(b, "CROWN_GPU_HEAP_SIZE"));
  BOOST_TEST(crown::detail::canonical_value(config::parse({{"CROWN_GPU_HEAP_SIZE", "0"}}),
                                            "CROWN_GPU_HEAP_SIZE") == "0");
  BOOST_TEST(crown::detail::canonical_value(config::parse({{"CROWN_GPU_MAPPING", "ipc"}}),
                                            "CROWN_GPU_MAPPING") == "ipc");
  bool per_rank = true;
  for (const auto& v : crown::config_variables())
    if (v.name.starts_with("CROWN_GPU_")) per_rank = per_rank && v.per_rank;
  BOOST_TEST(!per_rank); // a symmetric heap: every rank must agree
}

BOOST_AUTO_TEST_CASE(kernel_view_is_trivially_copyable_plain_data) {
  // Kernels take the view by value: it must be a plain, trivially copyable struct, and
  // host code (g++) must be able to build one without CUDA headers.
  using view = crown::device::coarray_view<double, 3>;
  static_assert(std::is_trivially_copyable_v<view>);
  static_assert(std::is_standard_layout_v<view>);
  const view v{nullptr, {2, 3, 4}, 1, 4};
  const view w = v;
  BOOST_TEST(w.extents[2] == 4u);
  BOOST_TEST(w.num_images == 4);
}
