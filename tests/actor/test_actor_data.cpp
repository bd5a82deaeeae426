// Large arguments (issue 19): arrays of numbers from 64 KiB up travel beside the
// command, from the caller's memory, down a binary tree in pieces; a std::span<const T>
// parameter views the received bytes. Every value is checked against a reference
// computed on the caller; tree depths 1..3 (np 2..5, fan-out 2 and 16).
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <crown/crown.hpp>
#include <fstream>
#include <harness/crown_test.hpp>
#include <numeric>
#include <span>
#include <string>
#include <sys/resource.h>
#include <unistd.h>
#include <vector>

using namespace crown_test; // n(), what_of()

namespace {

void control(const std::function<void(crown::controller&)>& fn) {
  BOOST_TEST(crown::this_runtime().control(fn) == 0);
}

/// A fingerprint of an array that changes with any element and with its order.
template <typename T>
double fingerprint(std::span<const T> a) {
  double f = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    f += static_cast<double>(a[i]) * static_cast<double>((i % 1013) + 1);
  return f;
}

/// Integers as doubles: every partial sum is exact, so fingerprints compare exactly.
std::vector<double> ramp(std::size_t count, double start) {
  std::vector<double> a(count);
  for (std::size_t i = 0; i < count; ++i) a[i] = start + static_cast<double>(i % 4096);
  return a;
}

class holder {
public:
  double by_vector(const std::vector<double>& a) { return fingerprint<double>(a); }
  double by_span(std::span<const double> a) { return fingerprint(a); }
  /// Small and large, inline and beside, in one call; the name checks what came between.
  double mixed(std::string name, std::span<const float> big, std::vector<int> small,
               std::vector<double> large) {
    if (name != "mixed") throw std::logic_error("the string arrived as '" + name + "'");
    return fingerprint(big) + fingerprint<int>(small) + fingerprint<double>(large);
  }
  void keep(std::span<const double> a) { kept_.push_back(fingerprint(a)); }
  /// Keeps the vector itself: it is this actor's, never the next call's storage.
  void keep_vector(std::vector<double> a) { kept_vectors_.push_back(std::move(a)); }
  std::vector<double> kept_vectors() const {
    std::vector<double> out;
    for (const auto& v : kept_vectors_) out.push_back(fingerprint<double>(v));
    return out;
  }
  /// Limits this rank's address space to what it maps now plus `mib` MiB (0: no limit).
  void limit_memory(int mib) {
    rlimit l{RLIM_INFINITY, RLIM_INFINITY};
    if (mib > 0) {
      std::ifstream status("/proc/self/statm");
      std::size_t pages = 0;
      status >> pages;
      l.rlim_cur = pages * static_cast<std::size_t>(sysconf(_SC_PAGESIZE)) +
                   (static_cast<std::size_t>(mib) << 20);
    }
    if (setrlimit(RLIMIT_AS, &l) != 0) throw std::runtime_error("setrlimit failed");
  }
  std::vector<double> kept() const { return kept_; }
  /// Sends `a` on to the actor at `to` (one target: straight there) and to every actor
  /// (several targets: relayed by the controller); returns both answers.
  std::vector<double> pass_on(crown::actor_mesh<holder> mesh, int to, std::span<const double> a) {
    std::vector<double> out{mesh.call_one({to}, &holder::by_span, a).get()};
    for (double v : mesh.call(&holder::by_vector, std::vector<double>(a.begin(), a.end())).get())
      out.push_back(v);
    return out;
  }
  static constexpr auto endpoints = crown::endpoints(
      &holder::by_vector, &holder::by_span, &holder::mixed, &holder::keep, &holder::kept,
      &holder::pass_on, &holder::limit_memory, &holder::keep_vector, &holder::kept_vectors);

private:
  std::vector<double> kept_;
  std::vector<std::vector<double>> kept_vectors_;
};

/// Exposes its own memory as a remote_buffer (issue 19, remote buffers).
class keeper {
public:
  crown::remote_buffer<double> expose(std::size_t count) {
    data_ = ramp(count, 100.0 * crown::this_actor().index);
    buffer_ = crown::remote_buffer<double>(std::span<double>(data_), "kept");
    return buffer_;
  }
  double total() const { return fingerprint<double>(data_); }
  /// Reads another actor's buffer: actor to actor.
  std::vector<double> read_other(crown::remote_buffer<double> b, std::size_t count) const {
    std::vector<double> v(count);
    b.read_into(v);
    return v;
  }
  void forget() { buffer_.drop(); }
  static constexpr auto endpoints =
      crown::endpoints(&keeper::expose, &keeper::total, &keeper::read_other, &keeper::forget);

private:
  std::vector<double> data_;
  crown::remote_buffer<double> buffer_;
};

/// Sizes around the attachment threshold and the piece sizes (256 KiB forwarded, 4 MiB
/// sent straight), none a multiple of them.
const std::vector<std::size_t> counts{10, (64 << 10) / 8 - 1, (64 << 10) / 8, (256 << 10) / 8 + 3,
                                      (5 << 20) / 8 + 17};

} // namespace

BOOST_AUTO_TEST_CASE(arrays_reach_every_actor_whole) {
  control([](crown::controller& c) {
    auto m = c.workers().spawn<holder>("holders");
    for (std::size_t count : counts) {
      const auto a = ramp(count, 1.0);
      const double expected = fingerprint<double>(a);
      for (double v : m.call(&holder::by_vector, a).get()) BOOST_TEST(v == expected);
      for (double v : m.call(&holder::by_span, a).get()) BOOST_TEST(v == expected);
      BOOST_TEST(m.call_one({n() - 2}, &holder::by_span, std::span<const double>(a)).get() ==
                 expected);
      BOOST_TEST(m.reduce(crown::reduce_op::max, &holder::by_vector, a).get() == expected);
    }
  });
}

// A large array lands in the std::vector a vector parameter takes, kept for the next
// one: one call after another with new values, and vectors an actor keeps, stay right.
BOOST_AUTO_TEST_CASE(vector_parameters_see_each_call_s_values_and_keep_their_own) {
  control([](crown::controller& c) {
    auto m = c.workers().spawn<holder>("holders");
    std::vector<double> expected;
    for (int call = 0; call < 4; ++call) {
      const auto a = ramp((300 << 10) / 8 + static_cast<std::size_t>(call % 2), 10.0 * call);
      for (double v : m.call(&holder::by_vector, a).get()) BOOST_TEST(v == fingerprint<double>(a));
      m.call(&holder::keep_vector, a).get();
      expected.push_back(fingerprint<double>(a));
    }
    for (const auto& kept : m.call(&holder::kept_vectors).get()) BOOST_TEST(kept == expected);
  });
}

BOOST_AUTO_TEST_CASE(small_and_large_arguments_mix_in_one_call) {
  control([](crown::controller& c) {
    auto m = c.workers().spawn<holder>("holders");
    std::vector<float> big((300 << 10) / 4);
    std::iota(big.begin(), big.end(), 0.0f); // exact in float below 2^24
    const std::vector<int> small{3, -1, 4};
    const auto large = ramp((70 << 10) / 8, -100.0);
    const double expected =
        fingerprint<float>(big) + fingerprint<int>(small) + fingerprint<double>(large);
    const auto got = m.call(&holder::mixed, std::string("mixed"), big, small, large).get();
    for (double v : got) BOOST_TEST(v == expected);
    // Empty arrays travel too.
    for (double v : m.call(&holder::mixed, std::string("mixed"), std::vector<float>{},
                           std::vector<int>{}, std::vector<double>{})
                        .get())
      BOOST_TEST(v == 0.0);
  });
}

BOOST_AUTO_TEST_CASE(the_caller_may_change_its_array_once_the_call_returns) {
  control([](crown::controller& c) {
    auto m = c.workers().spawn<holder>("holders");
    auto a = ramp((1 << 20) / 8, 5.0);
    const double first = fingerprint<double>(a);
    m.broadcast(&holder::keep, a); // sent from `a` itself: it may change once this returns
    std::fill(a.begin(), a.end(), -7.0);
    const double second = fingerprint<double>(a);
    m.broadcast(&holder::keep, a);
    a.assign(a.size(), 0.0);
    a.clear();
    a.shrink_to_fit(); // freed
    c.flush();
    for (const auto& kept : m.call(&holder::kept).get()) {
      BOOST_TEST(kept.size() == 2u);
      if (kept.size() == 2) {
        BOOST_TEST(kept[0] == first);
        BOOST_TEST(kept[1] == second);
      }
    }
  });
}

BOOST_AUTO_TEST_CASE(actors_pass_large_arrays_to_actors) {
  control([](crown::controller& c) {
    auto m = c.workers().spawn<holder>("holders");
    const auto a = ramp((600 << 10) / 8 + 1, 2.0);
    const double expected = fingerprint<double>(a);
    // Each actor passes the array to the last actor (to itself, for the last one) and
    // to every actor through the controller's relay.
    const int last = n() - 2;
    for (const auto& answers : m.call(&holder::pass_on, m, last, a).get()) {
      BOOST_TEST(answers.size() == static_cast<std::size_t>(n()));
      for (double v : answers) BOOST_TEST(v == expected);
    }
  });
}

// A rank forwards a command with attachments to its children as soon as it arrives, so
// their answers can come back before its own part runs; they were once dropped there
// (seen 1 run in 30 at 5 ranks, then the call waited for ever). Many rounds, every
// answer within a time limit.
BOOST_AUTO_TEST_CASE(answers_from_below_that_overtake_a_part_with_arrays_are_kept) {
  control([](crown::controller& c) {
    auto m = c.workers().spawn<holder>("holders");
    const auto a = ramp((80 << 10) / 8, 3.0), b = ramp((600 << 10) / 8 + 1, 2.0);
    const double expected_a = fingerprint<double>(a), expected_b = fingerprint<double>(b);
    for (int round = 0; round < 60; ++round) {
      for (double v : m.call(&holder::by_span, a).get(std::chrono::seconds(30)))
        BOOST_TEST(v == expected_a);
      if (round % 3 != 0) continue;
      for (const auto& answers :
           m.call(&holder::pass_on, m, round % (n() - 1), b).get(std::chrono::seconds(30))) {
        BOOST_TEST(answers.size() == static_cast<std::size_t>(n()));
        for (double v : answers) BOOST_TEST(v == expected_b);
      }
    }
  });
}

BOOST_AUTO_TEST_CASE(many_large_calls_in_flight_keep_their_order_and_values) {
  control([](crown::controller& c) {
    auto m = c.workers().spawn<holder>("holders");
    std::vector<double> expected;
    for (int k = 0; k < 12; ++k) {
      const auto a = ramp((100 << 10) / 8 + static_cast<std::size_t>(k), k);
      expected.push_back(fingerprint<double>(a));
      m.broadcast(&holder::keep, a);
    }
    for (const auto& kept : m.call(&holder::kept).get()) BOOST_TEST(kept == expected);
  });
}

BOOST_AUTO_TEST_CASE(a_rank_without_memory_for_the_arguments_fails_the_call_and_serves_on) {
  control([](crown::controller& c) {
    auto m = c.workers().spawn<holder>("holders");
    const int last = n() - 2;
    m.call_one({last}, &holder::limit_memory, 64).get(); // 64 MiB more than it maps now
    const std::vector<double> huge((256 << 20) / 8, 1.0);
    // The caller is not left waiting: the rank takes the pieces and drops them.
    const std::string why =
        what_of<crown::actor_error>([&] { m.call(&holder::by_span, huge).get(); });
    BOOST_TEST(why.find("holders{workers=" + std::to_string(last) + "} on rank " +
                        std::to_string(last + 1)) != std::string::npos,
               why);
    BOOST_TEST(why.find("rank " + std::to_string(last + 1) +
                        " has no memory for 268435456 bytes "
                        "of arguments") != std::string::npos,
               why);
    m.call_one({last}, &holder::limit_memory, 0).get();
    const auto a = ramp((300 << 10) / 8, 3.0);
    for (double v : m.call(&holder::by_span, a).get()) BOOST_TEST(v == fingerprint<double>(a));
  });
}

BOOST_AUTO_TEST_CASE(remote_buffers_travel_between_the_controller_and_actors) {
  control([](crown::controller& c) {
    auto m = c.workers().spawn<keeper>("keepers");
    const std::size_t count = 1000;
    const auto handles = m.call(&keeper::expose, count).get();
    BOOST_TEST(handles.size() == static_cast<std::size_t>(n() - 1));
    for (std::size_t i = 0; i < handles.size(); ++i) { // the controller reads each actor's
      BOOST_TEST(handles[i].rank() == static_cast<int>(i) + 1);
      BOOST_TEST(!handles[i].owns());
      std::vector<double> got(count);
      handles[i].read_into(got);
      BOOST_TEST(got == ramp(count, 100.0 * static_cast<double>(i)),
                 boost::test_tools::per_element());
    }
    // The controller writes into actor 0's memory; the actor sees it, and so does the
    // last actor reading it.
    const std::vector<double> marks(10, -1.0);
    handles[0].write_from(marks, 20);
    auto expected = ramp(count, 0.0);
    std::fill(expected.begin() + 20, expected.begin() + 30, -1.0);
    BOOST_TEST(m.call_one({0}, &keeper::total).get() == fingerprint<double>(expected));
    const auto seen = m.call_one({n() - 2}, &keeper::read_other, handles[0], count).get();
    BOOST_TEST(seen == expected, boost::test_tools::per_element());
    // The controller's own memory, read by every actor.
    std::vector<double> mine = ramp(count, 7.0);
    const crown::remote_buffer<double> from_controller(std::span<double>(mine), "controller's");
    for (const auto& v : m.call(&keeper::read_other, from_controller, count).get())
      BOOST_TEST(v == mine, boost::test_tools::per_element());
    // Dropped by its owner: an error naming it and its rank, for the controller and actors.
    m.call_one({0}, &keeper::forget).get();
    std::vector<double> out(count);
    const std::string why = what_of<crown::state_error>([&] { handles[0].read_into(out); });
    BOOST_TEST(why.find("remote_buffer 'kept' of rank 1") != std::string::npos, why);
    BOOST_TEST(why.find("its owner freed it") != std::string::npos, why);
    const std::string relayed = what_of<crown::actor_error>(
        [&] { (void)m.call_one({n() - 2}, &keeper::read_other, handles[0], count).get(); });
    BOOST_TEST(relayed.find("remote_buffer 'kept' of rank 1") != std::string::npos, relayed);
  });
}
