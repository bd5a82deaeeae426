/* tests/capi/test_c_api.c — Crown from C: attach to an MPI the program initialised,
 * coarrays (whole blocks, sections), sync, events, locks, atomics, collectives, and the
 * status + message every bad call returns. Prints "PASS c_api" on image 0. */
#include <crown/crown.h>
#include <stdio.h>
#include <string.h>

static int failures = 0;
#define EXPECT(cond)                                                                           \
  do {                                                                                         \
    if (!(cond)) {                                                                             \
      ++failures;                                                                              \
      printf("image %d: FAILED %s (line %d; last error: %s)\n", crown_this_image(), #cond,     \
             __LINE__, crown_last_error());                                                    \
    }                                                                                          \
  } while (0)

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  EXPECT(crown_this_image() == -1);
  EXPECT(crown_init(&argc, &argv) == CROWN_OK); /* attaches: MPI is initialised */
  EXPECT(crown_init(&argc, &argv) == CROWN_ERR_STATE);
  EXPECT(strstr(crown_last_error(), "already initialised") != NULL);
  const int me = crown_this_image(), n = crown_num_images();
  const int right = (me + 1) % n, left = (me + n - 1) % n;

  crown_coarray* a = NULL;
  double* block = NULL;
  const size_t extents[2] = {4, 5};
  EXPECT(crown_coarray_allocate(CROWN_DOUBLE, 2, extents, &a, (void**)&block) == CROWN_OK);
  EXPECT(crown_coarray_of(block) == a && crown_coarray_elements(a) == 20);
  for (int i = 0; i < 20; ++i) block[i] = -1;
  crown_sync_all();
  double row[20];
  for (int i = 0; i < 20; ++i) row[i] = me * 100 + i;
  EXPECT(crown_put(a, right, row) == CROWN_OK);
  crown_sync_all();
  EXPECT(block[19] == left * 100 + 19);
  /* rows 1 and 3, columns 0, 2, 4 of the left neighbour's block */
  const size_t begin[2] = {1, 0}, end[2] = {4, 5}, stride[2] = {2, 2};
  double part[6];
  EXPECT(crown_get_section(a, left, begin, end, stride, part) == CROWN_OK);
  const int left2 = (left + n - 1) % n;
  EXPECT(part[0] == left2 * 100 + 5 && part[5] == left2 * 100 + 3 * 5 + 4);

  crown_coarray* counter = NULL;
  int64_t* word = NULL;
  const size_t one = 1;
  EXPECT(crown_coarray_allocate(CROWN_INT64, 1, &one, &counter, (void**)&word) == CROWN_OK);
  *word = 0;
  crown_sync_all();
  int64_t old = -1;
  EXPECT(crown_atomic(counter, 0, 0, CROWN_ATOMIC_ADD, me + 1, 0, &old) == CROWN_OK);
  crown_sync_all();
  if (me == 0) EXPECT(*word == (int64_t)n * (n + 1) / 2);

  crown_event* ev = NULL;
  crown_lock* lk = NULL;
  EXPECT(crown_event_create(&ev) == CROWN_OK && crown_lock_create(&lk) == CROWN_OK);
  EXPECT(crown_event_post(ev, 0) == CROWN_OK);
  if (me == 0) EXPECT(crown_event_wait(ev, n) == CROWN_OK);
  EXPECT(crown_lock_acquire(lk, 0) == CROWN_OK && crown_lock_release(lk, 0) == CROWN_OK);

  float values[2] = {(float)me, -(float)me};
  EXPECT(crown_co_max(CROWN_FLOAT, values, 2, -1) == CROWN_OK);
  EXPECT(values[0] == n - 1 && values[1] == 0);
  int32_t total = me;
  EXPECT(crown_co_sum(CROWN_INT32, &total, 1, -1) == CROWN_OK && total == n * (n - 1) / 2);

  /* bad input: a status and a message naming the image and the values */
  EXPECT(crown_put(a, n, row) == CROWN_ERR_ARGUMENT);
  EXPECT(strstr(crown_last_error(), "image out of range") != NULL);
  const size_t too_far[2] = {5, 5};
  EXPECT(crown_put_section(a, 0, begin, too_far, stride, part) == CROWN_ERR_ARGUMENT);
  EXPECT(crown_atomic(a, 0, 0, CROWN_ATOMIC_ADD, 1, 0, &old) == CROWN_ERR_ARGUMENT);
  EXPECT(strstr(crown_last_error(), "int32 or int64") != NULL);
  EXPECT(crown_co_min(CROWN_COMPLEX_DOUBLE, part, 1, -1) == CROWN_ERR_ARGUMENT);
  EXPECT(crown_co_sum((crown_type)42, part, 1, -1) == CROWN_ERR_ARGUMENT);

  crown_sync_all();
  EXPECT(crown_event_free(ev) == CROWN_OK && crown_lock_free(lk) == CROWN_OK);
  EXPECT(crown_coarray_free(counter) == CROWN_OK && crown_coarray_free(a) == CROWN_OK);
  int32_t all_failures = failures;
  crown_co_sum(CROWN_INT32, &all_failures, 1, -1);
  EXPECT(crown_finalize() == CROWN_OK);
  if (me == 0 && all_failures == 0) printf("PASS c_api\n");
  MPI_Finalize(); /* the program's: Crown attached */
  return all_failures != 0;
}
