// Checkpoints: dist_tensors written on every rank of the job and read back on 1..n of
// them under other meshes and placements (resharding), coarrays, replicated and sharded
// arrays (float and double), metadata, and the errors a corrupt, truncated or mismatched
// file gets (naming file, dataset and field), on every rank together. Every value is
// checked against the global index it belongs to.
#include <boost/test/unit_test.hpp>
#include <crown/checkpoint.hpp>
#include <crown/crown.hpp>
#include <filesystem>
#include <fstream>
#include <harness/crown_test.hpp>

using namespace crown_test; // w(), me(), n(), what_of()

namespace {

/// A directory of this test's own (rank count in its name: suites run side by side).
std::string scratch(const std::string& what) {
  const std::string dir = "ckpt_" + what + ".np" + std::to_string(n());
  if (me() == 0) {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
  }
  crown::sync_all(w());
  return dir;
}

template <typename T>
T value_at(std::size_t global) {
  return static_cast<T>(global) * T(0.5) + T(1);
}

template <std::size_t N>
std::size_t linear(const std::array<std::size_t, N>& i, const std::array<std::size_t, N>& shape) {
  std::size_t v = 0;
  for (std::size_t d = 0; d < N; ++d) v = v * shape[d] + i[d];
  return v;
}

/// The first k ranks of the world as a mesh of their own.
crown::mesh first(int k, const std::string& dim = "x") {
  std::vector<int> ranks(static_cast<std::size_t>(k));
  for (int r = 0; r < k; ++r) ranks[static_cast<std::size_t>(r)] = r;
  return crown::mesh({{dim, k}}, ranks);
}

/// Flips one byte in the middle of a file (where the data lies when the data is large).
void flip_middle_byte(const std::string& path) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(0, std::ios::end);
  const auto size = static_cast<std::streamoff>(f.tellg());
  f.seekg(size / 2);
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x5a);
  f.seekp(size / 2);
  f.write(&c, 1);
}

} // namespace

BOOST_AUTO_TEST_CASE(dist_tensor_resharded_onto_every_rank_count_mesh_and_placement) {
  const std::string dir = scratch("reshard");
  const std::string path = dir + "/t.h5";
  const std::array<std::size_t, 2> shape{13, 7}; // uneven over any rank count
  {
    // Written on all n ranks, sharded along rows, with a halo the file must not see.
    crown::dist_tensor<double, 2> t(first(n()), shape, {crown::shard(0)}, {{1, 1}, {false, false}});
    t.apply([&](const auto& i, double& x) { x = value_at<double>(linear(i, shape)); });
    crown::checkpoint_writer wr(w(), path);
    wr.write("field", t);
    wr.commit();
  }
  BOOST_TEST(std::filesystem::exists(path));
  BOOST_TEST(!std::filesystem::exists(path + ".tmp"));
  for (int k = 1; k <= n(); ++k) {
    if (me() >= k) continue;
    const crown::mesh m = first(k);
    const std::vector<std::vector<crown::placement>> layouts{
        {crown::shard(1)}, {crown::replicate()}, {crown::shard(0)}};
    for (const auto& placements : layouts) {
      crown::dist_tensor<double, 2> t(m, shape, placements);
      t.fill(-1);
      crown::checkpoint_reader rd(m, path);
      rd.read("field", t);
      std::size_t wrong = 0;
      t.apply([&](const auto& i, double& x) { wrong += x != value_at<double>(linear(i, shape)); });
      BOOST_TEST(wrong == 0u, k << " ranks, " << crown::detail::placements_text(placements));
    }
    if (k == 4) { // a 2x2 mesh, both dimensions sharded
      const crown::mesh sq = m.reshape({{"r", 2}, {"c", 2}});
      crown::dist_tensor<double, 2> t(sq, shape, {crown::shard(0), crown::shard(1)});
      crown::checkpoint_reader(sq, path).read("field", t);
      std::size_t wrong = 0;
      t.apply([&](const auto& i, double& x) { wrong += x != value_at<double>(linear(i, shape)); });
      BOOST_TEST(wrong == 0u);
    }
  }
  crown::sync_all(w());
}

BOOST_AUTO_TEST_CASE(coarray_and_metadata_round_trip) {
  const std::string dir = scratch("coarray");
  const std::string path = dir + "/c.h5";
  crown::coarray<std::int64_t, 2> a(w(), {3, 5});
  for (std::size_t k = 0; k < a.size(); ++k)
    a.data()[k] = static_cast<std::int64_t>(1000 * me() + static_cast<int>(k));
  const std::vector<std::byte> rng{std::byte{1}, std::byte{0}, std::byte{255}};
  {
    crown::checkpoint_writer wr(w(), path);
    wr.write("a", a);
    wr.put("step", std::int64_t{42});
    wr.put("lr", 0.125);
    wr.put("plan", "dp=2,tp=2");
    wr.put("empty", "");
    wr.put_bytes("rng", rng);
    wr.commit();
  }
  for (std::size_t k = 0; k < a.size(); ++k) a.data()[k] = -1;
  crown::checkpoint_reader rd(w(), path);
  rd.read("a", a);
  for (std::size_t k = 0; k < a.size(); ++k)
    BOOST_TEST(a.data()[k] == static_cast<std::int64_t>(1000 * me() + static_cast<int>(k)));
  BOOST_TEST(rd.get_int("step") == 42);
  BOOST_TEST(rd.get_double("lr") == 0.125);
  BOOST_TEST(rd.get_string("plan") == "dp=2,tp=2");
  BOOST_TEST(rd.get_string("empty") == "");
  BOOST_TEST((rd.get_bytes("rng") == rng));
  BOOST_TEST(rd.contains("a"));
  BOOST_TEST(!rd.contains("b"));
  BOOST_TEST((rd.shape_of("a") == std::vector<std::size_t>{static_cast<std::size_t>(n()), 3, 5}));
  const std::string kind = what_of<crown::checkpoint_error>([&] { (void)rd.get_double("step"); });
  BOOST_TEST(kind.find("meta 'step': kind: file has int, reading double") != std::string::npos,
             kind);
  if (n() > 1 && me() < n() - 1) { // another image count: refused, naming the shape
    const crown::mesh m = first(n() - 1);
    crown::coarray<std::int64_t, 2> b(m, {3, 5});
    const std::string e =
        what_of<crown::checkpoint_error>([&] { crown::checkpoint_reader(m, path).read("a", b); });
    BOOST_TEST(e.find(path + ": dataset 'a': shape: file has [" + std::to_string(n()) +
                      ", 3, 5], expected [" + std::to_string(n() - 1) + ", 3, 5]") !=
                   std::string::npos,
               e);
  }
  crown::sync_all(w());
}

template <typename T>
void replicated_and_sharded(const std::string& tag) {
  const std::string dir = scratch("flat_" + tag);
  const std::string path = dir + "/p.h5";
  const std::size_t rows = 11, cols = 3, flat = 1001;
  std::vector<T> params(rows * cols);
  for (std::size_t k = 0; k < params.size(); ++k) params[k] = value_at<T>(k);
  const std::size_t lo = crown::detail::shard_begin(flat, me(), n()),
                    hi = crown::detail::shard_begin(flat, me() + 1, n());
  std::vector<T> piece(hi - lo);
  for (std::size_t k = 0; k < piece.size(); ++k) piece[k] = value_at<T>(lo + k) * T(3);
  {
    crown::checkpoint_writer wr(w(), path);
    wr.write_replicated<T>("params", params, {rows, cols});
    wr.write_sharded<T>("flat", piece, flat);
    wr.commit();
  }
  for (int k = 1; k <= n(); ++k) { // read back on 1..n ranks: resharded
    if (me() >= k) continue;
    const crown::mesh m = first(k);
    crown::checkpoint_reader rd(m, path);
    std::vector<T> back(rows * cols, T(-1));
    rd.read_replicated<T>("params", back, {rows, cols});
    BOOST_TEST((back == params));
    const std::vector<T> mine = rd.read_sharded<T>("flat", flat);
    const std::size_t l = crown::detail::shard_begin(flat, me(), k);
    BOOST_TEST(mine.size() == crown::detail::shard_begin(flat, me() + 1, k) - l);
    std::size_t wrong = 0;
    for (std::size_t j = 0; j < mine.size(); ++j) wrong += mine[j] != value_at<T>(l + j) * T(3);
    BOOST_TEST(wrong == 0u, k << " ranks");
  }
  crown::sync_all(w());
}

BOOST_AUTO_TEST_CASE(replicated_and_sharded_float) { replicated_and_sharded<float>("f"); }
BOOST_AUTO_TEST_CASE(replicated_and_sharded_double) { replicated_and_sharded<double>("d"); }

BOOST_AUTO_TEST_CASE(mismatched_corrupt_and_truncated_files_are_refused_by_name) {
  const std::string dir = scratch("bad");
  const std::string path = dir + "/b.h5";
  const std::array<std::size_t, 1> shape{65536}; // 512 KiB: the middle of the file is data
  crown::dist_tensor<double, 1> t(first(n()), shape, {crown::shard(0)});
  t.apply([&](const auto& i, double& x) { x = value_at<double>(i[0]); });
  {
    crown::checkpoint_writer wr(w(), path);
    wr.write("u", t);
    wr.commit();
  }
  auto error_of = [&](auto&& f) { return what_of<crown::checkpoint_error>(f); };
  const std::string missing = error_of([&] { crown::checkpoint_reader(w(), path).read("v", t); });
  BOOST_TEST(missing.find(path + ": dataset 'v': missing (the file holds: u)") != std::string::npos,
             missing);
  crown::dist_tensor<double, 1> other(first(n()), {65535}, {crown::shard(0)});
  const std::string shape_err =
      error_of([&] { crown::checkpoint_reader(w(), path).read("u", other); });
  BOOST_TEST(shape_err.find("dataset 'u': shape: file has [65536], expected [65535]") !=
                 std::string::npos,
             shape_err);
  crown::dist_tensor<float, 1> single(first(n()), shape, {crown::shard(0)});
  const std::string type_err =
      error_of([&] { crown::checkpoint_reader(w(), path).read("u", single); });
  BOOST_TEST(type_err.find("dataset 'u': type: file has float64, reading float32") !=
                 std::string::npos,
             type_err);

  if (me() == 0) flip_middle_byte(path);
  crown::sync_all(w());
  const std::string corrupt = error_of([&] { crown::checkpoint_reader(w(), path).read("u", t); });
  BOOST_TEST(corrupt.find(path + ": dataset 'u': checksum: attribute says 0x") != std::string::npos,
             corrupt);
  const std::string verify = error_of([&] { crown::verify_checkpoint(w(), path); });
  BOOST_TEST(verify.find("dataset 'u': checksum") != std::string::npos, verify);

  if (me() == 0) std::filesystem::resize_file(path, std::filesystem::file_size(path) / 3);
  crown::sync_all(w());
  const std::string truncated = error_of([&] { crown::checkpoint_reader rd(w(), path); });
  BOOST_TEST(truncated.find(path + ": not a readable HDF5 file (truncated or corrupt?)") !=
                 std::string::npos,
             truncated);
  const std::string absent = error_of([&] { crown::checkpoint_reader rd(w(), dir + "/none.h5"); });
  BOOST_TEST(absent.find("none.h5: no such file") != std::string::npos, absent);
  crown::sync_all(w());
}

BOOST_AUTO_TEST_CASE(directory_keeps_the_newest_and_skips_an_invalid_newest) {
  const std::string dir = scratch("dir");
  crown::checkpoint_dir cd(w(), dir, 2);
  BOOST_TEST(!cd.newest_valid().has_value());
  crown::dist_tensor<double, 1> t(first(n()), {40000}, {crown::shard(0)});
  for (std::int64_t step = 1; step <= 4; ++step) {
    t.fill(static_cast<double>(step));
    crown::checkpoint_writer wr = cd.begin(step);
    wr.write("u", t);
    wr.put("step", step);
    cd.commit(wr);
  }
  BOOST_TEST(!std::filesystem::exists(cd.path_of(1)));
  BOOST_TEST(!std::filesystem::exists(cd.path_of(2)));
  BOOST_TEST(std::filesystem::exists(cd.path_of(3)));
  BOOST_TEST(std::filesystem::exists(cd.path_of(4)));
  {
    crown::checkpoint_writer abandoned = cd.begin(5); // destroyed without commit
    abandoned.write("u", t);
  }
  BOOST_TEST(!std::filesystem::exists(cd.path_of(5)));
  BOOST_TEST(!std::filesystem::exists(cd.path_of(5) + ".tmp"));
  if (me() == 0) flip_middle_byte(cd.path_of(4));
  crown::sync_all(w());
  std::vector<std::string> rejected;
  const auto found = cd.newest_valid(&rejected);
  BOOST_REQUIRE(found.has_value());
  BOOST_TEST(found->step == 3);
  BOOST_TEST(found->path == cd.path_of(3));
  BOOST_REQUIRE(rejected.size() == 1u);
  BOOST_TEST(rejected[0].find(cd.path_of(4) + ": dataset 'u': checksum") != std::string::npos,
             rejected[0]);
  crown::checkpoint_reader rd(w(), found->path);
  rd.read("u", t);
  BOOST_TEST(rd.get_int("step") == 3);
  BOOST_TEST(t.sum() == 3.0 * 40000);
  crown::sync_all(w());
}
