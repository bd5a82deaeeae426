// A serving rank that hangs (stopped: no heartbeat either) or dies inside an endpoint
// must end the whole job, non-zero, with a message naming the rank — never a hang.
//   mpirun -np 3 actor_failures hang|die
#include <crown/crown.hpp>
#include <csignal>
#include <string_view>

namespace {

struct victim {
  void hang() const {
    if (crown::this_actor().index == 0) std::raise(SIGSTOP); // the whole process stops
  }
  void die() const {
    if (crown::this_actor().index == 0) std::raise(SIGKILL);
  }
  static constexpr auto endpoints = crown::endpoints(&victim::hang, &victim::die);
};

} // namespace

int main(int argc, char** argv) {
  const std::string_view mode = argc > 1 ? argv[1] : "";
  crown::runtime rt(argc, argv);
  return rt.control([&](crown::controller& c) {
    auto victims = c.workers().spawn<victim>("victims");
    if (mode == "hang")
      victims.call(&victim::hang).get();
    else
      victims.call(&victim::die).get();
  });
}
