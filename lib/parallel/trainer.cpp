// One worker's part of training (include/crown/parallel/trainer.hpp).
#include <algorithm>
#include <cmath>
#include <crown/block_collectives.hpp>
#include <crown/checkpoint.hpp>
#include <crown/collectives.hpp>
#include <crown/detail/fault.hpp>
#include <crown/error.hpp>
#include <crown/parallel/random.hpp>
#include <crown/parallel/trainer.hpp>
#include <optional>

namespace crown::parallel {

void check_options(const train_options& o, int workers) {
  o.model.check();
  validate(o.plan,
           {workers, o.batch, o.model.blocks, o.model.heads, o.model.channels, o.model.vocabulary});
  if (o.batch < 1)
    throw argument_error("training", "the batch must be positive, not " + std::to_string(o.batch));
  if (o.optimizer != "adam" && o.optimizer != "sgd")
    throw argument_error("training", "unknown optimizer '" + o.optimizer + "' (adam or sgd)");
  if (!(o.lr > 0) || !std::isfinite(o.lr))
    throw argument_error("training", "the learning rate must be positive and finite, not " +
                                         std::to_string(o.lr));
}

namespace {
template <typename T>
std::variant<adam<T>, sgd<T>> make_optimizer(const train_options& o, std::size_t count) {
  if (o.optimizer == "sgd") return sgd<T>(count, {o.lr, 0});
  return adam<T>(count, {.lr = o.lr});
}
bool sharded(const train_options& o) { return o.plan.fsdp != fsdp_strategy::no_shard; }

/// This worker's part of the model: its stage's blocks (the plan's boundaries, else equal
/// shares, the earlier stages taking the smaller ones) and its tensor-parallel slice.
model_part part_of(const plan& p, const mesh& m, int blocks) {
  const int s = m.coordinate("pp");
  auto boundary = [&](int i) {
    if (i == 0) return 0;
    if (i == p.pp) return blocks;
    return p.stages.empty() ? i * blocks / p.pp : p.stages[std::size_t(i - 1)];
  };
  return {m.coordinate("tp"), p.tp, boundary(s), boundary(s + 1)};
}

/// Activation slots: 1F1B keeps at most pp - stage micro-batches in flight.
int slots_of(const plan& p, const mesh& m) {
  return std::min(p.microbatches, p.pp - m.coordinate("pp"));
}

template <typename T>
std::optional<mesh> tp_group(const plan& p, const mesh& m) {
  if (p.tp == 1) return std::nullopt;
  return m.sub({"tp"});
}

// The engines are neither copied nor moved: built in place, initialising the model first.
template <typename T>
std::optional<ddp<T>> make_ddp(const train_options& o, const mesh& dp, gpt<T>& model) {
  if (sharded(o)) return std::nullopt;
  model.initialise(o.seed);
  return std::optional<ddp<T>>(std::in_place, dp, model.params(), model.layout(), o.ddp);
}
template <typename T>
std::optional<fsdp<T>> make_fsdp(const train_options& o, const mesh& plan_mesh, const mesh& dp,
                                 const gpt<T>& model) {
  if (!sharded(o)) return std::nullopt;
  check_fsdp_groups(plan_mesh, o.plan.fsdp); // every group, so every rank fails alike
  return std::optional<fsdp<T>>(std::in_place, dp, o.plan.fsdp, model.layout(), o.seed);
}
} // namespace

template <typename T>
trainer<T>::trainer(const mesh& workers, std::shared_ptr<const corpus> data, train_options o)
    : o_((check_options(o, workers.size()), std::move(o))), data_(std::move(data)),
      mesh_(make_mesh(o_.plan, workers)), dp_mesh_(mesh_.sub({"dp"})), pp_mesh_(mesh_.sub({"pp"})),
      model_(o_.model, o_.batch / o_.plan.microbatches, !sharded(o_),
             part_of(o_.plan, mesh_, o_.model.blocks), tp_group<T>(o_.plan, mesh_),
             slots_of(o_.plan, mesh_)),
      ddp_(make_ddp(o_, dp_mesh_, model_)), fsdp_(make_fsdp(o_, mesh_, dp_mesh_, model_)),
      optimizer_(make_optimizer<T>(o_, params().size())) {
  if (o_.plan.pp > 1) {
    (void)pp_mesh_.comm(); // created here, in step with the stage's peers
    const std::size_t n = std::size_t(o_.batch / o_.plan.microbatches) * o_.model.context *
                          std::size_t(o_.model.channels),
                      slots = std::size_t(slots_of(o_.plan, mesh_));
    received_.assign(slots, tracked<T>(buffer_kind::activations, n));
    dinput_.assign(slots, tracked<T>(buffer_kind::activations, n));
    dout_ = tracked<T>(buffer_kind::activations, n);
    output_sent_.assign(slots, MPI_REQUEST_NULL);
    dinput_sent_.assign(slots, MPI_REQUEST_NULL);
  }
}

template <typename T>
std::span<const T> trainer<T>::params() const noexcept {
  return fsdp_ ? fsdp_->shard_params() : model_.params();
}

template <typename T>
std::span<const T> trainer<T>::grads() noexcept {
  return fsdp_ ? fsdp_->shard_grads() : ddp_->grads();
}

template <typename T>
T trainer<T>::forward(int slot, std::span<const T> input, int batch) {
  return fsdp_ ? model_.forward_part(slot, inputs_, input, targets_, batch, *fsdp_)
               : model_.forward_part(slot, inputs_, input, targets_, batch);
}

template <typename T>
void trainer<T>::backward(int slot, T loss_scale, std::span<const T> dout, std::span<T> dinput,
                          bool sync) {
  if (fsdp_) // every backward reduce-scatters into the sharded gradient
    return model_.backward_part(slot, loss_scale, dout, dinput, *fsdp_);
  std::optional<typename ddp<T>::no_sync_guard> accumulate;
  if (!sync) accumulate.emplace(ddp_->no_sync()); // reduce once, after the last
  model_.backward_part(slot, loss_scale, dout, dinput, ddp_->grads(),
                       [&](std::size_t e) { ddp_->mark_ready(e); });
}

template <typename T>
void trainer<T>::load_micro_batch(std::uint64_t first, int k, int micro) {
  inputs_.clear();
  targets_.clear();
  for (int i = 0; i < micro; ++i)
    data_->training_sample(o_.seed, first + std::uint64_t(k * micro + i), inputs_, targets_);
}

template <typename T>
double trainer<T>::hidden_fraction() const noexcept {
  if (ddp_) return ddp_->last_timing().hidden_fraction();
  const fsdp_timing& t = fsdp_->last_timing();
  const double busy = t.gather_seconds + t.scatter_seconds;
  return busy > 0 ? std::max(0.0, 1 - t.exposed_seconds / busy) : 0;
}

template <typename T>
std::string trainer<T>::memory_placement() const {
  if (ddp_) return ddp_->grads_in_heap() ? "gradients in the symmetric heap" : "";
  const auto& g = fsdp_->groups();
  return std::string(to_string(o_.plan.fsdp)) + ": shards over " + std::to_string(g.shard.size()) +
         " ranks" +
         (g.replicate.size() > 1 ? ", replicated over " + std::to_string(g.replicate.size()) : "") +
         (fsdp_->shards_in_heap() ? ", in the symmetric heap" : "");
}

namespace {
double seconds() { return MPI_Wtime(); }
/// An MPI call of the pipeline: its error names the stage, the call and the micro-batch.
void check(int rc, int stage, const char* call, int k) {
  if (rc != MPI_SUCCESS)
    throw mpi_error("pipeline stage " + std::to_string(stage) + ": " + call + " of micro-batch " +
                        std::to_string(k),
                    rc);
}
} // namespace

template <typename T>
T trainer<T>::step() {
  crown::detail::fault_point_reached(fault_point::step);
  const int m = o_.plan.microbatches, micro = o_.batch / m;
  const int p = o_.plan.pp, s = pp_mesh_.rank(), slots = slots_of(o_.plan, mesh_);
  const bool first_stage = s == 0, last_stage = s == p - 1;
  const std::uint64_t first = samples_ + std::uint64_t(dp_mesh_.rank()) * o_.batch;
  if (ddp_)
    ddp_->zero_grad();
  else
    fsdp_->zero_grad();
  const MPI_Comm pipe = p > 1 ? pp_mesh_.comm() : MPI_COMM_NULL;
  const MPI_Datatype type = crown::detail::mpi_datatype<T>();
  double loss = 0;
  const double start = seconds();
  double waited = 0;
  auto timed = [&](auto&& wait) { // time blocked on a neighbouring stage
    const double t = seconds();
    wait();
    waited += seconds() - t;
  };
  // 1F1B (PipeDream-Flush, as Megatron schedules it): stage s runs p - s - 1 forwards
  // ahead, then alternates one forward and one backward, then drains the backwards. With
  // one stage it is forward, backward per micro-batch. Activations cross a boundary as
  // MPI messages tagged by micro-batch (2k forward, 2k + 1 backward); sends are left in
  // flight and waited for before their buffer is reused.
  auto forward_one = [&](int k) {
    const int slot = k % slots;
    load_micro_batch(first, k, micro);
    std::span<const T> input;
    if (!first_stage) {
      timed([&] {
        check(MPI_Recv(received_[std::size_t(slot)].data(),
                       int(received_[std::size_t(slot)].size()), type, s - 1, 2 * k, pipe,
                       MPI_STATUS_IGNORE),
              s, "receiving the activation", k);
      });
      input = received_[std::size_t(slot)];
    }
    if (!last_stage)
      timed([&] {
        check(MPI_Wait(&output_sent_[std::size_t(slot)], MPI_STATUS_IGNORE), s,
              "sending an earlier activation before", k);
      });
    if (!last_stage) targets_.clear();
    loss += double(forward(slot, input, micro));
    if (!last_stage) {
      const auto out = model_.output(slot);
      check(MPI_Isend(out.data(), int(out.size()), type, s + 1, 2 * k, pipe,
                      &output_sent_[std::size_t(slot)]),
            s, "sending the activation", k);
    }
  };
  auto backward_one = [&](int k) {
    const int slot = k % slots;
    if (!last_stage)
      timed([&] {
        check(MPI_Recv(dout_.data(), int(dout_.size()), type, s + 1, 2 * k + 1, pipe,
                       MPI_STATUS_IGNORE),
              s, "receiving the output's gradient", k);
      });
    std::span<T> dinput;
    if (!first_stage) {
      timed([&] {
        check(MPI_Wait(&dinput_sent_[std::size_t(slot)], MPI_STATUS_IGNORE), s,
              "sending an earlier input gradient before", k);
      });
      dinput = dinput_[std::size_t(slot)];
    }
    backward(slot, T(1) / T(m), last_stage ? std::span<const T>() : std::span<const T>(dout_),
             dinput, k + 1 == m);
    if (!first_stage)
      check(MPI_Isend(dinput.data(), int(dinput.size()), type, s - 1, 2 * k + 1, pipe,
                      &dinput_sent_[std::size_t(slot)]),
            s, "sending the input gradient", k);
  };
  const int warmup = std::min(p - s - 1, m);
  for (int k = 0; k < warmup; ++k) forward_one(k);
  for (int k = 0; k + warmup < m; ++k) {
    forward_one(k + warmup);
    backward_one(k);
  }
  for (int k = m - warmup; k < m; ++k) backward_one(k);
  timed([&] {
    for (auto* sent : {&output_sent_, &dinput_sent_})
      check(MPI_Waitall(int(sent->size()), sent->data(), MPI_STATUSES_IGNORE), s,
            "completing the sends after", m - 1);
  });
  pipe_ = {seconds() - start, waited};
  if (ddp_) {
    ddp_->finish();
    std::visit([&](auto& opt) { opt.step(model_.params(), ddp_->grads()); }, optimizer_);
  } else {
    fsdp_->finish();
    fsdp_->reshard(); // nothing gathered may outlive the shards it was gathered from
    std::visit([&](auto& opt) { opt.step(fsdp_->shard_params(), fsdp_->shard_grads()); },
               optimizer_);
  }
  ++step_;
  samples_ += std::uint64_t(o_.plan.dp) * std::uint64_t(o_.batch);
  if (p > 1) co_broadcast(pp_mesh_, loss, p - 1); // the last stage has the loss
  return T(loss / m);
}

template <typename T>
T trainer<T>::average(T local) {
  double v = double(local) / dp_mesh_.size();
  co_sum(dp_mesh_, v);
  return T(v);
}

template <typename T>
T trainer<T>::forward_through_stages(int batch, int k) {
  const int p = o_.plan.pp, s = pp_mesh_.rank();
  if (p == 1) return forward(0, {}, batch);
  const MPI_Comm pipe = pp_mesh_.comm();
  const MPI_Datatype type = crown::detail::mpi_datatype<T>();
  const std::size_t n = std::size_t(batch) * o_.model.context * std::size_t(o_.model.channels);
  std::span<const T> input;
  if (s > 0) {
    check(MPI_Recv(received_[0].data(), int(n), type, s - 1, 0, pipe, MPI_STATUS_IGNORE), s,
          "receiving a forward-only activation", k);
    input = std::span<const T>(received_[0]).first(n);
  }
  if (s < p - 1) targets_.clear();
  const T loss = forward(0, input, batch);
  if (s < p - 1) {
    const auto out = model_.output(0);
    check(MPI_Send(out.data(), int(out.size()), type, s + 1, 0, pipe), s,
          "sending a forward-only activation", k);
  }
  return loss;
}

template <typename T>
T trainer<T>::evaluate(int batches) {
  const int micro = o_.batch / o_.plan.microbatches;
  double sum = 0;
  int count = 0;
  for (int b = 0; b < batches; ++b)
    for (int k = 0; k < o_.plan.microbatches; ++k) {
      inputs_.clear();
      targets_.clear();
      const std::uint64_t first =
          (std::uint64_t(b) * std::uint64_t(dp_mesh_.size()) + std::uint64_t(dp_mesh_.rank())) *
              std::uint64_t(o_.batch) +
          std::uint64_t(k * micro);
      for (int i = 0; i < micro; ++i) data_->validation_sample(first + i, inputs_, targets_);
      sum += double(forward_through_stages(micro, k));
      ++count;
    }
  if (fsdp_) fsdp_->reshard();
  if (o_.plan.pp > 1) co_broadcast(pp_mesh_, sum, o_.plan.pp - 1); // the last stage's
  return average(T(sum / std::max(count, 1)));
}

template <typename T>
std::string trainer<T>::sample(const std::string& prompt, int length, double temperature,
                               std::uint64_t seed) {
  const int ctx = o_.model.context, V = o_.model.vocabulary, Vl = V / o_.plan.tp;
  const int p = o_.plan.pp;
  const bool last_stage = pp_mesh_.rank() == p - 1;
  const mesh tp_mesh = mesh_.sub({"tp"});
  std::vector<int> tokens(std::size_t(ctx), '\n'); // the left pads a short prompt
  for (unsigned char ch : prompt) tokens.push_back(ch);
  std::string out;
  std::vector<T> row(static_cast<std::size_t>(V));
  std::vector<double> w(static_cast<std::size_t>(V));
  for (int n = 0; n < length; ++n) {
    inputs_.assign(tokens.end() - ctx, tokens.end());
    targets_.clear();
    (void)forward_through_stages(1, n);
    int next = V - 1;
    if (last_stage) { // the last position's probabilities, each tp rank's rows gathered
      const auto mine = model_.probabilities().subspan(std::size_t(ctx - 1) * Vl, std::size_t(Vl));
      if (o_.plan.tp > 1)
        all_gather(tp_mesh, mine, std::span<T>(row));
      else
        std::copy(mine.begin(), mine.end(), row.begin());
      double total = 0;
      for (int v = 0; v < V; ++v)
        total += w[std::size_t(v)] = std::pow(double(row[std::size_t(v)]), 1.0 / temperature);
      double u = unit_interval(mix64(seed) ^ std::uint64_t(n)) * total;
      for (int v = 0; v < V; ++v)
        if ((u -= w[std::size_t(v)]) < 0) {
          next = v;
          break;
        }
    }
    if (p > 1) co_broadcast(pp_mesh_, next, p - 1);
    tokens.push_back(next);
    out.push_back(char(next));
  }
  if (fsdp_) fsdp_->reshard();
  return out;
}

namespace {
/// The optimizer's state arrays, named as they are stored (spans of T, or of const T for a
/// const optimizer).
template <typename Optimizer>
auto optimizer_state(Optimizer& o) {
  using state = decltype(std::get<0>(o).first_moment());
  std::vector<std::pair<const char*, state>> out;
  if (auto* a = std::get_if<0>(&o))
    out = {{"adam.m", a->first_moment()}, {"adam.v", a->second_moment()}};
  else if (!std::get<1>(o).momentum_buffer().empty())
    out = {{"sgd.momentum", std::get<1>(o).momentum_buffer()}};
  return out;
}
/// A tensor's dataset: its whole-model shape, q, k and v apart for the attention's qkv
/// ({3, C, C} and {3, C}), so that a tensor-parallel slice of any tensor is one box.
std::vector<std::size_t> dataset_shape(const param_entry& whole) {
  std::vector<std::size_t> shape(whole.shape.begin(), whole.shape.end());
  if (whole.name.ends_with("attn.qkv.w") || whole.name.ends_with("attn.qkv.b")) {
    shape[0] /= 3;
    shape.insert(shape.begin(), 3);
  }
  return shape;
}
/// The box of the dataset (shape `g`) that a part's tensor split `split` over tp holds.
crown::detail::ckpt_piece tensor_box(const std::vector<std::size_t>& g, tp_split split, int r,
                                     int tp) {
  crown::detail::ckpt_piece p;
  p.lo.assign(g.size(), 0);
  p.count = g;
  const std::size_t d = split == tp_split::rows       ? 0
                        : split == tp_split::qkv_rows ? 1
                        : split == tp_split::columns  ? g.size() - 1
                                                      : g.size();
  if (d < g.size()) { // this rank's share of dimension d
    p.count[d] = g[d] / std::size_t(tp);
    p.lo[d] = std::size_t(r) * p.count[d];
  }
  p.extents = p.count; // the part's tensor is exactly its box, row-major
  p.at.assign(g.size(), 0);
  return p;
}
const char* type_name(float) { return "float"; }
const char* type_name(double) { return "double"; }
} // namespace

template <typename T>
template <typename Self, typename F>
void trainer<T>::each_tensor(Self& self, F&& f) {
  using array = decltype(self.model_.params());
  std::vector<std::pair<std::string, array>> arrays;
  arrays.emplace_back("params", self.fsdp_ ? self.fsdp_->shard_params() : self.model_.params());
  for (auto [name, state] : optimizer_state(self.optimizer_)) arrays.emplace_back(name, state);
  const param_layout whole = param_layout::of(self.o_.model);
  const param_layout& mine = self.model_.layout();
  const model_part& part = mine.part;
  // One copy writes each element: data-parallel rank 0, and of a tensor that is whole on
  // every tensor-parallel rank, tp rank 0. Every holder reads.
  const bool dp_first = self.dp_mesh_.rank() == 0;
  for (const auto& [name, data] : arrays)
    for (const param_unit& wu : whole.units) {
      const auto held = std::find_if(mine.units.begin(), mine.units.end(),
                                     [&](const param_unit& u) { return u.name == wu.name; });
      const std::size_t u = std::size_t(held - mine.units.begin());
      for (std::size_t i = wu.first_entry; i < wu.end_entry; ++i) {
        const std::vector<std::size_t> shape = dataset_shape(whole.entries[i]);
        crown::detail::ckpt_piece piece;
        const param_entry* e = nullptr;
        if (held != mine.units.end()) {
          e = &mine.at(whole.entries[i].name);
          piece = tensor_box(shape, e->split, part.tp_rank, part.tp);
          piece.counted = dp_first && (e->split != tp_split::none || part.tp_rank == 0);
        } else { // a tensor of another stage: an empty piece, the call being collective
          piece = {std::vector<std::size_t>(shape.size(), 0),
                   std::vector<std::size_t>(shape.size(), 0),
                   shape,
                   std::vector<std::size_t>(shape.size(), 0),
                   nullptr,
                   false};
        }
        f(crown::detail::ckpt_dataset{name + "." + whole.entries[i].name,
                                      crown::detail::ckpt_kind::sharded,
                                      crown::detail::ckpt_type_of<T>(), shape, "", ""},
          piece, e, held != mine.units.end() ? u : none_held, data);
      }
    }
}

template <typename T>
std::span<const T> trainer<T>::unit_values(std::span<const T> data, std::size_t u,
                                           std::vector<T>& whole) const {
  const param_unit& unit = model_.layout().units[u];
  if (!fsdp_) return data.subspan(unit.offset, unit.count);
  const unit_shard& sh = fsdp_->shards()[u];
  whole.resize(sh.padded);
  all_gather(fsdp_->groups().shard, data.subspan(sh.offset, sh.shard), std::span<T>(whole));
  return std::span<const T>(whole).first(unit.count);
}

template <typename T>
void trainer<T>::save(checkpoint_writer& w) const {
  std::vector<T> whole; // FSDP: one unit gathered from the shards at a time
  std::size_t gathered = none_held;
  std::span<const T> values;
  const T* gathered_from = nullptr;
  each_tensor(*this, [&](const crown::detail::ckpt_dataset& d, crown::detail::ckpt_piece piece,
                         const param_entry* e, std::size_t u, std::span<const T> data) {
    if (e && (u != gathered || data.data() != gathered_from)) { // a new unit or array
      values = unit_values(data, u, whole);
      gathered = u;
      gathered_from = data.data();
    }
    if (!piece.counted) std::fill(piece.count.begin(), piece.count.end(), 0);
    if (e)
      piece.data = const_cast<T*>(values.data() + (e->offset - model_.layout().units[u].offset));
    w.write_piece(d, piece);
  });
  w.put("step", std::int64_t{step_});
  w.put("samples", std::int64_t(samples_));
  w.put("seed", std::int64_t(o_.seed));
  w.put("plan", o_.plan.to_string());
  w.put("model", o_.model.to_string());
  w.put("optimizer", o_.optimizer);
  w.put("dtype", type_name(T{}));
}

template <typename T>
void trainer<T>::load(checkpoint_reader& r) {
  auto must_match = [&](const char* what, const std::string& saved, const std::string& here) {
    if (saved != here)
      throw argument_error("trainer::load", std::string("the checkpoint's ") + what + " is " +
                                                saved + ", this run's " + here);
  };
  must_match("model", r.get_string("model"), o_.model.to_string());
  must_match("optimizer", r.get_string("optimizer"), o_.optimizer);
  must_match("element type", r.get_string("dtype"), type_name(T{}));
  must_match("seed", std::to_string(r.get_int("seed")), std::to_string(std::int64_t(o_.seed)));
  std::vector<T> whole; // FSDP: one unit read whole, then this rank's shard kept
  auto keep_shard = [&](std::span<T> data, std::size_t u) {
    const unit_shard& sh = fsdp_->shards()[u];
    whole.resize(sh.padded); // the padding stays zero
    std::copy_n(whole.begin() +
                    std::ptrdiff_t(std::size_t(fsdp_->groups().shard.rank()) * sh.shard),
                sh.shard, data.begin() + std::ptrdiff_t(sh.offset));
  };
  std::size_t reading = none_held;
  std::span<T> reading_into;
  each_tensor(*this, [&](const crown::detail::ckpt_dataset& d, crown::detail::ckpt_piece piece,
                         const param_entry* e, std::size_t u, std::span<T> data) {
    if (fsdp_ && reading != none_held && (u != reading || data.data() != reading_into.data())) {
      keep_shard(reading_into, reading);
      reading = none_held;
    }
    if (e) {
      const param_unit& unit = model_.layout().units[u];
      if (fsdp_) {
        if (reading == none_held) whole.assign(fsdp_->shards()[u].padded, T(0));
        reading = u;
        reading_into = data;
        piece.data = whole.data() + (e->offset - unit.offset);
      } else {
        piece.data = data.data() + e->offset;
      }
    }
    r.read_piece(d, piece);
  });
  if (fsdp_ && reading != none_held) keep_shard(reading_into, reading);
  step_ = long(r.get_int("step"));
  samples_ = std::uint64_t(r.get_int("samples"));
  std::visit([&](auto& opt) { opt.set_steps(step_); }, optimizer_);
}

template class trainer<float>;
template class trainer<double>;

} // namespace crown::parallel
