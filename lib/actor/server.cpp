// The serving ranks' loop: each rank forwards a command to its children before it
// executes it, executes commands in each sender's order, and sends its part of the
// reply (with its children's) back up the tree.
#include "control.hpp"
#include "control_core.hpp"
#include "stdout_capture.hpp"
#include <algorithm>
#include <crown/actor/controller.hpp>
#include <crown/detail/fault.hpp>
#include <crown/detail/wait.hpp>
#include <crown/log.hpp>
#include <crown/trace.hpp>
#include <map>
#include <memory>
#include <optional>
#include <unordered_map>

namespace crown {
namespace detail {
namespace {

std::string point_text(const crown::mesh& m, const point& p) {
  std::string s = "{";
  for (std::size_t i = 0; i < p.size(); ++i)
    s += (i ? "," : "") + m.dims()[i].name + "=" + std::to_string(p[i]);
  return s + "}";
}

/// The exception being handled, as a failure of `label` on `rank` (`prefix` before its
/// message).
actor_failure failure_now(std::string label, int rank, const std::string& prefix = "") {
  actor_failure f{std::move(label), rank, exception_type(), prefix + "?"};
  try {
    throw;
  } catch (const std::exception& e) {
    f.message = prefix + e.what();
  } catch (...) {}
  return f;
}

thread_local const actor_context* g_actor = nullptr;
thread_local supervisor_ref g_supervisor; ///< the running actor, or the controller

/// Sets this_actor() and current_supervisor() for the duration of a constructor, an
/// endpoint or a hook, and sends what it logs to its caller (when `capture` is given);
/// restores the outer actor's on exit (an endpoint waiting in get() runs others).
class actor_scope {
public:
  actor_scope(const actor_context& c, supervisor_ref self, const log_capture* capture)
      : actor_(std::exchange(g_actor, &c)), supervisor_(std::exchange(g_supervisor, self)),
        capture_(capture_in_use) {
    set_thread_log_capture(capture_in_use = capture);
  }
  ~actor_scope() {
    g_actor = actor_;
    g_supervisor = supervisor_;
    set_thread_log_capture(capture_in_use = capture_);
  }
  actor_scope(const actor_scope&) = delete;
  actor_scope& operator=(const actor_scope&) = delete;

private:
  static thread_local const log_capture* capture_in_use;
  const actor_context* actor_;
  supervisor_ref supervisor_;
  const log_capture* capture_;
};
thread_local const log_capture* actor_scope::capture_in_use = nullptr;

/// A serving rank: runs the commands that reach it (from the controller and from
/// actors, each sender's in its order), forwards them down their trees, and sends the
/// replies up. Reentrant: an endpoint that waits in get() drives the engine, which runs
/// the commands whose turn comes meanwhile.
class server final : public command_sink {
public:
  server(control_core& core, bool capture_stdout)
      : core_(core), rank_(core.rank()), size_(core.size()) {
    if (capture_stdout) stdout_.emplace();
    capture_ = [this](log_level level, std::string_view message) {
      if (!current_.reply || !current_.label) return;
      std::vector<std::byte> bytes;
      to_bytes(log_line{static_cast<int>(level), *current_.label + " " + std::string(message)},
               bytes);
      append_record(current_.position, record_kind::log, bytes, *current_.reply);
    };
  }
  ~server() {
    stdout_.reset(); // what destructors print now goes to this rank's own stdout
    (void)destroy_actors();
  }
  server(const server&) = delete;
  server& operator=(const server&) = delete;

  /// Serves until the controller's stop; returns the exit code it carries.
  int serve() {
    // Idle between commands for as long as the controller computes: the heartbeat
    // watch (control.cpp) notices a controller that is gone, not this wait.
    auto pause = backoff::unwatched();
    // Done once the stop's reply is sent (commands of actors that arrive after the stop
    // were answered with a failure; replies still due from stopped ranks never come).
    while (!(stopped_ && !open_.count(stop_request_))) {
      if (core_.progress())
        pause = backoff::unwatched();
      else
        pause.pause();
      if (session_stop_) finish_session_stop(); // deferred until no endpoint runs
    }
    core_.channel().drain_sends();
    return exit_code_;
  }

  /// Commands that arrived early and whose turn has come (also while an endpoint waits
  /// in get(): the engine calls this on every progress pass).
  void run_ready() override {
    while (std::optional<held_command> next = queue_.take_ready()) {
      const held_command held = std::move(*next);
      const auto d = decode_command(*held.bytes, size_); // decoded once before: valid
      execute(*d, static_cast<std::size_t>(d->index_of(rank_)), held.bulk.get());
      core_.channel().recycle(held.bytes);
    }
  }

  void arriving(const command& c, std::size_t index) override {
    if (!open_.count(c.head.request)) open(c, index); // else a duplicate: refused when it runs
  }

  void accept(channel::incoming& m, message_kind kind) override {
    if (kind == message_kind::reply) return accept_reply(m);
    if (kind == message_kind::supervise) return accept_supervision(m);
    accept_command(m);
  }

  void forward_log(std::span<const std::byte> line, int from) override {
    if (current_.reply)
      return append_record(current_.position, record_kind::log, line, *current_.reply);
    try { // no reply is being built: this rank logs it
      const auto l = from_bytes<log_line>(line);
      log(l.level == log_line::stdout_level ? log_level::info : static_cast<log_level>(l.level),
          l.text);
    } catch (const std::exception& e) {
      log(log_level::error, "a malformed log line from rank ", from, ": ", e.what());
    }
  }

private:
  struct hosted {
    const actor_type* type = nullptr;
    void* object = nullptr;
    std::uint64_t id = 0;
    crown::mesh mesh;
    point coords;
    int index = 0;
    std::string name;
    std::string label;     ///< "trainers{dp=1}"
    std::string log_label; ///< "[trainers{dp=1}]"
    supervisor_ref supervisor;
    int active = 0;        ///< its endpoints on this rank's stack (reentrant calls)
    bool stopping = false; ///< stop() came: calls fail, it goes once `active` is 0
    [[nodiscard]] actor_context context() const { return {mesh, coords, index, name}; }
  };
  struct gone { ///< an actor mesh stopped here: later calls name it
    std::string label;
    supervisor_ref supervisor;
  };
  struct open_request {
    int parent = 0;
    std::uint32_t waiting = 0;
    bool own_done = false;
    reply_mode mode = reply_mode::gather;
    reduce_op op = reduce_op::sum;
    std::uint64_t mesh_id = 0;
    std::uint32_t endpoint = 0;
    message_buffer reply;
    std::vector<std::byte> reduced, scratch;
    bool have_reduced = false;
  };
  /// Where what runs now logs and prints: saved and restored around every command.
  struct reply_context {
    std::vector<std::byte>* reply = nullptr;
    std::uint32_t position = 0;
    const std::string* label = nullptr;
  };
  /// A command waiting for its turn, with its attachments (if any).
  struct held_command {
    message_buffer bytes;
    std::shared_ptr<bulk_in> bulk;
  };
  using command_queue = in_order_queue<held_command>;

  void accept_command(channel::incoming& m) {
    const auto c = decode_command(m.bytes, size_);
    const std::int64_t i = c ? c->index_of(rank_) : -1;
    if (i < 0) {
      log(log_level::error, "dropped a malformed command from rank ", m.source, " (",
          m.bytes.size(), " bytes)");
      return;
    }
    const auto at = static_cast<std::size_t>(i);
    order_key keys[2] = {{c->head.sequencer, c->order[at]}, {}};
    if (c->relayed()) keys[1] = {c->head.origin, c->origin_order[at]};
    const std::span<const order_key> key_span(keys, c->relayed() ? 2 : 1);
    const auto verdict = queue_.admit(key_span);
    if (verdict == command_queue::verdict::drop) {
      log(log_level::error, "dropped a command from rank ", m.source,
          " whose order was already run or is already waiting");
      return;
    }
    // A command with attachments was forwarded, and its request opened, as it arrived
    // (arriving()); its pieces are forwarded as they come.
    if (!m.bulk) {
      open(*c, at);
      const auto [first, last] = children_of(at + 1, c->head.fanout, c->head.targets);
      // Forward first: a child never waits for this rank's endpoint to finish.
      for (std::uint64_t child = first; child <= last; ++child)
        core_.channel().send(m.owned, c->ranks[child - 1]);
    }
    if (verdict == command_queue::verdict::hold) {
      queue_.hold(key_span, {std::move(m.owned), std::move(m.bulk)});
      return;
    }
    queue_.ran(key_span);
    execute(*c, at, m.bulk.get()); // m.owned, which `c` views, lives in the caller
    run_ready();
  }

  /// This rank's part of a command: where its answer goes, the subtrees it waits for,
  /// and the reply being built. Opened before the command goes on to the children, whose
  /// answers may then come back at any time.
  void open(const command& c, std::size_t at) {
    const std::uint64_t node = at + 1, fanout = c.head.fanout;
    const auto [first, last] = children_of(node, fanout, c.head.targets);
    const bool streamed = c.head.mode == reply_mode::stream; // straight to the caller
    const std::uint64_t parent = parent_node(node, fanout);
    const bool to_caller = streamed || parent == 0;
    open_request& o = open_.acquire(c.head.request);
    o.parent = to_caller ? c.head.origin : c.ranks[parent - 1];
    o.waiting = !streamed && first <= last ? static_cast<std::uint32_t>(last - first + 1) : 0;
    o.mode = c.head.mode;
    o.op = static_cast<reduce_op>(c.head.reduce_op);
    o.mesh_id = c.head.mesh_id;
    o.endpoint = c.head.endpoint;
    o.reply = core_.channel().acquire();
    begin_reply(c.head.request, to_caller ? reply_leg::to_caller : reply_leg::to_parent, *o.reply);
  }

  void execute(const command& c, std::size_t index, bulk_in* bulk) {
    const std::uint32_t position = c.positions[index];
    const std::uint64_t request = c.head.request;
    std::vector<std::byte> value;
    const reply_context outer =
        std::exchange(current_, {open_.at(request).reply.get(), position, nullptr});
    bool answered = true;
    try {
      if (stopped_ || session_stop_)
        throw state_error(label_of(c.head.mesh_id, position),
                          "the control session is ending; the command was not run");
      if (bulk && !bulk->failure().empty())
        throw malformed_message("the call's arguments did not arrive whole: " + bulk->failure());
      switch (c.head.kind) {
      case message_kind::spawn:
        spawn(c.head.mesh_id, c.payload);
        break;
      case message_kind::call: {
        fault_point_reached(fault_point::call);
        trace_span span("actor", "call", {"endpoint", c.head.endpoint}, {"caller", c.head.origin},
                        {"callee", rank_});
        if (span.recording()) span.text("actor", label_of(c.head.mesh_id, position));
        call(c.head.mesh_id, c.head.endpoint, c.payload,
             bulk ? bulk->arrived() : arrived_attachments{}, value);
        break;
      }
      case message_kind::stop_mesh:
        stop_mesh(c.head.mesh_id, request, position);
        break;
      default:
        exit_code_ = from_bytes<int>(c.payload);
        session_stop_.emplace(request, position);
        answered = false; // once no endpoint runs (serve())
        core_.fail_pending("the control session is ending");
        break;
      }
      if (answered) {
        forward_stdout();
        record(open_.at(request), position, record_kind::value, value);
      }
    } catch (...) {
      forward_stdout();
      record_failure(request, position, label_of(c.head.mesh_id, position));
    }
    current_ = outer;
    if (answered) done(request);
  }

  /// The current exception as this point's failure.
  void record_failure(std::uint64_t request, std::uint32_t position, std::string label) {
    record_error(open_.at(request), position, failure_now(std::move(label), rank_));
  }
  /// Adds a failure to the reply under construction.
  static void record_error(open_request& o, std::uint32_t position, const actor_failure& f) {
    std::vector<std::byte> bytes;
    to_bytes(f, bytes);
    append_record(position, record_kind::error, bytes, *o.reply);
  }

  void done(std::uint64_t request) {
    open_.at(request).own_done = true;
    finish(request);
  }

  void finish_session_stop() {
    if (depth_ > 0) return;
    const auto [request, position] = *session_stop_;
    session_stop_.reset();
    stopped_ = true;
    stop_request_ = request;
    current_ = {open_.at(request).reply.get(), position, &last_label_};
    forward_stdout(true); // an unfinished last line, as the last actor that ran left it
    for (const auto& f : destroy_actors()) record_error(open_.at(request), position, f);
    current_ = {};
    done(request);
  }

  /// What the actor printed goes with the reply, tagged like its log lines.
  void forward_stdout(bool unfinished_too = false) {
    if (!stdout_ || !current_.reply || !current_.label) return;
    const auto send = [this](std::string_view text) {
      std::vector<std::byte> bytes;
      to_bytes(log_line{log_line::stdout_level, *current_.label + " " + std::string(text)}, bytes);
      append_record(current_.position, record_kind::log, bytes, *current_.reply);
    };
    if (unfinished_too)
      stdout_->finish(send);
    else
      stdout_->collect(send);
  }

  /// The actor whose log lines and output come next (also for output a crash rescues).
  void use_label(const std::string* label) noexcept {
    current_.label = label;
    if (label) last_label_ = *label; // a copy: its actor may be gone by the session's end
    if (stdout_) stdout_->set_label(label ? *label : std::string_view());
  }

  std::string label_of(std::uint64_t mesh_id, std::uint32_t position) const {
    if (const auto it = actors_.find(mesh_id); it != actors_.end()) return it->second->label;
    if (const auto g = gone_.find(mesh_id); g != gone_.end()) return g->second.label;
    return "actor mesh #" + std::to_string(mesh_id) + " point " + std::to_string(position);
  }

  /// Runs `f` as actor `h` (this_actor(), its log lines, its label for output).
  template <typename F>
  void as_actor(hosted& h, F&& f) {
    const actor_context context = h.context();
    const std::string* outer = current_.label;
    use_label(&h.log_label);
    const actor_scope scope(context, {rank_, h.id}, &capture_);
    ++h.active;
    ++depth_;
    try {
      f();
    } catch (...) {
      --h.active;
      --depth_;
      forward_stdout(); // while its label lives
      use_label(outer);
      throw;
    }
    --h.active;
    --depth_;
    forward_stdout();
    use_label(outer);
  }

  void spawn(std::uint64_t mesh_id, std::span<const std::byte> payload) {
    const auto spec = from_bytes<spawn_spec>(payload);
    const actor_type* type = find_actor_type(spec.key);
    if (!type)
      throw state_error("spawn of " + spec.name,
                        "actor type " + demangle(spec.key.c_str()) + " is not registered here");
    std::vector<dim> dims;
    for (std::size_t d = 0; d < spec.dim_names.size() && d < spec.dim_sizes.size(); ++d)
      dims.push_back({spec.dim_names[d], spec.dim_sizes[d]});
    auto h = std::make_unique<hosted>(hosted{type,
                                             nullptr,
                                             mesh_id,
                                             crown::mesh(std::move(dims), spec.ranks),
                                             {},
                                             0,
                                             spec.name,
                                             {},
                                             {},
                                             spec.supervisor,
                                             0,
                                             {}});
    h->coords = h->mesh.point_of(rank_);
    h->index = h->mesh.index_of(rank_);
    h->label = spec.name + point_text(h->mesh, h->coords);
    h->log_label = "[" + h->label + "]";
    as_actor(*h, [&] {
      byte_reader args(spec.args);
      h->object = type->construct(args);
    });
    actors_.insert_or_assign(mesh_id, std::move(h));
  }

  hosted& find_actor(std::uint64_t mesh_id, const char* what) {
    const auto it = actors_.find(mesh_id);
    if (it != actors_.end() && !it->second->stopping) return *it->second;
    if (it != actors_.end() || gone_.count(mesh_id))
      throw state_error(std::string(what) + " on " + label_of(mesh_id, 0),
                        "its actor mesh was stopped (actor_mesh::stop); its actors are gone");
    throw state_error(what, "no actor of actor mesh #" + std::to_string(mesh_id) +
                                " lives on this rank (its spawn failed?)");
  }

  void call(std::uint64_t mesh_id, std::uint32_t endpoint, std::span<const std::byte> payload,
            const arrived_attachments& attachments, std::vector<std::byte>& value) {
    hosted& h = find_actor(mesh_id, "call");
    if (endpoint >= h.type->endpoints.size())
      throw argument_error("call on " + h.label,
                           "unknown endpoint #" + std::to_string(endpoint) + " of " + h.type->name);
    try {
      as_actor(h, [&] {
        const std::size_t left = h.type->endpoints[endpoint](h.object, payload, attachments, value);
        if (left != 0)
          throw malformed_message("call on " + h.label + ": " + std::to_string(left) +
                                  " argument bytes left over");
      });
    } catch (...) {
      stop_if_asked(h); // a stop came while it ran
      throw;
    }
    stop_if_asked(h);
  }

  /// Stops this rank's actor of `mesh_id`: now, or once its endpoints on the stack have
  /// returned (an actor is never destroyed under its own endpoint; the caller may be
  /// that actor, so the stop is answered at once either way). A cleanup() that throws
  /// is this point's failure, or goes to supervision when the stop had to wait.
  void stop_mesh(std::uint64_t mesh_id, std::uint64_t request, std::uint32_t position) {
    const auto it = actors_.find(mesh_id);
    if (it == actors_.end()) {
      if (gone_.count(mesh_id)) return; // stopped already
      throw state_error("stop", "no actor of actor mesh #" + std::to_string(mesh_id) +
                                    " lives on this rank");
    }
    it->second->stopping = true; // from now on calls to it fail
    if (it->second->active > 0) return;
    if (auto failed = stop_now(mesh_id)) record_error(open_.at(request), position, *failed);
  }

  /// An actor whose stop waited: its last endpoint on the stack has returned.
  void stop_if_asked(hosted& h) {
    if (!h.stopping || h.active > 0) return;
    const supervisor_ref up = h.supervisor;
    if (auto failed = stop_now(h.id)) core_.supervise(up, {std::move(*failed)});
  }

  /// Runs cleanup() and destroys the actor of `mesh_id`; returns what cleanup() threw.
  std::optional<actor_failure> stop_now(std::uint64_t mesh_id) {
    const auto it = actors_.find(mesh_id);
    std::unique_ptr<hosted> h = std::move(it->second);
    actors_.erase(it);
    gone_[mesh_id] = {h->label, h->supervisor};
    std::optional<actor_failure> failed;
    try {
      end_actor(*h, true);
    } catch (...) {
      failed = failure_now(h->label, rank_, "cleanup(): ");
    }
    return failed;
  }

  /// Runs the actor's cleanup() hook (when `cleanup`), then destroys it; throws what
  /// cleanup() threw, after the destruction.
  void end_actor(hosted& h, bool cleanup) {
    std::exception_ptr failed;
    if (cleanup && h.type->cleanup) {
      try {
        as_actor(h, [&] { h.type->cleanup(h.object); });
      } catch (...) {
        failed = std::current_exception();
      }
    }
    try {
      as_actor(h, [&] { h.type->destroy(h.object); });
    } catch (...) { // a destructor that throws terminates anyway
    }
    if (failed) std::rethrow_exception(failed);
  }

  /// Failures nobody waited for, sent to the actor that spawned the failed actor mesh:
  /// its supervise() hook handles them (returns true) or they go on up the tree.
  void accept_supervision(const channel::incoming& m) {
    const auto n = decode_note(m.bytes); // checked by the engine
    if (!n) return;
    std::vector<actor_failure> failures;
    try {
      failures = from_bytes<std::vector<actor_failure>>(n->payload);
    } catch (const std::exception& e) {
      log(log_level::error, "dropped a malformed supervision event from rank ", m.source, ": ",
          e.what());
      return;
    }
    const std::uint64_t mesh_id = n->head.target;
    const auto it = actors_.find(mesh_id);
    if (it == actors_.end()) { // stopped: its supervisor takes over
      const auto g = gone_.find(mesh_id);
      return core_.supervise(g != gone_.end() ? g->second.supervisor : supervisor_ref{},
                             std::move(failures));
    }
    hosted& h = *it->second;
    std::vector<actor_failure> unhandled;
    for (actor_failure& f : failures) {
      bool handled = false;
      if (h.type->supervise) {
        try {
          as_actor(h, [&] { handled = h.type->supervise(h.object, f); });
        } catch (...) {
          unhandled.push_back(failure_now(
              h.label, rank_, "supervise() threw while handling " + f.mesh + "'s failure: "));
        }
      }
      if (!handled) unhandled.push_back(std::move(f));
    }
    const supervisor_ref up = h.supervisor;
    stop_if_asked(h);
    core_.supervise(up, std::move(unhandled));
  }

  /// Adds this rank's or a child's answer to the reply under construction.
  void record(open_request& o, std::uint32_t position, record_kind kind,
              std::span<const std::byte> bytes) {
    if (kind != record_kind::value) return append_record(position, kind, bytes, *o.reply);
    if (o.mode == reply_mode::errors_only) return;
    if (o.mode != reply_mode::reduce)
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
      } catch (const std::exception&) {
        record_error(it->second, r.position,
                     failure_now(label_of(it->second.mesh_id, r.position), rank_));
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
    const message_buffer reply = std::move(o.reply); // the channel's pool gets it back
    core_.channel().send(reply, o.parent);
    open_.release(it);
  }

  /// The end of the session: every actor's cleanup() runs, then it is destroyed (in
  /// the reverse order of their spawns). Returns the cleanups that threw.
  std::vector<actor_failure> destroy_actors() noexcept {
    std::vector<actor_failure> failed;
    for (auto it = actors_.rbegin(); it != actors_.rend(); ++it) {
      try {
        end_actor(*it->second, true);
      } catch (...) {
        failed.push_back(failure_now(it->second->label, rank_, "cleanup(): "));
      }
    }
    use_label(nullptr);
    actors_.clear();
    return failed;
  }

  control_core& core_;
  int rank_, size_;
  command_queue queue_; ///< early commands wait here for their turn
  std::map<std::uint64_t, std::unique_ptr<hosted>> actors_;
  std::unordered_map<std::uint64_t, gone> gone_;
  recycling_map<std::uint64_t, open_request> open_;
  std::optional<std::pair<std::uint64_t, std::uint32_t>> session_stop_; ///< request, point
  bool stopped_ = false;
  std::uint64_t stop_request_ = 0;
  int exit_code_ = 0;
  int depth_ = 0; ///< endpoints, constructors and hooks on this rank's stack
  log_capture capture_;
  reply_context current_;
  std::string last_label_;               ///< of the actor that ran last
  std::optional<stdout_capture> stdout_; ///< CROWN_ACTOR_STDOUT
};

} // namespace

int serve_actors(MPI_Comm comm, const mailbox_map& boxes, int rank, int size, const config& cfg) {
  control_core core(comm, boxes, rank, size, cfg.fanout, cfg.call_timeout * cfg.timeout_scale);
  const session_scope session(core);
  server s(core, cfg.actor_stdout);
  core.set_sink(&s);
  const int code = s.serve();
  core.set_sink(nullptr);
  return code;
}

supervisor_ref current_supervisor() noexcept { return g_supervisor; }

} // namespace detail

const actor_context& this_actor() {
  if (!detail::g_actor)
    throw state_error("crown::this_actor()", "called outside an actor's constructor or endpoint");
  return *detail::g_actor;
}

} // namespace crown
