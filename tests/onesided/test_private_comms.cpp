// Crown's own traffic never reaches a communicator the user holds (mesh.comm()): no
// message a user's MPI_ANY_SOURCE/MPI_ANY_TAG receive could take, and no collective
// that would have to be ordered with the user's own collectives on it.
#include <atomic>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <crown/crown.hpp>
#include <harness/crown_test.hpp>
#include <numeric>
#include <string>
#include <thread>

using namespace crown_test; // w(), me(), n(), left(), right()

// Every MPI call Crown makes goes through these wrappers (the executable's definitions
// take precedence over libmpi's for libcrown too); while a user communicator is
// watched, each call on it is counted.
namespace {
std::atomic<MPI_Comm> g_watched{MPI_COMM_NULL};
std::atomic<int> g_calls{0};
std::atomic<const char*> g_last{"none"};

void note(MPI_Comm c, const char* name) {
  if (c != MPI_COMM_NULL && c == g_watched.load()) {
    ++g_calls;
    g_last = name;
  }
}

/// Counts the MPI calls made on `user` while f() runs.
template <typename F>
int calls_on(MPI_Comm user, F&& f) {
  g_calls = 0;
  g_last = "none";
  g_watched = user;
  f();
  g_watched = MPI_COMM_NULL;
  return g_calls.load();
}
} // namespace

extern "C" {
int MPI_Iallreduce(const void* s, void* r, int c, MPI_Datatype t, MPI_Op o, MPI_Comm comm,
                   MPI_Request* q) {
  note(comm, "MPI_Iallreduce");
  return PMPI_Iallreduce(s, r, c, t, o, comm, q);
}
int MPI_Allreduce(const void* s, void* r, int c, MPI_Datatype t, MPI_Op o, MPI_Comm comm) {
  note(comm, "MPI_Allreduce");
  return PMPI_Allreduce(s, r, c, t, o, comm);
}
int MPI_Ireduce(const void* s, void* r, int c, MPI_Datatype t, MPI_Op o, int root, MPI_Comm comm,
                MPI_Request* q) {
  note(comm, "MPI_Ireduce");
  return PMPI_Ireduce(s, r, c, t, o, root, comm, q);
}
int MPI_Ibcast(void* b, int c, MPI_Datatype t, int root, MPI_Comm comm, MPI_Request* q) {
  note(comm, "MPI_Ibcast");
  return PMPI_Ibcast(b, c, t, root, comm, q);
}
int MPI_Bcast(void* b, int c, MPI_Datatype t, int root, MPI_Comm comm) {
  note(comm, "MPI_Bcast");
  return PMPI_Bcast(b, c, t, root, comm);
}
int MPI_Iallgather(const void* s, int sc, MPI_Datatype st, void* r, int rc, MPI_Datatype rt,
                   MPI_Comm comm, MPI_Request* q) {
  note(comm, "MPI_Iallgather");
  return PMPI_Iallgather(s, sc, st, r, rc, rt, comm, q);
}
int MPI_Igather(const void* s, int sc, MPI_Datatype st, void* r, int rc, MPI_Datatype rt, int root,
                MPI_Comm comm, MPI_Request* q) {
  note(comm, "MPI_Igather");
  return PMPI_Igather(s, sc, st, r, rc, rt, root, comm, q);
}
int MPI_Ialltoall(const void* s, int sc, MPI_Datatype st, void* r, int rc, MPI_Datatype rt,
                  MPI_Comm comm, MPI_Request* q) {
  note(comm, "MPI_Ialltoall");
  return PMPI_Ialltoall(s, sc, st, r, rc, rt, comm, q);
}
int MPI_Allgather(const void* s, int sc, MPI_Datatype st, void* r, int rc, MPI_Datatype rt,
                  MPI_Comm comm) {
  note(comm, "MPI_Allgather");
  return PMPI_Allgather(s, sc, st, r, rc, rt, comm);
}
int MPI_Alltoall(const void* s, int sc, MPI_Datatype st, void* r, int rc, MPI_Datatype rt,
                 MPI_Comm comm) {
  note(comm, "MPI_Alltoall");
  return PMPI_Alltoall(s, sc, st, r, rc, rt, comm);
}
int MPI_Ibarrier(MPI_Comm comm, MPI_Request* q) {
  note(comm, "MPI_Ibarrier");
  return PMPI_Ibarrier(comm, q);
}
int MPI_Barrier(MPI_Comm comm) {
  note(comm, "MPI_Barrier");
  return PMPI_Barrier(comm);
}
int MPI_Isend(const void* b, int c, MPI_Datatype t, int dest, int tag, MPI_Comm comm,
              MPI_Request* q) {
  note(comm, "MPI_Isend");
  return PMPI_Isend(b, c, t, dest, tag, comm, q);
}
int MPI_Irecv(void* b, int c, MPI_Datatype t, int src, int tag, MPI_Comm comm, MPI_Request* q) {
  note(comm, "MPI_Irecv");
  return PMPI_Irecv(b, c, t, src, tag, comm, q);
}
int MPI_Send(const void* b, int c, MPI_Datatype t, int dest, int tag, MPI_Comm comm) {
  note(comm, "MPI_Send");
  return PMPI_Send(b, c, t, dest, tag, comm);
}
int MPI_Recv(void* b, int c, MPI_Datatype t, int src, int tag, MPI_Comm comm, MPI_Status* s) {
  note(comm, "MPI_Recv");
  return PMPI_Recv(b, c, t, src, tag, comm, s);
}
}

namespace {

/// Probes `user` for any message from anyone for a while (about 0.3 s: long enough for
/// a message the other ranks sent before they started waiting for this one to arrive)
/// and returns what was found, without receiving it.
std::string probe_for_a_while(MPI_Comm user) {
  for (int i = 0; i < 300; ++i) {
    int flag = 0;
    MPI_Status status;
    MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, user, &flag, &status);
    if (flag)
      return "a message from rank " + std::to_string(status.MPI_SOURCE) + " with tag " +
             std::to_string(status.MPI_TAG);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return "nothing";
}

} // namespace

BOOST_AUTO_TEST_CASE(crown_operations_make_no_mpi_call_on_the_users_communicators) {
  for (const crown::mesh& m : {w(), reversed_world()}) {
    MPI_Comm user = m.comm(); // the user holds it from here on
    const int img = m.rank(), imgs = m.size();
    std::vector<double> v(10000);
    std::iota(v.begin(), v.end(), static_cast<double>(img));
    double x = img + 1.0;
    int calls = calls_on(user, [&] { crown::sync_all(m); });
    BOOST_TEST(calls == 0, m << ": sync_all made " << calls << " calls, the last " << g_last);
    std::vector<int> neighbours{(img + 1) % imgs};
    if (imgs > 2) neighbours.push_back((img + imgs - 1) % imgs);
    calls = calls_on(user, [&] { crown::sync_images(m, neighbours); });
    BOOST_TEST(calls == 0, m << ": sync_images made " << calls << " calls, the last " << g_last);
    calls = calls_on(user, [&] {
      crown::co_sum(m, x);
      crown::co_sum(m, std::span(v));
      crown::co_max(m, x, imgs - 1);
      crown::co_broadcast(m, x, 0);
      crown::co_reduce(m, x, [](double a, double b) { return a * b; });
    });
    BOOST_TEST(calls == 0, m << ": co_* made " << calls << " calls, the last " << g_last);
    calls = calls_on(user, [&] {
      crown::coarray<int> a(m, 100);
      a.on((img + 1) % imgs).put({0}, img);
      crown::sync_all(m);
      BOOST_TEST(a(0) == (img + imgs - 1) % imgs);
    });
    BOOST_TEST(calls == 0,
               m << ": a coarray's life made " << calls << " calls, the last " << g_last);
    std::vector<double> all(v.size() * static_cast<std::size_t>(imgs)), part(v.size());
    calls = calls_on(user, [&] {
      crown::all_gather(m, std::span<const double>(v), std::span(all));
      crown::reduce_scatter(m, std::span<const double>(all), std::span(part));
      crown::coarray<double> a(m, v.size());
      crown::all_gather(a, std::span(all));
      crown::completion sum = crown::co_sum_async(m, std::span(part));
      crown::completion copy = crown::co_broadcast_async(m, std::span(v), 0);
      sum.wait();
      copy.wait();
    });
    BOOST_TEST(calls == 0, m << ": all_gather, reduce_scatter and co_*_async made " << calls
                             << " calls, the last " << g_last);
    BOOST_TEST(v[0] == static_cast<double>(imgs) * (imgs - 1) / 2); // the sums still crossed
  }
}

BOOST_AUTO_TEST_CASE(sync_images_tokens_never_reach_the_users_receive) {
  // Image 0 comes late: the others' tokens are already in flight while it probes the
  // communicator it holds. A token there would be taken by an MPI_ANY_TAG receive.
  if (n() < 2) return;
  MPI_Comm user = w().comm();
  if (me() == 0) {
    const std::string seen = probe_for_a_while(user);
    BOOST_TEST(seen == "nothing", "image 0 could receive " << seen << " during sync_images");
    std::vector<int> others(static_cast<std::size_t>(n() - 1));
    std::iota(others.begin(), others.end(), 1);
    crown::sync_images(w(), others);
  } else {
    crown::sync_images(w(), {0});
  }
  const std::string after = probe_for_a_while(user);
  BOOST_TEST(after == "nothing", "after sync_images there is " << after);
}

BOOST_AUTO_TEST_CASE(a_new_meshs_communicator_sends_nothing_on_the_users_world) {
  // The first allocation on a mesh creates its communicators; the members meet first.
  // Image 0 comes late and probes the world communicator it holds meanwhile.
  if (n() < 2) return;
  MPI_Comm user = w().comm();
  std::vector<int> ranks(w().begin(), w().end());
  std::rotate(ranks.begin(), ranks.begin() + 1, ranks.end()); // a rank list no test used
  const crown::mesh rotated({{"r", n()}}, ranks);
  if (me() == 0) {
    const std::string seen = probe_for_a_while(user);
    BOOST_TEST(seen == "nothing", "image 0 could receive " << seen << " during the creation");
  }
  crown::coarray<int> a(rotated, 1);
  a.on((a.this_image() + 1) % n()).put({0}, me());
  crown::sync_all(rotated);
  BOOST_TEST(a(0) == ranks[static_cast<std::size_t>((a.this_image() + n() - 1) % n())]);
  const std::string after = probe_for_a_while(user);
  BOOST_TEST(after == "nothing", "after the allocation there is " << after);
}

BOOST_AUTO_TEST_CASE(users_any_tag_receive_gets_only_the_users_message) {
  // A receive the user posted before Crown's operations, on the communicator they
  // hold, completes with the user's own message sent after them. (sync_images is left
  // out: where its token could be taken, the test would hang instead of failing.)
  if (n() < 2) return;
  MPI_Comm user = w().comm();
  int got = -1;
  MPI_Request pending = MPI_REQUEST_NULL;
  MPI_Status status;
  if (me() == 0) MPI_Irecv(&got, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, user, &pending);
  crown::sync_all(w());
  double x = 1.0;
  crown::co_sum(w(), x);
  crown::coarray<double> a(w(), 10);
  crown::sync_all(w());
  if (me() == 1) {
    const int payload = 4242;
    MPI_Send(&payload, 1, MPI_INT, 0, 17, user);
  }
  if (me() == 0) {
    MPI_Wait(&pending, &status);
    BOOST_TEST(status.MPI_TAG == 17);
    BOOST_TEST(status.MPI_SOURCE == 1);
    BOOST_TEST(got == 4242);
  }
  BOOST_TEST(x == static_cast<double>(n()));
}
