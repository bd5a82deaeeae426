// A rank's engine in a control session (control_core.hpp): commands fan out along a
// tree over their targets, replies are gathered or reduced on the way back; on rank 0
// the watchdog and the log collector run in its progress loop, and it sequences what
// actors relay. Also rank 0's half of runtime::control.
#include "control_core.hpp"
#include "control.hpp"
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <crown/actor/controller.hpp>
#include <crown/detail/fault.hpp>
#include <crown/detail/wait.hpp>
#include <crown/log.hpp>
#include <crown/trace.hpp>
#include <cstdio>
#include <map>
#include <unordered_map>
#include <utility>

namespace crown {
namespace detail {
namespace {

std::atomic<std::uint64_t> g_session{0}; ///< the running control session, 0 outside
std::uint64_t g_sessions = 0;            ///< control sessions so far
control_core* g_core = nullptr;          ///< this rank's engine in it

std::chrono::steady_clock::duration seconds(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(s));
}

/// Request and port ids carry the rank that made them: unique in the job.
constexpr int id_shift = 40;
std::uint64_t make_id(int rank, std::uint64_t count) {
  return (std::uint64_t(rank) << id_shift) | count;
}
/// The count part of an id, as messages name it ("port #3").
std::uint64_t local_part(std::uint64_t id) { return id & ((std::uint64_t(1) << id_shift) - 1); }

} // namespace

std::uint64_t control_session() noexcept { return g_session.load(std::memory_order_relaxed); }

int port_rank(std::uint64_t id) noexcept { return static_cast<int>(id >> id_shift); }

control_core& running_core(const char* what) {
  if (!g_core || control_session() == 0)
    throw state_error(what, "outside runtime::control (actors, their handles and ports live "
                            "only inside a control session)");
  return *g_core;
}

session_scope::session_scope(control_core& core) {
  g_session = ++g_sessions;
  g_core = &core;
}
session_scope::~session_scope() {
  g_session = 0;
  g_core = nullptr;
}

control_core::control_core(MPI_Comm comm, const mailbox_map& boxes, int rank, int size, int fanout,
                           double call_timeout)
    : channel_(comm, boxes), rank_(rank), size_(size), fanout_(fanout), call_timeout_(call_timeout),
      sent_to_(static_cast<std::size_t>(size)) {}

void control_core::watch(watchdog dog, std::string setting) {
  watchdog_ = std::move(dog);
  watchdog_setting_ = std::move(setting);
}

void control_core::note_mesh(std::uint64_t mesh_id, const std::string& name,
                             const crown::mesh& on) {
  if (rank_ == 0)
    for (int r : on) hosted_[r].push_back(name);
  mesh_names_[mesh_id] = name;
  busy_[mesh_id].assign(static_cast<std::size_t>(on.size()), 0);
}

std::uint64_t control_core::new_mesh_id() { return make_id(rank_, ++next_mesh_); }

std::vector<std::byte>& control_core::begin_command() {
  next_ = channel_.acquire(last_bytes_); // a large payload is likely followed by another
  next_->resize(header_space());
  attachments_.clear();
  return *next_;
}

std::uint64_t control_core::submit(message_kind kind, std::uint64_t mesh_id, std::uint32_t endpoint,
                                   reply_mode mode, reduce_op op, std::span<const int> ranks,
                                   std::span<const std::uint32_t> positions,
                                   supervisor_ref supervisor) {
  if (kind == message_kind::call) fault_point_reached(fault_point::call); // the caller's
  trace_span span("actor", kind == message_kind::call ? "call_send" : "command_send",
                  {"endpoint", endpoint}, {"callee", ranks.empty() ? -1 : ranks[0]},
                  {"targets", static_cast<std::int64_t>(ranks.size())});
  if (span.recording()) span.text("actor", describe(mesh_id));
  // An actor's spawn or command to several actors goes through the controller, which
  // orders it among its own: collectives among actors then meet in one order everywhere.
  const bool relayed = rank_ != 0 && (kind == message_kind::spawn || ranks.size() > 1);
  // Large arguments travel beside the command, from the caller's memory, down a binary
  // tree (each rank sends them at most twice), in pieces where a rank forwards them.
  const bool bulk = !attachments_.empty();
  const int fanout = bulk ? std::min(fanout_, 2) : fanout_;
  bulk_sizes_.clear();
  std::uint64_t total = 0;
  for (const auto a : attachments_.parts) {
    bulk_sizes_.push_back(a.size());
    total += a.size();
  }
  const bool forwarded = relayed || ranks.size() > static_cast<std::size_t>(fanout);
  // Larger pieces only where a call carries more than max_pieces of the usual size.
  const std::uint64_t piece = std::max<std::uint64_t>(forwarded ? 256u << 10 : 4u << 20,
                                                      total / (max_pieces - max_attachments) + 1);
  if (piece > max_piece_bytes)
    throw argument_error("a call", "its large arguments, " + std::to_string(total) +
                                       " bytes, exceed what one call carries");
  const bulk_layout layout{bulk_sizes_, attachments_.elements, bulk ? channel_.next_bulk_tag() : 0,
                           static_cast<std::uint32_t>(piece)};
  command_header h;
  h.kind = kind;
  h.request = make_id(rank_, ++next_request_);
  h.mesh_id = mesh_id;
  h.endpoint = endpoint;
  h.mode = mode;
  h.reduce_op = static_cast<std::uint8_t>(op);
  h.fanout = static_cast<std::uint16_t>(fanout);
  h.origin = rank_;
  h.sequencer = relayed ? 0 : rank_;
  h.seq = relayed ? 0 : ++seq_;
  order_.clear();
  origin_order_.clear();
  for (int r : ranks) {
    const std::uint64_t mine = sent_to_[static_cast<std::size_t>(r)]++;
    order_.push_back(relayed ? 0 : mine); // the controller fills in its own
    if (relayed) origin_order_.push_back(mine);
  }
  message_buffer message = std::move(next_);
  finish_command(h, ranks, positions, order_, origin_order_, *message, layout);
  last_bytes_ = message->size();
  const auto children = std::min<std::size_t>(ranks.size(), h.fanout);
  // Each child's last piece (a bulk command has at most two children, or goes to rank 0).
  std::array<std::pair<int, std::uint64_t>, 2> bulk_sent{};
  std::size_t bulk_children = 0;
  const auto send_to = [&](int dest) {
    channel_.send(message, dest);
    if (bulk)
      bulk_sent.at(bulk_children++) = {
          dest, channel_.send_bulk(attachments_.parts, layout.piece_bytes, dest, layout.tag, {})};
  };
  if (relayed)
    send_to(0);
  else
    for (std::size_t node = 1; node <= children; ++node) send_to(ranks[node - 1]);
  pending& p = requests_.acquire(h.request);
  p.waiting = static_cast<std::uint32_t>(mode == reply_mode::stream ? ranks.size() : children);
  p.mesh_id = mesh_id;
  p.kind = kind;
  p.mode = mode;
  p.endpoint = endpoint;
  p.first_rank = ranks.empty() ? -1 : ranks[0];
  p.targets = static_cast<std::uint32_t>(ranks.size());
  p.supervisor = supervisor;
  ++unfinished_;
  if (kind == message_kind::call) { // counted for choose(), also on handles received
    std::vector<int>& b = busy_[mesh_id];
    for (std::uint32_t position : positions) {
      if (position >= b.size()) b.resize(position + std::size_t{1});
      ++b[position];
    }
    p.counted = static_cast<std::uint32_t>(positions.size());
    if (!positions.empty()) p.first_position = positions[0];
    if (positions.size() > 1) p.more_positions.assign(positions.begin() + 1, positions.end());
  }
  if (bulk) { // the caller may change or free its arrays once this returns (as MPI_Send)
    attachments_.clear();
    // Sends retire in order: one child after the other, so a long wait names its rank.
    for (std::size_t i = 0; i < bulk_children; ++i) {
      backoff pause(wait_site{"sending a call's large arguments", bulk_sent[i].first});
      while (!channel_.sent(bulk_sent[i].second))
        if (!progress()) pause.pause();
    }
  }
  return h.request;
}

std::shared_ptr<bulk_in> control_core::receive_bulk(const command& c, int source,
                                                    message_buffer message,
                                                    std::vector<int> children) {
  const int tag = channel_.next_bulk_tag();
  set_bulk_tag(*message, tag);
  for (const int child : children) channel_.send(message, child);
  std::vector<std::uint64_t> sizes(c.attachment_bytes.size());
  std::vector<std::uint8_t> elements(sizes.size());
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    sizes[i] = c.attachment_bytes[i];
    elements[i] = c.attachment_elements[i];
  }
  return channel_.receive_bulk(source, c.bulk_tag, sizes, c.piece_bytes, std::move(children), tag,
                               elements);
}

void control_core::begin_arrival(channel::incoming& m, message_kind kind) {
  const auto c = decode_command(m.bytes, size_);
  const std::int64_t at = c && rank_ != 0 ? c->index_of(rank_) : 0;
  if (!c || at < 0 || (rank_ == 0 && (!c->relayed() || c->head.sequencer != 0)))
    return dispatch_command(m, kind); // refused there, naming the cause
  message_buffer message = channel_.acquire(m.bytes.size());
  message->assign(m.bytes.begin(), m.bytes.end());
  // Rank 0 relays it for an actor (node 0 of the tree), a serving rank is node at + 1.
  if (rank_ == 0) sequence(*c, *message);
  const auto [first, last] = children_of(rank_ == 0 ? 0 : static_cast<std::uint64_t>(at) + 1,
                                         c->head.fanout, c->head.targets);
  std::vector<int> children;
  for (std::uint64_t node = first; node <= last; ++node) children.push_back(c->ranks[node - 1]);
  if (rank_ != 0) sink_->arriving(*c, static_cast<std::size_t>(at));
  auto bulk = receive_bulk(*c, m.source, std::move(message), std::move(children));
  arrivals_.push_back(
      {rank_ == 0 ? channel::incoming{} : std::move(m), kind, std::move(bulk), rank_ == 0});
}

void control_core::finish_arrivals() {
  channel_.progress_bulk();
  for (;;) { // an arrival's endpoint may drive progress and finish others: look again
    const auto it = std::find_if(arrivals_.begin(), arrivals_.end(),
                                 [](const arrival& a) { return a.bulk->complete(); });
    if (it == arrivals_.end()) return;
    arrival a = std::move(*it);
    arrivals_.erase(it);
    if (a.relayed) {
      if (!a.bulk->failure().empty())
        log(log_level::error, "controller: a relayed call's arguments: ", a.bulk->failure());
      continue;
    }
    a.message.bulk = std::move(a.bulk);
    dispatch_command(a.message, a.kind);
    channel_.recycle(std::move(a.message.owned));
  }
}

void control_core::dispatch_command(channel::incoming& m, message_kind kind) {
  if (rank_ == 0) // the controller hosts no actors: a relayed command
    relay(m);
  else if (sink_)
    sink_->accept(m, kind);
}

void control_core::relay(const channel::incoming& m) {
  const auto c = decode_command(m.bytes, size_);
  if (!c || !c->relayed() || c->head.sequencer != 0) {
    log(log_level::error, "controller: dropped a malformed command relayed by rank ", m.source);
    return;
  }
  message_buffer message = channel_.acquire(m.bytes.size());
  message->assign(m.bytes.begin(), m.bytes.end());
  sequence(*c, *message);
  const auto children = std::min<std::size_t>(c->ranks.size(), c->head.fanout);
  for (std::size_t node = 1; node <= children; ++node) channel_.send(message, c->ranks[node - 1]);
}

void control_core::sequence(const command& c, std::vector<std::byte>& message) {
  order_.clear();
  for (std::size_t i = 0; i < c.ranks.size(); ++i)
    order_.push_back(sent_to_[static_cast<std::size_t>(c.ranks[i])]++);
  sequence_command(message, ++seq_, order_);
  if (c.head.kind == message_kind::spawn) { // the watchdog names the actors a rank hosts
    try {
      const auto spec = from_bytes<spawn_spec>(c.payload);
      for (int r : spec.ranks) hosted_[r].push_back(spec.name);
      mesh_names_[c.head.mesh_id] = spec.name;
    } catch (const std::exception&) { // the targets refuse it, naming the cause
    }
  }
}

bool control_core::ready(std::uint64_t request) {
  auto it = requests_.find(request);
  if (it != requests_.end() && it->second.waiting == 0) return true; // no MPI call needed
  progress();
  it = requests_.find(request);
  if (it == requests_.end())
    throw state_error("future", "its result was already taken (get() on a moved-from or "
                                "finished future)");
  return it->second.waiting == 0;
}

call_result control_core::take(std::uint64_t request) {
  const auto it = requests_.find(request);
  call_result r = std::move(it->second.result);
  std::stable_sort(r.failures.begin(), r.failures.end(), // arrival order is arbitrary
                   [](const actor_failure& a, const actor_failure& b) { return a.rank < b.rank; });
  settle(it->second);
  requests_.release(it);
  return r;
}

void control_core::forget(std::uint64_t request) {
  const auto it = requests_.find(request);
  if (it == requests_.end()) return;
  pending& p = it->second;
  p.forgotten = true;
  for (std::size_t i = p.taken; i < p.streamed.size(); ++i) // what a dropped stream left
    if (p.streamed[i].failed) p.result.failures.push_back(std::move(p.streamed[i].failure));
  p.streamed.clear();
  p.taken = 0;
  if (p.waiting == 0) retire(it); // complete already
  progress();
}

stream_event control_core::next_streamed(std::uint64_t request, std::vector<std::byte>& value,
                                         actor_failure& failure) {
  progress();
  const auto it = requests_.find(request);
  if (it == requests_.end()) return stream_event::end;
  pending& p = it->second;
  if (p.taken < p.streamed.size()) {
    pending::arrival a = std::move(p.streamed[p.taken++]);
    if (!a.failed) {
      value = std::move(a.value);
      return stream_event::value;
    }
    failure = std::move(a.failure);
    return stream_event::failure;
  }
  if (p.waiting > 0) return stream_event::none;
  settle(p);
  requests_.release(it);
  return stream_event::end;
}

std::size_t control_core::least_busy(std::uint64_t mesh_id,
                                     std::span<const std::uint32_t> positions) {
  const auto b = busy_.find(mesh_id);
  std::size_t best = 0;
  int fewest = -1;
  for (std::size_t i = 0; i < positions.size(); ++i) {
    const int n = b != busy_.end() && positions[i] < b->second.size() ? b->second[positions[i]] : 0;
    if (fewest < 0 || n < fewest) {
      fewest = n;
      best = i;
    }
  }
  return best;
}

std::vector<actor_failure> control_core::flush() {
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

void control_core::fail_pending(const std::string& why) {
  for (auto it = requests_.begin(); it != requests_.end();) {
    auto here = it++;
    pending& p = here->second;
    if (p.waiting == 0) continue;
    actor_failure f{describe(p.mesh_id), rank_, "crown::state_error", why};
    if (p.mode == reply_mode::stream)
      p.streamed.push_back({true, {}, f});
    else
      p.result.failures.push_back(std::move(f));
    p.waiting = 0;
    --unfinished_;
    if (p.forgotten) retire(here);
  }
}

void control_core::note_timeout(std::uint64_t request, const std::string& what) {
  const auto it = requests_.find(request);
  if (it != requests_.end()) it->second.timed_out = what;
}

bool control_core::abandoned() const {
  for (const auto& [id, p] : requests_)
    if (p.waiting > 0 && !p.timed_out.empty()) return true;
  return false;
}

std::string control_core::describe(std::uint64_t mesh_id) const {
  const auto name = mesh_names_.find(mesh_id);
  return name != mesh_names_.end() ? name->second : "actor mesh #" + std::to_string(mesh_id);
}

std::string control_core::outstanding() const {
  std::map<std::uint64_t, const pending*> sorted;
  for (const auto& [id, p] : requests_)
    if (p.waiting > 0) sorted.emplace(local_part(id), &p);
  std::string s;
  for (const auto& [id, p] : sorted) {
    if (!s.empty()) s += "; ";
    s += p->kind == message_kind::call
             ? "call #" + std::to_string(id) + " of endpoint #" + std::to_string(p->endpoint)
         : p->kind == message_kind::spawn     ? "spawn #" + std::to_string(id)
         : p->kind == message_kind::stop_mesh ? "stop #" + std::to_string(id)
                                              : "stop of the session #" + std::to_string(id);
    if (mesh_names_.count(p->mesh_id)) s += " on actor mesh " + describe(p->mesh_id);
    s += " (" + std::to_string(p->targets) + " actors from rank " + std::to_string(p->first_rank) +
         ", " + std::to_string(p->waiting) + " subtrees unanswered" +
         (p->timed_out.empty() ? "" : "; timed out: " + p->timed_out) + ")";
  }
  return s.empty() ? "none" : s;
}

bool control_core::progress() {
  channel_.poll_sends();
  if (!arrivals_.empty()) finish_arrivals();
  if (sink_) sink_->run_ready();
  if ((++ticks_ & 63) == 0) { // every 64 polls, not on each
    channel_.keep_mpi_moving();
    if (rank_ == 0) { // the clock is read here
      check_watchdog();
      logs_.flush(false);
    }
  }
  channel::incoming m;
  bool any = false;
  while (channel_.receive(m)) {
    any = true;
    const auto kind = kind_of(m.bytes);
    if (kind == message_kind::reply) {
      const auto reply = decode_reply(m.bytes);
      if (reply && reply->leg() == reply_leg::to_parent && sink_)
        sink_->accept(m, *kind); // a subtree's answer to this rank's part of a command
      else
        accept_reply(reply, m.source);
    } else if (kind == message_kind::supervise || kind == message_kind::port ||
               kind == message_kind::port_closed) {
      accept_note(m, *kind);
    } else if (kind && (rank_ == 0 || sink_)) { // a command
      if (attachments_of(m.bytes) != 0)
        begin_arrival(m, *kind);
      else
        dispatch_command(m, *kind);
    } else {
      log(log_level::error, "rank ", rank_, ": dropped a malformed message from rank ", m.source,
          " (", m.bytes.size(), " bytes)");
    }
    channel_.recycle(std::move(m.owned));
  }
  return any;
}

void control_core::drain() {
  channel_.drain_sends();
  logs_.flush(true);
}

void control_core::accept_reply(const std::optional<reply_view>& reply, int source) {
  if (!reply || reply->leg() != reply_leg::to_caller) {
    log(log_level::error, "rank ", rank_, ": dropped a malformed reply from rank ", source);
    return;
  }
  const auto it = requests_.find(reply->request());
  if (it == requests_.end()) {
    log(log_level::error, "rank ", rank_, ": reply from rank ", source, " for unknown request ",
        reply->request());
    return;
  }
  pending& p = it->second;
  if (p.waiting == 0) return; // failed already (fail_pending): a late answer
  reply_record rec;
  for (reply_view v = *reply; v.next(rec);) {
    if (rec.kind == record_kind::log) {
      collect_log(rec.bytes, source);
    } else if (p.mode == reply_mode::stream) {
      pending::arrival a;
      a.failed = rec.kind == record_kind::error;
      if (a.failed)
        a.failure = failure_of(rec.bytes, source);
      else
        a.value.assign(rec.bytes.begin(), rec.bytes.end());
      if (p.forgotten) {
        if (a.failed)
          p.result.failures.push_back(std::move(a.failure));
        else if (p.port.rank >= 0)
          to_reply_port(p, a.value);
      } else {
        p.streamed.push_back(std::move(a));
      }
    } else if (rec.kind == record_kind::error) {
      if (p.result.failures.empty()) {
        p.first_failure = std::chrono::steady_clock::now();
        failing_.push_back(it->first);
      }
      p.result.failures.push_back(failure_of(rec.bytes, source));
    } else {
      p.result.values.emplace_back(rec.position,
                                   std::vector<std::byte>(rec.bytes.begin(), rec.bytes.end()));
    }
  }
  if (--p.waiting == 0) {
    --unfinished_;
    if (!p.result.failures.empty()) std::erase(failing_, it->first);
    if (p.forgotten) retire(it);
  }
}

void control_core::collect_log(std::span<const std::byte> bytes, int from) {
  if (rank_ != 0) { // an actor called an actor: the line goes on towards the controller
    if (sink_) sink_->forward_log(bytes, from);
    return;
  }
  try {
    logs_.add(from_bytes<log_line>(bytes));
  } catch (const std::exception& e) {
    log(log_level::error, "controller: a malformed log line from rank ", from, ": ", e.what());
  }
}

void control_core::supervise(supervisor_ref to, std::vector<actor_failure> failures) {
  if (failures.empty()) return;
  if (to.rank == rank_ && to.mesh == 0 && rank_ == 0) {
    for (auto& f : failures) supervision_.push_back(std::move(f));
    return;
  }
  note_header h;
  h.kind = message_kind::supervise;
  h.target = to.mesh;
  message_buffer b = channel_.acquire();
  begin_note(h, *b);
  byte_writer w(*b);
  w(failures);
  channel_.send(b, to.rank);
}

void control_core::accept_note(const channel::incoming& m, message_kind kind) {
  const auto n = decode_note(m.bytes);
  if (!n) {
    log(log_level::error, "rank ", rank_, ": dropped a malformed note from rank ", m.source);
    return;
  }
  if (kind == message_kind::port) return deliver(m.source, *n);
  if (kind == message_kind::port_closed) {
    closed_ports_.emplace(m.source, n->head.target);
    return;
  }
  if (rank_ != 0 || n->head.target != 0) { // for an actor: its supervise() hook
    if (sink_) return sink_->accept(const_cast<channel::incoming&>(m), kind);
  }
  try {
    for (auto& f : from_bytes<std::vector<actor_failure>>(n->payload))
      supervision_.push_back(std::move(f));
  } catch (const std::exception& e) {
    log(log_level::error, "controller: a malformed supervision event from rank ", m.source, ": ",
        e.what());
  }
}

std::uint64_t control_core::open_port(std::uint64_t type, std::string type_name) {
  const std::uint64_t id = make_id(rank_, ++next_port_);
  port_state& p = ports_[id];
  p.type = type;
  p.type_name = std::move(type_name);
  return id;
}

void control_core::close_port(std::uint64_t id) noexcept { ports_.erase(id); }

void control_core::port_send(int rank, std::uint64_t id, std::uint64_t type,
                             std::span<const std::byte> bytes) {
  if (++port_calls_ % port_poll_every == 0) progress(); // a receiver may have gone
  // Named only when it fails: built on every send it was a heap allocation per message.
  const auto where = [&] {
    return "crown::port::send to port #" + std::to_string(local_part(id)) + " on rank " +
           std::to_string(rank);
  };
  if (rank < 0 || rank >= size_ || port_rank(id) != rank)
    throw argument_error(where(), "no such port in this job");
  if ((!closed_ports_.empty() && closed_ports_.count({rank, id})) ||
      (rank == rank_ && !ports_.count(id)))
    throw state_error(where(), "its receiver is gone (destroyed, or its actor stopped)");
  post_port_message(rank, id, type, bytes);
}

void control_core::post_port_message(int rank, std::uint64_t id, std::uint64_t type,
                                     std::span<const std::byte> bytes) {
  note_header h;
  h.kind = message_kind::port;
  h.target = id;
  h.seq = port_sent_[{rank, id}]++;
  h.type = type;
  if (rank == rank_) { // no need for MPI: the same order, delivered now
    deliver(rank_, note{h, bytes});
    return;
  }
  std::vector<std::byte> out = std::move(port_out_); // reentrant: a nested send has its own
  begin_note(h, out);
  out.insert(out.end(), bytes.begin(), bytes.end());
  channel_.send_copy(out, rank);
  out.clear();
  if (out.capacity() <= channel::slot_bytes) port_out_ = std::move(out);
}

void control_core::reply_via_port(std::uint64_t request, int rank, std::uint64_t id,
                                  std::uint64_t type) {
  const auto it = requests_.find(request);
  if (it == requests_.end()) return;
  pending& p = it->second;
  p.port = {rank, id, type};
  p.forgotten = true;
  for (std::size_t i = p.taken; i < p.streamed.size(); ++i) {
    if (p.streamed[i].failed)
      p.result.failures.push_back(std::move(p.streamed[i].failure));
    else
      to_reply_port(p, p.streamed[i].value);
  }
  p.streamed.clear();
  p.taken = 0;
  if (p.waiting == 0) retire(it);
}

/// A value for a call's response port; a port that is gone turns it into a failure.
void control_core::to_reply_port(pending& p, std::span<const std::byte> value) {
  const std::pair<int, std::uint64_t> where{p.port.rank, p.port.id};
  if (closed_ports_.count(where) || (p.port.rank == rank_ && !ports_.count(p.port.id))) {
    p.result.failures.push_back({describe(p.mesh_id), rank_, "crown::state_error",
                                 "the call's response port (on rank " +
                                     std::to_string(p.port.rank) + ") has no receiver any more"});
    return;
  }
  post_port_message(p.port.rank, p.port.id, p.port.type, value);
}

void control_core::deliver(int from, const note& n) {
  const auto it = ports_.find(n.head.target);
  if (it == ports_.end()) {
    log(log_level::warn, "rank ", rank_, ": a message from rank ", from, " for port #",
        local_part(n.head.target),
        ", whose receiver is gone, was dropped; that rank's sends to it throw once it has "
        "polled (within ",
        port_poll_every, " sends)");
    if (from == rank_) return;
    note_header h;
    h.kind = message_kind::port_closed;
    h.target = n.head.target;
    message_buffer b = channel_.acquire();
    begin_note(h, *b);
    channel_.send(b, from);
    return;
  }
  port_state& p = it->second;
  port_state::message msg{{n.payload.begin(), n.payload.end()}, from, n.head.type != p.type};
  const order_key key[] = {{from, n.head.seq}};
  switch (p.early.admit(key)) {
  case in_order_queue<port_state::message>::verdict::drop:
    log(log_level::error, "rank ", rank_, ": dropped a repeated port message from rank ", from);
    return;
  case in_order_queue<port_state::message>::verdict::hold:
    p.early.hold(key, std::move(msg));
    return;
  case in_order_queue<port_state::message>::verdict::run:
    p.ready.push_back(std::move(msg));
    p.early.ran(key);
    while (auto next = p.early.take_ready()) p.ready.push_back(std::move(*next));
  }
}

bool control_core::port_take(std::uint64_t id, std::vector<std::byte>& bytes) {
  auto it = ports_.find(id);
  if (it == ports_.end() || it->second.ready.empty() || ++port_calls_ % port_poll_every == 0) {
    progress();
    it = ports_.find(id); // progress may have opened ports (the table rehashed)
  }
  if (it == ports_.end() || it->second.ready.empty()) return false;
  port_state::message msg = std::move(it->second.ready.front());
  it->second.ready.pop_front();
  if (msg.wrong_type)
    throw argument_error("crown::receiver<" + it->second.type_name + ">::recv on rank " +
                             std::to_string(rank_),
                         "a message of another type than " + it->second.type_name +
                             " arrived from rank " + std::to_string(msg.from) + "; dropped");
  bytes = std::move(msg.bytes);
  return true;
}

/// A rank that neither answers nor beats hangs or lost contact: name it and end the
/// job, rather than wait forever (long endpoints are legal; silence is not).
void control_core::check_watchdog() {
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
void control_core::check_partial_failures() {
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

/// A forgotten request is complete: its failures go to the actor mesh's supervisor.
void control_core::retire(pending_map::iterator it) {
  supervise(it->second.supervisor, std::move(it->second.result.failures));
  settle(it->second);
  requests_.release(it);
}

void control_core::settle(const pending& p) {
  const auto b = busy_.find(p.mesh_id);
  if (b == busy_.end()) return;
  const auto uncount = [&](std::uint32_t position) {
    if (position < b->second.size()) --b->second[position];
  };
  if (p.counted > 0) uncount(p.first_position);
  for (std::uint32_t position : p.more_positions) uncount(position);
}

actor_failure control_core::failure_of(std::span<const std::byte> bytes, int from) {
  try {
    return from_bytes<actor_failure>(bytes);
  } catch (const std::exception& e) {
    return {"?", from, "crown::detail::malformed_message", e.what()};
  }
}

bool request_ready(control_core& core, std::uint64_t request) { return core.ready(request); }
call_result take_result(control_core& core, std::uint64_t request) { return core.take(request); }
std::vector<std::byte>& begin_command(control_core& core) { return core.begin_command(); }
attachment_list& command_attachments(control_core& core) { return core.attachments(); }
std::uint64_t submit(control_core& core, message_kind kind, std::uint64_t mesh_id,
                     std::uint32_t endpoint, reply_mode mode, reduce_op op,
                     std::span<const int> ranks, std::span<const std::uint32_t> positions,
                     supervisor_ref supervisor) {
  return core.submit(kind, mesh_id, endpoint, mode, op, ranks, positions, supervisor);
}
std::uint64_t new_mesh_id(control_core& core) { return core.new_mesh_id(); }
void forget_request(control_core& core, std::uint64_t request) { core.forget(request); }
stream_event next_streamed(control_core& core, std::uint64_t request, std::vector<std::byte>& value,
                           actor_failure& failure) {
  return core.next_streamed(request, value, failure);
}
double call_timeout(const control_core& core) noexcept { return core.call_timeout(); }
void note_timeout(control_core& core, std::uint64_t request, const std::string& what) {
  core.note_timeout(request, what);
}
std::size_t least_busy(control_core& core, std::uint64_t mesh_id,
                       std::span<const std::uint32_t> positions) {
  return core.least_busy(mesh_id, positions);
}
void note_mesh(control_core& core, std::uint64_t mesh_id, const std::string& name,
               const crown::mesh& on) {
  core.note_mesh(mesh_id, name, on);
}
std::uint64_t open_port(control_core& core, std::uint64_t type, std::string type_name) {
  return core.open_port(type, std::move(type_name));
}
void close_port(control_core& core, std::uint64_t id) noexcept { core.close_port(id); }
namespace {
thread_local std::vector<std::byte> t_spare_send_buffer;
}
std::vector<std::byte> take_send_buffer() noexcept {
  std::vector<std::byte> b = std::move(t_spare_send_buffer);
  t_spare_send_buffer = {}; // a moved-from vector is only valid-but-unspecified
  b.clear();
  return b;
}
void give_back_send_buffer(std::vector<std::byte>&& bytes) noexcept {
  if (bytes.capacity() <= (std::size_t{64} << 10)) // not a large value's pages for ever
    t_spare_send_buffer = std::move(bytes);
}
void port_send(control_core& core, int rank, std::uint64_t id, std::uint64_t type,
               std::span<const std::byte> bytes) {
  core.port_send(rank, id, type, bytes);
}
bool port_take(control_core& core, std::uint64_t id, std::vector<std::byte>& bytes) {
  return core.port_take(id, bytes);
}
void reply_via_port(control_core& core, std::uint64_t request, int rank, std::uint64_t id,
                    std::uint64_t type) {
  core.reply_via_port(request, rank, id, type);
}

void check_spawn(const control_core& core, const crown::mesh& on, const std::string& name) {
  const std::string what =
      "spawn of actor mesh " + (name.empty() ? "\"\"" : name) + " on " + on.to_string();
  if (name.empty()) throw argument_error(what, "an actor mesh needs a name");
  for (int r : on) {
    if (r == 0)
      throw argument_error(what, "rank 0 is the controller and hosts no actors; spawn on "
                                 "controller::workers() or a part of it");
    if (r >= core.size())
      throw argument_error(what, "rank " + std::to_string(r) + " is not in the job (" +
                                     std::to_string(core.size()) + " ranks)");
  }
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

int run_controller(MPI_Comm comm, const mailbox_map& boxes, int size, const config& cfg,
                   std::uint64_t* heartbeats, const std::function<void(controller&)>& fn) {
  int code = 0;
  char setting[96];
  std::snprintf(setting, sizeof setting, "CROWN_WATCHDOG=%g x CROWN_TIMEOUT_SCALE=%g", cfg.watchdog,
                cfg.timeout_scale);
  control_core core(comm, boxes, 0, size, cfg.fanout, cfg.call_timeout * cfg.timeout_scale);
  core.watch(watchdog(heartbeats, size, cfg.watchdog * cfg.timeout_scale), setting);
  controller c(core);
  const session_scope session(core); // futures and handles from this session die with it
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
                                    reduce_op::sum, ranks, positions, {});
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
detail::make_actor_mesh_ref(std::uint64_t id, std::string name, supervisor_ref supervisor,
                            crown::mesh full, crown::mesh view, std::shared_ptr<bool> stopped) {
  auto r = std::make_shared<actor_mesh_ref>(actor_mesh_ref{control_session(),
                                                           id,
                                                           std::move(name),
                                                           supervisor,
                                                           std::move(full),
                                                           std::move(view),
                                                           {},
                                                           {},
                                                           {},
                                                           std::move(stopped)});
  if (!r->stopped) r->stopped = std::make_shared<bool>(false);
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
  return proc_mesh(crown::mesh({{"workers", n - 1}}, std::move(ranks)));
}

void controller::flush() {
  auto failures = core_->flush();
  if (!failures.empty()) throw actor_error("controller::flush (broadcasts)", std::move(failures));
}

} // namespace crown
