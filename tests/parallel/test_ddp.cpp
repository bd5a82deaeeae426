// DDP over the world: the averaged gradient is the mean of every rank's own gradient,
// bitwise the same everywhere, in the heap or in ordinary memory; no_sync accumulates;
// parameters come from image 0; a gradient never marked ready is named, not waited for.
#include <boost/test/unit_test.hpp>
#include <crown/collectives.hpp>
#include <crown/error.hpp>
#include <crown/parallel/ddp.hpp>
#include <crown/parallel/gpt.hpp>
#include <crown/parallel/random.hpp>
#include <harness/crown_test.hpp>
#include <vector>

using namespace crown_test;
namespace par = crown::parallel;

namespace {

const par::gpt_config config{
    .vocabulary = 16, .context = 6, .channels = 8, .heads = 2, .blocks = 2};

/// Rank r's batch of 2 samples at step s (every rank can make any rank's).
void batch_of(int r, int s, std::vector<int>& in, std::vector<int>& out) {
  in.clear();
  out.clear();
  for (int i = 0; i < 2 * config.context; ++i) {
    in.push_back(int(par::mix64(std::uint64_t(r * 1000 + s * 100 + i)) % 16));
    out.push_back(int(par::mix64(std::uint64_t(r * 1000 + s * 100 + i + 7)) % 16));
  }
}

/// The gradient of rank r's loss at step s, computed here without communication.
std::vector<double> local_gradient(par::gpt<double>& m, int r, int s) {
  std::vector<int> in, out;
  batch_of(r, s, in, out);
  m.forward(in, out, 2);
  std::vector<double> g(m.layout().total);
  m.backward(g, 1.0, [](std::size_t) {});
  return g;
}

/// Runs one synchronised backward of this rank's batch through `d`.
void ddp_backward(par::gpt<double>& m, par::ddp<double>& d, int s) {
  std::vector<int> in, out;
  batch_of(me(), s, in, out);
  m.forward(in, out, 2);
  m.backward(d.grads(), 1.0, [&](std::size_t e) { d.mark_ready(e); });
}

/// The largest difference between `got` and `expected`, relative to expected's largest
/// element (rounding in elements near zero is not judged on their own scale).
double worst_difference(std::span<const double> got, const std::vector<double>& expected) {
  double scale = 1e-300, worst = 0;
  for (double x : expected) scale = std::max(scale, std::abs(x));
  for (std::size_t i = 0; i < expected.size(); ++i)
    worst = std::max(worst, std::abs(got[i] - expected[i]) / scale);
  return worst;
}

bool same_on_every_rank(std::span<const double> g) {
  std::vector<double> lo(g.begin(), g.end()), hi(g.begin(), g.end());
  crown::co_min(w(), std::span<double>(lo));
  crown::co_max(w(), std::span<double>(hi));
  return lo == hi;
}

} // namespace

/// Tiny buckets: a parameter or two each, so buckets are reduced while backward still runs.
const par::ddp_options many_buckets{.first_bucket_bytes = 512, .bucket_bytes = 1024};

BOOST_AUTO_TEST_CASE(the_gradient_is_the_mean_of_every_ranks_own_and_bitwise_the_same) {
  for (auto [heap, o] : {std::pair{true, par::ddp_options{}}, std::pair{false, par::ddp_options{}},
                         std::pair{true, many_buckets}}) {
    par::gpt<double> m(config, 2);
    m.initialise(3);
    o.heap_buckets = heap;
    par::ddp<double> d(w(), m.params(), m.layout(), o);
    BOOST_TEST((o.bucket_bytes > 1024 || d.buckets().size() >= 8), d.buckets().size()
                                                                       << " buckets");
    BOOST_TEST(d.grads_in_heap() == (heap && n() > 1));
    d.zero_grad();
    ddp_backward(m, d, 0);
    d.finish();
    std::vector<double> mean(m.layout().total, 0.0);
    for (int r = 0; r < n(); ++r) { // PyTorch's order: divide each, then sum
      const auto g = local_gradient(m, r, 0);
      for (std::size_t i = 0; i < g.size(); ++i) mean[i] += g[i] / n();
    }
    const double worst = worst_difference(d.grads(), mean);
    BOOST_TEST(worst < 1e-13, "heap " << heap << ": worst difference " << worst);
    BOOST_TEST(same_on_every_rank(d.grads()));
    if (n() > 1) BOOST_TEST(d.last_timing().reduce_seconds > 0);
  }
}

BOOST_AUTO_TEST_CASE(no_sync_accumulates_and_the_next_backward_reduces_the_sum) {
  par::gpt<double> m(config, 2);
  m.initialise(5);
  par::ddp<double> d(w(), m.params(), m.layout(), many_buckets);
  d.zero_grad();
  {
    auto guard = d.no_sync();
    ddp_backward(m, d, 1);
    ddp_backward(m, d, 2);
    d.finish(); // nothing to wait for
  }
  ddp_backward(m, d, 3);
  d.finish();
  std::vector<double> expected(m.layout().total, 0.0);
  for (int r = 0; r < n(); ++r) {
    std::vector<double> sum(expected.size(), 0.0);
    for (int s : {1, 2, 3}) {
      const auto g = local_gradient(m, r, s);
      for (std::size_t i = 0; i < g.size(); ++i) sum[i] += g[i];
    }
    for (std::size_t i = 0; i < sum.size(); ++i) expected[i] += sum[i] / n();
  }
  BOOST_TEST(worst_difference(d.grads(), expected) < 1e-13);
}

BOOST_AUTO_TEST_CASE(parameters_come_from_image_0) {
  par::gpt<double> m(config, 2);
  m.initialise(std::uint64_t(100 + me())); // different on every rank
  par::gpt<double> zero(config, 2);
  zero.initialise(100);
  par::ddp<double> d(w(), m.params(), m.layout());
  BOOST_TEST((std::vector<double>(m.params().begin(), m.params().end()) ==
              std::vector<double>(zero.params().begin(), zero.params().end())));
}

BOOST_AUTO_TEST_CASE(a_gradient_never_marked_ready_is_named_not_waited_for) {
  if (n() == 1) return; // nothing is reduced on one image
  par::gpt<double> m(config, 2);
  m.initialise(9);
  par::ddp<double> d(w(), m.params(), m.layout(), many_buckets);
  const std::size_t forgotten = m.layout().entries.size() / 2; // a bucket in the middle
  d.zero_grad();
  std::vector<int> in, out;
  batch_of(me(), 0, in, out);
  m.forward(in, out, 2);
  m.backward(d.grads(), 1.0, [&](std::size_t e) {
    if (e != forgotten) d.mark_ready(e); // later buckets wait for it: none is launched
  });
  try {
    d.finish();
    BOOST_TEST(false, "finish() returned");
  } catch (const crown::argument_error& e) {
    const std::string what = e.what(), name = m.layout().entries[forgotten].name;
    BOOST_TEST(what.find("never became ready: parameters not marked ready in this backward: " +
                         name) != std::string::npos,
               what);
    BOOST_TEST(what.find("wte") == std::string::npos, what); // only the forgotten one
  }
  BOOST_CHECK_THROW(d.mark_ready(999), crown::argument_error);
  // finish() re-armed: a whole backward works again, and a second mark is refused.
  d.zero_grad();
  ddp_backward(m, d, 0);
  d.finish();
  BOOST_TEST(same_on_every_rank(d.grads()));
  d.mark_ready(3);
  try {
    d.mark_ready(3);
    BOOST_TEST(false, "a second mark was taken");
  } catch (const crown::argument_error& e) {
    BOOST_TEST(std::string(e.what()).find("marked ready twice") != std::string::npos, e.what());
  }
}
