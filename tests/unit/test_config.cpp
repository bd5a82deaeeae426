// Configuration parsing, typo warnings, error formatting and logging: no MPI needed.
#include <boost/test/unit_test.hpp>
#include <crown/config.hpp>
#include <crown/detail/wait.hpp>
#include <crown/error.hpp>
#include <crown/log.hpp>
#include <fstream>
#include <harness/crown_test.hpp>
#include <runtime/cpu_list.hpp>
#include <sstream>
#include <unistd.h>

using crown::config;

namespace {
template <typename Error>
std::string message_of(const std::map<std::string, std::string>& vars) {
  return crown_test::what_of<Error>([&] { (void)config::parse(vars); });
}
} // namespace

BOOST_AUTO_TEST_CASE(defaults_when_nothing_is_set) {
  const config c = config::parse({{"PATH", "/bin"}, {"OMPI_FOO", "1"}});
  BOOST_TEST((c.log == crown::log_level::warn));
  BOOST_TEST((c.bind == crown::bind_policy::keep));
  BOOST_TEST(c.fake_hosts == 1);
  BOOST_TEST(c.wait_spins == -1);
}

BOOST_AUTO_TEST_CASE(every_valid_value_parses) {
  const config c = config::parse({{"CROWN_LOG", "debug"},
                                  {"CROWN_BIND", "numa"},
                                  {"CROWN_FAKE_HOSTS", "3"},
                                  {"CROWN_WAIT_SPINS", "0"}});
  BOOST_TEST((c.log == crown::log_level::debug));
  BOOST_TEST((c.bind == crown::bind_policy::numa));
  BOOST_TEST(c.fake_hosts == 3);
  BOOST_TEST(c.wait_spins == 0);
  for (auto b : {"keep", "core", "numa", "none"})
    BOOST_TEST(crown::to_string(config::parse({{"CROWN_BIND", b}}).bind) == b);
  BOOST_TEST(config::parse({{"CROWN_WAIT_SPINS", "auto"}}).wait_spins == -1);
}

BOOST_AUTO_TEST_CASE(invalid_values_name_variable_value_and_choices) {
  const auto m = message_of<crown::config_error>({{"CROWN_BIND", "cores"}});
  BOOST_TEST(m == "crown::config_error: rank ?: CROWN_BIND: invalid value 'cores' (allowed: keep, "
                  "core, numa, none)");
  for (auto bad : {"0", "-2", "two", "2x", ""})
    BOOST_TEST(message_of<crown::config_error>({{"CROWN_FAKE_HOSTS", bad}})
                   .find("CROWN_FAKE_HOSTS: invalid value '" + std::string(bad) + "'") !=
               std::string::npos);
  BOOST_TEST(message_of<crown::config_error>({{"CROWN_LOG", "verbose"}}).find("allowed: error") !=
             std::string::npos);
}

BOOST_AUTO_TEST_CASE(watchdog_settings_are_finite_and_not_too_short) {
  // nan once passed every range check (all comparisons false) and switched the watchdog
  // off; 0.001 s or a scale of 1e-9 aborted healthy jobs.
  for (auto bad : {"nan", "NaN", "-nan", "inf", "-inf", "infinity", "0.001", "0.5", "-1", "1e8", "",
                   "ten", "5s", "1e999"})
    BOOST_TEST(message_of<crown::config_error>({{"CROWN_WATCHDOG", bad}})
                       .find("CROWN_WATCHDOG: invalid value '" + std::string(bad) +
                             "' (expected 0 or a number from 1 to 1e+07)") != std::string::npos,
               bad);
  for (auto bad : {"nan", "inf", "0", "1e-9", "0.05", "-1", "1001", "", "x"})
    BOOST_TEST(message_of<crown::config_error>({{"CROWN_TIMEOUT_SCALE", bad}})
                       .find("CROWN_TIMEOUT_SCALE: invalid value '" + std::string(bad) +
                             "' (expected a number from 0.1 to 1000)") != std::string::npos,
               bad);
  const auto product =
      message_of<crown::config_error>({{"CROWN_WATCHDOG", "2"}, {"CROWN_TIMEOUT_SCALE", "0.25"}});
  BOOST_TEST(product == "crown::config_error: rank ?: CROWN_WATCHDOG: CROWN_WATCHDOG=2 x "
                        "CROWN_TIMEOUT_SCALE=0.25 is 0.5 s; the watchdog needs at least 1 s (0 "
                        "turns it off)");
  const config off = config::parse({{"CROWN_WATCHDOG", "0"}, {"CROWN_TIMEOUT_SCALE", "0.1"}});
  BOOST_TEST(off.watchdog == 0);
  BOOST_TEST(off.timeout_scale == 0.1);
  const config slow = config::parse({{"CROWN_WATCHDOG", "1.5"}, {"CROWN_TIMEOUT_SCALE", "1000"}});
  BOOST_TEST(slow.watchdog == 1.5);
  BOOST_TEST(slow.timeout_scale == 1000);
}

BOOST_AUTO_TEST_CASE(heap_sizes_never_wrap_and_have_a_cap) {
  // 4398046511105M (2^42 + 1 MiB) passed and wrapped to 4 MiB per host at 4 ranks.
  for (auto bad : {"4398046511105M", "16385G", "17T", "17592186044417", "18446744073709551616",
                   "99999999999999999999K", "1048575", "0", "-1M", "1.5G", "M", "", "nan", "1MB"})
    BOOST_TEST(message_of<crown::config_error>({{"CROWN_HEAP_SIZE", bad}})
                       .find("CROWN_HEAP_SIZE: invalid value '" + std::string(bad) +
                             "' (expected bytes from 1M to 16T") != std::string::npos,
               bad);
  BOOST_TEST(config::parse({{"CROWN_HEAP_SIZE", "16T"}}).heap_size == std::size_t{1} << 44);
  BOOST_TEST(config::parse({{"CROWN_HEAP_SIZE", "16384G"}}).heap_size == std::size_t{1} << 44);
  BOOST_TEST(config::parse({{"CROWN_HEAP_SIZE", "1048576"}}).heap_size == std::size_t{1} << 20);
  BOOST_TEST(config::parse({{"CROWN_HEAP_SIZE", "1048577"}}).heap_size == 1048577u);
  BOOST_TEST(config::parse({{"CROWN_HEAP_SIZE", "2g"}}).heap_size == std::size_t{2} << 30);
}

BOOST_AUTO_TEST_CASE(single_copy_is_auto_or_off) {
  BOOST_TEST(config::parse({}).single_copy);
  BOOST_TEST(config::parse({{"CROWN_SINGLE_COPY", "auto"}}).single_copy);
  BOOST_TEST(!config::parse({{"CROWN_SINGLE_COPY", "0"}}).single_copy);
  for (auto bad : {"1", "", "none", "off", "AUTO"})
    BOOST_TEST(message_of<crown::config_error>({{"CROWN_SINGLE_COPY", bad}}) ==
               "crown::config_error: rank ?: CROWN_SINGLE_COPY: invalid value '" +
                   std::string(bad) + "' (allowed: auto, 0)");
}

BOOST_AUTO_TEST_CASE(progress_cpus_are_host_rank_or_a_cpu_list) {
  BOOST_TEST(config::parse({}).progress_cpus == "host");
  const long cpus = sysconf(_SC_NPROCESSORS_CONF);
  const std::string last = std::to_string(cpus - 1);
  for (const std::string& good :
       std::vector<std::string>{"host", "rank", "0", "0-" + last, "0," + last})
    BOOST_TEST(config::parse({{"CROWN_PROGRESS_CPUS", good}}).progress_cpus == good);
  for (const std::string& bad :
       std::vector<std::string>{"", "all", "3-1", "0-", "-2", "1,", ",1", "0 1", "65536", "x",
                                std::to_string(cpus), "0-" + std::to_string(cpus)})
    BOOST_TEST(message_of<crown::config_error>({{"CROWN_PROGRESS_CPUS", bad}}) ==
               "crown::config_error: rank ?: CROWN_PROGRESS_CPUS: invalid value '" + bad +
                   "' (allowed: host, rank, or a list of CPUs 0-" + last + " such as 0-3,8)");
}

BOOST_AUTO_TEST_CASE(cpu_lists_name_every_cpu_in_a_range) {
  using crown::detail::parse_cpu_list;
  BOOST_TEST(parse_cpu_list("0-3,8").value() == (std::vector<int>{0, 1, 2, 3, 8}),
             boost::test_tools::per_element());
  BOOST_TEST(parse_cpu_list("7").value() == std::vector<int>{7}, boost::test_tools::per_element());
  BOOST_TEST(!parse_cpu_list("8-7"));
  BOOST_TEST(!parse_cpu_list(""));
}

BOOST_AUTO_TEST_CASE(wait_and_call_timeouts_are_checked) {
  const config d = config::parse({});
  BOOST_TEST(d.wait_warn == 60);
  BOOST_TEST(d.wait_timeout == 0);
  BOOST_TEST(d.call_timeout == 0);
  const config c = config::parse(
      {{"CROWN_WAIT_WARN", "0.5"}, {"CROWN_WAIT_TIMEOUT", "3"}, {"CROWN_CALL_TIMEOUT", "120"}});
  BOOST_TEST(c.wait_warn == 0.5);
  BOOST_TEST(c.wait_timeout == 3);
  BOOST_TEST(c.call_timeout == 120);
  for (const char* name : {"CROWN_WAIT_WARN", "CROWN_WAIT_TIMEOUT", "CROWN_CALL_TIMEOUT"})
    for (auto bad : {"nan", "inf", "-1", "0.01", "1e8", "", "3s"})
      BOOST_TEST(message_of<crown::config_error>({{name, bad}})
                         .find(std::string(name) + ": invalid value '" + bad + "'") !=
                     std::string::npos,
                 name << "=" << bad);
  BOOST_TEST(message_of<crown::config_error>(
                 {{"CROWN_WAIT_TIMEOUT", "2"}, {"CROWN_TIMEOUT_SCALE", "0.25"}}) ==
             "crown::config_error: rank ?: CROWN_WAIT_TIMEOUT: CROWN_WAIT_TIMEOUT=2 x "
             "CROWN_TIMEOUT_SCALE=0.25 is 0.5 s; it needs at least 1 s (0 turns it off)");
}

BOOST_AUTO_TEST_CASE(fault_injection_is_parsed_and_validated) {
  BOOST_TEST((config::parse({}).fault.action == crown::fault_action::none));
  BOOST_TEST(crown::to_string(config::parse({{"CROWN_FAULT", "none"}}).fault) == "none");
  const auto f = config::parse({{"CROWN_FAULT", "stop:rank=3:at=co_sum:count=7"}}).fault;
  BOOST_TEST((f.action == crown::fault_action::stop && f.rank == 3 &&
              f.at == crown::fault_point::co_sum && f.count == 7));
  BOOST_TEST(crown::to_string(f) == "stop:rank=3:at=co_sum:count=7");
  for (const char* good : {"kill:rank=0:at=startup", "throw:rank=1:at=put", "kill:at=call:rank=2",
                           "stop:rank=1:at=sync_all", "kill:rank=0:at=shutdown",
                           "kill:rank=1:at=step:count=50", "throw:rank=0:at=checkpoint"})
    BOOST_TEST(crown::to_string(config::parse({{"CROWN_FAULT", good}}).fault) != "none", good);
  for (auto bad : {"", "kill", "kill:rank=1", "kill:at=put", "boom:rank=1:at=put",
                   "kill:rank=-1:at=put", "kill:rank=1:at=lunch", "kill:rank=1:at=put:count=0",
                   "kill:rank=1:at=put:rank=2", "kill:rank=1:at=put:", "kill:rank=x:at=put",
                   "throw:rank=1:at=shutdown", "kill:rank=99999999999:at=put"})
    BOOST_TEST(message_of<crown::config_error>({{"CROWN_FAULT", bad}})
                       .find("CROWN_FAULT: invalid value '" + std::string(bad) + "'") !=
                   std::string::npos,
               bad);
}

BOOST_AUTO_TEST_CASE(unknown_names_warn_with_the_closest_known_name) {
  std::vector<std::string> warnings;
  (void)config::parse({{"CROWN_BNID", "core"}, {"CROWN_ZZZZZZZZZZZZZ", "1"}, {"XCROWN_LOG", "x"}},
                      &warnings);
  BOOST_TEST_REQUIRE(warnings.size() == 2u);
  BOOST_TEST(warnings[0] ==
             "unknown environment variable CROWN_BNID is ignored (did you mean CROWN_BIND?)");
  BOOST_TEST(warnings[1] == "unknown environment variable CROWN_ZZZZZZZZZZZZZ is ignored");
}

// The configuration reference is one table in one file, docs/configuration.md: every
// variable of the code's table has a row there, and README.md holds no copy of the rows.
BOOST_AUTO_TEST_CASE(docs_document_every_variable) {
  auto text_of = [](const char* path) {
    std::ifstream in(path);
    BOOST_TEST_REQUIRE(in.good(), path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  };
  const std::string reference = text_of(CROWN_SOURCE_DIR "/docs/configuration.md");
  const std::string readme = text_of(CROWN_SOURCE_DIR "/README.md");
  for (const auto& v : crown::config_variables()) {
    const std::string row = "| `" + std::string(v.name) + "` |";
    BOOST_TEST(reference.find(row) != std::string::npos,
               v.name << " is missing from docs/configuration.md's table");
    BOOST_TEST(readme.find(row) == std::string::npos,
               v.name << " has a row in README.md: the table lives in docs/configuration.md");
  }
}

BOOST_AUTO_TEST_CASE(errors_carry_kind_rank_context_and_message) {
  const crown::argument_error e("mesh{dp=2}.slice(\"tp\", 0)", "unknown dimension");
  BOOST_TEST(std::string(e.what()) ==
             "crown::argument_error: rank ?: mesh{dp=2}.slice(\"tp\", 0): unknown dimension");
  BOOST_TEST(e.rank() == -1);
  BOOST_TEST(e.context() == "mesh{dp=2}.slice(\"tp\", 0)");
  BOOST_TEST(e.message() == "unknown dimension");
  const crown::error& base = e; // one hierarchy: everything is a crown::error
  BOOST_TEST(std::string(base.what()).starts_with("crown::argument_error"));
}

BOOST_AUTO_TEST_CASE(log_lines_are_filtered_and_prefixed) {
  std::vector<std::string> lines;
  crown::detail::set_log_sink([&](std::string_view l) { lines.emplace_back(l); });
  crown::detail::set_log_level(crown::log_level::warn);
  crown::log(crown::log_level::debug, "hidden ", 1);
  crown::log(crown::log_level::warn, "shown ", 42);
  crown::detail::set_log_level(crown::log_level::trace);
  crown::log(crown::log_level::trace, "trace too");
  crown::detail::set_log_sink({});
  crown::detail::set_log_level(crown::log_level::warn);
  BOOST_TEST_REQUIRE(lines.size() == 2u);
  BOOST_TEST(lines[0] == "[crown warn rank ?] shown 42\n");
  BOOST_TEST(lines[1] == "[crown trace rank ?] trace too\n");
}

BOOST_AUTO_TEST_CASE(wait_until_polls_until_done) {
  for (int spins : {0, 1000}) {
    crown::detail::set_wait_spins(spins);
    int calls = 0;
    crown::detail::wait_until([&] { return ++calls == 50; });
    BOOST_TEST(calls == 50);
  }
}
