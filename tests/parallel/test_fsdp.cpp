// FSDP over the world: each rank's shards are its piece of the whole model, padded with
// zeros; the sharded gradient is DDP's; FULL_SHARD holds at most two units gathered and
// SHARD_GRAD_OP all of them between forward and backward; the accounting allocator
// charges what is allocated; bad strategies are refused on every rank.
#include <boost/test/unit_test.hpp>
#include <crown/block_collectives.hpp>
#include <crown/error.hpp>
#include <crown/parallel/fsdp.hpp>
#include <crown/parallel/gpt.hpp>
#include <crown/parallel/memory.hpp>
#include <crown/parallel/random.hpp>
#include <harness/crown_test.hpp>
#include <vector>

using namespace crown_test;
namespace par = crown::parallel;

namespace {

// 13 units whose sizes no rank count from 2 to 4 divides evenly: padding is exercised.
const par::gpt_config config{
    .vocabulary = 17, .context = 6, .channels = 8, .heads = 2, .blocks = 3};
constexpr std::uint64_t seed = 5;

/// Rank r's batch of 2 samples (every rank can make any rank's).
void batch_of(int r, std::vector<int>& in, std::vector<int>& out) {
  in.clear();
  out.clear();
  for (int i = 0; i < 2 * config.context; ++i) {
    in.push_back(int(par::mix64(std::uint64_t(r * 1000 + i)) % 17));
    out.push_back(int(par::mix64(std::uint64_t(r * 1000 + i + 7)) % 17));
  }
}

/// The mean over ranks of each rank's gradient, computed here without communication.
std::vector<double> mean_gradient() {
  par::gpt<double> m(config, 2);
  m.initialise(seed);
  std::vector<double> mean(m.layout().total);
  std::vector<int> in, out;
  for (int r = 0; r < n(); ++r) {
    batch_of(r, in, out);
    m.forward(in, out, 2);
    std::vector<double> g(m.layout().total);
    m.backward(g, 1.0, [](std::size_t) {});
    for (std::size_t i = 0; i < g.size(); ++i) mean[i] += g[i] / n();
  }
  return mean;
}

/// Unit u of every rank's shard arrays, gathered: the padded unit.
std::vector<double> gathered(par::fsdp<double>& f, std::span<const double> shards, std::size_t u) {
  const par::unit_shard& sh = f.shards()[u];
  std::vector<double> all(sh.padded);
  crown::all_gather(w(), shards.subspan(sh.offset, sh.shard), std::span<double>(all));
  return all;
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

} // namespace

BOOST_AUTO_TEST_CASE(each_ranks_shards_are_its_piece_of_the_whole_model_padded_with_zeros) {
  par::gpt<double> whole(config, 2);
  whole.initialise(seed);
  for (auto s : {par::fsdp_strategy::full_shard, par::fsdp_strategy::shard_grad_op}) {
    par::fsdp<double> f(w(), s, whole.layout(), seed);
    BOOST_TEST(f.shards().size() == whole.layout().units.size());
    for (std::size_t u = 0; u < f.shards().size(); ++u) {
      const auto& unit = whole.layout().units[u];
      const par::unit_shard& sh = f.shards()[u];
      BOOST_TEST(sh.padded % std::size_t(n()) == 0);
      BOOST_TEST(sh.padded - sh.count < std::size_t(n()));
      const auto all = gathered(f, f.shard_params(), u);
      const auto expected = whole.params().subspan(unit.offset, unit.count);
      BOOST_TEST(std::equal(expected.begin(), expected.end(), all.begin())); // bitwise
      BOOST_TEST(std::all_of(all.begin() + std::ptrdiff_t(sh.count), all.end(),
                             [](double x) { return x == 0; }));
    }
  }
}

BOOST_AUTO_TEST_CASE(the_sharded_gradient_is_the_mean_of_every_ranks_own) {
  const auto mean = mean_gradient();
  double scale = 1e-300;
  for (double x : mean) scale = std::max(scale, std::abs(x));
  for (auto s : {par::fsdp_strategy::full_shard, par::fsdp_strategy::shard_grad_op}) {
    par::gpt<double> m(config, 2, false); // holds no parameters: they come from f
    BOOST_TEST(m.params().empty());
    par::fsdp<double> f(w(), s, m.layout(), seed);
    std::vector<int> in, out;
    batch_of(me(), in, out);
    f.zero_grad();
    for (int micro = 0; micro < 2; ++micro) { // accumulates: twice the half-scaled gradient
      (void)m.forward(in, out, 2, f);
      m.backward(0.5, f);
    }
    f.finish();
    f.reshard();
    double worst = 0;
    for (std::size_t u = 0; u < f.shards().size(); ++u) {
      const auto& unit = m.layout().units[u];
      const auto all = gathered(f, f.shard_grads(), u);
      for (std::size_t i = 0; i < unit.count; ++i)
        worst = std::max(worst, std::abs(all[i] - mean[unit.offset + i]) / scale);
      BOOST_TEST(std::all_of(all.begin() + std::ptrdiff_t(unit.count), all.end(),
                             [](double x) { return x == 0; }));
    }
    BOOST_TEST(worst < 1e-13, "strategy " << par::to_string(s) << ": worst " << worst);
    BOOST_TEST(f.last_timing().scatters == 2 * f.shards().size());
  }
}

BOOST_AUTO_TEST_CASE(full_shard_gathers_at_most_two_units_and_shard_grad_op_all) {
  for (auto s : {par::fsdp_strategy::full_shard, par::fsdp_strategy::shard_grad_op}) {
    par::gpt<double> m(config, 2, false);
    par::fsdp<double> f(w(), s, m.layout(), seed);
    std::vector<int> in, out;
    batch_of(me(), in, out);
    const std::size_t before = par::memory_now().now(par::buffer_kind::gathered);
    (void)m.forward(in, out, 2, f);
    m.backward(1.0, f);
    f.finish();
    f.reshard();
    const std::size_t units = f.shards().size();
    if (s == par::fsdp_strategy::full_shard)
      BOOST_TEST(f.peak_gathered_units() == std::min<std::size_t>(2, units));
    else
      BOOST_TEST(f.peak_gathered_units() == units); // gathered in forward, kept for backward
    // Every gathered unit is given back: what stays is the two gradient slots and one
    // unit's reduce-scattered shard.
    BOOST_TEST(par::memory_now().now(par::buffer_kind::gathered) == before);
  }
}

BOOST_AUTO_TEST_CASE(forwards_without_backward_hold_at_most_two_units) {
  par::gpt<double> m(config, 2, false);
  par::fsdp<double> f(w(), par::fsdp_strategy::full_shard, m.layout(), seed);
  std::vector<int> in, out;
  batch_of(me(), in, out);
  const double first = m.forward(in, out, 2, f); // evaluation: the head stays gathered...
  const double again = m.forward(in, out, 2, f); // ...until the next forward begins
  BOOST_TEST(first == again);
  BOOST_TEST(f.peak_gathered_units() == 2u);
  f.reshard();
}

BOOST_AUTO_TEST_CASE(the_accounting_allocator_charges_what_it_hands_out) {
  const par::memory_ledger start = par::memory_now();
  par::reset_memory_peaks();
  {
    auto a = par::tracked<double>(par::buffer_kind::optimizer, 1000);
    {
      auto b = par::tracked<float>(par::buffer_kind::optimizer, 500);
      BOOST_TEST(par::memory_now().now(par::buffer_kind::optimizer) ==
                 start.now(par::buffer_kind::optimizer) + 8000 + 2000);
    }
    const par::tracked_bytes heap(par::buffer_kind::grads, 4096);
    const par::memory_ledger mid = par::memory_now();
    BOOST_TEST(mid.now(par::buffer_kind::optimizer) ==
               start.now(par::buffer_kind::optimizer) + 8000);
    BOOST_TEST(mid.max(par::buffer_kind::optimizer) ==
               start.now(par::buffer_kind::optimizer) + 10000);
    BOOST_TEST(mid.now(par::buffer_kind::grads) == start.now(par::buffer_kind::grads) + 4096);
  }
  BOOST_TEST(par::memory_now().current == start.current);
}

BOOST_AUTO_TEST_CASE(a_strategy_that_cannot_run_is_refused_on_every_rank) {
  const auto layout = par::param_layout::of(config);
  const std::string one_host = what_of<crown::argument_error>(
      [&] { par::fsdp<double> f(w(), par::fsdp_strategy::hybrid_shard, layout, seed); });
  BOOST_TEST(contains(one_host, "rank " + std::to_string(me()) + ": plan fsdp=hybrid"));
  BOOST_TEST(
      contains(one_host, "all " + std::to_string(n()) + " data-parallel ranks run on one host"));
  BOOST_TEST(contains(what_of<crown::argument_error>([&] {
                        par::fsdp<double> f(w(), par::fsdp_strategy::no_shard, layout, seed);
                      }),
                      "NO_SHARD shards nothing: it is DDP"));
}
