/* CUDA IPC between two processes, written against NVIDIA's cuda.h (run by
 * test_c_programs.py): the parent allocates three arrays, fills two with
 * fixed-seed random floats and poisons the third, exports all three with
 * cuIpcGetMemHandle and starts a child (this program again, with the
 * handles in hex on its command line). The child opens them, checks the
 * data, runs vadd_f32 from the imported inputs into the imported output and
 * exits; the parent then reads the sums the child's kernel wrote. Both
 * sides check the documented errors of each misuse.
 *
 *   ./a.out <libcuda/tests/data>
 *
 * Prints one line per check; exits 1 on the first failure.
 */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define RNG_SEED 0x1F2E3D4Cu
#include "check.h"

enum { N = 5003, HANDLES = 4 };

static void to_hex(const CUipcMemHandle *h, char out[2 * CU_IPC_HANDLE_SIZE + 1]) {
    for (int i = 0; i < CU_IPC_HANDLE_SIZE; i++)
        sprintf(out + 2 * i, "%02x", (unsigned char)h->reserved[i]);
}

static CUipcMemHandle from_hex(const char *s) {
    CUipcMemHandle h;
    memset(&h, 0, sizeof h);
    for (int i = 0; i < CU_IPC_HANDLE_SIZE && s[2 * i] && s[2 * i + 1]; i++) {
        unsigned v;
        sscanf(s + 2 * i, "%2x", &v);
        h.reserved[i] = (char)v;
    }
    return h;
}

/* The inputs both processes expect: the first 2*N numbers of the seed. */
static void inputs(float *a, float *b) {
    for (int i = 0; i < N; i++)
        a[i] = next_float();
    for (int i = 0; i < N; i++)
        b[i] = next_float();
}

static CUcontext setup(void) {
    CUdevice dev;
    CUcontext ctx;
    OK(cuInit(0));
    OK(cuDeviceGet(&dev, 0));
    OK(cuDevicePrimaryCtxRetain(&ctx, dev));
    OK(cuCtxSetCurrent(ctx));
    return ctx;
}

/* argv: prog dir child A B C FREED */
static int child(const char *dir, char **hex) {
    setup();
    CUipcMemHandle h[HANDLES];
    for (int i = 0; i < HANDLES; i++)
        h[i] = from_hex(hex[i]);
    float *a = malloc(N * sizeof(float)), *b = malloc(N * sizeof(float)), *seen = malloc(N * sizeof(float));
    inputs(a, b);

    CUdeviceptr da, db, dc, again;
    EXPECT(cuIpcOpenMemHandle(NULL, h[0], CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuIpcOpenMemHandle(&da, h[0], 0x2), CUDA_ERROR_INVALID_VALUE);
    OK(cuIpcOpenMemHandle(&da, h[0], CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    OK(cuIpcOpenMemHandle(&db, h[1], CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    OK(cuIpcOpenMemHandle(&dc, h[2], 0));
    /* Opened again by the same context: the same pointer, one more reference. */
    OK(cuIpcOpenMemHandle(&again, h[0], CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    CHECK(again == da, "a handle opened twice maps to one pointer");
    /* The parent freed this allocation before starting the child. */
    EXPECT(cuIpcOpenMemHandle(&again, h[3], CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS), CUDA_ERROR_INVALID_HANDLE);
    /* A handle whose token is not the exporter's is refused by it. */
    CUipcMemHandle forged = h[0];
    forged.reserved[20] ^= 0x5a;
    EXPECT(cuIpcOpenMemHandle(&again, forged, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS), CUDA_ERROR_INVALID_HANDLE);

    CUdeviceptr base;
    size_t size;
    OK(cuMemGetAddressRange(&base, &size, da + 40));
    CHECK(base == da && size == N * sizeof(float), "imported memory has its allocation's range");
    OK(cuMemcpyDtoH(seen, da, N * sizeof(float)));
    CHECK(memcmp(seen, a, N * sizeof(float)) == 0, "the child reads the parent's first array");
    OK(cuMemcpyDtoH(seen, db, N * sizeof(float)));
    CHECK(memcmp(seen, b, N * sizeof(float)) == 0, "the child reads the parent's second array");
    EXPECT(cuMemFree(da), CUDA_ERROR_INVALID_VALUE);

    char path[4096];
    snprintf(path, sizeof path, "%s/vadd_f32.ptx", dir);
    char *ptx = read_file(path, NULL);
    CUmodule mod;
    CUfunction vadd;
    OK(cuModuleLoadData(&mod, ptx));
    OK(cuModuleGetFunction(&vadd, mod, "vadd_f32"));
    int n = N;
    void *params[] = {&da, &db, &dc, &n};
    OK(cuLaunchKernel(vadd, (N + 127) / 128, 1, 1, 128, 1, 1, 0, NULL, params, NULL));
    OK(cuCtxSynchronize());
    OK(cuModuleUnload(mod));

    OK(cuIpcCloseMemHandle(da));
    OK(cuIpcCloseMemHandle(da)); /* the second reference */
    EXPECT(cuIpcCloseMemHandle(da), CUDA_ERROR_INVALID_VALUE);
    OK(cuIpcCloseMemHandle(db));
    OK(cuIpcCloseMemHandle(dc));
    EXPECT(cuMemcpyDtoH(seen, db, 4), CUDA_ERROR_INVALID_VALUE);
    free(ptx);
    free(a);
    free(b);
    free(seen);
    printf("ipc child: %d checks passed\n", checks);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s <data dir>\n", argv[0]);
        return 2;
    }
    if (argc == 3 + HANDLES && strcmp(argv[2], "child") == 0)
        return child(argv[1], argv + 3);

    setup();
    int ipc_events = -1;
    OK(cuDeviceGetAttribute(&ipc_events, CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED, 0));
    CHECK(ipc_events == 0 || ipc_events == 1, "IPC_EVENT_SUPPORTED is a boolean");

    float *a = malloc(N * sizeof(float)), *b = malloc(N * sizeof(float)), *c = malloc(N * sizeof(float));
    inputs(a, b);
    CUdeviceptr d[HANDLES];
    for (int i = 0; i < HANDLES; i++)
        OK(cuMemAlloc(&d[i], N * sizeof(float)));
    OK(cuMemcpyHtoD(d[0], a, N * sizeof(float)));
    OK(cuMemcpyHtoD(d[1], b, N * sizeof(float)));
    OK(cuMemsetD32(d[2], 0x7fc00bad, N)); /* poison: a NaN no sum gives */

    unsigned char capable = 0;
    OK(cuPointerGetAttribute(&capable, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, d[0]));
    CHECK(capable == 1, "cuMemAlloc memory is IPC capable");

    CUipcMemHandle h[HANDLES], twice;
    for (int i = 0; i < HANDLES; i++)
        OK(cuIpcGetMemHandle(&h[i], d[i]));
    OK(cuIpcGetMemHandle(&twice, d[0]));
    CHECK(memcmp(&twice, &h[0], sizeof twice) == 0, "exporting twice gives the same handle");
    CHECK(memcmp(&h[0], &h[1], sizeof twice) != 0, "allocations have different handles");

    /* Misuse in the exporting process. */
    EXPECT(cuIpcGetMemHandle(NULL, d[0]), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuIpcGetMemHandle(&twice, d[0] + 256), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuIpcGetMemHandle(&twice, (CUdeviceptr)0x1000), CUDA_ERROR_INVALID_VALUE);
    void *host;
    CUdeviceptr mapped;
    OK(cuMemHostAlloc(&host, 4096, CU_MEMHOSTALLOC_DEVICEMAP));
    OK(cuMemHostGetDevicePointer(&mapped, host, 0));
    EXPECT(cuIpcGetMemHandle(&twice, mapped), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemFreeHost(host));
    CUdeviceptr self;
    EXPECT(cuIpcOpenMemHandle(&self, h[0], CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS), CUDA_ERROR_INVALID_CONTEXT);
    CUipcMemHandle junk;
    for (int i = 0; i < CU_IPC_HANDLE_SIZE; i++)
        junk.reserved[i] = (char)(i * 37 + 1);
    EXPECT(cuIpcOpenMemHandle(&self, junk, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuIpcCloseMemHandle(d[0]), CUDA_ERROR_INVALID_VALUE);

    /* The fourth allocation goes before the child asks for it; memory
     * allocated at the same address later has a handle of its own. */
    OK(cuMemFree(d[3]));
    CUdeviceptr reused;
    OK(cuMemAlloc(&reused, N * sizeof(float)));
    OK(cuIpcGetMemHandle(&twice, reused));
    CHECK(memcmp(&twice, &h[3], sizeof twice) != 0, "new memory has a new handle");

    char hex[HANDLES][2 * CU_IPC_HANDLE_SIZE + 1];
    for (int i = 0; i < HANDLES; i++)
        to_hex(&h[i], hex[i]);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        execl("/proc/self/exe", argv[0], argv[1], "child", hex[0], hex[1], hex[2], hex[3], (char *)NULL);
        perror("execl");
        _exit(3);
    }
    CHECK(pid > 0, "fork");
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child's checks passed");

    OK(cuMemcpyDtoH(c, d[2], N * sizeof(float)));
    int wrong = 0;
    for (int i = 0; i < N; i++)
        wrong += c[i] != a[i] + b[i];
    CHECK(wrong == 0, "the parent reads the sums the child's kernel wrote");
    OK(cuMemcpyDtoH(c, d[0], N * sizeof(float)));
    CHECK(memcmp(c, a, N * sizeof(float)) == 0, "the parent's inputs are unchanged");

    for (int i = 0; i < 3; i++)
        OK(cuMemFree(d[i]));
    OK(cuMemFree(reused));
    free(a);
    free(b);
    free(c);
    printf("ipc: %d checks passed\n", checks);
    return 0;
}
