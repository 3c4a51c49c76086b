// Checks shared by the CUDA runtime client programs (test_cudart.py):
// CHECK(cond, fmt...) and EXPECT/OK on a cudaError_t count each check and
// exit 1 with the failing line; next_random() is a fixed-seed xorshift32.
#ifndef PTXVK_CUDART_CHECK_CUH
#define PTXVK_CUDART_CHECK_CUH

#include <cstdint>
#include <cstdio>
#include <cstdlib>

static int checks;

#define CHECK(cond, ...)                                        \
    do {                                                        \
        checks++;                                               \
        if (!(cond)) {                                          \
            printf("FAILED (%s:%d) ", __FILE__, __LINE__);      \
            printf(__VA_ARGS__);                                \
            printf("\n");                                       \
            exit(1);                                            \
        }                                                       \
    } while (0)

#define EXPECT(call, want)                                                                  \
    do {                                                                                    \
        cudaError_t got_ = (call);                                                          \
        checks++;                                                                           \
        if (got_ != (want)) {                                                               \
            printf("FAILED %s: got %d (%s), want %s (%s:%d)\n", #call, (int)got_,           \
                   cudaGetErrorName(got_), #want, __FILE__, __LINE__);                      \
            exit(1);                                                                        \
        }                                                                                   \
    } while (0)

#define OK(call) EXPECT(call, cudaSuccess)

// xorshift32, fixed seed: the same inputs every run.
static uint32_t rng_state = 0x2545F491u;
static inline uint32_t next_random() {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 17;
    rng_state ^= rng_state << 5;
    return rng_state;
}

#endif
