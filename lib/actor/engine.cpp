// The controller's engine and the serving ranks' loop: commands fan out along a tree
// over their targets (each rank forwards before it executes), every rank executes its
// commands in the controller's order, replies are gathered or reduced on the way back.
#include "../runtime/runtime_state.hpp"
#include "channel.hpp"
#include "protocol.hpp"
#include "stdout_capture.hpp"
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <crown/actor/controller.hpp>
#include <crown/detail/heap.hpp>
#include <crown/detail/types.hpp>
#include <crown/detail/wait.hpp>
#include <crown/log.hpp>
#include <cstdio>
#include <cstdlib>
#include <cxxabi.h>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <unordered_map>

namespace crown {
namespace detail {
namespace {

std::mutex g_registry_mutex;
std::atomic<std::uint64_t> g_session{0}; ///< the running control session, 0 outside
std::uint64_t g_sessions = 0;            ///< control sessions so far
std::map<std::string, actor_type>& registry() {
  static std::map<std::string, actor_type> types;
  return types;
}

std::string exception_type() {
  const std::type_info* t = abi::__cxa_current_exception_type();
  return t ? demangle(t->name()) : std::string("unknown exception");
}

std::string point_text(const crown::mesh& m, const point& p) {
  std::string s = "{";
  for (std::size_t i = 0; i < p.size(); ++i)
    s += (i ? "," : "") + m.dims()[i].name + "=" + std::to_string(p[i]);
  return s + "}";
}

thread_local const actor_context* g_actor = nullptr;

/// Sets this_actor() for the duration of a constructor or endpoint, and sends what it
/// logs to the controller (when `capture` is given).
struct actor_scope {
  explicit actor_scope(const actor_context& c, const log_capture* capture = nullptr) {
    g_actor = &c;
    set_thread_log_capture(capture);
  }
  actor_scope(const actor_context& c, const log_capture& capture) : actor_scope(c, &capture) {}
  ~actor_scope() {
    g_actor = nullptr;
    set_thread_log_capture(nullptr);
  }
  actor_scope(const actor_scope&) = delete;
  actor_scope& operator=(const actor_scope&) = delete;
};

} // namespace

std::uint64_t control_session() noexcept { return g_session.load(std::memory_order_relaxed); }

std::string demangle(const char* mangled) {
  int status = 0;
  char* readable = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string s = status == 0 && readable ? readable : mangled;
  std::free(readable);
  return s;
}

void register_actor_type(const std::string& key, actor_type t) {
  const std::lock_guard lock(g_registry_mutex);
  registry().emplace(key, std::move(t));
}

const actor_type* find_actor_type(const std::string& key) {
  const std::lock_guard lock(g_registry_mutex);
  const auto it = registry().find(key);
  return it == registry().end() ? nullptr : &it->second;
}

// ---------------------------------------------------------------- controller side

/// The controller's view of the serving ranks' heartbeat counters, which their
/// heartbeat threads increment in rank 0's heap (one 8-byte word per rank).
class watchdog {
public:
  watchdog(std::uint64_t* counters, int size, double timeout)
      : counters_(counters), timeout_(timeout), seen_(static_cast<std::size_t>(size)),
        when_(static_cast<std::size_t>(size), std::chrono::steady_clock::now()) {}
  [[nodiscard]] bool enabled() const noexcept { return counters_ != nullptr; }
  [[nodiscard]] double timeout() const noexcept { return timeout_; }
  /// The first rank silent for longer than the timeout, or -1 (checked every 1 ms).
  int silent(double& for_seconds) {
    const auto now = std::chrono::steady_clock::now();
    if (!counters_ || now - last_check_ < std::chrono::milliseconds(1)) return -1;
    last_check_ = now;
    for (std::size_t r = 1; r < seen_.size(); ++r) {
      const std::uint64_t beat = std::atomic_ref<std::uint64_t>(counters_[r]).load();
      if (beat != seen_[r]) {
        seen_[r] = beat;
        when_[r] = now;
      }
      for_seconds = std::chrono::duration<double>(now - when_[r]).count();
      if (for_seconds > timeout_) return static_cast<int>(r);
    }
    return -1;
  }

private:
  std::uint64_t* counters_; ///< nullptr: no watchdog
  double timeout_;
  std::vector<std::uint64_t> seen_;
  std::vector<std::chrono::steady_clock::time_point> when_;
  std::chrono::steady_clock::time_point last_check_{};
};

/// Prints the lines actors logged, tagged with their actor mesh and point; the same
/// line from several actors within 100 ms becomes one line with a count.
class log_collector {
public:
  void add(const log_line& line) {
    std::string label, message = line.text;
    if (const auto end = line.text.find("] ");
        line.text.starts_with("[") && end != std::string::npos) {
      label = line.text.substr(0, end + 1);
      message = line.text.substr(end + 2);
    }
    auto [it, fresh] = pending_.try_emplace(std::to_string(line.level) + '\x1f' + message);
    if (fresh)
      it->second = {line.level, label, std::move(message), 0, {}, std::chrono::steady_clock::now()};
    ++it->second.count;
    it->second.actors.insert(std::move(label));
  }
  void flush(bool all) {
    const auto now = std::chrono::steady_clock::now();
    for (auto it = pending_.begin(); it != pending_.end();) {
      const entry& e = it->second;
      if (!all && now - e.first < std::chrono::milliseconds(100)) {
        ++it;
        continue;
      }
      std::string text = e.label + " " + e.message;
      if (e.count > 1)
        text += " (" + std::to_string(e.count) + " lines from " + std::to_string(e.actors.size()) +
                (e.actors.size() == 1 ? " actor)" : " actors)");
      if (e.level == log_line::stdout_level)
        write_output(text);
      else
        log_write(static_cast<log_level>(e.level), text);
      it = pending_.erase(it);
    }
  }

private:
  struct entry {
    int level;
    std::string label, message; ///< the first actor's label
    int count;
    std::set<std::string> actors;
    std::chrono::steady_clock::time_point first;
  };
  std::map<std::string, entry> pending_;
};

class control_core {
public:
  control_core(MPI_Comm comm, int size, int fanout, watchdog dog, std::string dog_setting)
      : channel_(comm), size_(size), fanout_(fanout), sent_to_(static_cast<std::size_t>(size)),
        watchdog_(std::move(dog)), watchdog_setting_(std::move(dog_setting)) {}

  void note_mesh(std::uint32_t mesh_id, const std::string& name, const crown::mesh& on) {
    for (int r : on) hosted_[r].push_back(name);
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

  /// Waits for every command; returns the failures no future reported.
  std::vector<actor_failure> flush() {
    backoff pause;
    for (progress(); unfinished_ > 0; progress()) pause.pause();
    return std::exchange(supervision_, {});
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

  struct pending {
    std::uint32_t waiting = 0;
    std::uint32_t mesh_id = 0;
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
std::size_t least_busy(control_core& core, std::uint32_t mesh_id,
                       std::span<const std::uint32_t> positions) {
  return core.least_busy(mesh_id, positions);
}
void note_mesh(control_core& core, std::uint32_t mesh_id, const std::string& name,
               const crown::mesh& on) {
  core.note_mesh(mesh_id, name, on);
}

// ---------------------------------------------------------------- serving side

namespace {

class server {
public:
  server(MPI_Comm comm, int rank, int size, bool capture_stdout)
      : channel_(comm), rank_(rank), size_(size) {
    if (capture_stdout) stdout_.emplace();
    capture_ = [this](log_level level, std::string_view message) {
      std::vector<std::byte> bytes;
      to_bytes(log_line{static_cast<int>(level), *log_label_ + " " + std::string(message)}, bytes);
      append_record(log_position_, record_kind::log, bytes, *log_reply_);
    };
  }
  ~server() {
    stdout_.reset(); // what destructors print now goes to this rank's own stdout
    destroy_actors();
  }
  server(const server&) = delete;
  server& operator=(const server&) = delete;

  /// Serves until the controller's stop; returns the exit code it carries.
  int serve() {
    backoff pause;
    while (!(stopping_ && open_.empty())) { // the stop's reply is sent: done
      if (poll())
        pause = backoff{};
      else
        pause.pause();
    }
    channel_.drain_sends();
    return exit_code_;
  }

private:
  struct hosted {
    const actor_type* type = nullptr;
    void* object = nullptr;
    crown::mesh mesh;
    point coords;
    int index = 0;
    std::string name;
    std::string label;     ///< "trainers{dp=1}"
    std::string log_label; ///< "[trainers{dp=1}]"
  };
  struct open_request {
    int parent = 0;
    std::uint32_t waiting = 0;
    bool own_done = false;
    reply_mode mode = reply_mode::gather;
    reduce_op op = reduce_op::sum;
    std::uint32_t mesh_id = 0, endpoint = 0;
    message_buffer reply;
    std::vector<std::byte> reduced, scratch;
    bool have_reduced = false;
  };

  bool poll() {
    channel_.poll_sends();
    channel::incoming m;
    if (!channel_.receive(m)) return false;
    const auto kind = kind_of(m.bytes);
    if (kind == message_kind::reply)
      accept_reply(m);
    else
      accept_command(m);
    channel_.recycle(std::move(m.owned));
    return true;
  }

  void accept_command(channel::incoming& m) {
    const auto c = decode_command(m.bytes, size_);
    const std::int64_t i = c ? c->index_of(rank_) : -1;
    if (i < 0) {
      log(log_level::error, "dropped a malformed command from rank ", m.source, " (",
          m.bytes.size(), " bytes)");
      return;
    }
    const std::uint64_t node = static_cast<std::uint64_t>(i) + 1, fanout = c->head.fanout;
    const std::uint64_t order = c->order[static_cast<std::size_t>(i)];
    const std::uint64_t first = first_child(node, fanout);
    const std::uint64_t last = std::min<std::uint64_t>(first + fanout - 1, c->head.targets);
    const bool in_turn = !stopping_ && order == executed_;
    // A command that is forwarded or waits for its turn needs bytes of its own (small
    // messages arrive in a slot that is reused).
    if ((first <= last || !in_turn) && !m.owned) {
      m.owned = channel_.acquire();
      m.owned->assign(m.bytes.begin(), m.bytes.end());
    }
    // Forward first: a child never waits for this rank's endpoint to finish.
    for (std::uint64_t child = first; child <= last; ++child)
      channel_.send(m.owned, c->ranks[child - 1]);
    const std::uint64_t parent = parent_node(node, fanout);
    open_request& o = open_[c->head.request];
    o.parent = parent == 0 ? 0 : c->ranks[parent - 1];
    o.waiting = first <= last ? static_cast<std::uint32_t>(last - first + 1) : 0;
    o.mode = c->head.mode;
    o.op = static_cast<reduce_op>(c->head.reduce_op);
    o.mesh_id = c->head.mesh_id;
    o.endpoint = c->head.endpoint;
    o.reply = channel_.acquire();
    begin_reply(c->head.request, *o.reply);
    if (!in_turn) {
      queued_.insert_or_assign(order, std::move(m.owned));
      return;
    }
    ++executed_;
    execute(*c, static_cast<std::size_t>(i));
    while (!stopping_) { // commands that arrived early, now in turn
      const auto next = queued_.find(executed_);
      if (next == queued_.end()) break;
      message_buffer bytes = std::move(next->second);
      queued_.erase(next);
      ++executed_;
      const auto d = decode_command(*bytes, size_); // decoded once before: valid
      execute(*d, static_cast<std::size_t>(d->index_of(rank_)));
      channel_.recycle(std::move(bytes));
    }
  }

  void execute(const command& c, std::size_t index) {
    const std::uint32_t position = c.positions[index];
    open_request& o = open_.at(c.head.request);
    value_.clear();
    log_reply_ = o.reply.get(); // what the actor logs travels in this reply
    log_position_ = position;
    try {
      switch (c.head.kind) {
      case message_kind::spawn:
        spawn(c.head.mesh_id, c.payload);
        break;
      case message_kind::call:
        call(c.head.mesh_id, c.head.endpoint, c.payload, value_);
        break;
      default:
        exit_code_ = from_bytes<int>(c.payload);
        forward_stdout(true); // an unfinished last line, as the last actor that ran left it
        destroy_actors();
        stopping_ = true;
        break;
      }
      forward_stdout();
      record(o, position, record_kind::value, value_);
    } catch (...) {
      actor_failure f{label_of(c.head.mesh_id, position), rank_, exception_type(), "?"};
      try {
        throw;
      } catch (const std::exception& e) {
        f.message = e.what();
      } catch (...) {}
      std::vector<std::byte> bytes;
      to_bytes(f, bytes);
      forward_stdout();
      record(o, position, record_kind::error, bytes);
    }
    log_reply_ = nullptr;
    o.own_done = true;
    finish(c.head.request);
  }

  /// What the actor printed goes with the reply, tagged like its log lines.
  void forward_stdout(bool unfinished_too = false) {
    if (!stdout_ || !log_reply_ || !log_label_) return;
    const auto send = [this](std::string_view text) {
      std::vector<std::byte> bytes;
      to_bytes(log_line{log_line::stdout_level, *log_label_ + " " + std::string(text)}, bytes);
      append_record(log_position_, record_kind::log, bytes, *log_reply_);
    };
    if (unfinished_too)
      stdout_->finish(send);
    else
      stdout_->collect(send);
  }

  std::string label_of(std::uint32_t mesh_id, std::uint32_t position) const {
    const auto it = actors_.find(mesh_id);
    return it != actors_.end()
               ? it->second->label
               : "actor mesh #" + std::to_string(mesh_id) + " point " + std::to_string(position);
  }

  void spawn(std::uint32_t mesh_id, std::span<const std::byte> payload) {
    const auto spec = from_bytes<spawn_spec>(payload);
    const actor_type* type = find_actor_type(spec.key);
    if (!type)
      throw state_error("spawn of " + spec.name,
                        "actor type " + demangle(spec.key.c_str()) + " is not registered here");
    std::vector<dim> dims;
    for (std::size_t d = 0; d < spec.dim_names.size() && d < spec.dim_sizes.size(); ++d)
      dims.push_back({spec.dim_names[d], spec.dim_sizes[d]});
    auto h = std::make_unique<hosted>(
        hosted{type, nullptr, crown::mesh(std::move(dims), spec.ranks), {}, 0, spec.name, {}, {}});
    h->coords = h->mesh.point_of(rank_);
    h->index = h->mesh.index_of(rank_);
    h->label = spec.name + point_text(h->mesh, h->coords);
    h->log_label = "[" + h->label + "]";
    {
      const actor_context context{h->mesh, h->coords, h->index, h->name};
      log_label_ = &h->log_label;
      const actor_scope scope(context, capture_);
      byte_reader args(spec.args);
      try {
        h->object = type->construct(args);
      } catch (...) { // what the failed constructor printed goes while its label lives
        forward_stdout();
        log_label_ = nullptr;
        throw;
      }
    }
    actors_.insert_or_assign(mesh_id, std::move(h));
  }

  void call(std::uint32_t mesh_id, std::uint32_t endpoint, std::span<const std::byte> payload,
            std::vector<std::byte>& value) {
    const auto it = actors_.find(mesh_id);
    if (it == actors_.end())
      throw state_error("call", "no actor of actor mesh #" + std::to_string(mesh_id) +
                                    " lives on this rank (its spawn failed?)");
    hosted& h = *it->second;
    if (endpoint >= h.type->endpoints.size())
      throw argument_error("call on " + h.label,
                           "unknown endpoint #" + std::to_string(endpoint) + " of " + h.type->name);
    const actor_context context{h.mesh, h.coords, h.index, h.name};
    log_label_ = &h.log_label;
    const actor_scope scope(context, capture_);
    byte_reader args(payload);
    h.type->endpoints[endpoint](h.object, args, value);
    if (args.remaining() != 0)
      throw malformed_message("call on " + h.label + ": " + std::to_string(args.remaining()) +
                              " argument bytes left over");
  }

  /// Adds this rank's or a child's answer to the reply under construction.
  void record(open_request& o, std::uint32_t position, record_kind kind,
              std::span<const std::byte> bytes) {
    if (kind != record_kind::value) return append_record(position, kind, bytes, *o.reply);
    if (o.mode == reply_mode::errors_only) return;
    if (o.mode == reply_mode::gather)
      return append_record(position, record_kind::value, bytes, *o.reply);
    if (!o.have_reduced) {
      o.reduced.assign(bytes.begin(), bytes.end());
      o.have_reduced = true;
      return;
    }
    const auto it = actors_.find(o.mesh_id);
    const auto combine = it == actors_.end() || o.endpoint >= it->second->type->reducers.size()
                             ? nullptr
                             : it->second->type->reducers[o.endpoint];
    if (!combine) throw state_error("reduce", "the endpoint's result cannot be reduced");
    o.scratch.clear();
    combine(o.op, o.reduced, bytes, o.scratch);
    std::swap(o.reduced, o.scratch);
  }

  void accept_reply(const channel::incoming& m) {
    const auto reply = decode_reply(m.bytes);
    const auto it = reply ? open_.find(reply->request()) : open_.end();
    if (it == open_.end()) {
      log(log_level::error, "dropped a malformed or unexpected reply from rank ", m.source);
      return;
    }
    reply_record r;
    for (reply_view v = *reply; v.next(r);) {
      try {
        record(it->second, r.position, r.kind, r.bytes);
      } catch (const std::exception& e) {
        actor_failure f{label_of(it->second.mesh_id, r.position), rank_, exception_type(),
                        e.what()};
        std::vector<std::byte> bytes;
        to_bytes(f, bytes);
        append_record(r.position, record_kind::error, bytes, *it->second.reply);
      }
    }
    --it->second.waiting;
    finish(reply->request());
  }

  void finish(std::uint64_t request) {
    const auto it = open_.find(request);
    open_request& o = it->second;
    if (!o.own_done || o.waiting) return;
    if (o.have_reduced) append_record(all_positions, record_kind::value, o.reduced, *o.reply);
    channel_.send(o.reply, o.parent);
    open_.erase(it);
  }

  void destroy_actors() noexcept {
    for (auto it = actors_.rbegin(); it != actors_.rend(); ++it) {
      const hosted& h = *it->second;
      const actor_context context{h.mesh, h.coords, h.index, h.name};
      log_label_ = &h.log_label;
      const actor_scope scope(context);
      h.type->destroy(h.object);
      try {
        forward_stdout();
      } catch (...) { // output of a destructor is not worth a failed stop
      }
    }
    log_label_ = nullptr;
    actors_.clear();
  }

  channel channel_;
  int rank_, size_;
  std::uint64_t executed_ = 0;
  std::map<std::uint64_t, message_buffer> queued_; ///< early commands, by order
  std::map<std::uint32_t, std::unique_ptr<hosted>> actors_;
  std::unordered_map<std::uint64_t, open_request> open_;
  bool stopping_ = false;
  int exit_code_ = 0;
  std::vector<std::byte> value_; ///< the endpoint's result, reused
  log_capture capture_;
  const std::string* log_label_ = nullptr;
  std::optional<stdout_capture> stdout_; ///< CROWN_ACTOR_STDOUT
  std::vector<std::byte>* log_reply_ = nullptr;
  std::uint32_t log_position_ = 0;
};

} // namespace
} // namespace detail

// ---------------------------------------------------------------- public

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

const actor_context& this_actor() {
  if (!detail::g_actor)
    throw state_error("crown::this_actor()", "called outside an actor's constructor or endpoint");
  return *detail::g_actor;
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

int runtime::control(const std::function<void(controller&)>& fn) {
  state_->check_alive("runtime::control");
  MPI_Comm comm = MPI_COMM_NULL; // control traffic never meets data traffic
  check_mpi(MPI_Comm_dup(state_->world_comm.get(), &comm), "runtime::control: MPI_Comm_dup");
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  // Heartbeats: a thread on each serving rank adds to its word in rank 0's heap (plain
  // atomics on one host, the transport across hosts), even while an endpoint runs.
  const auto& cfg = state_->cfg;
  const double timeout = cfg.watchdog * cfg.timeout_scale;
  const bool watched = timeout > 0 && state_->level == thread_level::multiple && state_->size > 1;
  const detail::heap_block beats =
      detail::heap_allocate(*state_->world, sizeof(std::uint64_t) * state_->size,
                            detail::type_tag<std::uint64_t, 1>(), "controller heartbeats");
  int code = 0;
  if (state_->rank == 0) {
    auto* counters = reinterpret_cast<std::uint64_t*>(detail::heap_address(beats.offset));
    char setting[96];
    std::snprintf(setting, sizeof setting, "CROWN_WATCHDOG=%g x CROWN_TIMEOUT_SCALE=%g",
                  cfg.watchdog, cfg.timeout_scale);
    detail::control_core core(comm, state_->size, cfg.fanout,
                              detail::watchdog(watched ? counters : nullptr, state_->size, timeout),
                              setting);
    controller c(core);
    struct session_scope { // futures and handles from this session die with it
      session_scope() { detail::g_session = ++detail::g_sessions; }
      ~session_scope() { detail::g_session = 0; }
    } session;
    try {
      fn(c);
      c.flush();
    } catch (const std::exception& e) {
      log(log_level::error, "the controller failed: ", e.what());
      code = 1;
    } catch (...) { // whatever it was, the serving ranks must still be stopped
      log(log_level::error, "the controller failed: ", detail::exception_type());
      code = 1;
    }
    try { // every serving rank leaves its loop with the same exit code
      std::vector<int> ranks;
      std::vector<std::uint32_t> positions;
      for (int r = 1; r < state_->size; ++r) {
        ranks.push_back(r);
        positions.push_back(static_cast<std::uint32_t>(r - 1));
      }
      if (!ranks.empty()) {
        detail::to_bytes(code, core.begin_command());
        const auto stop =
            core.submit(detail::message_kind::stop, 0, 0, detail::reply_mode::errors_only,
                        reduce_op::sum, ranks, positions);
        detail::backoff pause;
        while (!core.ready(stop)) pause.pause();
        auto result = core.take(stop);
        for (const auto& f : result.failures)
          log(log_level::error, "stopping ", f.mesh, " on rank ", f.rank, ": ", f.message);
      }
      core.drain();
    } catch (const std::exception& e) {
      log(log_level::error, "stopping the serving ranks failed: ", e.what());
      code = 1;
    } catch (...) {
      log(log_level::error, "stopping the serving ranks failed: ", detail::exception_type());
      code = 1;
    }
  } else {
    std::jthread heartbeat;
    if (watched)
      heartbeat = std::jthread([&](std::stop_token stop) {
        const auto period = std::chrono::duration<double>(std::max(timeout / 10, 0.01));
        const std::uint64_t word = beats.offset + sizeof(std::uint64_t) * state_->rank;
        std::mutex m;
        std::condition_variable_any wake; // woken by the stop request, not only by time
        std::unique_lock lock(m);
        do
          detail::remote_atomic(0, word, detail::atomic_op::add, 8, false, 1, 0, beats.cpu_atomics);
        while (!wake.wait_for(lock, stop, period, [&] { return stop.stop_requested(); }));
      });
    try {
      detail::server s(comm, state_->rank, state_->size, cfg.actor_stdout);
      code = s.serve();
    } catch (const std::exception& e) { // the controller would wait for this rank forever
      log(log_level::error, "serving actors failed: ", e.what(), ". Aborting the job.");
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
  detail::heap_release(*state_->world, beats); // a barrier: the heartbeat threads are gone
  MPI_Comm_free(&comm);
  return code;
}

} // namespace crown
