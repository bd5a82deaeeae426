// libFuzzer target: endpoint and constructor argument decoding on a serving rank
// (include/crown/actor/registry.hpp over the bounded reader of detail/archive.hpp).
// Whatever bytes arrive as a call's arguments, the endpoint either runs with values
// read from inside them or the call fails with malformed_message; no read past the
// bytes, no allocation out of proportion to them (a hostile length prefix is refused
// before anything is allocated), no other exception.
#include <crown/actor/registry.hpp>
#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <vector>

// The one registry.cpp function the templates use; the rest of libcrown stays out.
std::string crown::detail::demangle(const char* mangled) { return mangled; }

namespace {

void require(bool ok) {
  if (!ok) __builtin_trap();
}

struct probe {
  probe(int a, std::string b) : total(a + static_cast<long>(b.size())) {}
  long scalars(int a, double b, bool c) { return static_cast<long>(a) + (b > 0) + c; }
  std::size_t text(const std::string& s) { return s.size(); }
  double numbers(std::vector<double> v) {
    double sum = 0;
    for (double x : v) sum += x;
    return sum;
  }
  std::size_t nested(const std::map<std::string, std::vector<int>>& m,
                     std::tuple<int, std::string> t, std::vector<std::string> names) {
    return m.size() + std::get<1>(t).size() + names.size();
  }
  void nothing() {}
  static constexpr auto endpoints = crown::endpoints(&probe::scalars, &probe::text, &probe::numbers,
                                                     &probe::nested, &probe::nothing);
  long total;
};

const crown::detail::actor_type& type() {
  static const crown::detail::actor_type t =
      crown::detail::make_actor_type<probe, int, std::string>();
  return t;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const auto& t = type();
  // exactly the argument bytes, so that ASan sees any read past them
  std::vector<std::byte> args(size - 1);
  if (size > 1) std::memcpy(args.data(), data + 1, size - 1);
  const std::size_t which = data[0] % (t.endpoints.size() + 1);
  try {
    if (which == t.endpoints.size()) { // the constructor
      crown::detail::byte_reader in(args);
      t.destroy(t.construct(in));
    } else {
      probe actor(1, "x");
      std::vector<std::byte> out;
      require(t.endpoints[which](&actor, args, {}, out) <= args.size());
    }
  } catch (const crown::detail::malformed_message&) { // refused: the wanted outcome
  }
  return 0;
}
