// A serving rank that hangs (stopped: no heartbeat either), dies, or throws while its
// peers wait for it in a collective must end the whole job, non-zero, with a message
// naming the rank — never a hang.
// A call that never returns is bounded by CROWN_CALL_TIMEOUT or get(timeout), and the
// job still ends; a stopped controller is noticed by the serving ranks.
//   mpirun -np 3 actor_failures hang|die|collective|stuck|stuck_get_timeout|stop_controller|crash
#include <chrono>
#include <crown/crown.hpp>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string_view>
#include <thread>

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
  /// Never returns (its rank's heartbeat goes on: only a call timeout bounds it).
  void stuck() const {
    if (crown::this_actor().index == 0)
      for (;;) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  /// Prints a line, then crashes (CROWN_ACTOR_STDOUT=1 must still show the line).
  void crash() const {
    if (crown::this_actor().index != 0) return;
    std::printf("last words before the crash\n");
    std::abort();
  }
  static constexpr auto endpoints = crown::endpoints(
      &victim::hang, &victim::die, &victim::collective, &victim::stuck, &victim::crash);
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
    else if (mode == "stuck") // CROWN_CALL_TIMEOUT bounds get()
      victims.call(&victim::stuck).get();
    else if (mode == "stuck_get_timeout")
      victims.call(&victim::stuck).get(std::chrono::seconds(1));
    else if (mode == "crash")
      victims.call(&victim::crash).get();
    else if (mode == "stop_controller") // the serving ranks notice the silence
      std::raise(SIGSTOP);
    else
      victims.call(&victim::collective).get();
  });
}
