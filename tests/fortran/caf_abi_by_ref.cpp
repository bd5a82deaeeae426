// libcrown_caf's send_by_ref and sendget_by_ref, called the way gfortran would (gfortran
// 12 emits them for derived types with allocatable components: caf_alloc_components).
// Reference chains into a static coarray of 6 particles {real x; integer tag(4)}, which
// no Fortran program makes: particles(2:6:2)%tag(3), a component range, and an index
// beyond the coarray (stat= set). Prints "PASS caf_abi_by_ref" on image 1.
#include "caf_abi.hpp"
#include <cstdio>
#include <cstring>

using namespace crown::caf;

extern "C" {
void _gfortran_caf_init(int*, char***);
void _gfortran_caf_finalize();
int _gfortran_caf_this_image(int);
int _gfortran_caf_num_images(int, int);
void _gfortran_caf_register(std::size_t, int, void**, descriptor*, int*, char*, std::size_t);
void _gfortran_caf_sync_all(int*, char*, std::size_t);
void _gfortran_caf_co_sum(descriptor*, int, int*, char*, std::size_t);
void _gfortran_caf_send_by_ref(void*, int, descriptor*, reference*, int, int, bool, bool, int*,
                               int);
void _gfortran_caf_sendget_by_ref(void*, int, reference*, void*, int, reference*, int, int, bool,
                                  int*, int*, int, int);
}

namespace {

struct particle {
  float x;
  std::int32_t tag[4];
};
static_assert(sizeof(particle) == 20);

int failures = 0;
void check(bool ok, const char* what) {
  if (ok) return;
  ++failures;
  std::printf("image %d: FAILED %s\n", _gfortran_caf_this_image(0), what);
}

/// A reference to particles(start:end:stride) (0-based, one dimension) of the static array.
reference particles(std::ptrdiff_t start, std::ptrdiff_t end, std::ptrdiff_t stride,
                    reference* next) {
  reference r{};
  r.next = next;
  r.type = caf_ref_static_array;
  r.item_size = sizeof(particle);
  r.u.a.mode[0] = start == end ? caf_arr_single : caf_arr_range;
  r.u.a.static_array_type = bt_derived;
  r.u.a.dim[0].s = {start, end, stride};
  return r;
}

reference component(std::ptrdiff_t offset, std::size_t size, reference* next) {
  reference r{};
  r.next = next;
  r.type = caf_ref_component;
  r.item_size = size;
  r.u.c.offset = offset;
  return r;
}

/// A contiguous rank-1 descriptor of `n` elements of `e` at `data`.
descriptor vector_of(void* data, std::size_t n, element e) {
  descriptor d{};
  d.base_addr = data;
  d.dtype = {e.size, 0, 1, static_cast<signed char>(e.type), 0};
  d.span = static_cast<std::ptrdiff_t>(e.size);
  d.dim[0] = {1, 1, static_cast<std::ptrdiff_t>(n)};
  d.offset = static_cast<std::size_t>(-1);
  return d;
}

} // namespace

int main(int argc, char** argv) {
  _gfortran_caf_init(&argc, &argv);
  const int me = _gfortran_caf_this_image(0), n = _gfortran_caf_num_images(0, -1);
  const int right = me % n + 1, left = (me + n - 2) % n + 1, right2 = right % n + 1;
  descriptor scalar{};
  void* token = nullptr;
  _gfortran_caf_register(6 * sizeof(particle), caf_register_static, &token, &scalar, nullptr,
                         nullptr, 0);
  auto* mine = static_cast<particle*>(scalar.base_addr);
  for (int i = 0; i < 6; ++i) {
    mine[i].x = static_cast<float>(me * 10 + i);
    for (int k = 0; k < 4; ++k) mine[i].tag[k] = me * 100 + i * 4 + k;
  }
  _gfortran_caf_sync_all(nullptr, nullptr, 0);

  // particles(2:6:2)[right]%tag(3) = [7, 8, 9] * me
  std::int32_t values[3] = {7 * me, 8 * me, 9 * me};
  descriptor source = vector_of(values, 3, {bt_integer, 4});
  reference tag3 = particles(2, 2, 1, nullptr); // tag(3): a static array of 4 integers
  tag3.item_size = 4;
  tag3.u.a.static_array_type = bt_integer;
  reference tag = component(offsetof(particle, tag), sizeof(std::int32_t[4]), &tag3);
  reference odd = particles(1, 5, 2, &tag);
  _gfortran_caf_send_by_ref(token, right, &source, &odd, 4, 4, false, false, nullptr, bt_integer);
  _gfortran_caf_sync_all(nullptr, nullptr, 0);
  for (int i = 0; i < 6; ++i) {
    const bool written = i % 2 == 1;
    check(mine[i].tag[2] == (written ? (7 + i / 2) * left : me * 100 + i * 4 + 2),
          "send_by_ref into a component of every other particle");
    check(mine[i].tag[1] == me * 100 + i * 4 + 1, "send_by_ref leaves the rest");
  }
  _gfortran_caf_sync_all(nullptr, nullptr, 0);

  // particles(5:6)[left]%x = particles(1:2)[right]%x
  reference x_to = component(offsetof(particle, x), sizeof(float), nullptr);
  reference to = particles(4, 5, 1, &x_to);
  reference x_from = component(offsetof(particle, x), sizeof(float), nullptr);
  reference from = particles(0, 1, 1, &x_from);
  _gfortran_caf_sendget_by_ref(token, left, &to, token, right, &from, 4, 4, false, nullptr, nullptr,
                               bt_real, bt_real);
  _gfortran_caf_sync_all(nullptr, nullptr, 0);
  // written by the right neighbour, from its right neighbour
  check(mine[4].x == static_cast<float>(right2 * 10) &&
            mine[5].x == static_cast<float>(right2 * 10 + 1) &&
            mine[3].x == static_cast<float>(me * 10 + 3),
        "sendget_by_ref between two other images");

  // An index beyond the 6 particles: stat= is set and nothing is written.
  int stat = 0;
  reference beyond = particles(6, 6, 1, &x_to);
  float one = 1;
  descriptor single = vector_of(&one, 1, {bt_real, 4});
  single.dtype.rank = 0;
  _gfortran_caf_send_by_ref(token, right, &single, &beyond, 4, 4, false, false, &stat, bt_real);
  check(stat != 0, "an index beyond the coarray sets stat");

  descriptor total = vector_of(&failures, 1, {bt_integer, 4});
  total.dtype.rank = 0;
  _gfortran_caf_co_sum(&total, 0, nullptr, nullptr, 0);
  if (me == 1 && failures == 0) std::printf("PASS caf_abi_by_ref\n");
  const int status = failures ? 1 : 0;
  _gfortran_caf_finalize();
  return status;
}
