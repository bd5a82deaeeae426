// crown-trace-merge: joins the per-rank trace files CROWN_TRACE wrote
// (crown-trace.<rank>.json) into one Chrome/Perfetto trace on rank 0's clock, each
// rank's times moved by the offset it estimated at start-up, and prints the offsets and
// their error bounds. Usage: crown-trace-merge [-o OUT] [--partial] DIR | FILE...
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <rapidjson/filereadstream.h>
#include <rapidjson/filewritestream.h>
#include <rapidjson/writer.h>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
namespace rj = rapidjson;

struct rank_file {
  std::string path;
  rj::Document doc;
  int rank = -1;
  int ranks = 0;
  double offset_us = 0;
  double error_us = 0;
  std::string host;
};

[[noreturn]] void fail(const std::string& message) { throw std::runtime_error(message); }

const rj::Value& member(const rj::Value& v, const char* name, const std::string& where) {
  if (!v.IsObject() || !v.HasMember(name)) fail(where + ": no \"" + name + "\"");
  return v[name];
}

double number(const rj::Value& v, const char* name, const std::string& where) {
  const rj::Value& m = member(v, name, where);
  if (!m.IsNumber()) fail(where + ": \"" + name + "\" is not a number");
  return m.GetDouble();
}

rank_file read(const std::string& path) {
  rank_file f;
  f.path = path;
  std::FILE* in = std::fopen(path.c_str(), "rb");
  if (!in) fail(path + ": cannot open: " + std::strerror(errno));
  char buffer[1 << 16];
  rj::FileReadStream stream(in, buffer, sizeof buffer);
  f.doc.ParseStream(stream);
  std::fclose(in);
  if (f.doc.HasParseError())
    fail(path + ": not JSON at byte " + std::to_string(f.doc.GetErrorOffset()) + ": " +
         rj::GetParseError_En(f.doc.GetParseError()) +
         " (a rank that died before its runtime ended leaves its file unfinished)");
  const rj::Value& meta = member(f.doc, "otherData", path);
  f.rank = static_cast<int>(number(meta, "crown_rank", path + " otherData"));
  f.ranks = static_cast<int>(number(meta, "crown_ranks", path + " otherData"));
  f.offset_us = number(meta, "clock_offset_us", path + " otherData");
  f.error_us = number(meta, "clock_error_us", path + " otherData");
  if (meta.HasMember("host") && meta["host"].IsString()) f.host = meta["host"].GetString();
  if (!member(f.doc, "traceEvents", path).IsArray()) fail(path + ": traceEvents is not an array");
  return f;
}

/// The files named, or every crown-trace.<rank>.json of a directory.
std::vector<std::string> inputs(const std::vector<std::string>& args) {
  std::vector<std::string> files;
  for (const auto& a : args) {
    if (!fs::is_directory(a)) {
      files.push_back(a);
      continue;
    }
    for (const auto& e : fs::directory_iterator(a)) {
      const std::string name = e.path().filename().string();
      if (name.starts_with("crown-trace.") && name.ends_with(".json") &&
          name.find_first_not_of("0123456789", 12) == name.size() - 5)
        files.push_back(e.path().string());
    }
  }
  return files;
}

void merge(const std::vector<std::string>& paths, const std::string& out_path, bool partial) {
  if (paths.empty()) fail("no crown-trace.<rank>.json files found");
  std::map<int, rank_file> by_rank;
  for (const auto& p : paths) {
    rank_file f = read(p);
    const int r = f.rank;
    if (by_rank.count(r))
      fail(p + " and " + by_rank[r].path + " both hold rank " + std::to_string(r));
    by_rank.emplace(r, std::move(f));
  }
  const int ranks = by_rank.begin()->second.ranks;
  for (const auto& [r, f] : by_rank)
    if (f.ranks != ranks || r < 0 || r >= ranks)
      fail(f.path + " holds rank " + std::to_string(r) + " of " + std::to_string(f.ranks) + ", " +
           by_rank.begin()->second.path + " a rank of " + std::to_string(ranks) +
           ": files of different jobs");
  std::string missing;
  for (int r = 0; r < ranks; ++r)
    if (!by_rank.count(r)) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
  if (!missing.empty() && partial)
    std::printf("crown-trace-merge: no file holds rank %s (--partial: merging the others)\n",
                missing.c_str());
  else if (!missing.empty())
    fail("the job had " + std::to_string(ranks) + " ranks but no file holds rank " + missing);

  // Times on rank 0's clock, starting at the job's first event.
  double origin = 1e300;
  for (auto& [r, f] : by_rank)
    for (const auto& e : f.doc["traceEvents"].GetArray())
      if (e.HasMember("ts") && e["ts"].IsNumber())
        origin = std::min(origin, e["ts"].GetDouble() + f.offset_us);
  if (origin == 1e300) origin = 0;

  rj::Document out(rj::kObjectType);
  auto& a = out.GetAllocator();
  rj::Value events(rj::kArrayType), table(rj::kArrayType);
  double bound = 0;
  std::size_t count = 0;
  for (auto& [r, f] : by_rank) {
    for (auto& e : f.doc["traceEvents"].GetArray()) {
      if (e.HasMember("ts") && e["ts"].IsNumber())
        e["ts"].SetDouble(e["ts"].GetDouble() + f.offset_us - origin);
      if (e.HasMember("ph") && e["ph"] == "X") ++count;
      events.PushBack(rj::Value(e, a), a);
    }
    rj::Value row(rj::kObjectType);
    row.AddMember("rank", r, a);
    row.AddMember("host", rj::Value(f.host.c_str(), a), a);
    row.AddMember("clock_offset_us", f.offset_us, a);
    row.AddMember("clock_error_us", f.error_us, a);
    table.PushBack(row, a);
    bound = std::max(bound, f.error_us);
  }
  rj::Value meta(rj::kObjectType);
  meta.AddMember("crown_ranks", ranks, a);
  meta.AddMember("clock_error_bound_us", bound, a);
  meta.AddMember("ts_origin_us", origin, a);
  meta.AddMember("ranks", table, a);
  out.AddMember("displayTimeUnit", "ns", a);
  out.AddMember("otherData", meta, a);
  out.AddMember("traceEvents", events, a);

  std::FILE* o = std::fopen(out_path.c_str(), "wb");
  if (!o) fail(out_path + ": cannot write: " + std::strerror(errno));
  char buffer[1 << 16];
  rj::FileWriteStream stream(o, buffer, sizeof buffer);
  rj::Writer<rj::FileWriteStream> writer(stream);
  out.Accept(writer);
  stream.Flush();
  if (std::fclose(o) != 0) fail(out_path + ": write failed: " + std::strerror(errno));

  std::printf("crown-trace-merge: %d ranks, %zu events -> %s\n", ranks, count, out_path.c_str());
  for (const auto& [r, f] : by_rank)
    std::printf("  rank %d (%s): clock offset %+.3f us against rank 0, error <= %.3f us\n", r,
                f.host.c_str(), f.offset_us, f.error_us);
  std::printf("clock error bound: %.3f us (half the shortest round trip to rank 0)\n", bound);
}

} // namespace

int main(int argc, char** argv) {
  std::string out;
  bool partial = false;
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-o" && i + 1 < argc)
      out = argv[++i];
    else if (a == "--partial")
      partial = true;
    else if (a == "-h" || a == "--help" || a.starts_with("-")) {
      std::fprintf(a.starts_with("-h") || a == "--help" ? stdout : stderr,
                   "usage: crown-trace-merge [-o OUT] [--partial] DIR | FILE...\n"
                   "  joins CROWN_TRACE's crown-trace.<rank>.json files on rank 0's clock\n"
                   "  (default OUT: DIR/crown-trace.json; --partial: merge a job whose ranks\n"
                   "  did not all write a file, e.g. after MPI_Abort)\n");
      return a.starts_with("-h") || a == "--help" ? 0 : 2;
    } else
      args.push_back(a);
  }
  if (args.empty()) {
    std::fprintf(stderr, "usage: crown-trace-merge [-o OUT] [--partial] DIR | FILE...\n");
    return 2;
  }
  if (out.empty()) {
    if (args.size() != 1 || !fs::is_directory(args[0])) {
      std::fprintf(stderr, "crown-trace-merge: name the output with -o when merging files\n");
      return 2;
    }
    out = (fs::path(args[0]) / "crown-trace.json").string();
  }
  try {
    merge(inputs(args), out, partial);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "crown-trace-merge: %s\n", e.what());
    return 1;
  }
  return 0;
}
