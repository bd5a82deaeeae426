// Reductions among ranks of one host: flag barriers and buffers in the symmetric heap.
#include "host_collectives.hpp"
#include "image_share.hpp"
#include "stream_copy.hpp"
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <crown/detail/copy.hpp>
#include <crown/detail/fault.hpp>
#include <crown/detail/heap.hpp>
#include <crown/detail/types.hpp>
#include <crown/detail/wait.hpp>
#include <crown/log.hpp>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <unistd.h>
#include <vector>

namespace crown::detail {

/// Copies `bytes` at `remote` in process `pid` to `local`: one copy by the kernel
/// (cross-memory attach), no staging through the heap.
bool read_process(pid_t pid, std::uint64_t remote, void* local, std::size_t bytes) {
  iovec here{local, bytes};
  iovec there{reinterpret_cast<void*>(remote), bytes};
  return process_vm_readv(pid, &here, 1, &there, 1, 0) == static_cast<ssize_t>(bytes);
}

std::optional<copy_times> time_kernel_copy(pid_t pid, std::uint64_t remote, const void* mapped,
                                           void* local, std::size_t bytes) {
  using clock = std::chrono::steady_clock;
  copy_times best{clock::duration::max(), clock::duration::max()};
  for (int rep = 0; rep < 4; ++rep) {
    const auto t0 = clock::now();
    if (!read_process(pid, remote, local, bytes)) return std::nullopt;
    const auto t1 = clock::now();
    copy_bytes(local, mapped, bytes);
    const auto t2 = clock::now();
    if (rep > 0) { // the first warms both
      best.kernel = std::min(best.kernel, t1 - t0);
      best.copy = std::min(best.copy, t2 - t1);
    }
  }
  return best;
}

namespace {

constexpr std::size_t line_bytes = 64;
/// Three cache lines: the flag (generation, offset), then two "tiny" lines (parity 0
/// and 1), each a generation and up to 56 bytes of data: one cache miss per image
/// carries both the arrival and the value.
constexpr std::size_t flag_bytes = 3 * line_bytes;
constexpr std::size_t tiny_bytes = line_bytes - 8;
/// Per image and parity. Large enough that the two flag barriers per chunk cost little
/// next to the copies (32 KiB slots made ordinary-memory sums 2x slower at 2 MiB).
constexpr std::size_t slot_bytes = 256 << 10;
constexpr std::size_t single_copy_bytes = 64 << 10; ///< above: kernel copies between processes
constexpr std::size_t small_bytes = 2048;           ///< below: every image reduces it all
/// From this size the chunks' slots are written with streaming stores (stream_bytes)
/// where they pay (streaming_pays). At 2 images on a 2-core Zen 5 VM whose vCPUs sat far
/// apart (2026-12-06, alternate runs of five batches): 64 KiB 8.6-10 us against 10-14
/// with ordinary stores, 256 KiB 20-24 against 33-46, 2 MiB 165-237 against 310-440, 16
/// MiB 1.7-2.1 ms against 3.0-3.3; at 32 KiB they lose (5.5 us against 2.4: the reader's
/// lines then come from memory instead of a cache).
constexpr std::size_t stream_from_bytes = 64 << 10;
constexpr std::size_t block_bytes = flag_bytes + 4 * slot_bytes; ///< flag, 2 in, 2 out

/// Flags and buffers of one mesh: a collective heap block, per image
/// [flag line][tiny line 0][tiny line 1][in slot, parity 0][in slot, parity 1]
/// [out slot, parity 0][out slot, parity 1].
struct scratch {
  std::vector<std::byte*> image; ///< every member's block, in mesh order
  std::vector<int> ranks;        ///< every member's world rank, in mesh order
  std::uint64_t generation = 0;  ///< flag barriers passed
  std::uint64_t signature = 0;   ///< of the reduction under way (flag words carry it)
  std::uint64_t rounds = 0;      ///< slot uses; its parity picks the slots
  std::uint64_t tiny_rounds = 0; ///< tiny-line uses; its parity picks the line
  std::vector<pid_t> pids;       ///< every member's process, for single-copy reads
  /// Probed at the first reduction that would use kernel copies, never before: a mesh
  /// that only reduces scalars asks for no ptrace rights.
  single_copy_state single_copy = single_copy_state::unprobed;
  /// Whether the slots are written with streaming stores: probed at the first reduction
  /// that would (streaming_pays).
  std::optional<bool> streams;
};

std::atomic<bool> g_single_copy_allowed{true}; ///< the tests' switch
std::atomic<bool> g_single_copy_timed{true};   ///< the tests' switch: false takes it untimed
std::atomic<int> g_streaming{-1};              ///< the tests' switch: -1 probed, 0 no, 1 yes
std::atomic<bool> g_single_copy_setting{true}; ///< CROWN_SINGLE_COPY
std::atomic<bool> g_ptracer_granted{false};    ///< this process set PR_SET_PTRACER_ANY
std::mutex g_mutex;
std::map<std::vector<int>, scratch> g_scratch;
std::pair<const std::vector<int>, scratch>* g_last = nullptr;

std::atomic_ref<std::uint64_t> flag_of(std::byte* block) {
  return std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(block));
}
std::byte* in_slot(std::byte* block, std::uint64_t round) {
  return block + flag_bytes + (round % 2) * slot_bytes;
}
std::byte* out_slot(std::byte* block, std::uint64_t round) {
  return block + flag_bytes + (2 + round % 2) * slot_bytes;
}

/// Flag line fields after the generation: what a barrier announces.
struct announcement {
  std::int64_t offset;   ///< heap offset of the data, or -1
  std::uint64_t address; ///< the data's address in the announcing process
};

/// Where the announcement of the barrier with generation `g` lives: two slots in the
/// flag line, by the generation's parity. The slot of generation g is written again at
/// generation g + 2 at the earliest, and no image enters that barrier before every
/// image has arrived at g + 1, i.e. has finished reading what g announced.
std::byte* announcement_slot(std::byte* block, std::uint64_t g) {
  return block + 8 + (g % 2) * sizeof(announcement);
}

// Every flag word (the flag line's and each tiny line's) holds a generation in its low
// bits and, above them, the signature of the reduction that wrote it: its size in
// bytes (exact below 512 KiB, hashed above). Images that passed different counts meet
// a signature of another size, or find the other image's generation in a word of
// another path (tiny, small or large), and both throw, instead of waiting for ever.
// A check that costs nothing on the way through: the word is read anyway.
constexpr int generation_bits = 44; ///< 1.7e13 barriers per mesh
constexpr std::uint64_t generation_mask = (std::uint64_t{1} << generation_bits) - 1;
constexpr std::uint64_t exact_signatures = std::uint64_t{1} << 19;

std::uint64_t signature_of(std::size_t bytes) {
  if (bytes < exact_signatures) return bytes;
  std::uint64_t h = bytes * 0x9e3779b97f4a7c15ull;
  return exact_signatures | ((h >> 40) & (exact_signatures - 1));
}
std::uint64_t flag_word(std::uint64_t generation, std::uint64_t signature) {
  return signature << generation_bits | (generation & generation_mask);
}

/// Image `i` reduces with other arguments than this image: every image that finds out
/// throws (the scratch is then forgotten: its words no longer line up).
[[noreturn]] void mismatch(const scratch& s, std::size_t i, std::uint64_t theirs) {
  auto size = [](std::uint64_t signature) {
    return signature < exact_signatures ? std::to_string(signature) + " bytes"
                                        : std::string("512 KiB or more");
  };
  throw argument_error("co_* among the ranks of one host",
                       "the images passed different counts: " + size(s.signature) + " here but " +
                           size(theirs) + " on image " + std::to_string(i) + " (rank " +
                           std::to_string(s.ranks[i]) + ")");
}

/// Waits until image `i`'s word at `offset` of its block reaches this image's
/// generation, checking that it got there with the same signature and by the same path.
void wait_for_image(const scratch& s, std::size_t i, std::size_t offset) {
  std::byte* block = s.image[i];
  const auto arrived = [&] {
    const std::uint64_t v = flag_of(block + offset).load(std::memory_order_acquire);
    const std::uint64_t generation = v & generation_mask;
    if (generation == s.generation && v >> generation_bits != s.signature)
      mismatch(s, i, v >> generation_bits);
    return generation >= s.generation;
  };
  wait_until(wait_site{"co_* among the ranks of one host", s.ranks[i]}, [&] {
    if (arrived()) return true;
    for (std::size_t other : {std::size_t{0}, line_bytes, 2 * line_bytes})
      if (other != offset) {
        const std::uint64_t w = flag_of(block + other).load(std::memory_order_acquire);
        // Image i may have written our word, seen ours, and already written the next
        // reduction's word between our two loads: it wrote ours first, so a second
        // look finds it. Only a word still behind means another path.
        if ((w & generation_mask) >= s.generation) {
          if (arrived()) return true;
          mismatch(s, i, w >> generation_bits);
        }
      }
    return false;
  });
}

/// Publishes `a` (when not null) and the next generation, then waits until every
/// member has reached it.
void flag_barrier(scratch& s, int me, const announcement* a = nullptr) {
  std::byte* mine = s.image[static_cast<std::size_t>(me)];
  streamed_stores_visible(); // what the slots received, before the flag says so
  if (a) std::memcpy(announcement_slot(mine, s.generation + 1), a, sizeof *a);
  flag_of(mine).store(flag_word(++s.generation, s.signature), std::memory_order_release);
  for (std::size_t i = 0; i < s.image.size(); ++i) wait_for_image(s, i, 0);
}

/// A tiny round: `bytes` (<= tiny_bytes) into this image's tiny line with the next
/// generation, then a wait for every image's line of the same parity to reach it.
/// Returns the data of every image, in mesh order. A line is rewritten two tiny rounds
/// later, after a barrier that no image passes before it has read this one.
/// It has no fence for streamed stores: no reduction leaves any unfenced before it.
void tiny_exchange(scratch& s, int me, const std::byte* data, std::size_t bytes,
                   std::vector<const std::byte*>& values) {
  const std::size_t line = line_bytes * (1 + s.tiny_rounds++ % 2);
  std::byte* mine = s.image[static_cast<std::size_t>(me)] + line;
  if (bytes) std::memcpy(mine + 8, data, bytes);
  flag_of(mine).store(flag_word(++s.generation, s.signature), std::memory_order_release);
  for (std::size_t i = 0; i < s.image.size(); ++i) {
    wait_for_image(s, i, line);
    values.push_back(s.image[i] + line + 8);
  }
}

/// What an image announced at the barrier just passed.
announcement announced(const scratch& s, std::byte* block) {
  announcement a;
  std::memcpy(&a, announcement_slot(block, s.generation), sizeof a);
  return a;
}

/// Yama's kernel.yama.ptrace_scope: 0 classic rules (same user suffices), 1 only
/// descendants unless the target names its reader (PR_SET_PTRACER), 2 only
/// CAP_SYS_PTRACE, 3 never; -1 without Yama (classic rules).
int yama_ptrace_scope() {
  std::FILE* f = std::fopen("/proc/sys/kernel/yama/ptrace_scope", "r");
  int scope = -1;
  if (f) {
    if (std::fscanf(f, "%d", &scope) != 1) scope = -1;
    std::fclose(f);
  }
  return scope;
}

/// True on every image alike when `yes` is true on every image. One flag barrier.
bool all_say_yes(scratch& s, int me, bool yes) {
  const announcement verdict{yes ? 1 : 0, 0};
  flag_barrier(s, me, &verdict);
  bool all = true;
  for (std::byte* b : s.image) all = all && announced(s, b).offset == 1;
  return all;
}

/// Every image reads 8 bytes of every other's scratch block; true on every image alike
/// when all reads succeeded (and `ready` on every image). Two flag barriers.
bool all_can_read(scratch& s, int me, const std::vector<std::uint64_t>& addresses, bool ready) {
  flag_barrier(s, me); // every image has set up what it was going to (ptracer)
  bool ok = ready;
  for (std::size_t j = 0; j < s.image.size(); ++j) {
    std::uint64_t probe = 0;
    if (static_cast<int>(j) != me && !read_process(s.pids[j], addresses[j], &probe, sizeof probe))
      ok = false;
  }
  return all_say_yes(s, me, ok);
}

/// Whether kernel copies pay here, with one answer on every image: each image times
/// reading 256 KiB of the next image's scratch block with process_vm_readv and with a
/// copy through the shared mapping (best of 3 after a warm-up), and the kernel copies
/// are taken only if on every image they took at most 1.25x the memcpy. They replace
/// the heap path's staging and copying out, which costs one more write per byte; where
/// the kernel copy is slower than that (pinning pages in a VM: 8x the memcpy on a
/// 2-core AMD VM, 2026-12-02) the heap path wins at every size. One flag barrier.
bool kernel_copies_pay(scratch& s, int me, const std::vector<std::uint64_t>& addresses) {
  const std::size_t n = s.image.size();
  bool pays = true;
  if (n > 1 && g_single_copy_timed.load()) {
    const std::size_t peer = (static_cast<std::size_t>(me) + 1) % n;
    std::vector<std::byte> here(slot_bytes);
    const auto t = time_kernel_copy(s.pids[peer], addresses[peer] + flag_bytes,
                                    s.image[peer] + flag_bytes, here.data(), slot_bytes);
    pays = t && t->kernel.count() * 4 <= t->copy.count() * 5;
    // Which of two paths every later large co_* takes, so say what decided it.
    if (t)
      log(log_level::debug, "co_* of ordinary memory: 256 KiB from image ", peer, " took ",
          std::chrono::duration<double, std::micro>(t->kernel).count(), " us by process_vm_readv, ",
          std::chrono::duration<double, std::micro>(t->copy).count(),
          " us by memcpy: kernel copies ", pays ? "pay here" : "do not pay here");
  }
  return all_say_yes(s, me, pays);
}

/// Finds out, collectively and with one answer on every image, whether the members may
/// read each other's memory with process_vm_readv, and whether that is faster here than
/// the heap path. The ptrace rules decide the first: as they stand; then, only where
/// Yama's scope 1 is what refuses, after each image lets any process of its user read
/// it (PR_SET_PTRACER_ANY, as Open MPI's vader and UCX's cma do; one pid would not do,
/// since one process reduces with several peers). The grant is taken back unless kernel
/// copies end up in use. Several flag barriers.
void probe_single_copy(scratch& s, int me) {
  const announcement mine{getpid(),
                          reinterpret_cast<std::uint64_t>(s.image[static_cast<std::size_t>(me)])};
  flag_barrier(s, me, &mine);
  std::vector<std::uint64_t> addresses;
  for (std::byte* b : s.image) {
    const announcement other = announced(s, b);
    s.pids.push_back(static_cast<pid_t>(other.offset));
    addresses.push_back(other.address);
  }
  s.single_copy = single_copy_state::unavailable;
  const bool had_grant = g_ptracer_granted.load();
  bool readable = all_can_read(s, me, addresses, true);
  if (!readable && yama_ptrace_scope() == 1) { // the same kernel: the same answer everywhere
    grant_process_access();
    readable = all_can_read(s, me, addresses, g_ptracer_granted.load());
  }
  if (readable)
    s.single_copy =
        kernel_copies_pay(s, me, addresses) ? single_copy_state::in_use : single_copy_state::slower;
  if (s.single_copy != single_copy_state::in_use && g_ptracer_granted.load() && !had_grant &&
      prctl(PR_SET_PTRACER, 0, 0, 0, 0) == 0)
    g_ptracer_granted = false;
}

/// copy_bytes of a size the compiler cannot see. Knowing a block's copy to be at most
/// a few KiB, GCC inlined it as `rep movsq`, which on this AMD VM took 61% of
/// combine()'s time; glibc's loop copies the same blocks at memcpy speed.
void copy_block(void* dst, const void* src, std::size_t bytes) noexcept {
  asm("" : "+r"(bytes));
  copy_bytes(dst, src, bytes);
}

/// acc[i] = a[i] op b[i] for i < len (acc may be a).
template <typename T>
void apply(T* acc, const T* a, const T* b, std::size_t len, reduction op) noexcept {
  if (op == reduction::sum)
    for (std::size_t i = 0; i < len; ++i) acc[i] = static_cast<T>(a[i] + b[i]);
  else if (op == reduction::min)
    for (std::size_t i = 0; i < len; ++i) acc[i] = std::min(a[i], b[i]);
  else
    for (std::size_t i = 0; i < len; ++i) acc[i] = std::max(a[i], b[i]);
}

/// Whether streaming stores into the slots beat ordinary ones here, with one answer on
/// every image. They win where a line that another core read is slow to take back (2 MiB
/// sums twice as fast on a Zen 5 VM whose two vCPUs were ~550 ns apart) and can lose where
/// the cores share a cache (the same VM in a run where they were ~110 ns apart: 2 MiB at
/// 0.63x MPI_Allreduce, streamed). Each image does to 128 KiB what combine() does to a
/// chunk: it reads, 2 KiB at a time, what its neighbour wrote in the pass before, and
/// writes each piece over what its other neighbour read in the pass before, between
/// flag barriers; two passes each way in turn, four times, the second of each pair timed
/// (it reads what was written the same way). Streaming is taken where on every image it
/// was the faster. Eighteen flag barriers, once per mesh.
bool streaming_pays(scratch& s, int me) {
  const std::size_t n = s.image.size();
  if (n < 2) return false; // an image reading its own slots gains nothing
  constexpr std::size_t bytes = 128 << 10, piece = 2048;
  const auto self = static_cast<std::size_t>(me);
  std::array<std::byte, piece> acc;
  std::chrono::steady_clock::duration best[2] = {std::chrono::hours(1), std::chrono::hours(1)};
  flag_barrier(s, me);
  for (int pass = 0; pass < 16; ++pass) {
    const bool stream = pass / 2 % 2 != 0;
    const std::byte* const theirs = in_slot(s.image[(self + 1) % n], pass + 1);
    std::byte* const mine = in_slot(s.image[self], pass);
    const auto start = std::chrono::steady_clock::now();
    for (std::size_t b = 0; b < bytes; b += piece) {
      copy_block(acc.data(), theirs + b, piece);
      (stream ? stream_bytes : copy_block)(mine + b, acc.data(), piece);
    }
    flag_barrier(s, me); // timed until every image is done, on every image alike
    if (pass % 2 != 0)
      best[stream] = std::min(best[stream], std::chrono::steady_clock::now() - start);
  }
  const bool pays = best[1] < best[0];
  log(log_level::debug, "co_* of ordinary memory: 128 KiB read from image ", (me + 1) % n,
      "'s slot and written to this image's in ",
      std::chrono::duration<double, std::micro>(best[0]).count(), " us with ordinary stores, ",
      std::chrono::duration<double, std::micro>(best[1]).count(),
      " us with streaming stores: they ", pays ? "pay here" : "do not pay here");
  return all_say_yes(s, me, pays);
}

/// outputs[k][i] = inputs[0][i] op inputs[1][i] op ... for i in [begin, end), image
/// order. An output may be an input: every input of a block is read before it is written.
/// The first `streamed` outputs (slots that other images read next) are written with
/// stream_bytes.
template <typename T>
void combine(const std::vector<const std::byte*>& inputs, const std::vector<std::byte*>& outputs,
             std::size_t begin, std::size_t end, reduction op, std::size_t streamed) {
  constexpr std::size_t block = 2048 / sizeof(T); // a stack accumulator: no allocation
  T acc[block];
  const auto in = [&](std::size_t j, std::size_t b) {
    return reinterpret_cast<const T*>(inputs[j]) + b;
  };
  for (std::size_t b = begin; b < end; b += block) {
    const std::size_t len = std::min(block, end - b);
    if (inputs.size() == 1)
      copy_block(acc, in(0, b), len * sizeof(T));
    else
      apply(acc, in(0, b), in(1, b), len, op);
    for (std::size_t j = 2; j < inputs.size(); ++j) apply(acc, acc, in(j, b), len, op);
    for (std::size_t k = 0; k < outputs.size(); ++k)
      (k < streamed ? stream_bytes : copy_block)(outputs[k] + b * sizeof(T), acc, len * sizeof(T));
  }
}

using combine_fn = void (*)(const std::vector<const std::byte*>&, const std::vector<std::byte*>&,
                            std::size_t, std::size_t, reduction, std::size_t);

/// Pointer lists reused from call to call: a small reduction allocates nothing.
struct pointer_lists {
  std::vector<const std::byte*> inputs;
  std::vector<std::byte*> outputs;
  pointer_lists& clear() {
    inputs.clear();
    outputs.clear();
    return *this;
  }
};
pointer_lists& lists() {
  thread_local pointer_lists l;
  return l.clear();
}

combine_fn combiner(MPI_Datatype type) {
  if (type == MPI_DOUBLE) return &combine<double>;
  if (type == MPI_FLOAT) return &combine<float>;
  if (type == MPI_INT32_T) return &combine<std::int32_t>;
  if (type == MPI_INT64_T) return &combine<std::int64_t>;
  if (type == MPI_UINT32_T) return &combine<std::uint32_t>;
  if (type == MPI_UINT64_T) return &combine<std::uint64_t>;
  return nullptr;
}

/// The mesh's scratch, allocated (collectively) on first use; nullptr when the heap
/// has no room, which every member learns alike from the allocation's agreement.
scratch* scratch_for(const mesh& m) {
  std::vector<int> ranks;
  {
    const std::lock_guard lock(g_mutex);
    // The last mesh used, checked without building a key: the common case of a loop.
    if (g_last && std::equal(m.begin(), m.end(), g_last->first.begin(), g_last->first.end()))
      return &g_last->second;
    ranks.assign(m.begin(), m.end());
    if (auto it = g_scratch.find(ranks); it != g_scratch.end()) {
      g_last = &*it;
      return &it->second;
    }
  }
  heap_block b;
  try {
    b = heap_allocate(m, block_bytes, type_tag<std::byte, 1>(), "co_* scratch");
  } catch (const error&) {
    return nullptr; // full heap: MPI's collectives instead
  }
  scratch s;
  for (int r : ranks) s.image.push_back(heap_peer_address(r, b.offset));
  s.ranks = ranks;
  const std::lock_guard lock(g_mutex);
  g_last = &*g_scratch.emplace(std::move(ranks), std::move(s)).first;
  return &g_last->second;
}

} // namespace

void set_host_single_copy(bool allowed) noexcept { g_single_copy_allowed = allowed; }
void set_host_single_copy_timed(bool timed) noexcept { g_single_copy_timed = timed; }
void set_host_streaming(std::optional<bool> forced) noexcept {
  g_streaming = forced ? int{*forced} : -1;
}

void configure_host_collectives(const config& c) noexcept { g_single_copy_setting = c.single_copy; }

single_copy_state host_single_copy_state(const mesh& m) {
  const std::lock_guard lock(g_mutex);
  const auto it = g_scratch.find(std::vector<int>(m.begin(), m.end()));
  return it == g_scratch.end() ? single_copy_state::unprobed : it->second.single_copy;
}

host_scratch_usage host_scratch_in_use() noexcept {
  const std::lock_guard lock(g_mutex);
  return {g_scratch.size() * block_bytes, g_scratch.size()};
}

bool host_ptracer_granted() noexcept { return g_ptracer_granted.load(); }

bool single_copy_enabled() noexcept {
  return g_single_copy_allowed.load(std::memory_order_relaxed) &&
         g_single_copy_setting.load(std::memory_order_relaxed);
}

void grant_process_access() noexcept {
  if (g_ptracer_granted.load() || yama_ptrace_scope() != 1) return;
  if (prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0) == 0) g_ptracer_granted = true;
}

void forget_host_scratch() noexcept {
  const std::lock_guard lock(g_mutex);
  g_scratch.clear();
  g_last = nullptr;
  // Nothing reads this process any more: its ptrace rules go back to what they were.
  if (g_ptracer_granted && prctl(PR_SET_PTRACER, 0, 0, 0, 0) == 0) g_ptracer_granted = false;
}

namespace {

/// reduce_on_host() once the mesh's scratch is there and the signature set.
bool reduce_in(scratch& sc, const mesh& m, void* data, std::size_t count, combine_fn fn,
               std::size_t elem_size, reduction op, int result_image) {
  scratch* s = &sc;
  const int me = m.rank();
  const auto n = static_cast<std::size_t>(m.size());
  const bool receives = result_image < 0 || result_image == me;
  auto* bytes = static_cast<std::byte*>(data);
  const std::size_t total = count * elem_size;

  if (total <= tiny_bytes) { // the values travel with the arrival flags
    pointer_lists& l = lists();
    tiny_exchange(*s, me, bytes, total, l.inputs);
    if (receives) {
      l.outputs.push_back(bytes);
      fn(l.inputs, l.outputs, 0, count, op, 0);
    }
    return true;
  }
  if (total <= small_bytes) { // one barrier; everyone combines everything
    const std::uint64_t round = s->rounds++;
    copy_bytes(in_slot(s->image[static_cast<std::size_t>(me)], round), bytes, total);
    flag_barrier(*s, me);
    if (receives) {
      pointer_lists& l = lists();
      for (std::byte* b : s->image) l.inputs.push_back(in_slot(b, round));
      l.outputs.push_back(bytes);
      fn(l.inputs, l.outputs, 0, count, op, 0);
    }
    return true;
  }

  // Heap data at one offset everywhere: combine in place, each image its share.
  const std::int64_t offset = heap_offset_of(data, total);
  const announcement mine{offset, reinterpret_cast<std::uint64_t>(data)};
  flag_barrier(*s, me, &mine);
  bool in_place = offset >= 0;
  for (std::byte* b : s->image) in_place = in_place && announced(*s, b).offset == offset;
  if (in_place) {
    pointer_lists& l = lists();
    int image = 0;
    for (int r : m) {
      std::byte* copy = heap_peer_address(r, static_cast<std::uint64_t>(offset));
      l.inputs.push_back(copy);
      if (result_image < 0 || image++ == result_image) l.outputs.push_back(copy);
    }
    const auto [begin, end] = image_share(count, n, static_cast<std::size_t>(me));
    fn(l.inputs, l.outputs, begin, end, op, 0);
    flag_barrier(*s, me); // nobody reads a result before every share is written
    return true;
  }

  // Ordinary memory to every image, where the kernel copies between processes faster
  // than the heap path (probed: kernel_copies_pay): each image reads the others'
  // elements of its share straight from their buffers, combines them into its own
  // buffer, and after a barrier reads the other shares of the result from theirs. A
  // last barrier keeps every buffer in place until all have read it. On the 2026-11-30
  // VM: about MPI_Allreduce's speed from 256 KiB up, the heap path (then staging whole
  // chunks) 0.5-0.65 of it; below 64 KiB the heap path wins everywhere.
  // Every image takes the same decision: the settings and arguments agree, and so does
  // the probe. `where` is read before the probe's barriers reuse the announcement slots.
  std::vector<announcement> where;
  if (single_copy_enabled() && result_image < 0 && total > single_copy_bytes) {
    for (std::byte* b : s->image) where.push_back(announced(*s, b));
    if (s->single_copy == single_copy_state::unprobed) probe_single_copy(*s, me);
  }
  if (s->single_copy == single_copy_state::in_use && !where.empty()) {
    // A failed read is agreed at the last barrier (every image throws), never left to
    // one image while the others wait for it.
    std::int64_t unreadable = -1;
    const auto read = [&](std::size_t j, std::size_t from, void* to, std::size_t elements) {
      if (unreadable < 0 &&
          !read_process(s->pids[j], where[j].address + from * elem_size, to, elements * elem_size))
        unreadable = static_cast<std::int64_t>(j);
    };
    const auto [begin, end] = image_share(count, n, static_cast<std::size_t>(me));
    // Staged in all four of my slots: fewer, larger kernel copies measured faster.
    const std::size_t piece = 4 * slot_bytes / elem_size / n;
    for (std::size_t at = begin; at < end; at += piece) {
      const std::size_t len = std::min(piece, end - at);
      pointer_lists& l = lists();
      for (std::size_t j = 0; j < n; ++j) {
        if (static_cast<int>(j) == me) {
          l.inputs.push_back(bytes);
          continue;
        }
        // Indexed like the user's buffer, so that combine() sees elements [at, at+len).
        std::byte* staged = in_slot(s->image[static_cast<std::size_t>(me)], 0) +
                            j * piece * elem_size - at * elem_size;
        read(j, at, staged + at * elem_size, len);
        l.inputs.push_back(staged);
      }
      l.outputs.push_back(bytes);
      fn(l.inputs, l.outputs, at, at + len, op, 0);
    }
    flag_barrier(*s, me);
    for (std::size_t j = 0; j < n; ++j) {
      const auto [b, e] = image_share(count, n, j);
      if (static_cast<int>(j) != me && b < e) read(j, b, bytes + b * elem_size, e - b);
    }
    const announcement status{unreadable, 0};
    flag_barrier(*s, me, &status);
    for (std::size_t i = 0; i < n; ++i)
      if (const std::int64_t j = announced(*s, s->image[i]).offset; j >= 0)
        throw error(std::string("co_* on ") + m.to_string(),
                    "image " + std::to_string(i) + " could not read image " + std::to_string(j) +
                        "'s buffer (process_vm_readv); the result is incomplete");
    return true;
  }

  // Anything else: chunks through the slots. Each image stages the elements of the
  // chunk that the others reduce (its own share it reads from its buffer), combines its
  // share into its out slot (and, receiving, straight into its buffer: those elements
  // were read by nobody else), and the receivers copy the other shares out. Staging the
  // whole chunk and copying every share out moved 11 bytes per byte reduced at 2
  // images, this 8: 2 MiB sums went from 0.98x to 1.3x MPI_Allreduce on a 2-core AMD VM.
  // From stream_from_bytes the slots, which another image reads next, are written with
  // streaming stores where streaming_pays finds them faster (or the tests' switch says
  // so; it may differ between images: the probe runs on all, fences on all); the user's
  // buffer keeps ordinary ones.
  const std::size_t per_chunk = slot_bytes / elem_size;
  const auto self = static_cast<std::size_t>(me);
  if (total >= stream_from_bytes && !s->streams) s->streams = streaming_pays(*s, me);
  const int forced = g_streaming.load();
  const bool stream_slots = total >= stream_from_bytes && (forced >= 0 ? forced != 0 : *s->streams);
  const auto stage_copy = stream_slots ? stream_bytes : copy_bytes;
  for (std::size_t at = 0; at < count; at += per_chunk) {
    const std::size_t len = std::min(per_chunk, count - at);
    const std::uint64_t round = s->rounds++;
    std::byte* const chunk = bytes + at * elem_size;
    std::byte* const staged = in_slot(s->image[self], round);
    const auto [begin, end] = image_share(len, n, self);
    stage_copy(staged, chunk, begin * elem_size);
    stage_copy(staged + end * elem_size, chunk + end * elem_size, (len - end) * elem_size);
    flag_barrier(*s, me);
    pointer_lists& l = lists();
    for (std::size_t j = 0; j < n; ++j)
      l.inputs.push_back(j == self ? chunk : in_slot(s->image[j], round));
    l.outputs.push_back(out_slot(s->image[self], round));
    if (receives) l.outputs.push_back(chunk); // in place: combine() reads before it writes
    fn(l.inputs, l.outputs, begin, end, op, stream_slots ? 1 : 0); // the out slot
    flag_barrier(*s, me);
    if (!receives) continue;
    for (std::size_t j = 0; j < n; ++j) {
      const auto [b, e] = image_share(len, n, j);
      if (j != self)
        copy_bytes(chunk + b * elem_size, out_slot(s->image[j], round) + b * elem_size,
                   (e - b) * elem_size);
    }
  }
  return true;
}

/// Drops a mesh's scratch whose flag words no longer line up (its heap block is lost).
void forget_scratch_of(const mesh& m) {
  const std::lock_guard lock(g_mutex);
  g_scratch.erase(std::vector<int>(m.begin(), m.end()));
  g_last = nullptr;
}

} // namespace

bool reduce_on_host(const mesh& m, void* data, std::size_t count, MPI_Datatype type,
                    std::size_t elem_size, reduction op, int result_image) {
  fault_point_reached(fault_point::co_sum); // every co_sum/min/max comes here first
  const combine_fn fn = combiner(type);
  if (!fn) return false;
  for (int r : m)
    if (!heap_peer_address(r, 0)) return false; // the same answer on every member
  scratch* s = scratch_for(m);
  if (!s) return false;
  // Zero elements too go through a barrier: a count that differs is found either way.
  s->signature = signature_of(count * elem_size);
  try {
    return reduce_in(*s, m, data, count, fn, elem_size, op, result_image);
  } catch (const argument_error&) { // counts differed: the flag words no longer line up
    forget_scratch_of(m);
    throw;
  }
}

} // namespace crown::detail
