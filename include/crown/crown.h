/* include/crown/crown.h — Crown's C API: the runtime, coarrays of the numeric types,
 * image control, atomics and collectives, for C programs and for the Fortran module
 * (fortran_bindings/). Images are numbered from 0 here; the Fortran module adds 1.
 *
 * Every function returns CROWN_OK (0) or an error code; crown_last_error() then holds
 * the message (naming the image, the values and the cause), for the calling thread.
 * Nothing throws across this interface. */
#ifndef CROWN_CROWN_H
#define CROWN_CROWN_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum crown_status {
  CROWN_OK = 0,
  CROWN_ERR_ARGUMENT = 1, /* a bad image, index, section, size or type */
  CROWN_ERR_STATE = 2,    /* not initialised, freed handle, mismatched collective */
  CROWN_ERR_MPI = 3,      /* MPI reported an error */
  CROWN_ERR_OTHER = 4,
  CROWN_ERR_RESOURCE = 5,  /* the heap is full, or a size no heap can hold (nothing allocated) */
  CROWN_ERR_CHECKPOINT = 6 /* a checkpoint file that cannot be written, or is corrupt, truncated
                              or does not match what is read (the message names file, dataset
                              and field) */
};

/* Element types (Fortran: int32, int64, real32, real64, complex of real32 and real64).
 * Functions take them as int, so that any value a caller passes is defined behaviour
 * (and an unknown one an error). */
typedef enum crown_type {
  CROWN_INT32 = 1,
  CROWN_INT64 = 2,
  CROWN_FLOAT = 3,
  CROWN_DOUBLE = 4,
  CROWN_COMPLEX_FLOAT = 5,
  CROWN_COMPLEX_DOUBLE = 6
} crown_type;

/* The message of the last error on this thread ("" when none). */
const char* crown_last_error(void);
/* Bytes of one element of `type`, 0 for an unknown type. */
size_t crown_type_size(int type);

/* Starts Crown, initialising MPI when it is not yet (argc/argv may be NULL), or
 * attaching to the MPI the program already initialised, over all its ranks. */
int crown_init(int* argc, char*** argv);
/* Stops Crown (and MPI, if crown_init initialised it). Collective. */
int crown_finalize(void);
int crown_initialized(void);
int crown_this_image(void); /* 0-based; -1 before crown_init */
int crown_num_images(void);

/* Coarrays: the same block of `rank` (1..3) dimensions on every image, row-major in C
 * (the Fortran module reverses the extents, so its blocks are column-major). */
typedef struct crown_coarray crown_coarray;
/* Collective: every image gives the same type and extents (checked; a mismatch is an
 * error on every image). `*local` receives this image's block. */
int crown_coarray_allocate(int type, int rank, const size_t* extents, crown_coarray** out,
                           void** local);
/* Collective. */
int crown_coarray_free(crown_coarray* a);
/* The coarray whose local block starts at `local`, or NULL. */
crown_coarray* crown_coarray_of(const void* local);
size_t crown_coarray_elements(const crown_coarray* a);

/* Whole blocks; return when the data is at the target (put) or here (get). */
int crown_put(const crown_coarray* a, int image, const void* src);
int crown_get(const crown_coarray* a, int image, void* dst);
/* A strided section: indices begin[d], begin[d]+stride[d], ... below end[d] (0-based,
 * half-open); `packed` holds its elements row-major. */
int crown_put_section(const crown_coarray* a, int image, const size_t* begin, const size_t* end,
                      const size_t* stride, const void* packed);
int crown_get_section(const crown_coarray* a, int image, const size_t* begin, const size_t* end,
                      const size_t* stride, void* packed);

/* Image control over all images. */
int crown_sync_all(void);
int crown_sync_images(const int* images, int count);
int crown_sync_memory(void);

/* Events: a counter on every image. */
typedef struct crown_event crown_event;
int crown_event_create(crown_event** out); /* collective */
int crown_event_free(crown_event* e);      /* collective */
int crown_event_post(crown_event* e, int image);
int crown_event_wait(crown_event* e, int64_t until); /* waits for `until` posts, consumes them */
int crown_event_query(crown_event* e, int64_t* count);

/* Locks: one lock per image. */
typedef struct crown_lock crown_lock;
int crown_lock_create(crown_lock** out); /* collective */
int crown_lock_free(crown_lock* l);      /* collective */
int crown_lock_acquire(crown_lock* l, int image);
int crown_lock_release(crown_lock* l, int image);

/* Atomics on element `element` (row-major linear index) of an int32 or int64 coarray:
 * the value before the operation goes to *old (may be NULL for define). */
typedef enum crown_atomic_op {
  CROWN_ATOMIC_DEFINE = 1,
  CROWN_ATOMIC_REF = 2,
  CROWN_ATOMIC_ADD = 3,
  CROWN_ATOMIC_AND = 4,
  CROWN_ATOMIC_OR = 5,
  CROWN_ATOMIC_XOR = 6,
  CROWN_ATOMIC_CAS = 7 /* swaps in `value` when the element equals `compare` */
} crown_atomic_op;
int crown_atomic(const crown_coarray* a, int image, size_t element, int op, int64_t value,
                 int64_t compare, int64_t* old);

/* Collectives over all images, element-wise and in place, into every image or only
 * into `result_image` (-1: every image). Results are bitwise the same on every image. */
int crown_co_sum(int type, void* data, size_t count, int result_image);
int crown_co_min(int type, void* data, size_t count, int result_image);
int crown_co_max(int type, void* data, size_t count, int result_image);
int crown_co_broadcast(int type, void* data, size_t count, int source_image);

/* Checkpoints (docs/checkpoint.md): one parallel HDF5 file, collective over all images;
 * every image makes the same calls. A writer's file appears under `path` only when
 * crown_checkpoint_commit returns (temporary name, fsync, rename, fsync of the directory);
 * closing an uncommitted writer removes its temporary file. Element types: CROWN_INT32,
 * CROWN_INT64, CROWN_FLOAT, CROWN_DOUBLE. */
typedef struct crown_checkpoint crown_checkpoint;
int crown_checkpoint_create(const char* path, crown_checkpoint** out); /* a writer */
int crown_checkpoint_open(const char* path, crown_checkpoint** out);   /* a reader */
int crown_checkpoint_commit(crown_checkpoint* c);
int crown_checkpoint_close(crown_checkpoint* c);
/* Every image's block, as a dataset [images, extents...]; read back onto as many images. */
int crown_checkpoint_write_coarray(crown_checkpoint* c, const char* name, const crown_coarray* a);
int crown_checkpoint_read_coarray(crown_checkpoint* c, const char* name, const crown_coarray* a);
/* A 1-D array of `global` elements in contiguous pieces: image i of n holds
 * [i*global/n, (i+1)*global/n) (crown_checkpoint_piece), `count` elements; read back
 * under any image count. */
int crown_checkpoint_piece(size_t global, size_t* begin, size_t* end);
int crown_checkpoint_write_sharded(crown_checkpoint* c, const char* name, int type,
                                   const void* piece, size_t count, size_t global);
int crown_checkpoint_read_sharded(crown_checkpoint* c, const char* name, int type, void* piece,
                                  size_t count, size_t global);
/* An array the same on every image (row-major, `ndim` extents), stored once. */
int crown_checkpoint_write_replicated(crown_checkpoint* c, const char* name, int type,
                                      const void* data, int ndim, const size_t* shape);
int crown_checkpoint_read_replicated(crown_checkpoint* c, const char* name, int type, void* data,
                                     int ndim, const size_t* shape);
/* Metadata (image 0's value is stored). */
int crown_checkpoint_put_int(crown_checkpoint* c, const char* name, int64_t value);
int crown_checkpoint_get_int(crown_checkpoint* c, const char* name, int64_t* value);
int crown_checkpoint_put_double(crown_checkpoint* c, const char* name, double value);
int crown_checkpoint_get_double(crown_checkpoint* c, const char* name, double* value);
/* The newest checkpoint in `dir` that verifies (step-<12 digits>.h5), invalid newer ones
 * reported on image 0's stderr: its path into path[size] and its step, or path "" and
 * step -1 when there is none. crown_checkpoint_step_path names the file of a step. */
int crown_checkpoint_newest(const char* dir, char* path, size_t size, int64_t* step);
int crown_checkpoint_step_path(const char* dir, int64_t step, char* path, size_t size);

#ifdef __cplusplus
}
#endif
#endif /* CROWN_CROWN_H */
