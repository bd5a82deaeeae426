// The controller's engine: commands fan out along a tree over their targets, replies
// are gathered or reduced on the way back; the watchdog and the log collector run in
// its progress loop. Also rank 0's half of runtime::control.
#include "channel.hpp"
#include "control.hpp"
#include "log_collector.hpp"
#include "protocol.hpp"
#include "watchdog.hpp"
#include <algorithm>
#include <atomic>
#include <chrono>
#include <crown/actor/controller.hpp>
#include <crown/detail/fault.hpp>
#include <crown/detail/wait.hpp>
#include <crown/log.hpp>
#include <cstdio>
#include <map>
#include <unordered_map>

namespace crown {
namespace detail {
namespace {

std::atomic<std::uint64_t> g_session{0}; ///< the running control session, 0 outside
std::uint64_t g_sessions = 0;            ///< control sessions so far

} // namespace

std::uint64_t control_session() noexcept { return g_session.load(std::memory_order_relaxed); }

class control_core {
public:
  control_core(MPI_Comm comm, int size, int fanout, watchdog dog, std::string dog_setting,
               double call_timeout)
      : channel_(comm), size_(size), fanout_(fanout), sent_to_(static_cast<std::size_t>(size)),
        watchdog_(std::move(dog)), watchdog_setting_(std::move(dog_setting)),
        call_timeout_(call_timeout) {}

  void note_mesh(std::uint32_t mesh_id, const std::string& name, const crown::mesh& on) {
    for (int r : on) hosted_[r].push_back(name);
    mesh_names_[mesh_id] = name;
    if (busy_.size() <= mesh_id) busy_.resize(mesh_id + 1);
    busy_[mesh_id].assign(static_cast<std::size_t>(on.size()), 0);
  }

  std::vector<std::byte>& begin_command() {
    next_ = channel_.acquire(last_bytes_); // a large payload is likely followed by another
    next_->resize(header_space());
    return *next_;
  }

  std::uint64_t submit(message_kind kind, std::uint32_t mesh_id, std::uint32_t endpoint,
                       reply_mode mode, reduce_op op, std::span<const int> ranks,
                       std::span<const std::uint32_t> positions) {
    if (kind == message_kind::call) fault_point_reached(fault_point::call); // the controller's
    command_header h;
    h.kind = kind;
    h.seq = ++seq_;
    h.request = ++next_request_;
    h.mesh_id = mesh_id;
    h.endpoint = endpoint;
    h.mode = mode;
    h.reduce_op = static_cast<std::uint8_t>(op);
    h.fanout = static_cast<std::uint16_t>(fanout_);
    order_.clear();
    for (int r : ranks) order_.push_back(sent_to_[static_cast<std::size_t>(r)]++);
    message_buffer message = std::move(next_);
    finish_command(h, ranks, positions, order_, *message);
    last_bytes_ = message->size();
    const auto children = std::min<std::size_t>(ranks.size(), h.fanout);
    for (std::size_t node = 1; node <= children; ++node) channel_.send(message, ranks[node - 1]);
    pending& p = requests_[h.request];
    p.waiting = static_cast<std::uint32_t>(children);
    p.mesh_id = mesh_id;
    p.kind = kind;
    p.endpoint = endpoint;
    p.first_rank = ranks.empty() ? -1 : ranks[0];
    p.targets = static_cast<std::uint32_t>(ranks.size());
    ++unfinished_;
    if (kind == message_kind::call && mesh_id < busy_.size()) {
      for (std::uint32_t position : positions) ++busy_[mesh_id][position];
      p.positions.assign(positions.begin(), positions.end());
    }
    return h.request;
  }

  bool ready(std::uint64_t request) {
    progress();
    const auto it = requests_.find(request);
    if (it == requests_.end())
      throw state_error("future", "its result was already taken (get() on a moved-from or "
                                  "finished future)");
    return it->second.waiting == 0;
  }

  call_result take(std::uint64_t request) {
    const auto it = requests_.find(request);
    call_result r = std::move(it->second.result);
    std::stable_sort(
        r.failures.begin(), r.failures.end(), // arrival order is arbitrary
        [](const actor_failure& a, const actor_failure& b) { return a.rank < b.rank; });
    settle(it->second);
    requests_.erase(it);
    return r;
  }

  void forget(std::uint64_t request) {
    const auto it = requests_.find(request);
    if (it == requests_.end()) return;
    it->second.forgotten = true;
    if (it->second.waiting == 0) retire(it); // complete already
    progress();
  }

  std::size_t least_busy(std::uint32_t mesh_id, std::span<const std::uint32_t> positions) {
    std::size_t best = 0;
    int fewest = -1;
    for (std::size_t i = 0; i < positions.size(); ++i) {
      const int n = mesh_id < busy_.size() ? busy_[mesh_id][positions[i]] : 0;
      if (fewest < 0 || n < fewest) {
        fewest = n;
        best = i;
      }
    }
    return best;
  }

  /// Waits for every command (for at most CROWN_CALL_TIMEOUT, when set); returns the
  /// failures no future reported.
  std::vector<actor_failure> flush() {
    const auto until = std::chrono::steady_clock::now() + seconds(call_timeout_);
    auto pause = backoff::unwatched();
    for (progress(); unfinished_ > 0; progress()) {
      if (call_timeout_ > 0 && std::chrono::steady_clock::now() >= until) {
        for (auto& [id, p] : requests_)
          if (p.waiting > 0 && p.timed_out.empty()) p.timed_out = "flush";
        throw timeout_error("controller::flush", "commands still unanswered after " +
                                                     std::to_string(call_timeout_) +
                                                     " s (CROWN_CALL_TIMEOUT): " + outstanding());
      }
      pause.pause();
    }
    return std::exchange(supervision_, {});
  }

  [[nodiscard]] double call_timeout() const noexcept { return call_timeout_; }
  void note_timeout(std::uint64_t request, const std::string& what) {
    const auto it = requests_.find(request);
    if (it != requests_.end()) it->second.timed_out = what;
  }
  /// True when some unanswered command was given up on by a get() with a limit.
  [[nodiscard]] bool abandoned() const {
    for (const auto& [id, p] : requests_)
      if (p.waiting > 0 && !p.timed_out.empty()) return true;
    return false;
  }
  /// Every unanswered command, by what the controller knows of it.
  [[nodiscard]] std::string outstanding() const {
    std::map<std::uint64_t, const pending*> sorted;
    for (const auto& [id, p] : requests_)
      if (p.waiting > 0) sorted.emplace(id, &p);
    std::string s;
    for (const auto& [id, p] : sorted) {
      if (!s.empty()) s += "; ";
      const auto name = mesh_names_.find(p->mesh_id);
      s += p->kind == message_kind::call
               ? "call #" + std::to_string(id) + " of endpoint #" + std::to_string(p->endpoint)
           : p->kind == message_kind::spawn ? "spawn #" + std::to_string(id)
                                            : "stop #" + std::to_string(id);
      if (name != mesh_names_.end()) s += " on actor mesh " + name->second;
      s += " (" + std::to_string(p->targets) + " actors from rank " +
           std::to_string(p->first_rank) + ", " + std::to_string(p->waiting) +
           " subtrees unanswered" + (p->timed_out.empty() ? "" : "; timed out: " + p->timed_out) +
           ")";
    }
    return s.empty() ? "none" : s;
  }

  std::uint32_t new_mesh_id() { return ++next_mesh_; }
  [[nodiscard]] int size() const { return size_; }

  void progress() {
    channel_.poll_sends();
    if ((++ticks_ & 63) == 0) { // the clock is read every 64 polls, not on each
      check_watchdog();
      logs_.flush(false);
    }
    channel::incoming m;
    while (channel_.receive(m)) {
      accept_reply(m);
      channel_.recycle(std::move(m.owned));
    }
  }

  void drain() {
    channel_.drain_sends();
    logs_.flush(true);
  }

private:
  void accept_reply(const channel::incoming& m) {
    const auto reply = decode_reply(m.bytes);
    if (!reply) {
      log(log_level::error, "controller: dropped a malformed reply from rank ", m.source);
      return;
    }
    const auto it = requests_.find(reply->request());
    if (it == requests_.end()) {
      log(log_level::error, "controller: reply from rank ", m.source, " for unknown request ",
          reply->request());
      return;
    }
    pending& p = it->second;
    reply_record rec;
    for (reply_view v = *reply; v.next(rec);) {
      if (rec.kind == record_kind::error) {
        if (p.result.failures.empty()) {
          p.first_failure = std::chrono::steady_clock::now();
          failing_.push_back(it->first);
        }
        p.result.failures.push_back(failure_of(rec.bytes, m.source));
      } else if (rec.kind == record_kind::log) {
        collect_log(rec.bytes, m.source);
      } else {
        p.result.values.emplace_back(rec.position,
                                     std::vector<std::byte>(rec.bytes.begin(), rec.bytes.end()));
      }
    }
    if (--p.waiting == 0) {
      --unfinished_;
      std::erase(failing_, it->first);
      if (p.forgotten) retire(it);
    }
  }

  void collect_log(std::span<const std::byte> bytes, int from) {
    try {
      logs_.add(from_bytes<log_line>(bytes));
    } catch (const std::exception& e) {
      log(log_level::error, "controller: a malformed log line from rank ", from, ": ", e.what());
    }
  }

  /// A rank that neither answers nor beats hangs or lost contact: name it and end the
  /// job, rather than wait forever (long endpoints are legal; silence is not).
  void check_watchdog() {
    double silent_for = 0;
    const int r = watchdog_.silent(silent_for);
    if (r < 0) return check_partial_failures();
    std::string actors;
    for (const auto& name : hosted_[r]) actors += (actors.empty() ? "" : ", ") + name;
    log(log_level::error, "watchdog: rank ", r, " sent no heartbeat for ",
        static_cast<int>(silent_for), " s (", watchdog_setting_, "); it hangs or lost contact",
        actors.empty() ? std::string() : "; it hosts actors of " + actors, ". Aborting the job.");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }

  /// Some actors of a command failed and the others have not answered for a watchdog
  /// period: they most likely wait for the failed ones inside a collective among the
  /// actors, and would wait forever. Name the failures and end the job.
  void check_partial_failures() {
    if (!watchdog_.enabled()) return;
    const auto now = std::chrono::steady_clock::now();
    for (const std::uint64_t id : failing_) {
      const pending& p = requests_.at(id);
      if (std::chrono::duration<double>(now - p.first_failure).count() <= watchdog_.timeout())
        continue;
      const actor_failure& f = p.result.failures.front();
      log(log_level::error, "watchdog: ", f.mesh, " on rank ", f.rank, " failed (", f.type, ": ",
          f.message, ") and the other actors of that call have not answered for ",
          static_cast<int>(watchdog_.timeout()),
          " s: they most likely wait for it in a collective. Aborting the job.");
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }

  static std::chrono::steady_clock::duration seconds(double s) {
    return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(s));
  }

  struct pending {
    std::uint32_t waiting = 0;
    std::uint32_t mesh_id = 0;
    message_kind kind = message_kind::call;
    std::uint32_t endpoint = 0;
    std::uint32_t targets = 0;
    int first_rank = -1;
    std::string timed_out; ///< what a get() with a limit gave up on ("" if none did)
    bool forgotten = false;
    std::chrono::steady_clock::time_point first_failure{}; ///< while others still run
    std::vector<std::uint32_t> positions;                  ///< counted in busy_
    call_result result;
  };
  /// A forgotten request is complete: its failures go to supervision.
  void retire(std::unordered_map<std::uint64_t, pending>::iterator it) {
    for (auto& f : it->second.result.failures) supervision_.push_back(std::move(f));
    settle(it->second);
    requests_.erase(it);
  }
  void settle(const pending& p) {
    for (std::uint32_t position : p.positions) --busy_[p.mesh_id][position];
  }
  static actor_failure failure_of(std::span<const std::byte> bytes, int from) {
    try {
      return from_bytes<actor_failure>(bytes);
    } catch (const std::exception& e) {
      return {"?", from, "crown::detail::malformed_message", e.what()};
    }
  }

  channel channel_;
  int size_;
  int fanout_;
  std::uint64_t seq_ = 0, next_request_ = 0, ticks_ = 0;
  std::size_t last_bytes_ = 0; ///< of the last command
  std::uint32_t next_mesh_ = 0;
  std::size_t unfinished_ = 0; ///< requests still waiting for replies
  std::vector<std::uint64_t> sent_to_, order_;
  message_buffer next_; ///< the command being written (begin_command)
  std::unordered_map<std::uint64_t, pending> requests_;
  std::vector<std::uint64_t> failing_; ///< incomplete requests with failures
  std::vector<std::vector<int>> busy_; ///< calls in flight, by actor mesh and point
  std::vector<actor_failure> supervision_;
  watchdog watchdog_;
  std::string watchdog_setting_;
  std::map<int, std::vector<std::string>> hosted_;
  std::map<std::uint32_t, std::string> mesh_names_;
  double call_timeout_; ///< seconds, scaled; 0 = none
  log_collector logs_;
};

bool request_ready(control_core& core, std::uint64_t request) { return core.ready(request); }
call_result take_result(control_core& core, std::uint64_t request) { return core.take(request); }
std::vector<std::byte>& begin_command(control_core& core) { return core.begin_command(); }
std::uint64_t submit(control_core& core, message_kind kind, std::uint32_t mesh_id,
                     std::uint32_t endpoint, reply_mode mode, reduce_op op,
                     std::span<const int> ranks, std::span<const std::uint32_t> positions) {
  return core.submit(kind, mesh_id, endpoint, mode, op, ranks, positions);
}
std::uint32_t new_mesh_id(control_core& core) { return core.new_mesh_id(); }
void forget_request(control_core& core, std::uint64_t request) { core.forget(request); }
double call_timeout(const control_core& core) noexcept { return core.call_timeout(); }
void note_timeout(control_core& core, std::uint64_t request, const std::string& what) {
  core.note_timeout(request, what);
}
std::size_t least_busy(control_core& core, std::uint32_t mesh_id,
                       std::span<const std::uint32_t> positions) {
  return core.least_busy(mesh_id, positions);
}
void note_mesh(control_core& core, std::uint32_t mesh_id, const std::string& name,
               const crown::mesh& on) {
  core.note_mesh(mesh_id, name, on);
}

namespace {
/// How long leaving control waits for the actors after a timed-out call: the watchdog's
/// time, else the call timeout's, else the watchdog's default (30 s), all scaled.
double shutdown_bound(const config& cfg) {
  const double base = cfg.watchdog > 0       ? cfg.watchdog
                      : cfg.call_timeout > 0 ? cfg.call_timeout
                                             : 30;
  return base * cfg.timeout_scale;
}
} // namespace

int run_controller(MPI_Comm comm, int size, const config& cfg, std::uint64_t* heartbeats,
                   const std::function<void(controller&)>& fn) {
  int code = 0;
  char setting[96];
  std::snprintf(setting, sizeof setting, "CROWN_WATCHDOG=%g x CROWN_TIMEOUT_SCALE=%g", cfg.watchdog,
                cfg.timeout_scale);
  control_core core(comm, size, cfg.fanout,
                    watchdog(heartbeats, size, cfg.watchdog * cfg.timeout_scale), setting,
                    cfg.call_timeout * cfg.timeout_scale);
  controller c(core);
  struct session_scope { // futures and handles from this session die with it
    session_scope() { g_session = ++g_sessions; }
    ~session_scope() { g_session = 0; }
  } session;
  try {
    fn(c);
    c.flush();
  } catch (const std::exception& e) {
    log(log_level::error, "the controller failed: ", e.what());
    code = 1;
  } catch (...) { // whatever it was, the serving ranks must still be stopped
    log(log_level::error, "the controller failed: ", exception_type());
    code = 1;
  }
  try { // every serving rank leaves its loop with the same exit code
    std::vector<int> ranks;
    std::vector<std::uint32_t> positions;
    for (int r = 1; r < size; ++r) {
      ranks.push_back(r);
      positions.push_back(static_cast<std::uint32_t>(r - 1));
    }
    if (!ranks.empty()) {
      to_bytes(code, core.begin_command());
      // Once a get() gave up on a call, the actors may never answer (an endpoint that
      // never returns still beats): wait for the stop for the watchdog's time at most.
      const bool bounded = core.abandoned();
      const double bound = shutdown_bound(cfg);
      const auto until = std::chrono::steady_clock::now() +
                         std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                             std::chrono::duration<double>(bound));
      const auto stop = core.submit(message_kind::stop, 0, 0, reply_mode::errors_only,
                                    reduce_op::sum, ranks, positions);
      auto pause = backoff::unwatched();
      while (!core.ready(stop)) {
        if (bounded && std::chrono::steady_clock::now() >= until) {
          log(log_level::error, "leaving runtime::control: the actors did not stop within ", bound,
              " s after a call timed out; still unanswered: ", core.outstanding(),
              ". Aborting the job.");
          MPI_Abort(MPI_COMM_WORLD, 1);
        }
        pause.pause();
      }
      auto result = core.take(stop);
      for (const auto& f : result.failures)
        log(log_level::error, "stopping ", f.mesh, " on rank ", f.rank, ": ", f.message);
    }
    core.drain();
  } catch (const std::exception& e) {
    log(log_level::error, "stopping the serving ranks failed: ", e.what());
    code = 1;
  } catch (...) {
    log(log_level::error, "stopping the serving ranks failed: ", exception_type());
    code = 1;
  }
  return code;
}
} // namespace detail

std::string detail::call_site::what() const {
  if (!target) return adverb;
  return std::string(adverb) + " on actor mesh " + target->name + " " + target->view.to_string();
}

std::shared_ptr<const detail::actor_mesh_ref>
detail::make_actor_mesh_ref(controller* owner, std::uint32_t id, std::string name, crown::mesh full,
                            crown::mesh view) {
  auto r = std::make_shared<actor_mesh_ref>(actor_mesh_ref{owner,
                                                           owner ? control_session() : 0,
                                                           id,
                                                           std::move(name),
                                                           std::move(full),
                                                           std::move(view),
                                                           {},
                                                           {},
                                                           {}});
  r->view_index.assign(static_cast<std::size_t>(r->full.size()), -1);
  for (int i = 0; i < r->view.size(); ++i) {
    const int rank = r->view.ranks()[static_cast<std::size_t>(i)];
    const int position = r->full.index_of(rank); // argument_error if not a part of full
    r->ranks.push_back(rank);
    r->positions.push_back(static_cast<std::uint32_t>(position));
    r->view_index[static_cast<std::size_t>(position)] = i;
  }
  return r;
}

proc_mesh controller::workers() {
  const int n = core_->size();
  if (n < 2)
    throw state_error("controller::workers()",
                      "no rank serves: rank 0 controls and ranks 1.. serve actors, so launch "
                      "N workers with mpirun -np N+1");
  std::vector<int> ranks;
  for (int r = 1; r < n; ++r) ranks.push_back(r);
  return proc_mesh(this, crown::mesh({{"workers", n - 1}}, std::move(ranks)));
}

void controller::flush() {
  auto failures = core_->flush();
  if (!failures.empty()) throw actor_error("controller::flush (broadcasts)", std::move(failures));
}

void controller::check_spawn(const crown::mesh& on, const std::string& name) const {
  const std::string what =
      "spawn of actor mesh " + (name.empty() ? "\"\"" : name) + " on " + on.to_string();
  if (name.empty()) throw argument_error(what, "an actor mesh needs a name");
  for (int r : on) {
    if (r == 0)
      throw argument_error(what, "rank 0 is the controller and hosts no actors; spawn on "
                                 "controller::workers() or a part of it");
    if (r >= core_->size())
      throw argument_error(what, "rank " + std::to_string(r) + " is not in the job (" +
                                     std::to_string(core_->size()) + " ranks)");
  }
}

} // namespace crown
