// CROWN_TRACE: per-thread event buffers, the clock offset against rank 0, and the
// Chrome/Perfetto trace-event file each rank writes when its runtime shuts down.
#include "tags.hpp"
#include "trace_control.hpp"
#include <cerrno>
#include <climits>
#include <crown/error.hpp>
#include <crown/log.hpp>
#include <crown/trace.hpp>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <memory>
#include <mutex>
#include <pthread.h>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace crown::detail {

bool g_trace_on = false;

struct trace_event {
  const char* category = nullptr;
  const char* name = nullptr;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0; ///< 0 while the span is open
  trace_arg args[3];
  const char* text_key = nullptr;
  std::string text;
};

/// One thread's events. Owned by the registry, not the thread: a thread that ended
/// before the runtime shut down still has its events written.
struct trace_buffer {
  /// Events in chunks that never move: a growing vector's copies and its fresh pages'
  /// faults made a traced 8 B put cost 0.36-0.58 us (in chunks: 0.13-0.36, of which
  /// about 50 ns are the two clock reads).
  static constexpr std::size_t chunk = 1024;
  int tid = 0;
  std::string thread_name;
  std::vector<std::unique_ptr<trace_event[]>> chunks;
  std::size_t count = 0;

  trace_event& at(std::size_t i) noexcept { return chunks[i / chunk][i % chunk]; }
  trace_event& append() {
    if (count == chunks.size() * chunk) chunks.push_back(std::make_unique<trace_event[]>(chunk));
    return at(count++);
  }
  void clear() noexcept { count = 0; } // the chunks stay for reuse
};

namespace {

std::mutex g_mutex; // the registry and the session; never taken per event
std::vector<std::unique_ptr<trace_buffer>> g_buffers;
thread_local trace_buffer* t_buffer = nullptr;

struct session {
  std::FILE* file = nullptr;
  std::string path;
  std::string host;
  int rank = 0;
  int size = 1;
  clock_offset offset;
};
session g_session;

std::int64_t now_ns() noexcept {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t); // system-wide: one clock for every rank of a host
  return static_cast<std::int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
}

trace_buffer& this_thread_buffer() {
  if (t_buffer) return *t_buffer;
  auto b = std::make_unique<trace_buffer>();
  char name[32] = {};
  pthread_getname_np(pthread_self(), name, sizeof name);
  b->thread_name = gettid() == getpid() ? std::string("main") : std::string(name);
  const std::lock_guard lock(g_mutex);
  b->tid = static_cast<int>(g_buffers.size());
  t_buffer = b.get();
  g_buffers.push_back(std::move(b));
  return *t_buffer;
}

/// Microseconds with nanosecond digits, as trace viewers read "ts" and "dur".
void put_us(std::FILE* f, std::int64_t ns) {
  if (ns < 0) {
    std::fputc('-', f);
    ns = -ns;
  }
  std::fprintf(f, "%lld.%03lld", static_cast<long long>(ns / 1000),
               static_cast<long long>(ns % 1000));
}

void put_string(std::FILE* f, std::string_view s) {
  std::fputc('"', f);
  for (const char c : s) {
    if (c == '"' || c == '\\')
      std::fprintf(f, "\\%c", c);
    else if (static_cast<unsigned char>(c) < 0x20)
      std::fprintf(f, "\\u%04x", static_cast<unsigned>(c));
    else
      std::fputc(c, f);
  }
  std::fputc('"', f);
}

/// The offset of this rank's CLOCK_MONOTONIC against rank 0's, from ping-pongs with rank
/// 0: of `rounds` exchanges the one with the shortest round trip counts. Rank 0's clock
/// read t0 lies between this rank's send (t1) and receive (t2), so
/// offset = t0 - (t1 + rtt / 2) is wrong by at most rtt / 2.
void estimate_offset(MPI_Comm world, session& s) {
  constexpr int rounds = 16;
  constexpr int tag = tags::clock_sync.first;
  if (s.size < 2) return;
  if (s.rank == 0) {
    for (int r = 1; r < s.size; ++r)
      for (int i = 0; i < rounds; ++i) {
        char ping = 0;
        check_mpi(MPI_Recv(&ping, 1, MPI_CHAR, r, tag, world, MPI_STATUS_IGNORE),
                  "MPI_Recv(CROWN_TRACE clock offset)");
        const std::int64_t t0 = now_ns();
        check_mpi(MPI_Send(&t0, 1, MPI_INT64_T, r, tag, world), "MPI_Send(CROWN_TRACE clock)");
      }
    return;
  }
  std::int64_t best_rtt = LLONG_MAX, best_offset = 0;
  for (int i = 0; i < rounds; ++i) {
    char ping = 0;
    std::int64_t t0 = 0;
    const std::int64_t t1 = now_ns();
    check_mpi(MPI_Send(&ping, 1, MPI_CHAR, 0, tag, world), "MPI_Send(CROWN_TRACE clock offset)");
    check_mpi(MPI_Recv(&t0, 1, MPI_INT64_T, 0, tag, world, MPI_STATUS_IGNORE),
              "MPI_Recv(CROWN_TRACE clock offset)");
    const std::int64_t rtt = now_ns() - t1;
    if (rtt < best_rtt) {
      best_rtt = rtt;
      best_offset = t0 - (t1 + rtt / 2);
    }
  }
  s.offset = {static_cast<double>(best_offset) / 1e3, static_cast<double>(best_rtt) / 2e3};
}

void write_event(std::FILE* f, int pid, int tid, const trace_event& e, std::int64_t now) {
  std::fprintf(f, ",\n{\"ph\":\"X\",\"cat\":\"%s\",\"name\":\"%s\",\"pid\":%d,\"tid\":%d,\"ts\":",
               e.category, e.name, pid, tid);
  put_us(f, e.start_ns);
  std::fputs(",\"dur\":", f);
  put_us(f, (e.end_ns ? e.end_ns : now) - e.start_ns);
  std::fputs(",\"args\":{", f);
  const char* sep = "";
  for (const trace_arg& a : e.args)
    if (a.key) {
      std::fprintf(f, "%s\"%s\":%lld", sep, a.key, static_cast<long long>(a.value));
      sep = ",";
    }
  if (e.text_key) {
    std::fprintf(f, "%s\"%s\":", sep, e.text_key);
    put_string(f, e.text);
  }
  if (!e.end_ns) std::fprintf(f, "%s\"unfinished\":true", *sep || e.text_key ? "," : "");
  std::fputs("}}", f);
}

bool write_file(const session& s) {
  std::FILE* f = s.file;
  const std::int64_t now = now_ns();
  std::fprintf(f,
               "{\"displayTimeUnit\":\"ns\",\n\"otherData\":{\"crown_rank\":%d,\"crown_ranks\":%d,"
               "\"host\":",
               s.rank, s.size);
  put_string(f, s.host);
  std::fprintf(f,
               ",\"clock\":\"CLOCK_MONOTONIC\",\"clock_offset_us\":%.3f,\"clock_error_us\":%.3f,"
               "\"clock_method\":\"min-RTT ping-pong with rank 0 at start-up, offset = t0 - "
               "(t_send + rtt/2), error <= rtt/2\"},\n\"traceEvents\":[\n",
               s.offset.offset_us, s.offset.error_us);
  std::fprintf(
      f,
      "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":", s.rank);
  put_string(f, "rank " + std::to_string(s.rank) + " (" + s.host + ")");
  std::fprintf(f,
               "}},\n{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%d,\"tid\":0,"
               "\"args\":{\"sort_index\":%d}}",
               s.rank, s.rank);
  for (const auto& b : g_buffers) {
    std::fprintf(f,
                 ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,\"args\":{"
                 "\"name\":",
                 s.rank, b->tid);
    put_string(f, b->thread_name);
    std::fputs("}}", f);
    for (std::size_t i = 0; i < b->count; ++i) write_event(f, s.rank, b->tid, b->at(i), now);
  }
  std::fputs("\n]}\n", f);
  return std::fflush(f) == 0 && !std::ferror(f);
}

} // namespace

void trace_span::begin(const char* category, const char* name, trace_arg a, trace_arg b,
                       trace_arg c) noexcept {
  try {
    trace_buffer& buf = this_thread_buffer();
    trace_event& e = buf.append();
    e.category = category;
    e.name = name;
    e.args[0] = a;
    e.args[1] = b;
    e.args[2] = c;
    e.text_key = nullptr;
    e.end_ns = 0;
    e.start_ns = now_ns();
    buffer_ = &buf;
    index_ = buf.count - 1;
  } catch (...) { // out of memory: the span goes unrecorded
  }
}

void trace_span::end() noexcept { buffer_->at(index_).end_ns = now_ns(); }

void trace_span::text(const char* key, std::string_view value) noexcept {
  if (!buffer_) return;
  try {
    trace_event& e = buffer_->at(index_);
    e.text.assign(value);
    e.text_key = key;
  } catch (...) {}
}

void set_trace_enabled(bool on) noexcept { g_trace_on = on && CROWN_TRACE_COMPILED; }

clock_offset trace_clock_offset() noexcept { return g_session.offset; }

void trace_open(int rank, int size, const std::string& dir, const std::string& host) {
  if (dir.empty()) return;
  if (!CROWN_TRACE_COMPILED)
    throw config_error("CROWN_TRACE=" + dir,
                       "this libcrown was built with CROWN_TRACE_COMPILED=OFF (no trace hooks)");
  session s;
  s.rank = rank;
  s.size = size;
  s.host = host;
  s.path = dir + "/crown-trace." + std::to_string(rank) + ".json";
  if (::mkdir(dir.c_str(), 0777) != 0 && errno != EEXIST)
    throw config_error("CROWN_TRACE=" + dir, "cannot create the directory for the trace file " +
                                                 s.path + ": " + std::strerror(errno));
  s.file = std::fopen(s.path.c_str(), "w");
  if (!s.file)
    throw config_error("CROWN_TRACE=" + dir,
                       "cannot write the trace file " + s.path + ": " + std::strerror(errno));
  const std::lock_guard lock(g_mutex);
  for (auto& b : g_buffers) b->clear(); // an earlier runtime's, or a benchmark's
  g_session = std::move(s);
}

void trace_begin(MPI_Comm world) {
  if (!g_session.file) return;
  estimate_offset(world, g_session); // trace_finish closes the file after a failure
  g_trace_on = true;
  log(log_level::debug, "CROWN_TRACE: writing ", g_session.path, " at shutdown; clock offset ",
      g_session.offset.offset_us, " us against rank 0 (error <= ", g_session.offset.error_us,
      " us)");
}

namespace {
void finish_locked() noexcept {
  session& s = g_session;
  if (!s.file) return;
  const bool ok = write_file(s);
  const int closed = std::fclose(s.file);
  if (!ok || closed != 0)
    log(log_level::error, "CROWN_TRACE: writing ", s.path, " failed: ", std::strerror(errno));
  s = session{};
  for (auto& b : g_buffers) b->clear();
}
} // namespace

void trace_finish() noexcept {
  g_trace_on = false;
  const std::lock_guard lock(g_mutex);
  finish_locked();
}

void trace_finish_before_abort() noexcept {
  g_trace_on = false;
  std::unique_lock lock(g_mutex, std::try_to_lock); // never wait on the way out
  if (lock.owns_lock()) finish_locked();
}

} // namespace crown::detail
