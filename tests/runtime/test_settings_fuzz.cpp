// Every CROWN_* variable with bad values (empty, negative, nan, inf, huge, non-numeric),
// on every rank or on one, and with good values that differ between ranks: start-up
// ends in a config_error naming the variable on every rank, never a crash, a hang or a
// silent default. The harness owns MPI; each case starts (and fails to start) a runtime.
#include <boost/test/unit_test.hpp>
#include <crown/crown.hpp>
#include <crown/detail/heap.hpp>
#include <cstdlib>
#include <harness/crown_test.hpp>
#include <map>
#include <unistd.h>

using crown_test::world_rank;
using crown_test::world_size;

namespace {

/// Values that no variable accepts.
const char* const bad_values[] = {
    "",      "-1",  "nan", "NaN", "inf",  "-inf", "99999999999999999999",
    "1e999", "zzz", " 1",  "1 ",  "0x10", "1,5"};

/// Two good values per variable (the first usually the default).
const std::map<std::string, std::pair<std::string, std::string>> good_values{
    {"CROWN_LOG", {"warn", "error"}},
    {"CROWN_BIND", {"keep", "none"}},
    {"CROWN_FAKE_HOSTS", {"1", "2"}},
    {"CROWN_WAIT_SPINS", {"auto", "0"}},
    {"CROWN_HEAP_SIZE", {"2M", "3M"}},
    {"CROWN_SHM", {"1", "0"}},
    {"CROWN_CHECK", {"default", "1"}},
    {"CROWN_TRANSPORT", {"auto", "am"}},
    {"CROWN_FANOUT", {"16", "2"}},
    {"CROWN_WATCHDOG", {"30", "31"}},
    {"CROWN_TIMEOUT_SCALE", {"1", "2"}},
    {"CROWN_ACTOR_STDOUT", {"0", "1"}},
    {"CROWN_MAILBOX_SIZE", {"256K", "0"}},
    {"CROWN_PROGRESS_THREAD", {"0", "1"}},
    {"CROWN_PROGRESS_CPUS", {"host", "0"}},
    {"CROWN_SINGLE_COPY", {"auto", "0"}},
    {"CROWN_WAIT_WARN", {"60", "61"}},
    {"CROWN_WAIT_TIMEOUT", {"0", "100"}},
    {"CROWN_CALL_TIMEOUT", {"0", "100"}},
    {"CROWN_STOP_GRACE", {"10", "20"}},
    // a fault at a point these tests never reach (no put)
    {"CROWN_FAULT", {"none", "kill:rank=0:at=put"}},
    {"CROWN_GPU_HEAP_SIZE", {"2M", "0"}},
    {"CROWN_GPU_MAPPING", {"auto", "ipc"}},
    {"CROWN_GPU_COLLECTIVES", {"auto", "host"}},
    {"CROWN_GPU_HALOS", {"copies", "kernel"}},
    {"CROWN_GEMM", {"auto", "cpu"}},
    {"CROWN_TRACE", {"", "crown-trace-fuzz"}}, // differing values fail before the directory is made
};

/// Variables whose every text is a valid value (CROWN_TRACE names a directory): no bad
/// value to refuse.
bool takes_any_text(const std::string& name) { return name == "CROWN_TRACE"; }

/// Sets one variable in this process for a scope (a small heap for the rest).
struct setting {
  setting(const std::string& name, const std::string& value) : name_(name) {
    setenv(name.c_str(), value.c_str(), 1);
  }
  ~setting() { unsetenv(name_.c_str()); }
  setting(const setting&) = delete;
  setting& operator=(const setting&) = delete;
  std::string name_;
};

/// "started", the config_error's what(), or "other: <what>" for any other Crown error.
std::string start() {
  try {
    crown::runtime rt;
    return "started";
  } catch (const crown::config_error& e) {
    return e.what();
  } catch (const crown::error& e) {
    return std::string("other: ") + e.what();
  }
}

/// The start of this rank's config_error about `variable`: "...: rank 2: CROWN_X".
std::string config_error_of(const std::string& variable) {
  return "crown::config_error: rank " + std::to_string(world_rank()) + ": " + variable;
}

struct clean_environment {
  clean_environment() {
    for (const auto& v : crown::config_variables()) unsetenv(std::string(v.name).c_str());
    setenv("CROWN_HEAP_SIZE", "4M", 1);
  }
  ~clean_environment() { unsetenv("CROWN_HEAP_SIZE"); }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(settings_fuzz, clean_environment)

BOOST_AUTO_TEST_CASE(the_fuzz_knows_every_variable) {
  for (const auto& v : crown::config_variables())
    BOOST_TEST(good_values.count(std::string(v.name)) == 1u, v.name << " has no good values here");
}

BOOST_AUTO_TEST_CASE(bad_values_on_every_rank_fail_everywhere) {
  for (const auto& v : crown::config_variables())
    for (const char* bad : bad_values) {
      const std::string name(v.name);
      if (takes_any_text(name)) continue;
      if (name == "CROWN_PROGRESS_CPUS" && std::string(bad) == "1,5" &&
          sysconf(_SC_NPROCESSORS_CONF) > 5)
        continue; // CPUs 1 and 5 of a machine that has them
      const setting s(name, bad);
      const std::string m = start();
      BOOST_TEST(m.starts_with(config_error_of(name) + ": invalid value '" + bad + "'"),
                 name << "='" << bad << "': " << m);
    }
}

BOOST_AUTO_TEST_CASE(values_too_large_for_the_machine_fail_everywhere) {
  // Parsed fine, refused later: by the memory check, the topology, the tree's range.
  const std::pair<const char*, const char*> cases[] = {
      {"CROWN_HEAP_SIZE", "16T"},
      {"CROWN_FAKE_HOSTS", "2147483647"},
      {"CROWN_FANOUT", "65536"},
      {"CROWN_WAIT_SPINS", "2147483648"},
      {"CROWN_WATCHDOG", "10000001"},
      {"CROWN_HEAP_SIZE", "4398046511105M"},          // once wrapped to 4 MiB at 4 ranks per host
      {"CROWN_FAULT", "kill:rank=2147483647:at=put"}, // no such rank in the job
  };
  for (const auto& [name, value] : cases) {
    const setting s(name, value);
    const std::string m = start();
    BOOST_TEST(m.starts_with(config_error_of(name)), name << "=" << value << ": " << m);
  }
}

BOOST_AUTO_TEST_CASE(a_bad_value_on_one_rank_fails_every_rank) {
  // The ranks whose own value is fine report the bad rank's error, as a config_error.
  const int n = world_size();
  int turn = 0;
  for (const auto& v : crown::config_variables()) {
    const std::string name(v.name);
    if (takes_any_text(name)) continue;
    const int bad_rank = turn++ % n;
    const std::string value = world_rank() == bad_rank ? "nan" : good_values.at(name).first;
    const setting s(name, value);
    const std::string m = start();
    const std::string expected =
        config_error_of(name) + ": " +
        (world_rank() == bad_rank ? std::string() : "on rank " + std::to_string(bad_rank) + ": ") +
        "invalid value 'nan'";
    BOOST_TEST(m.starts_with(expected), name << " bad on rank " << bad_rank << ": " << m);
  }
}

BOOST_AUTO_TEST_CASE(good_values_that_differ_between_ranks_fail_every_rank) {
  if (world_size() < 2) return;
  for (const auto& v : crown::config_variables()) {
    const std::string name(v.name);
    const auto& [a, b] = good_values.at(name);
    // Rank 0 and every even rank get a, odd ranks b: rank 1 is the first that differs.
    const setting s(name, world_rank() % 2 == 0 ? a : b);
    const std::string m = start();
    if (v.per_rank) {
      BOOST_TEST(m == "started", name << " may differ between ranks: " << m);
      continue;
    }
    BOOST_TEST(m.starts_with(config_error_of(name) + ": differs between ranks: rank 0 has "),
               name << ": " << m);
    BOOST_TEST(m.find(", rank 1 has ") != std::string::npos, name << ": " << m);
    BOOST_TEST(m.find("every rank needs the same value") != std::string::npos, m);
  }
  // Different spellings of one value agree.
  const setting s("CROWN_HEAP_SIZE", world_rank() % 2 == 0 ? "4096K" : "4M");
  BOOST_TEST(start() == "started");
}

BOOST_AUTO_TEST_CASE(per_rank_values_apply_to_their_rank) {
  const setting s("CROWN_WAIT_SPINS", std::to_string(world_rank() * 10));
  crown::runtime rt;
  BOOST_TEST(rt.wait_spins() == world_rank() * 10);
}

BOOST_AUTO_TEST_CASE(heap_slices_start_on_page_boundaries) {
  // A heap size that is not a multiple of the page (or of 64) once left every other
  // rank's heap misaligned: each slice started where the previous one ended.
  const setting s("CROWN_HEAP_SIZE", "1048577");
  crown::runtime rt;
  const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  for (int r = 0; r < rt.size(); ++r)
    if (std::byte* base = crown::detail::heap_peer_address(r, 0))
      BOOST_TEST(reinterpret_cast<std::uintptr_t>(base) % page == 0u, "rank " << r);
  rt.world().barrier();
}

BOOST_AUTO_TEST_SUITE_END()
