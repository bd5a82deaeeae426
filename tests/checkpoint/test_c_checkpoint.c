/* tests/checkpoint/test_c_checkpoint.c — checkpoints from C: a coarray, a sharded and a
 * replicated array and metadata written, committed and read back, the newest checkpoint of a
 * directory, and the errors (status + message naming file, dataset and field). Run at several image
 * counts: each reads back its own piece of the sharded array. Prints "PASS c_checkpoint" on image
 * 0. */
#include <crown/crown.h>
#include <stdio.h>
#include <string.h>

static int failures = 0;
#define EXPECT(cond)                                                                               \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      ++failures;                                                                                  \
      printf("image %d: FAILED %s (line %d; last error: %s)\n", crown_this_image(), #cond,         \
             __LINE__, crown_last_error());                                                        \
    }                                                                                              \
  } while (0)

int main(int argc, char** argv) {
  EXPECT(crown_init(&argc, &argv) == CROWN_OK);
  const int me = crown_this_image(), n = crown_num_images();
  char dir[64], path[256];
  snprintf(dir, sizeof dir, "c_checkpoint.np%d", n);
  EXPECT(crown_checkpoint_step_path(dir, 7, path, sizeof path) == CROWN_OK);
  EXPECT(strstr(path, "step-000000000007.h5") != NULL);

  crown_coarray* a = NULL;
  double* block = NULL;
  const size_t extents[1] = {6};
  EXPECT(crown_coarray_allocate(CROWN_DOUBLE, 1, extents, &a, (void**)&block) == CROWN_OK);
  for (int i = 0; i < 6; ++i) block[i] = me * 10 + i;
  const size_t global = 1001;
  size_t lo = 0, hi = 0;
  EXPECT(crown_checkpoint_piece(global, &lo, &hi) == CROWN_OK);
  static float piece[1001], params[12], back[12];
  for (size_t i = lo; i < hi; ++i) piece[i - lo] = (float)i * 0.5f;
  for (int i = 0; i < 12; ++i) params[i] = (float)i + 0.25f;
  const size_t shape[2] = {3, 4};

  crown_checkpoint* w = NULL;
  EXPECT(crown_checkpoint_create(path, &w) == CROWN_OK);
  EXPECT(crown_checkpoint_write_coarray(w, "a", a) == CROWN_OK);
  EXPECT(crown_checkpoint_write_sharded(w, "flat", CROWN_FLOAT, piece, hi - lo, global) ==
         CROWN_OK);
  EXPECT(crown_checkpoint_write_replicated(w, "params", CROWN_FLOAT, params, 2, shape) == CROWN_OK);
  EXPECT(crown_checkpoint_put_int(w, "step", 7) == CROWN_OK);
  EXPECT(crown_checkpoint_put_double(w, "loss", 0.5) == CROWN_OK);
  EXPECT(crown_checkpoint_commit(w) == CROWN_OK);
  EXPECT(crown_checkpoint_close(w) == CROWN_OK);

  char newest[256];
  int64_t step = 0;
  EXPECT(crown_checkpoint_newest(dir, newest, sizeof newest, &step) == CROWN_OK);
  EXPECT(step == 7 && strcmp(newest, path) == 0);

  for (int i = 0; i < 6; ++i) block[i] = -1;
  crown_checkpoint* r = NULL;
  EXPECT(crown_checkpoint_open(newest, &r) == CROWN_OK);
  EXPECT(crown_checkpoint_read_coarray(r, "a", a) == CROWN_OK);
  for (int i = 0; i < 6; ++i) EXPECT(block[i] == me * 10 + i);
  static float got[1001];
  EXPECT(crown_checkpoint_read_sharded(r, "flat", CROWN_FLOAT, got, hi - lo, global) == CROWN_OK);
  for (size_t i = lo; i < hi; ++i) EXPECT(got[i - lo] == (float)i * 0.5f);
  EXPECT(crown_checkpoint_read_replicated(r, "params", CROWN_FLOAT, back, 2, shape) == CROWN_OK);
  for (int i = 0; i < 12; ++i) EXPECT(back[i] == params[i]);
  int64_t s = 0;
  double loss = 0;
  EXPECT(crown_checkpoint_get_int(r, "step", &s) == CROWN_OK && s == 7);
  EXPECT(crown_checkpoint_get_double(r, "loss", &loss) == CROWN_OK && loss == 0.5);

  /* Errors: a missing dataset, another type, a writer's call on a reader. */
  EXPECT(crown_checkpoint_read_coarray(r, "nope", a) == CROWN_ERR_CHECKPOINT);
  EXPECT(strstr(crown_last_error(), "dataset 'nope': missing") != NULL);
  EXPECT(strstr(crown_last_error(), path) != NULL);
  static double gotd[1001];
  EXPECT(crown_checkpoint_read_sharded(r, "flat", CROWN_DOUBLE, gotd, hi - lo, global) ==
         CROWN_ERR_CHECKPOINT);
  EXPECT(strstr(crown_last_error(), "dataset 'flat': type: file has float32, reading float64") !=
         NULL);
  EXPECT(crown_checkpoint_read_replicated(r, "params", CROWN_DOUBLE, back, 2, shape) ==
         CROWN_ERR_CHECKPOINT);
  EXPECT(strstr(crown_last_error(), "dataset 'params': type: file has float32, reading float64") !=
         NULL);
  EXPECT(crown_checkpoint_put_int(r, "x", 1) == CROWN_ERR_ARGUMENT);
  EXPECT(crown_checkpoint_close(r) == CROWN_OK);
  EXPECT(crown_checkpoint_open("c_checkpoint_absent.h5", &r) == CROWN_ERR_CHECKPOINT);
  EXPECT(strstr(crown_last_error(), "c_checkpoint_absent.h5: no such file") != NULL);

  EXPECT(crown_coarray_free(a) == CROWN_OK);
  int all = failures;
  crown_co_sum(CROWN_INT32, &all, 1, -1);
  if (me == 0 && all == 0) printf("PASS c_checkpoint\n");
  crown_finalize();
  return all == 0 ? 0 : 1;
}
