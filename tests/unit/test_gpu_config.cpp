// CROWN_GPU_HEAP_SIZE, CROWN_GPU_MAPPING, CROWN_GPU_COLLECTIVES and CROWN_GPU_HALOS:
// parsing, limits, canonical values; the path device collectives choose from agreed
// facts and how they split elements between images; the kernel view's host-side type;
// and the element arithmetic of dist_tensor's box copy kernel. No MPI, no GPU.
#include <algorithm>
#include <array>
#include <bit>
#include <boost/test/unit_test.hpp>
#include <crown/config.hpp>
#include <crown/device/coarray_view.hpp>
#include <crown/error.hpp>
#include <crown/section.hpp>
#include <crown/tensor/dist_tensor.hpp>
#include <cstring>
#include <gpu/box_copy.hpp>
#include <gpu/collective_path.hpp>
#include <gpu/offhost_path.hpp>
#include <gpu/strided_copies.hpp>
#include <gpu/x86_sum.hpp>
#include <harness/crown_test.hpp>
#include <limits>
#include <numeric>
#include <runtime/startup_agreement.hpp>
#include <transport/image_share.hpp>
#include <type_traits>
#include <utility>
#include <vector>

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

namespace {
/// A choice variable: the first of `values` is its default; each value is parsed,
/// spelled back and canonical as given; `bad` is refused naming what is allowed.
template <typename Field>
void choices_parse(const std::string& name, const std::vector<std::string>& values, Field field,
                   const std::string& bad) {
  BOOST_TEST(crown::to_string(config::parse({}).*field) == values.front());
  std::string allowed;
  for (const std::string& v : values) {
    const config parsed = config::parse({{name, v}});
    BOOST_TEST(crown::to_string(parsed.*field) == v);
    BOOST_TEST(crown::detail::canonical_value(parsed, name) == v);
    allowed += (allowed.empty() ? "" : ", ") + v;
  }
  BOOST_TEST(message_of({{name, bad}}) == "crown::config_error: rank ?: " + name +
                                              ": invalid value '" + bad + "' (allowed: " + allowed +
                                              ")");
}
} // namespace

BOOST_AUTO_TEST_CASE(gpu_mapping_is_auto_vmm_or_ipc) {
  choices_parse("CROWN_GPU_MAPPING", {"auto", "vmm", "ipc"}, &config::gpu_mapping, "nvlink");
}

BOOST_AUTO_TEST_CASE(gpu_collectives_is_auto_peer_nccl_or_host) {
  choices_parse("CROWN_GPU_COLLECTIVES", {"auto", "peer", "nccl", "host"}, &config::gpu_collectives,
                "mpi");
}

BOOST_AUTO_TEST_CASE(gpu_halos_is_copies_or_kernel) {
  choices_parse("CROWN_GPU_HALOS", {"copies", "kernel"}, &config::gpu_halos, "auto");
}

namespace {
/// Box `extent` of blocks `fe` and `te` (N dimensions) from `fa` to `ta`, copied element
/// by element as the box copy kernel copies it (box3's position and offsets), against
/// the host tensor's copy_box; the rest of `to` must stay as it was.
template <std::size_t N>
void box_kernel_matches_host(const std::array<std::size_t, N>& fe,
                             const std::array<std::size_t, N>& fa,
                             const std::array<std::size_t, N>& te,
                             const std::array<std::size_t, N>& ta,
                             const std::array<std::size_t, N>& ex) {
  std::size_t from_n = 1, to_n = 1;
  for (std::size_t d = 0; d < N; ++d) {
    from_n *= fe[d];
    to_n *= te[d];
  }
  std::vector<double> from(from_n), expected(to_n, -1.0), got(to_n, -1.0);
  for (std::size_t i = 0; i < from_n; ++i) from[i] = static_cast<double>(i);
  crown::detail::copy_box(from.data(), fe, fa, expected.data(), te, ta, ex);
  const crown::detail::box3 b = crown::detail::make_box3(
      N, from.data(), fe.data(), fa.data(), got.data(), te.data(), ta.data(), ex.data());
  std::size_t count = 1;
  for (std::size_t d = 0; d < N; ++d) count *= ex[d];
  BOOST_TEST(b.count() == count);
  for (std::size_t i = 0; i < b.count(); ++i) { // one "thread" per element
    std::size_t z = 0, y = 0, x = 0;
    b.position(i, z, y, x);
    got[b.to_offset(z, y, x)] = from[b.from_offset(z, y, x)];
  }
  BOOST_TEST(got == expected, boost::test_tools::per_element());
}
} // namespace

BOOST_AUTO_TEST_CASE(the_box_copy_kernel_moves_what_the_host_box_copy_moves) {
  box_kernel_matches_host<1>({10}, {3}, {12}, {0}, {7});
  box_kernel_matches_host<2>({6, 9}, {1, 7}, {8, 4}, {5, 1}, {3, 2}); // a halo column
  box_kernel_matches_host<2>({6, 9}, {2, 0}, {6, 9}, {0, 0}, {1, 9}); // a whole row
  box_kernel_matches_host<2>({5, 4}, {0, 0}, {5, 4}, {0, 0}, {5, 4}); // all of it
  box_kernel_matches_host<3>({4, 5, 6}, {1, 2, 3}, {3, 7, 8}, {0, 1, 2}, {2, 3, 3});
  box_kernel_matches_host<3>({4, 5, 6}, {0, 4, 0}, {4, 1, 6}, {0, 0, 0}, {4, 1, 6}); // a face
  box_kernel_matches_host<3>({3, 3, 3}, {2, 2, 2}, {3, 3, 3}, {0, 0, 0}, {1, 1, 1}); // a corner
}

BOOST_AUTO_TEST_CASE(a_box_plane_is_one_copy_only_where_its_rows_are_one_run) {
  const std::size_t fe[2] = {6, 9}, te[2] = {6, 9}, te_narrow[2] = {6, 4}, at[2] = {};
  const std::size_t row[2] = {1, 9}, rows[2] = {3, 9}, column[2] = {3, 1}, block[2] = {3, 4};
  using crown::detail::make_box3;
  BOOST_TEST(make_box3(2, nullptr, fe, at, nullptr, te, at, row).planes_contiguous());
  BOOST_TEST(make_box3(2, nullptr, fe, at, nullptr, te, at, rows).planes_contiguous());
  BOOST_TEST(!make_box3(2, nullptr, fe, at, nullptr, te, at, column).planes_contiguous());
  BOOST_TEST(!make_box3(2, nullptr, fe, at, nullptr, te_narrow, at, block).planes_contiguous());
  const std::size_t one[1] = {5}, one_at[1] = {2};
  const auto b = make_box3(1, nullptr, one, one_at, nullptr, one, one_at, one);
  BOOST_TEST(b.ex[0] == 1u); // leading dimensions of extent 1
  BOOST_TEST(b.ex[1] == 1u);
  BOOST_TEST(b.ex[2] == 5u);
  BOOST_TEST(b.fa[2] == 2u);
}

BOOST_AUTO_TEST_CASE(the_box_kernel_moves_the_widest_aligned_word) {
  alignas(16) static std::byte memory[64];
  const auto box = [](std::size_t from, std::size_t to) {
    crown::detail::box3 b;
    b.from = memory + from;
    b.to = memory + to;
    return b;
  };
  using crown::detail::box_word_bytes;
  BOOST_TEST(box_word_bytes(box(0, 8), 8) == 8u);   // double
  BOOST_TEST(box_word_bytes(box(0, 8), 16) == 8u);  // complex<double>
  BOOST_TEST(box_word_bytes(box(0, 4), 8) == 4u);   // complex<float> at a 4-byte address
  BOOST_TEST(box_word_bytes(box(0, 16), 12) == 4u); // three floats
  BOOST_TEST(box_word_bytes(box(0, 16), 2) == 2u);
  BOOST_TEST(box_word_bytes(box(1, 16), 8) == 1u);
  BOOST_TEST(box_word_bytes(box(0, 0), 3) == 1u);
}

namespace {
using crown::detail::choose_device_path;
using crown::detail::device_path_facts;

device_path_facts facts(int images, int unmapped, int shared_a, int shared_b, bool nccl,
                        crown::gpu_collectives_choice setting) {
  device_path_facts f;
  f.images = images;
  f.unmapped_image = unmapped;
  f.shared_gpu_images[0] = shared_a;
  f.shared_gpu_images[1] = shared_b;
  f.nccl_built = nccl;
  f.setting = setting;
  return f;
}

std::string refusal(const device_path_facts& f) {
  return crown_test::what_of<crown::state_error>([&] { (void)choose_device_path(f); });
}
} // namespace

namespace {
/// Section `s` of a row-major block of `extents` ints, moved packed by the 2-D copies
/// for_each_copy_2d gives (each copy done as cudaMemcpy2D would) and by a serial loop
/// over the section's indices; returns the copies' count after checking they agree.
template <std::size_t N>
std::size_t copies_match_the_serial_gather(const crown::section<N>& s,
                                           const std::array<std::size_t, N>& extents,
                                           std::size_t max_pitch, std::size_t* tallest = nullptr) {
  std::size_t elements = 1;
  for (const std::size_t e : extents) elements *= e;
  std::vector<int> block(elements);
  std::iota(block.begin(), block.end(), 7);
  const crown::detail::heap_block where{0, elements * sizeof(int)};
  const crown::detail::strided layout =
      crown::detail::section_layout(s, extents, sizeof(int), where, [] { return std::string(); });
  std::vector<int> serial;
  std::array<std::size_t, N> at{};
  const auto gather = [&](auto&& self, std::size_t d) -> void {
    if (d == N) {
      std::size_t i = 0;
      for (std::size_t k = 0; k < N; ++k) i = i * extents[k] + at[k];
      serial.push_back(block[i]);
      return;
    }
    for (at[d] = s[d].begin; at[d] < s[d].end; at[d] += s[d].stride) self(self, d + 1);
  };
  gather(gather, 0);
  std::vector<int> packed(serial.size(), -1);
  std::size_t copies = 0, done = 0, height = 0;
  const auto* heap = reinterpret_cast<const std::byte*>(block.data()) + layout.offset;
  auto* out = reinterpret_cast<std::byte*>(packed.data());
  const bool split =
      crown::detail::for_each_copy_2d(layout, max_pitch, [&](const crown::detail::copy_2d& c) {
        ++copies;
        height = std::max(height, c.height);
        // A copy of one row is a plain copy, without a pitch.
        BOOST_TEST(
            (c.height == 1 || crown::detail::fits_copy_2d(c.width, c.pitch, c.width, max_pitch)));
        BOOST_TEST_REQUIRE(done + c.width * c.height <= packed.size() * sizeof(int));
        for (std::size_t r = 0; r < c.height; ++r, done += c.width)
          std::memcpy(out + done, heap + c.offset + r * c.pitch, c.width);
      });
  BOOST_TEST(done == serial.size() * sizeof(int));
  BOOST_TEST(packed == serial, boost::test_tools::per_element());
  if (tallest) *tallest = height;
  std::size_t unlimited_copies = 0; // the limit split rows exactly where it changed the plan
  (void)crown::detail::for_each_copy_2d(layout, SIZE_MAX,
                                        [&](const crown::detail::copy_2d&) { ++unlimited_copies; });
  BOOST_TEST(split == (copies != unlimited_copies));
  return copies;
}
} // namespace

BOOST_AUTO_TEST_CASE(strided_blocks_go_as_2d_copies_or_row_by_row_past_the_pitch_limit) {
  using crown::triplet;
  constexpr std::size_t unlimited = std::size_t{1} << 31;
  std::size_t tallest = 0;
  // Strided elements of one row: one copy down the innermost dimension.
  BOOST_TEST(copies_match_the_serial_gather<1>({triplet{2, 17, 3}}, {20}, unlimited, &tallest) ==
             1u);
  BOOST_TEST(tallest == 5u);
  // A contiguous run is one plain copy, however wide (a row has no pitch).
  BOOST_TEST(copies_match_the_serial_gather<1>({triplet{3, 19, 1}}, {20}, 8) == 1u);
  // Columns 0, 3, 6, 9 of rows 1, 3, 5: one copy per row of the section.
  const crown::section<2> s{triplet{1, 7, 2}, triplet{0, 10, 3}};
  BOOST_TEST(copies_match_the_serial_gather<2>(s, {8, 10}, unlimited, &tallest) == 3u);
  BOOST_TEST(tallest == 4u);
  // Past the limit (12-byte pitch, limit 8): one element per copy.
  BOOST_TEST(copies_match_the_serial_gather<2>(s, {8, 10}, 8, &tallest) == 12u);
  BOOST_TEST(tallest == 1u);
  // Contiguous rows 3..5, columns 2..8: one copy over the rows; rows apart by 40 bytes.
  const crown::section<2> rows{triplet{3, 6, 1}, triplet{2, 9, 1}};
  BOOST_TEST(copies_match_the_serial_gather<2>(rows, {8, 10}, unlimited, &tallest) == 1u);
  BOOST_TEST(tallest == 3u);
  BOOST_TEST(copies_match_the_serial_gather<2>(rows, {8, 10}, 40) == 1u); // at the limit
  BOOST_TEST(copies_match_the_serial_gather<2>(rows, {8, 10}, 39, &tallest) == 3u);
  BOOST_TEST(tallest == 1u);
  // Three dimensions: planes looped over, each a 2-D copy of rows, or rows one by one.
  const crown::section<3> box{triplet{0, 4, 3}, triplet{1, 5, 2}, triplet{1, 6, 1}};
  BOOST_TEST(copies_match_the_serial_gather<3>(box, {5, 6, 7}, unlimited, &tallest) == 2u);
  BOOST_TEST(tallest == 2u);
  BOOST_TEST(copies_match_the_serial_gather<3>(box, {5, 6, 7}, 50) == 4u);
  const crown::section<3> columns{triplet{1, 3, 1}, triplet{0, 6, 5}, triplet{2, 7, 4}};
  BOOST_TEST(copies_match_the_serial_gather<3>(columns, {5, 6, 7}, unlimited) == 4u);
  BOOST_TEST(copies_match_the_serial_gather<3>(columns, {5, 6, 7}, 8) == 8u);
  // Nothing selected: no copy at all.
  BOOST_TEST(copies_match_the_serial_gather<2>({triplet{2, 2, 1}, triplet{0, 10, 1}}, {8, 10},
                                               unlimited) == 0u);
  // The box copies' test: every pitch, and the row width, within the limit.
  BOOST_TEST(crown::detail::fits_copy_2d(40, 40, 24, 40));
  BOOST_TEST(!crown::detail::fits_copy_2d(40, 41, 24, 40));
  BOOST_TEST(!crown::detail::fits_copy_2d(41, 24, 24, 40));
}

BOOST_AUTO_TEST_CASE(device_collectives_choose_nccl_peer_or_host_from_agreed_facts) {
  using crown::device_path;
  constexpr auto automatic = crown::gpu_collectives_choice::automatic;
  auto path = [](const device_path_facts& f) {
    return crown::to_string(choose_device_path(f).path);
  };
  // A GPU each and NCCL: NCCL, on one host or several.
  BOOST_TEST(path(facts(4, -1, -1, -1, true, automatic)) == "nccl");
  BOOST_TEST(path(facts(4, 2, -1, -1, true, automatic)) == "nccl");
  // Ranks that share a GPU: NCCL refuses them; Crown's kernels where all are mapped.
  const auto shared = choose_device_path(facts(4, -1, 0, 1, true, automatic));
  BOOST_TEST(crown::to_string(shared.path) == "peer");
  BOOST_TEST(shared.why ==
             "4 images mapped here; images 0 and 1 share one GPU (NCCL refuses that)");
  BOOST_TEST(choose_device_path(facts(2, -1, -1, -1, false, automatic)).why ==
             "2 images mapped here; built without NCCL");
  BOOST_TEST(path(facts(1, -1, -1, -1, true, automatic)) == "peer"); // one image: no NCCL needed
  // Shared GPUs on several hosts: the host collectives.
  const auto elsewhere = choose_device_path(facts(4, 2, 0, 2, true, automatic));
  BOOST_TEST(crown::to_string(elsewhere.path) == "host");
  BOOST_TEST(elsewhere.why == "4 images; image 2's device heap is not mapped here (another "
                              "host); images 0 and 2 share one GPU (NCCL refuses that)");
  BOOST_TEST(path(facts(2, 1, -1, -1, false, automatic)) == "host");
  // Forced: what can work does; what cannot throws, naming the setting and the images.
  BOOST_TEST(path(facts(4, -1, -1, -1, true, crown::gpu_collectives_choice::peer)) == "peer");
  BOOST_TEST(path(facts(4, 3, 0, 1, true, crown::gpu_collectives_choice::host)) == "host");
  BOOST_TEST(refusal(facts(4, 3, -1, -1, true, crown::gpu_collectives_choice::peer)) ==
             "crown::state_error: rank ?: CROWN_GPU_COLLECTIVES=peer: image 3's device heap is "
             "not mapped here (another host): the peer path needs every image mapped");
  BOOST_TEST(refusal(facts(2, -1, 0, 1, true, crown::gpu_collectives_choice::nccl)) ==
             "crown::state_error: rank ?: CROWN_GPU_COLLECTIVES=nccl: images 0 and 1 share one "
             "GPU, and NCCL refuses several ranks on one GPU (use peer or host)");
  BOOST_TEST(refusal(facts(2, -1, -1, -1, false, crown::gpu_collectives_choice::nccl)) ==
             "crown::state_error: rank ?: CROWN_GPU_COLLECTIVES=nccl: this Crown was built "
             "without NCCL");
}

BOOST_AUTO_TEST_CASE(a_shared_gpu_is_the_same_gpu_uuid_for_two_images) {
  using crown::detail::first_shared_gpu;
  // Two GPUs, or two MIG instances of one (their own UUIDs): none shared.
  BOOST_TEST((first_shared_gpu({"GPU-0a1b", "GPU-0a1c"}) == std::pair{-1, -1}));
  BOOST_TEST((first_shared_gpu({"GPU-x", "GPU-y", "GPU-y", "GPU-x"}) == std::pair{1, 2}));
  BOOST_TEST((first_shared_gpu({"GPU-x", "GPU-y", "GPU-x"}) == std::pair{0, 2}));
  BOOST_TEST((first_shared_gpu({}) == std::pair{-1, -1}));
}

BOOST_AUTO_TEST_CASE(device_heaps_on_other_hosts_are_staged_and_the_probe_is_reported) {
  using crown::detail::choose_offhost_path;
  const auto none = choose_offhost_path({-1, false, 0});
  BOOST_TEST(std::string(none.path) == "none");
  BOOST_TEST(none.why == "no rank with a device heap on another host");
  const auto plain = choose_offhost_path({0, false, 3});
  BOOST_TEST(std::string(plain.path) == "staged");
  BOOST_TEST(plain.why ==
             "3 ranks' device heaps on other hosts, through page-locked host memory "
             "in pipelined chunks (MPI is not CUDA-aware, UCX has no CUDA memory type)");
  // A CUDA-aware MPI or UCX is named, and still staged: the direct path is not built.
  const auto aware = choose_offhost_path({1, true, 1});
  BOOST_TEST(std::string(aware.path) == "staged");
  BOOST_TEST(aware.why.find("MPI is CUDA-aware (MPIX_Query_cuda_support), UCX lists CUDA memory; "
                            "device pointers on the wire are not used yet") != std::string::npos,
             aware.why);
  BOOST_TEST(choose_offhost_path({-1, false, 2}).why.find("no CUDA-awareness extension") !=
             std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_link_to_a_device_heap_is_self_mapped_staged_or_none) {
  using crown::detail::device_link;
  // self, mapped, heap here, heap there, active messages
  BOOST_TEST(std::string(device_link(true, true, true, true, false)) == "self");
  BOOST_TEST(std::string(device_link(false, true, true, true, false)) == "mapped");
  BOOST_TEST(std::string(device_link(false, false, true, true, true)) == "staged");
  BOOST_TEST(std::string(device_link(false, false, true, true, false)) == "none");
  BOOST_TEST(std::string(device_link(false, false, false, true, true)) == "none");
  BOOST_TEST(std::string(device_link(false, false, true, false, true)) == "none");
  BOOST_TEST(std::string(device_link(true, true, false, false, true)) == "none");
}

BOOST_AUTO_TEST_CASE(image_shares_cover_every_element_once_in_image_order) {
  using crown::detail::image_share;
  for (std::size_t count : {0u, 1u, 2u, 7u, 10u, 407u, 4096u})
    for (std::size_t n : {1u, 2u, 3u, 4u, 5u, 8u}) {
      std::size_t next = 0;
      for (std::size_t i = 0; i < n; ++i) {
        const auto [b, e] = image_share(count, n, i);
        BOOST_TEST(b == next);
        BOOST_TEST(e >= b);
        BOOST_TEST(e - b <= (count + n - 1) / n);
        next = e;
      }
      BOOST_TEST(next == count);
    }
  BOOST_TEST((image_share(10, 4, 3) == std::pair<std::size_t, std::size_t>{9, 10}));
  BOOST_TEST((image_share(2, 4, 3) == std::pair<std::size_t, std::size_t>{2, 2}));
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

namespace {
/// a + b on this CPU with `a` the first source (the destination), as the host fold
/// `acc = acc + next` compiles: a plain `x + y` lets GCC pick the order, which decides
/// whose NaN comes back when both are.
template <typename T>
T cpu_sum(T a, T b) {
#if defined(__x86_64__)
  if constexpr (sizeof(T) == 4)
    asm("addss %1, %0" : "+x"(a) : "x"(b));
  else
    asm("addsd %1, %0" : "+x"(a) : "x"(b));
  return a;
#else
  return a + b; // unused: the test stops first
#endif
}

template <typename T, typename W>
void x86_sum_matches_the_cpu() {
  const auto of = [](W w) { return std::bit_cast<T>(w); };
  const T inf = std::numeric_limits<T>::infinity();
  const W sign = W{1} << (sizeof(W) * 8 - 1);
  const W quiet = crown::detail::nan_bits<T>::quiet;
  const W exponent = std::bit_cast<W>(inf);
  const T nan_p = of(exponent | quiet | 0x111), nan_q = of(sign | exponent | quiet | 0x222);
  const T signalling = of(exponent | 0x333); // quiet bit clear
  const std::vector<std::pair<T, T>> cases{
      {nan_p, T(1)},       {T(1), nan_q},
      {nan_p, nan_q},      {nan_q, nan_p},
      {signalling, T(2)},  {T(2), signalling},
      {signalling, nan_p}, {inf, -inf},
      {-inf, inf},         {inf, T(1)},
      {T(-0.0), T(0.0)},   {T(-0.0), T(-0.0)},
      {T(0.1), T(0.2)},    {nan_p, inf},
      {-inf, nan_q},       {std::numeric_limits<T>::denorm_min(), T(0)}};
  for (const auto& [a, b] : cases) {
    const W want = std::bit_cast<W>(cpu_sum(a, b)),
            got = std::bit_cast<W>(crown::detail::x86_sum(a, b));
    BOOST_TEST(got == want, std::hex << std::bit_cast<W>(a) << " + " << std::bit_cast<W>(b) << ": "
                                     << got << ", the CPU's " << want);
  }
  // The values the device fold's test expects (tests/gpu/test_device_collectives.cpp).
  BOOST_TEST(std::bit_cast<W>(crown::detail::x86_sum(inf, -inf)) ==
             crown::detail::nan_bits<T>::default_nan);
  BOOST_TEST(std::bit_cast<W>(crown::detail::x86_sum(nan_p, nan_q)) == std::bit_cast<W>(nan_p));
}
} // namespace

BOOST_AUTO_TEST_CASE(the_device_folds_sum_gives_the_nans_this_cpu_gives) {
  // A GPU returns one canonical NaN; the host collectives add on this CPU. The device
  // fold builds x86's NaNs itself so that a device co_sum stays bitwise the host's.
#if !defined(__x86_64__)
  BOOST_TEST_MESSAGE("not an x86-64 host: x86_sum is x86's rule, nothing to hold it against");
  return;
#endif
  x86_sum_matches_the_cpu<float, std::uint32_t>();
  x86_sum_matches_the_cpu<double, std::uint64_t>();
}
