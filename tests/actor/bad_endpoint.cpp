// Endpoints that cannot work: each CROWN_BAD_ENDPOINT variant must fail to compile with
// one static_assert that names the endpoint and the rule (tests/actor/CMakeLists.txt).
#include <crown/crown.hpp>
#include <string>

namespace {

struct opaque { // no serialize function
  int x = 0;
};

struct bad {
#if CROWN_BAD_ENDPOINT == 1
  void scale(std::string& out) { out += "!"; } // the caller's object is on another rank
#elif CROWN_BAD_ENDPOINT == 2
  int* where() { return &value; } // an address means nothing on the caller's rank
#elif CROWN_BAD_ENDPOINT == 3
  int peek(opaque o) { return o.x; } // cereal cannot write it
#endif
  int value = 0;
#if CROWN_BAD_ENDPOINT == 1
  static constexpr auto endpoints = crown::endpoints(&bad::scale);
#elif CROWN_BAD_ENDPOINT == 2
  static constexpr auto endpoints = crown::endpoints(&bad::where);
#elif CROWN_BAD_ENDPOINT == 3
  static constexpr auto endpoints = crown::endpoints(&bad::peek);
#endif
};

} // namespace

int main(int argc, char** argv) {
  crown::runtime rt(argc, argv);
  return rt.control([](crown::controller& c) { (void)c.workers().spawn<bad>("bad"); });
}
