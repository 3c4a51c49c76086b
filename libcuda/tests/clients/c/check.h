/* Check macros shared by the cuda.h client programs of this folder: each
 * prints one line per check and exits 1 on the first failure. */
#ifndef PTXVK_CLIENT_CHECK_H
#define PTXVK_CLIENT_CHECK_H
#include <cuda.h>
#include <stdio.h>
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

#endif
