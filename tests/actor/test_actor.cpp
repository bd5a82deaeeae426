// The single controller: rank 0 drives actor meshes on the other ranks. Every test runs
// runtime::control on every rank; the checks run on rank 0, inside the controller.
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <crown/crown.hpp>
#include <cstdio>
#include <harness/crown_test.hpp>
#include <iostream>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <thread>

using namespace crown_test; // w(), me(), n(), what_of()

namespace {

struct stats {
  int index = 0;
  std::vector<double> samples;
  std::string label;
  template <class Ar>
  void serialize(Ar& ar) {
    ar(index, samples, label);
  }
};

/// A test actor: a counter that starts at `start` plus its index in the actor mesh.
class counter {
public:
  explicit counter(int start) : value_(start + crown::this_actor().index) {
    if (start < 0) throw std::invalid_argument("negative start " + std::to_string(start));
  }
  int add(int k) { return value_ += k; }
  int get() const { return value_; }
  std::string where() const {
    const auto& a = crown::this_actor();
    return a.name + "@" + std::to_string(a.index) + "/" + std::to_string(a.mesh.size());
  }
  void fail_on(int index) {
    if (crown::this_actor().index == index)
      throw std::domain_error("boom at " + std::to_string(index));
  }
  double ring_sum() { // the actor mesh is a mesh: coarrays and collectives among actors
    const crown::mesh& m = crown::this_actor().mesh;
    crown::coarray<double> a(m, 1);
    a.on((m.rank() + 1) % m.size()).put({0}, m.rank() + 1.0);
    crown::sync_all(m);
    double x = a(0);
    crown::co_sum(m, x);
    return x;
  }
  stats summary(int k) const {
    return {crown::this_actor().index, std::vector<double>(static_cast<std::size_t>(k), 0.5),
            where()};
  }
  int slow(int ms) const {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    return ms;
  }
  void chatter(int round) const {
    crown::log(crown::log_level::warn, "round ", round);
    if (crown::this_actor().index == 0) crown::log(crown::log_level::warn, "only me");
  }
  void shout(int round) const {
    std::printf("shout %d\n", round);
    if (crown::this_actor().index == 0) std::cout << "first " << round << " without newline";
  }
  /// Meshes and actor-mesh handles arrive as values; the actor calls the other mesh.
  std::string peers(const crown::mesh& m, const crown::actor_mesh<counter>& other) const {
    const auto values = other.call(&counter::get).get();
    return m.to_string() + " " + other.name() + " " + std::to_string(other.mesh().size()) + " " +
           std::to_string(values[0]);
  }
  int not_an_endpoint() const { return 0; }

  static constexpr auto endpoints = crown::endpoints(
      &counter::add, &counter::get, &counter::where, &counter::fail_on, &counter::ring_sum,
      &counter::summary, &counter::slow, &counter::chatter, &counter::shout, &counter::peers);

private:
  int value_;
};

/// Runs `fn` as the controller on rank 0 while the others serve; checks every rank's
/// exit code.
void control(const std::function<void(crown::controller&)>& fn, int expected = 0) {
  const int code = crown::this_runtime().control(fn);
  BOOST_TEST(code == expected);
}

} // namespace

BOOST_AUTO_TEST_CASE(call_gives_one_value_per_point) {
  control([](crown::controller& c) {
    auto counters = c.workers().spawn<counter>("counters", 10);
    const auto values = counters.call(&counter::get).get();
    BOOST_TEST(values.size() == static_cast<std::size_t>(n() - 1));
    for (int i = 0; i < n() - 1; ++i) {
      BOOST_TEST(values[static_cast<std::size_t>(i)] == 10 + i);
      BOOST_TEST(values.at({i}) == 10 + i);
    }
    const auto where = counters.call(&counter::where).get();
    BOOST_TEST(where[0] == "counters@0/" + std::to_string(n() - 1));
  });
}

BOOST_AUTO_TEST_CASE(every_adverb) {
  control([](crown::controller& c) {
    auto counters = c.workers().spawn<counter>("counters", 0);
    const int last = n() - 2;
    BOOST_TEST(counters.call_one({last}, &counter::add, 5).get() == last + 5);
    counters.broadcast(&counter::add, 100);
    const auto values = counters.call(&counter::get).get();
    int total = 0;
    for (int i = 0; i <= last; ++i) {
      BOOST_TEST(values[static_cast<std::size_t>(i)] == i + 100 + (i == last ? 5 : 0));
      total += values[static_cast<std::size_t>(i)];
    }
    BOOST_TEST(counters.reduce(crown::reduce_op::sum, &counter::get).get() == total);
    BOOST_TEST(counters.reduce(crown::reduce_op::max, &counter::get).get() == last + 105);
    BOOST_TEST(counters.reduce(crown::reduce_op::min, &counter::get).get() == 100 + (last ? 0 : 5));
    const int chosen = counters.choose(&counter::get).get();
    BOOST_TEST((chosen >= 100 && chosen <= last + 105));
    counters.call(&counter::fail_on, -1).get(); // void endpoints: a future<void>
  });
}

BOOST_AUTO_TEST_CASE(many_calls_in_flight_complete_in_order) {
  control([](crown::controller& c) {
    auto counters = c.workers().spawn<counter>("counters", 0);
    std::vector<crown::future<int>> pending;
    for (int k = 1; k <= 300; ++k) pending.push_back(counters.call_one({0}, &counter::add, 1));
    std::vector<crown::future<crown::value_mesh<int>>> all;
    for (int k = 0; k < 50; ++k) all.push_back(counters.call(&counter::add, 2));
    for (int k = 1; k <= 300; ++k) BOOST_TEST(pending[static_cast<std::size_t>(k - 1)].get() == k);
    for (int k = 0; k < 50; ++k)
      BOOST_TEST(all[static_cast<std::size_t>(k)].get()[0] == 300 + 2 * (k + 1));
  });
}

BOOST_AUTO_TEST_CASE(overlapping_actor_meshes_keep_one_order) {
  // Commands to two actor meshes over overlapping ranks, each running a collective
  // among its actors: every rank executes them in the controller's order.
  control([](crown::controller& c) {
    auto all = c.workers().spawn<counter>("all", 0);
    auto tail = c.workers()
                    .slice("workers", crown::range{n() > 2 ? 1 : 0, n() - 1})
                    .spawn<counter>("tail", 0);
    const double m_all = n() - 1, m_tail = tail.mesh().size();
    std::vector<crown::future<crown::value_mesh<double>>> sums;
    for (int k = 0; k < 10; ++k) {
      sums.push_back(all.call(&counter::ring_sum));
      sums.push_back(tail.call(&counter::ring_sum));
    }
    for (std::size_t k = 0; k < sums.size(); ++k) {
      const double m = k % 2 ? m_tail : m_all;
      for (double v : sums[k].get()) BOOST_TEST(v == m * (m + 1) / 2);
    }
  });
}

BOOST_AUTO_TEST_CASE(slices_are_targets_for_every_adverb) {
  control([](crown::controller& c) {
    auto counters = c.workers().spawn<counter>("counters", 0);
    auto first = counters.slice("workers", 0);
    BOOST_TEST(first.mesh().size() == 1);
    BOOST_TEST(first.call(&counter::add, 7).get()[0] == 7);
    const auto values = counters.call(&counter::get).get();
    BOOST_TEST(values[0] == 7);
    BOOST_TEST(values.slice("workers", 0).values().size() == 1u);
    if (n() == 2) return;       // one actor: nothing else to slice
    BOOST_TEST(values[1] == 1); // untouched
    auto rest = counters.slice("workers", crown::range{1, n() - 1});
    rest.broadcast(&counter::add, 10);
    BOOST_TEST(counters.reduce(crown::reduce_op::sum, &counter::get).get() ==
               7 + (n() - 2) * (n() - 1) / 2 + 10 * (n() - 2));
  });
}

BOOST_AUTO_TEST_CASE(user_types_travel_both_ways) {
  control([](crown::controller& c) {
    auto counters = c.workers().spawn<counter>("counters", 0);
    const auto s = counters.call(&counter::summary, 3).get();
    for (int i = 0; i < n() - 1; ++i) {
      BOOST_TEST(s[static_cast<std::size_t>(i)].index == i);
      BOOST_TEST(s[static_cast<std::size_t>(i)].samples == std::vector<double>(3, 0.5));
      BOOST_TEST(s[static_cast<std::size_t>(i)].label.starts_with("counters@"));
    }
  });
}

BOOST_AUTO_TEST_CASE(exceptions_in_endpoints_name_point_rank_and_type) {
  control([](crown::controller& c) {
    auto counters = c.workers().spawn<counter>("counters", 0);
    try {
      counters.call(&counter::fail_on, 0).get();
      BOOST_FAIL("no actor_error");
    } catch (const crown::actor_error& e) {
      BOOST_TEST(e.failures().size() == 1u);
      const auto& f = e.failures().at(0);
      BOOST_TEST(f.mesh == "counters{workers=0}");
      BOOST_TEST(f.rank == 1);
      BOOST_TEST(f.type == "std::domain_error");
      BOOST_TEST(f.message == "boom at 0");
      BOOST_TEST(std::string(e.what()).find("counters{workers=0} on rank 1: std::domain_error: "
                                            "boom at 0") != std::string::npos,
                 e.what());
    }
    BOOST_TEST(counters.call(&counter::get).get()[0] == 0); // still serving
    counters.broadcast(&counter::fail_on, n() - 2);
    const auto m = what_of<crown::actor_error>([&] { c.flush(); });
    BOOST_TEST(m.find("counters{workers=" + std::to_string(n() - 2) + "}") != std::string::npos, m);
    (void)counters.call(&counter::fail_on, 0); // dropped unwaited: still reported
    const auto dropped = what_of<crown::actor_error>([&] { c.flush(); });
    BOOST_TEST(dropped.find("counters{workers=0}") != std::string::npos, dropped);
    auto f = counters.call_one({0}, &counter::get);
    BOOST_TEST(f.get() == 0);
    const auto twice = what_of<crown::state_error>([&] { (void)f.get(); });
    BOOST_TEST(twice.find("already taken") != std::string::npos, twice);
    const auto spawn = what_of<crown::actor_error>([&] { c.workers().spawn<counter>("bad", -3); });
    BOOST_TEST(spawn.find("std::invalid_argument: negative start -3") != std::string::npos, spawn);
  });
}

BOOST_AUTO_TEST_CASE(bad_requests_are_refused_at_the_controller) {
  control([](crown::controller& c) {
    auto counters = c.workers().spawn<counter>("counters", 0);
    auto m =
        what_of<crown::argument_error>([&] { (void)counters.call(&counter::not_an_endpoint); });
    BOOST_TEST(m.find("not listed in") != std::string::npos, m);
    m = what_of<crown::argument_error>([&] { (void)counters.call_one({n()}, &counter::get); });
    BOOST_TEST(m.find("out of range") != std::string::npos, m);
    m = what_of<crown::argument_error>([&] { c.spawn<counter>(w(), "with_controller", 0); });
    BOOST_TEST(m.find("rank 0 is the controller") != std::string::npos, m);
    m = what_of<crown::argument_error>([&] { crown::mesh({{"x", 1}}, {n()}); });
    BOOST_TEST(m.find(std::to_string(n())) != std::string::npos, m);
    m = what_of<crown::state_error>([] { (void)crown::this_actor(); });
    BOOST_TEST(m.find("outside an actor") != std::string::npos, m);
  });
}

BOOST_AUTO_TEST_CASE(get_with_a_timeout) {
  control([](crown::controller& c) {
    auto counters = c.workers().spawn<counter>("counters", 0);
    auto f = counters.call_one({0}, &counter::slow, 300);
    const auto m =
        what_of<crown::timeout_error>([&] { (void)f.get(std::chrono::milliseconds(1)); });
    BOOST_TEST(m.find("no complete answer within") != std::string::npos, m);
    BOOST_TEST(f.get() == 300);
  });
}

BOOST_AUTO_TEST_CASE(a_failing_controller_fails_every_rank) {
  control([](crown::controller&) { throw std::runtime_error("controller gives up"); }, 1);
  control([](crown::controller&) { throw 42; }, 1); // not a std::exception: still stops all
}

BOOST_AUTO_TEST_CASE(futures_and_handles_kept_past_their_session_fail_cleanly) {
  std::optional<crown::future<int>> kept;
  std::optional<crown::actor_mesh<counter>> handle;
  control([&](crown::controller& c) {
    handle = c.workers().spawn<counter>("counters", 0);
    kept = handle->call_one({0}, &counter::get);
  });
  if (me() != 0) return;
  auto m = what_of<crown::state_error>([&] { (void)kept->get(); });
  BOOST_TEST(m.find("its control session has ended") != std::string::npos, m);
  m = what_of<crown::state_error>([&] { (void)handle->call(&counter::get); });
  BOOST_TEST(m.find("its control session has ended") != std::string::npos, m);
  kept.reset(); // destroying it touches nothing of the ended session
}

namespace {

/// What the controller printed (log lines and actors' output) while `fn` ran on it.
struct printed {
  std::vector<std::string> lines;
  explicit printed(const std::function<void(crown::controller&)>& fn) {
    if (me() == 0)
      crown::detail::set_log_sink([this](std::string_view line) { lines.emplace_back(line); });
    control(fn);
    crown::detail::set_log_sink({});
  }
  [[nodiscard]] bool has(const std::string& text) const {
    return std::any_of(lines.begin(), lines.end(),
                       [&](const std::string& l) { return l.find(text) != std::string::npos; });
  }
  /// How a line that every worker printed ends once collapsed.
  static std::string from_every_worker() {
    const std::string workers = std::to_string(n() - 1);
    return n() > 2 ? " (" + workers + " lines from " + workers + " actors)" : "\n";
  }
};

} // namespace

BOOST_AUTO_TEST_CASE(actor_logs_reach_the_controller_tagged_and_collapsed) {
  const printed out([](crown::controller& c) {
    auto chatty = c.workers().spawn<counter>("chatty", 0);
    chatty.call(&counter::chatter, 1).get();
    chatty.broadcast(&counter::chatter, 2);
  });
  if (me() != 0) return;
  BOOST_TEST(out.has("] round 1" + printed::from_every_worker()));
  BOOST_TEST(out.has("] round 2" + printed::from_every_worker()));
  BOOST_TEST(out.has("[chatty{workers=0}] only me")); // once, or twice collapsed into one line
  BOOST_TEST(!out.has("[chatty{workers=1}] only me"));
}

BOOST_AUTO_TEST_CASE(meshes_and_actor_mesh_handles_travel_as_arguments) {
  control([](crown::controller& c) {
    auto counters = c.workers().spawn<counter>("counters", 0);
    auto others = c.workers().slice("workers", 0).spawn<counter>("others", 0);
    const crown::mesh workers = c.workers().mesh();
    const crown::mesh grid({{"x", 1}, {"y", n() - 1}}, {workers.begin(), workers.end()});
    const auto answers = counters.call(&counter::peers, grid, others).get();
    for (const std::string& a : answers) BOOST_TEST(a == grid.to_string() + " others 1 0", a);
    // A mesh is checked on arrival: a rank outside the job is refused there.
    const auto m = what_of<crown::argument_error>([&] { crown::mesh({{"x", 1}}, {n()}); });
    BOOST_TEST(m.find("outside the world") != std::string::npos, m);
    const auto empty =
        what_of<crown::state_error>([] { (void)crown::actor_mesh<counter>().name(); });
    BOOST_TEST(empty.find("empty handle") != std::string::npos, empty);
  });
}

BOOST_AUTO_TEST_CASE(actor_stdout_reaches_the_controller_when_asked) {
  // Run with CROWN_ACTOR_STDOUT=1 (the ctest variant "stdout") and without.
  const printed out([](crown::controller& c) {
    auto loud = c.workers().spawn<counter>("loud", 0);
    loud.call(&counter::shout, 1).get();
    loud.broadcast(&counter::shout, 2);
  });
  if (me() != 0) return;
  const bool captured = crown::this_runtime().config().actor_stdout;
  BOOST_TEST(out.has("] shout 1" + printed::from_every_worker()) == captured);
  // The unfinished line waits for the next output and then ends at the next newline
  // ("first 1 without newlineshout 2"); at the stop it is sent as it is.
  BOOST_TEST(out.has("] shout 2") == (captured && n() > 2));
  BOOST_TEST(out.has("[loud{workers=0}] first 1 without newlineshout 2") == captured);
  BOOST_TEST(out.has("[loud{workers=0}] first 2 without newline") == captured);
}

namespace {

/// A type without a default constructor: cereal builds it (load_and_construct).
struct labelled {
  explicit labelled(int v) : value(v) {}
  int value;
  template <class Ar>
  void serialize(Ar& ar) {
    ar(value);
  }
  template <class Ar>
  static void load_and_construct(Ar& ar, cereal::construct<labelled>& build) {
    int v = 0;
    ar(v);
    build(v);
  }
};

/// Every endpoint signature a C++ user writes.
class signatures {
public:
  explicit signatures(std::unique_ptr<int> seed) : samples_{static_cast<double>(*seed)} {}
  int twice(int x) noexcept { return 2 * x; }
  int size() const noexcept { return static_cast<int>(samples_.size()); }
  const std::vector<double>& samples() const { return samples_; }
  double& last() { return samples_.back(); }
  std::size_t append(std::vector<double>&& more) {
    samples_.insert(samples_.end(), more.begin(), more.end());
    return samples_.size();
  }
  int take(std::unique_ptr<int> p) { return p ? *p : -1; }
  int unwrap(labelled l, const labelled& m) const { return l.value * 100 + m.value; }
  labelled make(int v) const { return labelled(v + 1); }
  void touch() noexcept {}
  static constexpr auto endpoints =
      crown::endpoints(&signatures::twice, &signatures::size, &signatures::samples,
                       &signatures::last, &signatures::append, &signatures::take,
                       &signatures::unwrap, &signatures::make, &signatures::touch);

private:
  std::vector<double> samples_;
};

} // namespace

BOOST_AUTO_TEST_CASE(every_endpoint_signature_a_user_writes) {
  control([](crown::controller& c) {
    auto s = c.workers().spawn<signatures>("signatures", std::make_unique<int>(3));
    BOOST_TEST(s.call_one({0}, &signatures::twice, 21).get() == 42);
    BOOST_TEST(s.call(&signatures::size).get()[0] == 1);
    BOOST_TEST(s.call_one({0}, &signatures::append, std::vector<double>{4, 5}).get() == 3u);
    BOOST_TEST(s.call_one({0}, &signatures::samples).get() == std::vector<double>({3, 4, 5}));
    BOOST_TEST(s.call_one({0}, &signatures::last).get() == 5.0);
    BOOST_TEST(s.call_one({0}, &signatures::take, std::make_unique<int>(7)).get() == 7);
    BOOST_TEST(s.call_one({0}, &signatures::take, std::unique_ptr<int>()).get() == -1);
    BOOST_TEST(s.call_one({0}, &signatures::unwrap, labelled(4), labelled(2)).get() == 402);
    const auto made = s.call(&signatures::make, 8).get();
    for (const labelled& l : made) BOOST_TEST(l.value == 9);
    BOOST_TEST(s.reduce(crown::reduce_op::sum, &signatures::size).get() == n() + 1);
    s.call(&signatures::touch).get();
  });
}

BOOST_AUTO_TEST_CASE(draining_calls_in_flight_costs_linear_time) {
  // 8x the calls may take at most 48x the time (quadratic bookkeeping took 72x; crown-bench
  // actors, quiet: 7.6x). 5,000 calls (2.4 ms) fit in one time slice, 40,000 do not: with another
  // suite's ranks on the same cores (ctest -j2) the ratio read 23-30x, with two busy
  // loops beside it up to 43x. (The same 40,000 calls all in flight took 3-5x as long as
  // 8 batches of 5,000 on a quiet machine here: not linear, not investigated.)
  control([](crown::controller& c) {
    auto counters = c.workers().spawn<counter>("counters", 0);
    const auto drain = [&](int calls) {
      std::vector<crown::future<int>> pending;
      pending.reserve(static_cast<std::size_t>(calls));
      const auto start = std::chrono::steady_clock::now();
      for (int k = 0; k < calls; ++k) pending.push_back(counters.call_one({0}, &counter::get));
      for (auto& f : pending) (void)f.get();
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    // The best of several rounds each: another suite's ranks on the same cores (ctest -j)
    // stretch single rounds by 2-3x.
    double few = 1e9, many = 1e9;
    for (int round = 0; round < 5; ++round) few = std::min(few, drain(5000));
    for (int round = 0; round < 4; ++round) many = std::min(many, drain(40000));
    BOOST_TEST(many / few <= 48.0, "5,000 calls in " << few << " s, 40,000 in " << many << " s");
    BOOST_TEST_MESSAGE("drain 5,000: " << few << " s, 40,000: " << many << " s");
  });
}
