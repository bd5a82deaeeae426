// The planner's inputs: JSON readers (RapidJSON) that check every field, and the analytic
// GPT model (include/crown/plan/inputs.hpp).
#include <algorithm>
#include <cmath>
#include <crown/error.hpp>
#include <crown/plan/inputs.hpp>
#include <cstdint>
#include <fstream>
#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <set>
#include <sstream>

namespace crown::plan {

namespace {

using value = rapidjson::Value;
constexpr double gib = 1024.0 * 1024 * 1024;
/// The search is O(pp L^2) per bound over O(L^2) bounds: beyond this, group layers into blocks.
constexpr int max_layers = 512;

std::string show(const value& v) {
  rapidjson::StringBuffer out;
  rapidjson::Writer<rapidjson::StringBuffer> w(out);
  v.Accept(w);
  return out.GetString();
}

/// Reads the fields of one file, naming the file, the field and the value in every error.
class reader {
public:
  explicit reader(std::string_view what) : what_(what) {}

  [[noreturn]] void fail(const std::string& field, const std::string& rule) const {
    throw argument_error(what_, field.empty() ? rule : "field '" + field + "': " + rule);
  }
  [[noreturn]] void fail(const std::string& field, const std::string& rule, const value& v) const {
    fail(field, rule + ", not " + show(v));
  }

  /// Parses the text: an object at the top.
  void parse(rapidjson::Document& d, std::string_view json) const {
    d.Parse<rapidjson::kParseFullPrecisionFlag>(json.data(), json.size());
    if (d.HasParseError()) {
      const std::size_t at = d.GetErrorOffset();
      const std::string_view before = json.substr(0, std::min(at, json.size()));
      const auto line = 1 + std::count(before.begin(), before.end(), '\n');
      const auto nl = before.rfind('\n');
      const auto column = at - (nl == std::string_view::npos ? 0 : nl + 1) + 1;
      fail("", "not valid JSON at line " + std::to_string(line) + ", column " +
                   std::to_string(column) + ": " + rapidjson::GetParseError_En(d.GetParseError()));
    }
    if (!d.IsObject()) fail("", "the top level must be a JSON object, not " + show(d));
  }

  /// `v` must be an object whose keys are all in `allowed`, each once.
  void keys(const value& v, const std::string& path,
            std::initializer_list<std::string_view> allowed) const {
    if (!v.IsObject()) fail(path, "must be an object", v);
    std::set<std::string> seen;
    for (const auto& member : v.GetObject()) {
      const std::string key(member.name.GetString(), member.name.GetStringLength());
      const std::string field = join(path, key);
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
        std::string known;
        for (std::string_view a : allowed) known += (known.empty() ? "" : ", ") + std::string(a);
        fail(field, "unknown key (known here: " + known + ")");
      }
      if (!seen.insert(key).second) fail(field, "appears twice");
    }
  }

  static std::string join(const std::string& path, std::string_view key) {
    return path.empty() ? std::string(key) : path + "." + std::string(key);
  }

  const value* find(const value& obj, std::string_view key) const {
    const auto it = obj.FindMember(value(rapidjson::StringRef(key.data(), key.size())));
    return it == obj.MemberEnd() ? nullptr : &it->value;
  }
  const value& need(const value& obj, const std::string& path, std::string_view key) const {
    const value* v = find(obj, key);
    if (!v) fail(join(path, key), "is required");
    return *v;
  }

  /// A finite number; `positive` demands > 0, otherwise >= 0; absent gives `fallback`
  /// unless required.
  double number(const value& obj, const std::string& path, std::string_view key, bool required,
                bool positive, double fallback = 0) const {
    const value* v = required ? &need(obj, path, key) : find(obj, key);
    if (!v) return fallback;
    const std::string field = join(path, key);
    if (!v->IsNumber()) fail(field, "must be a number", *v);
    const double x = v->GetDouble();
    if (!std::isfinite(x)) fail(field, "must be finite", *v);
    if (positive && !(x > 0)) fail(field, "must be a number > 0", *v);
    if (!positive && x < 0) fail(field, "must be a number >= 0", *v);
    return x;
  }
  /// A positive integer.
  int count(const value& obj, const std::string& path, std::string_view key, bool required,
            int fallback = 0) const {
    const value* v = required ? &need(obj, path, key) : find(obj, key);
    if (!v) return fallback;
    if (!v->IsInt() || v->GetInt() < 1) fail(join(path, key), "must be a positive integer", *v);
    return v->GetInt();
  }
  std::string text(const value& obj, const std::string& path, std::string_view key) const {
    const value& v = need(obj, path, key);
    if (!v.IsString()) fail(join(path, key), "must be a string", v);
    return {v.GetString(), v.GetStringLength()};
  }
  bool flag(const value& obj, const std::string& path, std::string_view key) const {
    const value& v = need(obj, path, key);
    if (!v.IsBool()) fail(join(path, key), "must be true or false", v);
    return v.GetBool();
  }
  std::string precision(const value& obj, const std::string& path, std::string_view key) const {
    std::string name = text(obj, path, key);
    (void)precision_bytes(name, what_ + ": field '" + join(path, key) + "'");
    return name;
  }

private:
  std::string what_;
};

layer read_layer(const reader& r, const value& v, const std::string& path) {
  r.keys(v, path,
         {"name", "repeat", "parameters", "activation_bytes", "replicated_activation_bytes",
          "input_bytes", "forward_flops", "backward_flops", "forward_seconds", "backward_seconds",
          "tp_allreduce_bytes", "optimizer_seconds", "forward_fixed_seconds",
          "backward_fixed_seconds"});
  layer l;
  if (const value* n = r.find(v, "name")) {
    if (!n->IsString()) r.fail(path + ".name", "must be a string", *n);
    l.name = n->GetString();
  }
  l.parameters = r.number(v, path, "parameters", true, false);
  l.activation_bytes = r.number(v, path, "activation_bytes", true, false);
  l.replicated_activation_bytes = r.number(v, path, "replicated_activation_bytes", false, false);
  l.input_bytes = r.number(v, path, "input_bytes", true, false);
  l.tp_allreduce_bytes = r.number(v, path, "tp_allreduce_bytes", false, false);
  l.optimizer_seconds = r.number(v, path, "optimizer_seconds", false, false);
  const bool flops = r.find(v, "forward_flops") || r.find(v, "backward_flops");
  const bool seconds = r.find(v, "forward_seconds") || r.find(v, "backward_seconds");
  if (!flops && !seconds)
    r.fail(path, "needs forward_flops and backward_flops, or forward_seconds and "
                 "backward_seconds");
  if (flops) {
    l.forward_flops = r.number(v, path, "forward_flops", true, false);
    l.backward_flops = r.number(v, path, "backward_flops", true, false);
  }
  if (seconds) {
    l.forward_seconds = r.number(v, path, "forward_seconds", true, true);
    l.backward_seconds = r.number(v, path, "backward_seconds", true, true);
    l.forward_fixed_seconds = r.number(v, path, "forward_fixed_seconds", false, false);
    l.backward_fixed_seconds = r.number(v, path, "backward_fixed_seconds", false, false);
  } else if (r.find(v, "forward_fixed_seconds") || r.find(v, "backward_fixed_seconds")) {
    r.fail(path, "forward_fixed_seconds and backward_fixed_seconds go with forward_seconds and "
                 "backward_seconds");
  }
  return l;
}

} // namespace

int precision_bytes(std::string_view name, std::string_view where) {
  if (name == "fp64" || name == "float64") return 8;
  if (name == "fp32" || name == "float32") return 4;
  if (name == "bf16" || name == "fp16" || name == "float16") return 2;
  if (name == "fp8") return 1;
  throw argument_error(std::string(where), "unknown precision '" + std::string(name) +
                                               "' (known: fp64, fp32, bf16, fp16, fp8)");
}

model gpt_model(const gpt_shape& g, double e) {
  const double h = g.hidden, s = g.sequence, a = g.heads, v = g.vocabulary;
  model m;
  m.heads = g.heads;
  m.hidden = g.hidden;
  m.vocabulary = g.vocabulary;
  m.tokens_per_sample = s;
  for (int i = 0; i < g.layers; ++i) {
    layer l;
    l.name = "block" + std::to_string(i);
    l.parameters = 12 * h * h + 13 * h;
    l.forward_flops = 24 * s * h * h + 4 * s * s * h;
    l.backward_flops = 2 * l.forward_flops;
    l.tp_allreduce_bytes = 2 * s * h * e;                      // after attention and after the MLP
    l.activation_bytes = (24 * s * h + 5 * a * s * s) * e / 2; // Korthikanti et al., 16-bit
    l.replicated_activation_bytes = 10 * s * h * e / 2;
    l.input_bytes = s * h * e;
    if (i == 0) { // word and position embeddings (vocabulary-parallel: one all-reduce)
      l.name += "+embeddings";
      l.parameters += v * h + s * h;
      l.tp_allreduce_bytes += s * h * e;
      l.replicated_activation_bytes += s * h * e;
    }
    if (i == g.layers - 1) { // final norm and logits (the last stage's copy of the tied words)
      l.name += "+logits";
      l.parameters += 2 * h + v * h;
      l.forward_flops += 2 * s * h * v;
      l.backward_flops += 4 * s * h * v;
      l.activation_bytes += 4 * s * v; // fp32 logits for the loss
    }
    m.layers.push_back(std::move(l));
  }
  return m;
}

namespace {

/// A JSON writer; RapidJSON writes each double as the shortest text that reads back equal.
class json_out {
public:
  void number(const char* key, double v) {
    w_.Key(key);
    w_.Double(v);
  }
  void integer(const char* key, int v) {
    w_.Key(key);
    w_.Int(v);
  }
  void text(const char* key, const std::string& v) {
    w_.Key(key);
    w_.String(v.c_str(), static_cast<rapidjson::SizeType>(v.size()));
  }
  rapidjson::Writer<rapidjson::StringBuffer>& writer() noexcept { return w_; }
  std::string str() const { return std::string(out_.GetString()) + "\n"; }

private:
  rapidjson::StringBuffer out_;
  rapidjson::Writer<rapidjson::StringBuffer> w_{out_};
};

} // namespace

std::string to_json(const model& m) {
  json_out o;
  auto& w = o.writer();
  w.StartObject();
  for (auto [key, v] :
       {std::pair{"heads", m.heads}, {"hidden", m.hidden}, {"vocabulary", m.vocabulary}})
    if (v > 0) o.integer(key, v);
  if (m.tokens_per_sample > 0) o.number("tokens_per_sample", m.tokens_per_sample);
  if (m.workspace_bytes > 0) o.number("workspace_bytes", m.workspace_bytes);
  if (!m.optimizer.empty()) o.text("optimizer", m.optimizer);
  w.Key("layers");
  w.StartArray();
  for (const layer& l : m.layers) {
    w.StartObject();
    o.text("name", l.name);
    o.number("parameters", l.parameters);
    o.number("activation_bytes", l.activation_bytes);
    o.number("replicated_activation_bytes", l.replicated_activation_bytes);
    o.number("input_bytes", l.input_bytes);
    o.number("tp_allreduce_bytes", l.tp_allreduce_bytes);
    o.number("forward_flops", l.forward_flops);
    o.number("backward_flops", l.backward_flops);
    if (l.forward_seconds > 0 || l.backward_seconds > 0) {
      o.number("forward_seconds", l.forward_seconds);
      o.number("backward_seconds", l.backward_seconds);
      o.number("forward_fixed_seconds", l.forward_fixed_seconds);
      o.number("backward_fixed_seconds", l.backward_fixed_seconds);
    }
    if (l.optimizer_seconds > 0) o.number("optimizer_seconds", l.optimizer_seconds);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return o.str();
}

std::string to_json(const cluster& c) {
  json_out o;
  auto& w = o.writer();
  w.StartObject();
  o.integer("hosts", c.hosts);
  o.integer("devices_per_host", c.devices_per_host);
  o.number("memory_gib", c.memory_bytes / gib);
  o.text("precision", c.precision);
  o.number("peak_tflops", c.peak_flops / 1e12);
  o.number("achievable_fraction", c.achievable_fraction);
  for (auto [key, l] : {std::pair{"intra_host", &c.intra_host},
                        {"inter_host", &c.inter_host},
                        {"beside_compute", &c.beside_compute}}) {
    if (l == &c.beside_compute && l->bandwidth <= 0) continue; // none: hidden
    w.Key(key);
    w.StartObject();
    o.number("bandwidth_gbs", l->bandwidth / 1e9);
    o.number("latency_us", l->latency * 1e6);
    w.EndObject();
  }
  w.EndObject();
  return o.str();
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw argument_error("file '" + path + "'", "cannot be opened");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

model parse_model(std::string_view json, std::string_view what) {
  const reader r(what);
  rapidjson::Document d;
  r.parse(d, json);
  if (r.find(d, "gpt")) {
    r.keys(d, "", {"gpt"});
    const value& v = d["gpt"];
    r.keys(v, "gpt",
           {"layers", "hidden", "heads", "sequence", "vocabulary", "activation_precision"});
    gpt_shape g;
    g.layers = r.count(v, "gpt", "layers", true);
    if (g.layers > max_layers)
      r.fail("gpt.layers", "at most " + std::to_string(max_layers) + " layers are planned",
             v["layers"]);
    g.hidden = r.count(v, "gpt", "hidden", true);
    g.heads = r.count(v, "gpt", "heads", true);
    g.sequence = r.count(v, "gpt", "sequence", true);
    g.vocabulary = r.count(v, "gpt", "vocabulary", true);
    if (g.hidden % g.heads != 0)
      r.fail("gpt.heads", "must divide gpt.hidden (" + std::to_string(g.hidden) + ")", v["heads"]);
    const int e = precision_bytes(r.precision(v, "gpt", "activation_precision"), what);
    return gpt_model(g, e);
  }
  r.keys(d, "",
         {"layers", "heads", "hidden", "vocabulary", "tokens_per_sample", "workspace_bytes",
          "optimizer"});
  model m;
  m.heads = r.count(d, "", "heads", false, 0);
  m.hidden = r.count(d, "", "hidden", false, 0);
  m.vocabulary = r.count(d, "", "vocabulary", false, 0);
  m.tokens_per_sample = r.number(d, "", "tokens_per_sample", false, true, 0);
  m.workspace_bytes = r.number(d, "", "workspace_bytes", false, false, 0);
  if (r.find(d, "optimizer")) {
    m.optimizer = r.text(d, "", "optimizer");
    if (m.optimizer != "adam" && m.optimizer != "sgd")
      r.fail("optimizer", "must be \"adam\" or \"sgd\"", d["optimizer"]);
  }
  const value& layers = r.need(d, "", "layers");
  if (!layers.IsArray() || layers.Empty())
    r.fail("layers", "must be a non-empty array of layers (or give \"gpt\" instead)", layers);
  for (rapidjson::SizeType i = 0; i < layers.Size(); ++i) {
    const std::string path = "layers[" + std::to_string(i) + "]";
    const layer l = read_layer(r, layers[i], path);
    const int repeat = r.count(layers[i], path, "repeat", false, 1);
    if (repeat > max_layers - static_cast<int>(m.layers.size()))
      r.fail(path + ".repeat",
             "makes more than " + std::to_string(max_layers) +
                 " layers, the most planned (group layers into blocks)",
             layers[i]["repeat"]);
    for (int k = 0; k < repeat; ++k) {
      m.layers.push_back(l);
      if (repeat > 1) // appended piecewise: GCC 12 warns (-Wrestrict) on "[" + string
        m.layers.back().name.append("[").append(std::to_string(k)).append("]");
    }
  }
  return m;
}

cluster parse_cluster(std::string_view json, std::string_view what) {
  const reader r(what);
  rapidjson::Document d;
  r.parse(d, json);
  r.keys(d, "",
         {"hosts", "devices_per_host", "memory_gib", "precision", "peak_tflops",
          "achievable_fraction", "intra_host", "inter_host", "beside_compute"});
  cluster c;
  c.hosts = r.count(d, "", "hosts", true);
  c.devices_per_host = r.count(d, "", "devices_per_host", true);
  c.memory_bytes = r.number(d, "", "memory_gib", true, true) * gib;
  c.precision = r.precision(d, "", "precision");
  c.peak_flops = r.number(d, "", "peak_tflops", true, true) * 1e12;
  c.achievable_fraction = r.number(d, "", "achievable_fraction", true, true);
  if (c.achievable_fraction > 1)
    r.fail("achievable_fraction", "must be in (0, 1]", d["achievable_fraction"]);
  for (auto [key, l] : {std::pair{"intra_host", &c.intra_host}, {"inter_host", &c.inter_host}}) {
    const value& v = r.need(d, "", key);
    r.keys(v, key, {"bandwidth_gbs", "latency_us"});
    l->bandwidth = r.number(v, key, "bandwidth_gbs", true, true) * 1e9;
    l->latency = r.number(v, key, "latency_us", true, false) * 1e-6;
  }
  if (const value* v = r.find(d, "beside_compute")) { // optional
    r.keys(*v, "beside_compute", {"bandwidth_gbs", "latency_us"});
    c.beside_compute.bandwidth = r.number(*v, "beside_compute", "bandwidth_gbs", true, true) * 1e9;
    c.beside_compute.latency = r.number(*v, "beside_compute", "latency_us", true, false) * 1e-6;
  }
  if (std::int64_t{c.hosts} * c.devices_per_host > 1 << 20) // before devices() can overflow
    r.fail("hosts", "hosts x devices_per_host exceeds 2^20", d["hosts"]);
  return c;
}

training parse_training(std::string_view json, std::string_view what) {
  const reader r(what);
  rapidjson::Document d;
  r.parse(d, json);
  r.keys(d, "", {"global_batch", "precision", "optimizer", "recompute", "memory_budget_gib"});
  training t;
  t.global_batch = r.count(d, "", "global_batch", true);
  const value& p = r.need(d, "", "precision");
  r.keys(p, "precision", {"parameters", "gradients", "optimizer"});
  t.parameter_precision = r.precision(p, "precision", "parameters");
  t.parameter_bytes = precision_bytes(t.parameter_precision, what);
  t.gradient_bytes = precision_bytes(r.precision(p, "precision", "gradients"), what);
  t.optimizer_bytes = precision_bytes(r.precision(p, "precision", "optimizer"), what);
  const std::string opt = r.text(d, "", "optimizer");
  if (opt == "adam")
    t.opt = optimizer::adam;
  else if (opt == "sgd")
    t.opt = optimizer::sgd;
  else
    r.fail("optimizer", "must be \"adam\" or \"sgd\"", d["optimizer"]);
  t.recompute = r.flag(d, "", "recompute");
  t.memory_budget_bytes = r.number(d, "", "memory_budget_gib", true, true) * gib;
  return t;
}

void check_consistent(const cluster& c, std::string_view cluster_what, const training& t,
                      std::string_view training_what) {
  if (c.precision != t.parameter_precision)
    throw argument_error(std::string(training_what),
                         "field 'precision.parameters': \"" + t.parameter_precision +
                             "\" differs from the precision of the peak FLOP/s in " +
                             std::string(cluster_what) + " (\"" + c.precision + "\")");
  if (t.memory_budget_bytes > c.memory_bytes) {
    char text[160];
    std::snprintf(text, sizeof text, "field 'memory_budget_gib': %g exceeds memory_gib %g of ",
                  t.memory_budget_bytes / gib, c.memory_bytes / gib);
    throw argument_error(std::string(training_what), text + std::string(cluster_what));
  }
}

} // namespace crown::plan
