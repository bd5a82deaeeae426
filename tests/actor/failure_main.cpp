// A serving rank that hangs (stopped: no heartbeat either), dies, or throws while its
// peers wait for it in a collective must end the whole job, non-zero, with a message
// naming the rank — never a hang.
//   mpirun -np 3 actor_failures hang|die|collective
#include <crown/crown.hpp>
#include <csignal>
#include <stdexcept>
#include <string_view>

namespace {

struct victim {
  void hang() const {
    if (crown::this_actor().index == 0) std::raise(SIGSTOP); // the whole process stops
  }
  void die() const {
    if (crown::this_actor().index == 0) std::raise(SIGKILL);
  }
  /// Throws on one actor while the others enter a collective that waits for it.
  double collective() const {
    if (crown::this_actor().index == 0) throw std::logic_error("no sum from me");
    double x = 1;
    crown::co_sum(crown::this_actor().mesh, x);
    return x;
  }
  static constexpr auto endpoints =
      crown::endpoints(&victim::hang, &victim::die, &victim::collective);
};

} // namespace

int main(int argc, char** argv) {
  const std::string_view mode = argc > 1 ? argv[1] : "";
  crown::runtime rt(argc, argv);
  return rt.control([&](crown::controller& c) {
    auto victims = c.workers().spawn<victim>("victims");
    if (mode == "hang")
      victims.call(&victim::hang).get();
    else if (mode == "die")
      victims.call(&victim::die).get();
    else
      victims.call(&victim::collective).get();
  });
}
