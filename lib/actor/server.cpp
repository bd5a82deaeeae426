// The serving ranks' loop: each rank forwards a command to its children before it
// executes it, executes commands in the controller's order, and sends its part of the
// reply (with its children's) back up the tree.
#include "channel.hpp"
#include "command_queue.hpp"
#include "control.hpp"
#include "protocol.hpp"
#include "stdout_capture.hpp"
#include <algorithm>
#include <crown/actor/controller.hpp>
#include <crown/detail/fault.hpp>
#include <crown/detail/wait.hpp>
#include <crown/log.hpp>
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
    // Idle between commands for as long as the controller computes: the heartbeat
    // watch (control.cpp) notices a controller that is gone, not this wait.
    auto pause = backoff::unwatched();
    while (!(stopping_ && open_.empty())) { // the stop's reply is sent: done
      if (poll())
        pause = backoff::unwatched();
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
    const auto verdict = queue_.admit(order);
    if (verdict == command_queue::verdict::drop) {
      log(log_level::error, "dropped a command from rank ", m.source, " whose order ", order,
          " was already run or is already waiting (next: ", queue_.next(), ")");
      return;
    }
    const std::uint64_t first = first_child(node, fanout);
    const std::uint64_t last = std::min<std::uint64_t>(first + fanout - 1, c->head.targets);
    const bool in_turn = !stopping_ && verdict == command_queue::verdict::run;
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
      queue_.hold(order, std::move(m.owned));
      return;
    }
    queue_.ran();
    execute(*c, static_cast<std::size_t>(i));
    while (!stopping_) { // commands that arrived early, now in turn
      std::optional<message_buffer> next = queue_.take_ready();
      if (!next) break;
      message_buffer bytes = std::move(*next);
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
        fault_point_reached(fault_point::call);
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

  /// The actor whose log lines and output come next (also for output a crash rescues).
  void use_label(const std::string* label) noexcept {
    log_label_ = label;
    if (stdout_) stdout_->set_label(label ? *label : std::string_view());
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
      use_label(&h->log_label);
      const actor_scope scope(context, capture_);
      byte_reader args(spec.args);
      try {
        h->object = type->construct(args);
      } catch (...) { // what the failed constructor printed goes while its label lives
        forward_stdout();
        use_label(nullptr);
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
    use_label(&h.log_label);
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
      use_label(&h.log_label);
      const actor_scope scope(context);
      h.type->destroy(h.object);
      try {
        forward_stdout();
      } catch (...) { // output of a destructor is not worth a failed stop
      }
    }
    use_label(nullptr);
    actors_.clear();
  }

  channel channel_;
  int rank_, size_;
  using command_queue = in_order_queue<message_buffer>;
  command_queue queue_; ///< early commands wait here for their turn
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

int serve_actors(MPI_Comm comm, int rank, int size, bool capture_stdout) {
  server s(comm, rank, size, capture_stdout);
  return s.serve();
}

} // namespace detail

const actor_context& this_actor() {
  if (!detail::g_actor)
    throw state_error("crown::this_actor()", "called outside an actor's constructor or endpoint");
  return *detail::g_actor;
}

} // namespace crown
