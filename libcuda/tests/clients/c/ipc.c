/* CUDA IPC between two processes, written against NVIDIA's cuda.h (run by
 * test_c_programs.py): the parent allocates three arrays, fills two with
 * fixed-seed random floats and poisons the third, exports all three with
 * cuIpcGetMemHandle, exports an interprocess event with cuIpcGetEventHandle
 * and starts a child (this program again, with the handles in hex on its
 * command line). The child opens them, checks the data, runs vadd_f32 from
 * the imported inputs into the imported output, records the imported event
 * and tells the parent through a pipe; the parent waits for the event and
 * reads the sums while the child still has the memory open. Both sides
 * check the documented errors of each misuse.
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

static CUipcEventHandle event_from_hex(const char *s) {
    CUipcMemHandle m = from_hex(s);
    CUipcEventHandle e;
    memcpy(e.reserved, m.reserved, CU_IPC_HANDLE_SIZE);
    return e;
}

/* argv: prog dir child A B C FREED EVENT to-parent-fd from-parent-fd */
static int child(const char *dir, char **hex) {
    setup();
    CUipcMemHandle h[HANDLES];
    for (int i = 0; i < HANDLES; i++)
        h[i] = from_hex(hex[i]);
    CUipcEventHandle eh = event_from_hex(hex[HANDLES]);
    int to_parent = atoi(hex[HANDLES + 1]), from_parent = atoi(hex[HANDLES + 2]);
    CUevent ev;
    EXPECT(cuIpcOpenEventHandle(NULL, eh), CUDA_ERROR_INVALID_VALUE);
    OK(cuIpcOpenEventHandle(&ev, eh));
    OK(cuEventQuery(ev));
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

    char *ptx = read_in(dir, "vadd_f32.ptx", NULL);
    CUmodule mod;
    CUfunction vadd;
    OK(cuModuleLoadData(&mod, ptx));
    OK(cuModuleGetFunction(&vadd, mod, "vadd_f32"));
    int n = N;
    void *params[] = {&da, &db, &dc, &n};
    OK(cuLaunchKernel(vadd, (N + 127) / 128, 1, 1, 128, 1, 1, 0, NULL, params, NULL));
    /* No synchronisation here: the parent waits for the event instead. */
    OK(cuEventRecord(ev, NULL));
    CHECK(write(to_parent, "r", 1) == 1, "tell the parent the event is recorded");
    char go;
    CHECK(read(from_parent, &go, 1) == 1, "the parent has read the sums");
    OK(cuEventSynchronize(ev));
    OK(cuEventQuery(ev));
    float *dc_host = malloc(N * sizeof(float));
    OK(cuMemcpyDtoH(dc_host, dc, N * sizeof(float)));
    int wrong = 0;
    for (int i = 0; i < N; i++)
        wrong += dc_host[i] != a[i] + b[i];
    CHECK(wrong == 0, "the child's kernel wrote the sums");
    free(dc_host);
    OK(cuEventDestroy(ev));
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
    const char *dir = data_dir(argc, argv);
    if (argc == 6 + HANDLES && strcmp(argv[2], "child") == 0)
        return child(dir, argv + 3);

    setup();
    int ipc = -1;
    OK(cuDeviceGetAttribute(&ipc, CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED, 0));
    if (ipc != 1) {
        printf("IPC_EVENT_SUPPORTED is %d: this device cannot share memory; nothing to test\n", ipc);
        printf("ipc: %d checks passed\n", checks);
        return 0;
    }

    CUevent ev, plain, gone;
    CUipcEventHandle eh, eh2;
    EXPECT(cuEventCreate(&ev, CU_EVENT_INTERPROCESS), CUDA_ERROR_INVALID_VALUE);
    OK(cuEventCreate(&ev, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING));
    OK(cuEventCreate(&plain, CU_EVENT_DISABLE_TIMING));
    OK(cuEventCreate(&gone, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING));
    EXPECT(cuIpcGetEventHandle(NULL, ev), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuIpcGetEventHandle(&eh, plain), CUDA_ERROR_INVALID_VALUE);
    OK(cuIpcGetEventHandle(&eh, gone));
    OK(cuEventDestroy(gone));
    EXPECT(cuIpcGetEventHandle(&eh, gone), CUDA_ERROR_INVALID_HANDLE);
    OK(cuIpcGetEventHandle(&eh, ev));
    OK(cuIpcGetEventHandle(&eh2, ev));
    CHECK(memcmp(&eh, &eh2, sizeof eh) == 0, "exporting an event twice gives the same handle");
    CUevent self_ev;
    EXPECT(cuIpcOpenEventHandle(&self_ev, eh), CUDA_ERROR_INVALID_CONTEXT);
    OK(cuEventDestroy(plain));

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

    char hex[HANDLES + 1][2 * CU_IPC_HANDLE_SIZE + 1];
    for (int i = 0; i < HANDLES; i++)
        to_hex(&h[i], hex[i]);
    CUipcMemHandle em;
    memcpy(em.reserved, eh.reserved, CU_IPC_HANDLE_SIZE);
    to_hex(&em, hex[HANDLES]);
    int c2p[2], p2c[2];
    CHECK(pipe(c2p) == 0 && pipe(p2c) == 0, "pipes");
    char to_parent[16], from_parent[16];
    snprintf(to_parent, sizeof to_parent, "%d", c2p[1]);
    snprintf(from_parent, sizeof from_parent, "%d", p2c[0]);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        execl("/proc/self/exe", argv[0], argv[1], "child", hex[0], hex[1], hex[2], hex[3], hex[4], to_parent,
              from_parent, (char *)NULL);
        perror("execl");
        _exit(3);
    }
    CHECK(pid > 0, "fork");
    close(c2p[1]);
    close(p2c[0]);
    char r = 0;
    CHECK(read(c2p[0], &r, 1) == 1 && r == 'r', "the child recorded the event");
    /* The event completes when the child's kernel has finished, whichever
     * process waits; the child still has the memory open. */
    OK(cuEventSynchronize(ev));
    OK(cuEventQuery(ev));
    OK(cuMemcpyDtoH(c, d[2], N * sizeof(float)));
    int wrong = 0;
    for (int i = 0; i < N; i++)
        wrong += c[i] != a[i] + b[i];
    CHECK(wrong == 0, "after the event the parent reads the sums the child's kernel wrote");
    CHECK(write(p2c[1], "g", 1) == 1, "release the child");
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child's checks passed");
    OK(cuEventDestroy(ev));
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
