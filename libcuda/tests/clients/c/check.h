/* Check macros shared by the cuda.h client programs of this folder: each
 * prints one line per check and exits 1 on the first failure. */
#ifndef PTXVK_CLIENT_CHECK_H
#define PTXVK_CLIENT_CHECK_H
#include <cuda.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>

static int checks;

#define CHECK(cond, what)                                                              \
    do {                                                                               \
        checks++;                                                                      \
        if (!(cond)) {                                                                 \
            printf("FAILED %s (%s:%d)\n", what, __FILE__, __LINE__);                   \
            exit(1);                                                                   \
        }                                                                              \
        printf("ok     %s\n", what);                                                   \
    } while (0)

#define EXPECT(call, want)                                                             \
    do {                                                                               \
        CUresult got_ = (call);                                                        \
        checks++;                                                                      \
        if (got_ != (want)) {                                                          \
            const char *n_ = NULL;                                                     \
            cuGetErrorName(got_, &n_);                                                 \
            printf("FAILED %s: got %d (%s), want %d (%s:%d)\n", #call, (int)got_,      \
                   n_ ? n_ : "?", (int)(want), __FILE__, __LINE__);                    \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

#define OK(call) EXPECT(call, CUDA_SUCCESS)

/* The whole file at `path`, NUL-terminated (its size with the NUL in *len
 * when len is not NULL); exits 2 when it cannot be read. */
static inline char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        exit(2);
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "cannot read %s\n", path);
        exit(2);
    }
    buf[n] = 0;
    fclose(f);
    if (len)
        *len = (size_t)n + 1;
    return buf;
}

/* The data folder each program takes as its first argument (the test
 * kernels, libcuda/tests/data); exits 2 with a usage line without one. */
static inline const char *data_dir(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s <data dir>\n", argv[0]);
        exit(2);
    }
    return argv[1];
}

/* The file `name` of folder `dir`, as read_file reads it. */
static inline char *read_in(const char *dir, const char *name, size_t *len) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return read_file(path, len);
}

#ifdef RNG_SEED
/* xorshift: fixed-seed random inputs (RNG_SEED defined before including). */
static uint32_t rng_state = RNG_SEED;
static inline uint32_t next_u32(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 17;
    rng_state ^= rng_state << 5;
    return rng_state;
}
static inline float next_float(void) {
    return (float)(int32_t)next_u32() / 65536.0f;
}
#endif

#endif
