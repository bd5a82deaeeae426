// The controller's engine and the serving ranks' loop: commands fan out along a tree
// over their targets (each rank forwards before it executes), every rank executes its
// commands in the controller's order, replies are gathered or reduced on the way back.
#include "../runtime/runtime_state.hpp"
#include "protocol.hpp"
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
#include <set>
#include <thread>

namespace crown {
namespace detail {
namespace {

constexpr int command_tag = 1;
constexpr int reply_tag = 2;

std::mutex g_registry_mutex;
std::map<std::string, actor_type>& registry() {
  static std::map<std::string, actor_type> types;
  return types;
}

/// Nonblocking sends whose buffers stay alive (shared by every child a command is
/// forwarded to) until MPI is done with them.
class sender {
public:
  void send(std::shared_ptr<const std::vector<std::byte>> data, int dest, int tag, MPI_Comm comm) {
    MPI_Request r = MPI_REQUEST_NULL;
    check_mpi(
        MPI_Isend(data->data(), static_cast<int>(data->size()), MPI_BYTE, dest, tag, comm, &r),
        "controller: MPI_Isend to rank " + std::to_string(dest));
    pending_.push_back({std::move(data), r});
  }
  void poll() {
    for (std::size_t i = 0; i < pending_.size();) {
      int done = 0;
      check_mpi(MPI_Test(&pending_[i].request, &done, MPI_STATUS_IGNORE), "controller: MPI_Test");
      if (done) {
        pending_[i] = std::move(pending_.back());
        pending_.pop_back();
      } else {
        ++i;
      }
    }
  }
  void drain() {
    backoff pause;
    for (poll(); !pending_.empty(); poll()) pause.pause();
  }

private:
  struct outgoing {
    std::shared_ptr<const std::vector<std::byte>> data;
    MPI_Request request;
  };
  std::vector<outgoing> pending_;
};

/// Receives one message with `tag` (any tag when MPI_ANY_TAG) if one has arrived.
std::shared_ptr<std::vector<std::byte>> receive(MPI_Comm comm, int tag, MPI_Status& status) {
  int arrived = 0;
  check_mpi(MPI_Iprobe(MPI_ANY_SOURCE, tag, comm, &arrived, &status), "controller: MPI_Iprobe");
  if (!arrived) return nullptr;
  int bytes = 0;
  MPI_Get_count(&status, MPI_BYTE, &bytes);
  auto data = std::make_shared<std::vector<std::byte>>(static_cast<std::size_t>(bytes));
  check_mpi(MPI_Recv(data->data(), bytes, MPI_BYTE, status.MPI_SOURCE, status.MPI_TAG, comm,
                     MPI_STATUS_IGNORE),
            "controller: MPI_Recv");
  return data;
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
      : comm_(comm), size_(size), fanout_(fanout), sent_to_(static_cast<std::size_t>(size)),
        watchdog_(std::move(dog)), watchdog_setting_(std::move(dog_setting)) {}

  void note_mesh(const std::string& name, const crown::mesh& on) {
    for (int r : on) hosted_[r].push_back(name);
  }

  std::uint64_t submit(message_kind kind, std::uint32_t mesh_id, std::uint32_t endpoint,
                       reply_mode mode, reduce_op op, const target_set& t,
                       std::span<const std::byte> payload) {
    command_header h;
    h.kind = kind;
    h.seq = ++seq_;
    h.request = ++next_request_;
    h.mesh_id = mesh_id;
    h.endpoint = endpoint;
    h.mode = mode;
    h.reduce_op = static_cast<std::uint8_t>(op);
    h.fanout = static_cast<std::uint16_t>(fanout_);
    h.targets = static_cast<std::uint32_t>(t.ranks.size());
    h.payload_bytes = payload.size();
    std::vector<std::int32_t> ranks(t.ranks.begin(), t.ranks.end());
    std::vector<std::uint64_t> order;
    for (int r : t.ranks) order.push_back(sent_to_[static_cast<std::size_t>(r)]++);
    auto message = std::make_shared<std::vector<std::byte>>();
    encode_command(h, ranks, t.positions, order, payload, *message);
    const std::uint32_t children = std::min<std::uint32_t>(h.targets, h.fanout);
    for (std::uint32_t node = 1; node <= children; ++node)
      out_.send(message, t.ranks[node - 1], command_tag, comm_);
    auto& p = requests_[h.request];
    p.waiting = children;
    p.mesh_id = mesh_id;
    if (kind == message_kind::call)
      for (std::uint32_t position : t.positions) {
        p.positions.push_back(position);
        ++busy_[{mesh_id, position}];
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
      const int n = busy_[{mesh_id, positions[i]}];
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
    for (progress(); !all_done(); progress()) pause.pause();
    return std::exchange(supervision_, {});
  }

  std::uint32_t new_mesh_id() { return ++next_mesh_; }
  std::vector<std::byte>& payload() { return payload_; }
  [[nodiscard]] int size() const { return size_; }

  void progress() {
    out_.poll();
    check_watchdog();
    logs_.flush(false);
    MPI_Status status;
    while (auto data = receive(comm_, reply_tag, status)) {
      auto reply = decode_reply(*data);
      if (!reply) {
        log(log_level::error, "controller: dropped a malformed reply from rank ",
            status.MPI_SOURCE);
        continue;
      }
      const auto it = requests_.find(reply->first);
      if (it == requests_.end()) {
        log(log_level::error, "controller: reply from rank ", status.MPI_SOURCE,
            " for unknown request ", reply->first);
        continue;
      }
      pending& p = it->second;
      for (const reply_record& rec : reply->second) {
        if (rec.kind == record_kind::error && p.result.failures.empty())
          p.first_failure = std::chrono::steady_clock::now();
        if (rec.kind == record_kind::error)
          p.result.failures.push_back(failure_of(rec.bytes, status.MPI_SOURCE));
        else if (rec.kind == record_kind::log)
          collect_log(rec.bytes, status.MPI_SOURCE);
        else
          p.result.values.emplace_back(rec.position,
                                       std::vector<std::byte>(rec.bytes.begin(), rec.bytes.end()));
      }
      if (--p.waiting == 0 && p.forgotten) retire(it);
    }
  }

  void drain() {
    out_.drain();
    logs_.flush(true);
  }

private:
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
    const auto now = std::chrono::steady_clock::now();
    for (const auto& [id, p] : requests_) {
      if (!p.waiting || p.result.failures.empty() || !watchdog_.enabled() ||
          std::chrono::duration<double>(now - p.first_failure).count() <= watchdog_.timeout())
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
    std::vector<std::uint32_t> positions;
    call_result result;
  };
  /// A forgotten request is complete: its failures go to supervision.
  void retire(std::map<std::uint64_t, pending>::iterator it) {
    for (auto& f : it->second.result.failures) supervision_.push_back(std::move(f));
    settle(it->second);
    requests_.erase(it);
  }
  void settle(const pending& p) {
    for (std::uint32_t position : p.positions) --busy_[{p.mesh_id, position}];
  }
  bool all_done() const {
    for (const auto& [id, p] : requests_)
      if (p.waiting) return false;
    return true;
  }
  static actor_failure failure_of(std::span<const std::byte> bytes, int from) {
    try {
      return from_bytes<actor_failure>(bytes);
    } catch (const std::exception& e) {
      return {"?", from, "crown::detail::malformed_message", e.what()};
    }
  }

  MPI_Comm comm_;
  int size_;
  int fanout_;
  std::uint64_t seq_ = 0, next_request_ = 0;
  std::uint32_t next_mesh_ = 0;
  std::vector<std::uint64_t> sent_to_;
  std::map<std::uint64_t, pending> requests_;
  std::map<std::pair<std::uint32_t, std::uint32_t>, int> busy_;
  std::vector<actor_failure> supervision_;
  std::vector<std::byte> payload_;
  sender out_;
  watchdog watchdog_;
  std::string watchdog_setting_;
  std::map<int, std::vector<std::string>> hosted_;
  log_collector logs_;
};

bool request_ready(control_core& core, std::uint64_t request) { return core.ready(request); }
call_result take_result(control_core& core, std::uint64_t request) { return core.take(request); }
std::uint64_t submit(control_core& core, message_kind kind, std::uint32_t mesh_id,
                     std::uint32_t endpoint, reply_mode mode, reduce_op op,
                     const target_set& targets, std::span<const std::byte> payload) {
  return core.submit(kind, mesh_id, endpoint, mode, op, targets, payload);
}
std::uint32_t new_mesh_id(control_core& core) { return core.new_mesh_id(); }
void forget_request(control_core& core, std::uint64_t request) { core.forget(request); }
std::size_t least_busy(control_core& core, std::uint32_t mesh_id,
                       std::span<const std::uint32_t> positions) {
  return core.least_busy(mesh_id, positions);
}
std::vector<std::byte>& payload_buffer(control_core& core) { return core.payload(); }
void note_mesh(control_core& core, const std::string& name, const crown::mesh& on) {
  core.note_mesh(name, on);
}

// ---------------------------------------------------------------- serving side

namespace {

class server {
public:
  server(MPI_Comm comm, int rank, int size) : comm_(comm), rank_(rank), size_(size) {
    capture_ = [this](log_level level, std::string_view message) {
      std::vector<std::byte> bytes;
      to_bytes(log_line{static_cast<int>(level), log_label_ + " " + std::string(message)}, bytes);
      append_record(log_position_, record_kind::log, bytes, *log_reply_);
    };
  }
  ~server() { destroy_actors(); }
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
    out_.drain();
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
    std::string label; ///< "trainers{dp=1}"
  };
  struct open_request {
    int parent = 0;
    std::uint32_t waiting = 0;
    bool own_done = false;
    reply_mode mode = reply_mode::gather;
    reduce_op op = reduce_op::sum;
    std::uint32_t mesh_id = 0, endpoint = 0;
    std::shared_ptr<std::vector<std::byte>> reply = std::make_shared<std::vector<std::byte>>();
    std::vector<std::byte> reduced, scratch;
    bool have_reduced = false;
  };

  /// A command waiting for its turn, decoded once on arrival.
  struct arrived {
    std::shared_ptr<std::vector<std::byte>> data;
    command decoded;
    std::uint32_t index; ///< this rank among the targets
  };

  bool poll() {
    out_.poll();
    MPI_Status status;
    auto data = receive(comm_, MPI_ANY_TAG, status);
    if (!data) return false;
    if (status.MPI_TAG == command_tag)
      accept_command(std::move(data), status.MPI_SOURCE);
    else
      accept_reply(*data, status.MPI_SOURCE);
    return true;
  }

  void accept_command(std::shared_ptr<std::vector<std::byte>> data, int from) {
    auto c = decode_command(*data, size_);
    const auto me = c ? std::find(c->ranks.begin(), c->ranks.end(), rank_) : c->ranks.end();
    if (!c || me == c->ranks.end()) {
      log(log_level::error, "dropped a malformed command from rank ", from, " (", data->size(),
          " bytes)");
      return;
    }
    const auto i = static_cast<std::uint32_t>(me - c->ranks.begin());
    const std::uint64_t node = i + 1, fanout = c->head.fanout;
    // Forward first: a child never waits for this rank's endpoint to finish.
    std::uint32_t children = 0;
    for (std::uint64_t child = first_child(node, fanout);
         child < first_child(node, fanout) + fanout && child <= c->head.targets;
         ++child, ++children)
      out_.send(data, c->ranks[child - 1], command_tag, comm_);
    const std::uint64_t parent = parent_node(node, fanout);
    open_request& o = open_[c->head.request];
    o.parent = parent == 0 ? 0 : c->ranks[parent - 1];
    o.waiting = children;
    o.mode = c->head.mode;
    o.op = static_cast<reduce_op>(c->head.reduce_op);
    o.mesh_id = c->head.mesh_id;
    o.endpoint = c->head.endpoint;
    begin_reply(c->head.request, *o.reply);
    const std::uint64_t order = c->order[i];
    // The decoded command's payload points into `data`, which travels with it.
    queued_.insert_or_assign(order, arrived{std::move(data), std::move(*c), i});
    while (!stopping_ && queued_.count(executed_)) {
      const arrived next = std::move(queued_.at(executed_));
      queued_.erase(executed_++);
      execute(next);
    }
  }

  void execute(const arrived& a) {
    const command* c = &a.decoded;
    const std::uint32_t position = c->positions[a.index];
    open_request& o = open_[c->head.request];
    std::vector<std::byte> value;
    log_reply_ = o.reply.get(); // what the actor logs travels in this reply
    log_position_ = position;
    try {
      switch (c->head.kind) {
      case message_kind::spawn:
        spawn(c->head.mesh_id, c->payload);
        break;
      case message_kind::call:
        call(c->head.mesh_id, c->head.endpoint, c->payload, value);
        break;
      default:
        exit_code_ = from_bytes<int>(c->payload);
        destroy_actors();
        stopping_ = true;
        break;
      }
      record(o, position, record_kind::value, value);
    } catch (...) {
      actor_failure f{label_of(c->head.mesh_id, position), rank_, exception_type(), "?"};
      try {
        throw;
      } catch (const std::exception& e) {
        f.message = e.what();
      } catch (...) {}
      std::vector<std::byte> bytes;
      to_bytes(f, bytes);
      record(o, position, record_kind::error, bytes);
    }
    o.own_done = true;
    finish(c->head.request);
  }

  std::string label_of(std::uint32_t mesh_id, std::uint32_t position) const {
    const auto it = actors_.find(mesh_id);
    return it != actors_.end()
               ? it->second.label
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
    hosted h{type, nullptr, crown::mesh(std::move(dims), spec.ranks), {}, 0, spec.name, {}};
    h.coords = h.mesh.point_of(rank_);
    h.index = h.mesh.index_of(rank_);
    h.label = spec.name + point_text(h.mesh, h.coords);
    {
      const actor_context context{h.mesh, h.coords, h.index, h.name};
      log_label_ = "[" + h.label + "]";
      const actor_scope scope(context, capture_);
      byte_reader args(spec.args);
      h.object = type->construct(args);
    }
    actors_.insert_or_assign(mesh_id, std::move(h));
  }

  void call(std::uint32_t mesh_id, std::uint32_t endpoint, std::span<const std::byte> payload,
            std::vector<std::byte>& value) {
    const auto it = actors_.find(mesh_id);
    if (it == actors_.end())
      throw state_error("call", "no actor of actor mesh #" + std::to_string(mesh_id) +
                                    " lives on this rank (its spawn failed?)");
    hosted& h = it->second;
    if (endpoint >= h.type->endpoints.size())
      throw argument_error("call on " + h.label,
                           "unknown endpoint #" + std::to_string(endpoint) + " of " + h.type->name);
    const actor_context context{h.mesh, h.coords, h.index, h.name};
    log_label_ = "[" + h.label + "]";
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
    const auto combine = it == actors_.end() || o.endpoint >= it->second.type->reducers.size()
                             ? nullptr
                             : it->second.type->reducers[o.endpoint];
    if (!combine) throw state_error("reduce", "the endpoint's result cannot be reduced");
    o.scratch.clear();
    combine(o.op, o.reduced, bytes, o.scratch);
    std::swap(o.reduced, o.scratch);
  }

  void accept_reply(const std::vector<std::byte>& data, int from) {
    auto reply = decode_reply(data);
    const auto it = reply ? open_.find(reply->first) : open_.end();
    if (it == open_.end()) {
      log(log_level::error, "dropped a malformed or unexpected reply from rank ", from);
      return;
    }
    for (const reply_record& r : reply->second) {
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
    finish(reply->first);
  }

  void finish(std::uint64_t request) {
    const auto it = open_.find(request);
    open_request& o = it->second;
    if (!o.own_done || o.waiting) return;
    if (o.have_reduced) append_record(all_positions, record_kind::value, o.reduced, *o.reply);
    out_.send(o.reply, o.parent, reply_tag, comm_);
    open_.erase(it);
  }

  void destroy_actors() noexcept {
    for (auto it = actors_.rbegin(); it != actors_.rend(); ++it) {
      const actor_context context{it->second.mesh, it->second.coords, it->second.index,
                                  it->second.name};
      const actor_scope scope(context);
      it->second.type->destroy(it->second.object);
    }
    actors_.clear();
  }

  MPI_Comm comm_;
  int rank_, size_;
  std::uint64_t executed_ = 0;
  std::map<std::uint64_t, arrived> queued_; ///< by order
  std::map<std::uint32_t, hosted> actors_;
  std::map<std::uint64_t, open_request> open_;
  sender out_;
  bool stopping_ = false;
  int exit_code_ = 0;
  log_capture capture_;
  std::string log_label_;
  std::vector<std::byte>* log_reply_ = nullptr;
  std::uint32_t log_position_ = 0;
};

} // namespace
} // namespace detail

// ---------------------------------------------------------------- public

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
    try {
      fn(c);
      c.flush();
    } catch (const std::exception& e) {
      log(log_level::error, "the controller failed: ", e.what());
      code = 1;
    }
    try { // every serving rank leaves its loop with the same exit code
      std::vector<std::byte> payload;
      detail::to_bytes(code, payload);
      detail::target_set all;
      for (int r = 1; r < state_->size; ++r) {
        all.ranks.push_back(r);
        all.positions.push_back(static_cast<std::uint32_t>(r - 1));
      }
      if (!all.ranks.empty()) {
        const auto stop =
            core.submit(detail::message_kind::stop, 0, 0, detail::reply_mode::errors_only,
                        reduce_op::sum, all, payload);
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
    detail::server s(comm, state_->rank, state_->size);
    code = s.serve();
  }
  detail::heap_release(*state_->world, beats); // a barrier: the heartbeat threads are gone
  MPI_Comm_free(&comm);
  return code;
}

} // namespace crown
