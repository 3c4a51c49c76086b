/* A driver-API program written against NVIDIA's cuda.h, linked with -lcuda
 * against ptxvk's libcuda.so.1 (run by test_c_programs.py).
 *
 *   cc -I<cuda include> driver_api.c -L<libcuda dir> -lcuda -lpthread
 *   ./a.out <libcuda/tests/data>
 *
 * Covers initialisation order, devices, contexts (primary and created, the
 * stack, per-thread currency), memory (linear, pitched, host, 2-D copies,
 * memsets, pointer attributes), loading and launching (kernelParams and the
 * `extra` buffer), streams, events and callbacks, and the documented error
 * of each misuse: bad handles, null pointers, freed memory, destroyed and
 * missing contexts. Prints one line per check; exits 1 on the first failure.
 */
#include <cuda.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RNG_SEED 0x9E3779B9u
#include "check.h"


static CUfunction vadd;

static int run_vadd(CUstream stream, unsigned n, int use_extra) {
    size_t bytes = (size_t)n * sizeof(float);
    float *a = malloc(bytes), *b = malloc(bytes), *c = malloc(bytes);
    for (unsigned i = 0; i < n; i++) {
        a[i] = next_float();
        b[i] = next_float();
        c[i] = -12345.0f; /* poison */
    }
    CUdeviceptr da, db, dc;
    OK(cuMemAlloc(&da, bytes));
    OK(cuMemAlloc(&db, bytes));
    OK(cuMemAlloc(&dc, bytes));
    OK(cuMemcpyHtoDAsync(da, a, bytes, stream));
    OK(cuMemcpyHtoDAsync(db, b, bytes, stream));
    OK(cuMemsetD32Async(dc, 0x7FC00000u, n, stream));
    unsigned blocks = (n + 127) / 128;
    if (use_extra) {
        /* The `extra` form: one buffer laid out like the kernel's params. */
        struct {
            CUdeviceptr a, b, c;
            unsigned n;
        } args = {da, db, dc, n};
        size_t size = sizeof args;
        void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &args, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                         CU_LAUNCH_PARAM_END};
        OK(cuLaunchKernel(vadd, blocks, 1, 1, 128, 1, 1, 0, stream, NULL, extra));
    } else {
        void *params[] = {&da, &db, &dc, &n};
        OK(cuLaunchKernel(vadd, blocks, 1, 1, 128, 1, 1, 0, stream, params, NULL));
    }
    OK(cuMemcpyDtoHAsync(c, dc, bytes, stream));
    OK(cuStreamSynchronize(stream));
    int good = 1;
    for (unsigned i = 0; i < n; i++)
        good &= c[i] == a[i] + b[i];
    OK(cuMemFree(da));
    OK(cuMemFree(db));
    OK(cuMemFree(dc));
    free(a);
    free(b);
    free(c);
    return good;
}

static void CUDA_CB host_fn(void *user) { *(int *)user += 1; }

static void CUDA_CB stream_cb(CUstream s, CUresult status, void *user) {
    (void)s;
    *(int *)user = status == CUDA_SUCCESS ? 100 : -1;
}

struct thread_arg {
    CUcontext ctx;
    unsigned n;
    int result;
};

static void *thread_main(void *p) {
    struct thread_arg *t = p;
    CUcontext cur = (CUcontext)1;
    /* A new host thread has no current context. */
    if (cuCtxGetCurrent(&cur) != CUDA_SUCCESS || cur != NULL) {
        t->result = 0;
        return NULL;
    }
    if (cuCtxSetCurrent(t->ctx) != CUDA_SUCCESS) {
        t->result = 0;
        return NULL;
    }
    CUstream s;
    if (cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) {
        t->result = 0;
        return NULL;
    }
    t->result = 1;
    for (int k = 0; k < 4; k++)
        t->result &= run_vadd(s, t->n + (unsigned)k * 97, k & 1);
    t->result &= cuStreamDestroy(s) == CUDA_SUCCESS;
    return NULL;
}

int main(int argc, char **argv) {
    char *ptx = read_in(data_dir(argc, argv), "vadd_f32.ptx", NULL);
    int count = -1;
    CUdevice dev;
    CUcontext ctx = NULL, cur = NULL;

    /* Before cuInit every call but a few reports NOT_INITIALIZED. */
    EXPECT(cuDeviceGetCount(&count), CUDA_ERROR_NOT_INITIALIZED);
    EXPECT(cuInit(1), CUDA_ERROR_INVALID_VALUE);
    OK(cuInit(0));
    int version = 0;
    OK(cuDriverGetVersion(&version));
    CHECK(version >= 12000, "driver version is 12.0 or later");
    EXPECT(cuDriverGetVersion(NULL), CUDA_ERROR_INVALID_VALUE);

    /* Devices. */
    OK(cuDeviceGetCount(&count));
    CHECK(count >= 1, "at least one device");
    EXPECT(cuDeviceGet(&dev, count), CUDA_ERROR_INVALID_DEVICE);
    EXPECT(cuDeviceGet(NULL, 0), CUDA_ERROR_INVALID_VALUE);
    OK(cuDeviceGet(&dev, 0));
    char name[256];
    OK(cuDeviceGetName(name, sizeof name, dev));
    CHECK(strlen(name) > 0, "device name");
    printf("device: %s\n", name);
    int warp = 0, major = 0, minor = 0, smem = 0, mtpb = 0;
    OK(cuDeviceGetAttribute(&warp, CU_DEVICE_ATTRIBUTE_WARP_SIZE, dev));
    OK(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
    OK(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
    OK(cuDeviceGetAttribute(&smem, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, dev));
    OK(cuDeviceGetAttribute(&mtpb, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, dev));
    CHECK(warp == 32 && major >= 7 && smem >= 16384 && mtpb >= 256, "device attributes");
    EXPECT(cuDeviceGetAttribute(&warp, (CUdevice_attribute)100000, dev), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuDeviceGetAttribute(&warp, CU_DEVICE_ATTRIBUTE_WARP_SIZE, (CUdevice)count + 5), CUDA_ERROR_INVALID_DEVICE);
    size_t total = 0;
    OK(cuDeviceTotalMem(&total, dev));
    CHECK(total > 0, "cuDeviceTotalMem");
    CUuuid uuid;
    OK(cuDeviceGetUuid(&uuid, dev));
    char bus[32];
    OK(cuDeviceGetPCIBusId(bus, sizeof bus, dev));
    CHECK(strchr(bus, ':') != NULL, "PCI bus id");

    /* Contexts: none current yet; memory calls need one. */
    OK(cuCtxGetCurrent(&cur));
    CHECK(cur == NULL, "no current context after cuInit");
    CUdeviceptr p = 0;
    EXPECT(cuMemAlloc(&p, 16), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT(cuCtxSynchronize(), CUDA_ERROR_INVALID_CONTEXT);

    unsigned flags = 99;
    int active = 1;
    OK(cuDevicePrimaryCtxGetState(dev, &flags, &active));
    CHECK(active == 0, "primary context inactive before retain");
    CUcontext primary;
    OK(cuDevicePrimaryCtxRetain(&primary, dev));
    OK(cuDevicePrimaryCtxGetState(dev, &flags, &active));
    CHECK(active == 1, "primary context active after retain");
    OK(cuCtxSetCurrent(primary));
    OK(cuCtxGetCurrent(&cur));
    CHECK(cur == primary, "primary context current");
    CUdevice cdev = -1;
    OK(cuCtxGetDevice(&cdev));
    CHECK(cdev == dev, "cuCtxGetDevice");
    unsigned api = 0;
    OK(cuCtxGetApiVersion(primary, &api));
    CHECK(api >= 3020, "cuCtxGetApiVersion");
    size_t stack = 0;
    OK(cuCtxGetLimit(&stack, CU_LIMIT_STACK_SIZE));
    CHECK(stack > 0, "stack size limit");
    OK(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 4096));
    OK(cuCtxGetLimit(&stack, CU_LIMIT_STACK_SIZE));
    CHECK(stack >= 4096, "stack size limit set");
    EXPECT(cuCtxGetLimit(&stack, (CUlimit)1000), CUDA_ERROR_INVALID_VALUE);
    size_t heap = 0;
    OK(cuCtxGetLimit(&heap, CU_LIMIT_MALLOC_HEAP_SIZE));
    CHECK(heap == 8u << 20, "device malloc heap 8 MiB by default");
    OK(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 16u << 20));
    OK(cuCtxGetLimit(&heap, CU_LIMIT_MALLOC_HEAP_SIZE));
    CHECK(heap == 16u << 20, "device malloc heap resized");

    /* A created context pushed over the primary one, then popped. */
    OK(cuCtxCreate(&ctx, NULL, 0, dev));
    OK(cuCtxGetCurrent(&cur));
    CHECK(cur == ctx, "created context is current");
    CUcontext popped = NULL;
    OK(cuCtxPopCurrent(&popped));
    CHECK(popped == ctx, "pop returns the created context");
    OK(cuCtxGetCurrent(&cur));
    CHECK(cur == primary, "primary context current again after pop");
    OK(cuCtxPushCurrent(ctx));
    OK(cuCtxPopCurrent(&popped));

    /* Code loading. */
    CUmodule mod;
    char log[4096] = {0};
    CUjit_option opts[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *vals[] = {log, (void *)(uintptr_t)sizeof log};
    const char *bad = ".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k()\n{\n  bogus.op %r1;\n}\n";
    EXPECT(cuModuleLoadDataEx(&mod, bad, 2, opts, vals), CUDA_ERROR_INVALID_PTX);
    CHECK(strstr(log, ":6:") != NULL, "JIT error log names the line of the bad instruction");
    EXPECT(cuModuleLoadData(&mod, NULL), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuModuleLoad(&mod, "/nonexistent/file.ptx"), CUDA_ERROR_FILE_NOT_FOUND);
    OK(cuModuleLoadData(&mod, ptx));
    OK(cuModuleGetFunction(&vadd, mod, "vadd_f32"));
    CUfunction missing;
    EXPECT(cuModuleGetFunction(&missing, mod, "nope"), CUDA_ERROR_NOT_FOUND);
    int maxthreads = 0;
    OK(cuFuncGetAttribute(&maxthreads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, vadd));
    CHECK(maxthreads >= 128, "cuFuncGetAttribute(MAX_THREADS_PER_BLOCK)");

    /* Launches on the default stream, a created stream, both param forms. */
    CHECK(run_vadd(NULL, 10007, 0), "vadd with kernelParams on the default stream");
    CUstream s;
    OK(cuStreamCreateWithPriority(&s, CU_STREAM_NON_BLOCKING, 0));
    CHECK(run_vadd(s, 4099, 1), "vadd with the extra buffer on a stream");
    CUdeviceptr d0 = 0;
    OK(cuMemAlloc(&d0, 1024));
    void *none[] = {&d0, &d0, &d0, &d0};
    EXPECT(cuLaunchKernel(vadd, 1, 1, 1, 4096, 1, 1, 0, s, none, NULL), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuLaunchKernel(vadd, 0, 1, 1, 32, 1, 1, 0, s, none, NULL), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuLaunchKernel(NULL, 1, 1, 1, 32, 1, 1, 0, s, none, NULL), CUDA_ERROR_INVALID_HANDLE);

    /* Events and host callbacks are ordered with the stream's work. */
    CUevent e0, e1;
    OK(cuEventCreate(&e0, CU_EVENT_DEFAULT));
    OK(cuEventCreate(&e1, CU_EVENT_DEFAULT));
    int hits = 0, cb = 0;
    OK(cuEventRecord(e0, s));
    OK(cuMemsetD8Async(d0, 0xAB, 1024, s));
    OK(cuLaunchHostFunc(s, host_fn, &hits));
    OK(cuStreamAddCallback(s, stream_cb, &cb, 0));
    OK(cuEventRecord(e1, s));
    OK(cuEventSynchronize(e1));
    OK(cuEventQuery(e1));
    CHECK(hits == 1 && cb == 100, "host function and stream callback ran");
    float ms = -1.0f;
    OK(cuEventElapsedTime(&ms, e0, e1));
    CHECK(ms >= 0.0f, "cuEventElapsedTime");
    CUevent nt;
    OK(cuEventCreate(&nt, CU_EVENT_DISABLE_TIMING));
    OK(cuEventRecord(nt, s));
    OK(cuEventSynchronize(nt));
    EXPECT(cuEventElapsedTime(&ms, e0, nt), CUDA_ERROR_INVALID_HANDLE);
    OK(cuStreamWaitEvent(NULL, e1, 0));
    OK(cuStreamQuery(s));
    unsigned char bytes[1024];
    OK(cuMemcpyDtoH(bytes, d0, sizeof bytes));
    int all_ab = 1;
    for (int i = 0; i < 1024; i++)
        all_ab &= bytes[i] == 0xAB;
    CHECK(all_ab, "cuMemsetD8Async");

    /* Pitched memory and 2-D copies. */
    size_t pitch = 0;
    CUdeviceptr img;
    const size_t w = 37 * sizeof(uint32_t), h = 19;
    OK(cuMemAllocPitch(&img, &pitch, w, h, 4));
    CHECK(pitch >= w && pitch % 4 == 0, "cuMemAllocPitch pitch");
    uint32_t host[19][37], back[19][37];
    for (size_t y = 0; y < h; y++)
        for (size_t x = 0; x < 37; x++)
            host[y][x] = (uint32_t)(y * 1000 + x) ^ 0x5A5A5A5Au;
    memset(back, 0xEE, sizeof back);
    OK(cuMemsetD2D32(img, pitch, 0xDEADBEEFu, 37, h));
    CUDA_MEMCPY2D c2 = {0};
    c2.srcMemoryType = CU_MEMORYTYPE_HOST;
    c2.srcHost = host;
    c2.srcPitch = sizeof host[0];
    c2.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c2.dstDevice = img;
    c2.dstPitch = pitch;
    c2.WidthInBytes = w - 8; /* leave two columns of the memset visible */
    c2.Height = h;
    OK(cuMemcpy2D(&c2));
    CUDA_MEMCPY2D r2 = {0};
    r2.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    r2.srcDevice = img;
    r2.srcPitch = pitch;
    r2.dstMemoryType = CU_MEMORYTYPE_HOST;
    r2.dstHost = back;
    r2.dstPitch = sizeof back[0];
    r2.WidthInBytes = w;
    r2.Height = h;
    OK(cuMemcpy2DAsync(&r2, s));
    OK(cuStreamSynchronize(s));
    int same = 1;
    for (size_t y = 0; y < h; y++)
        for (size_t x = 0; x < 37; x++)
            same &= back[y][x] == (x < 35 ? host[y][x] : 0xDEADBEEFu);
    CHECK(same, "2-D copies and cuMemsetD2D32");

    /* Pointer attributes and address ranges. */
    CUdeviceptr base = 0;
    size_t size = 0;
    OK(cuMemGetAddressRange(&base, &size, img + 100));
    CHECK(base == img && size >= pitch * h, "cuMemGetAddressRange");
    unsigned mtype = 0;
    OK(cuPointerGetAttribute(&mtype, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, img + 8));
    CHECK(mtype == CU_MEMORYTYPE_DEVICE, "pointer attribute: device memory");
    size_t free_b = 0, total_b = 0;
    OK(cuMemGetInfo(&free_b, &total_b));
    CHECK(free_b > 0 && free_b <= total_b, "cuMemGetInfo");

    /* Page-locked host memory. */
    void *pinned = NULL;
    OK(cuMemAllocHost(&pinned, 4096));
    memset(pinned, 0x11, 4096);
    OK(cuMemcpyHtoD(d0, pinned, 1024));
    OK(cuMemsetD16(d0, 0xBEEF, 4));
    OK(cuMemcpyDtoH(pinned, d0, 16));
    uint16_t *h16 = pinned;
    CHECK(h16[0] == 0xBEEF && h16[3] == 0xBEEF && h16[4] == 0x1111, "cuMemAllocHost + cuMemsetD16");
    OK(cuMemFreeHost(pinned));

    /* Freed memory and bad handles. */
    CUdeviceptr gone;
    OK(cuMemAlloc(&gone, 256));
    OK(cuMemFree(gone));
    EXPECT(cuMemFree(gone), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemcpyHtoD(gone, bytes, 16), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemsetD8(gone, 0, 16), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemcpyDtoH(bytes, d0, 4096), CUDA_ERROR_INVALID_VALUE); /* past the allocation */
    EXPECT(cuMemAlloc(NULL, 16), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemGetAddressRange(&base, &size, 0x10), CUDA_ERROR_NOT_FOUND);
    EXPECT(cuStreamSynchronize((CUstream)(uintptr_t)0xBAD0), CUDA_ERROR_INVALID_HANDLE);
    EXPECT(cuEventRecord((CUevent)(uintptr_t)0xBAD0, s), CUDA_ERROR_INVALID_HANDLE);
    EXPECT(cuModuleUnload((CUmodule)(uintptr_t)0xBAD0), CUDA_ERROR_INVALID_HANDLE);
    EXPECT(cuCtxSetCurrent((CUcontext)(uintptr_t)0xBAD0), CUDA_ERROR_INVALID_CONTEXT);

    /* Several host threads, one context, launching at once. */
    pthread_t th[3];
    struct thread_arg ta[3];
    for (int i = 0; i < 3; i++) {
        ta[i].ctx = primary;
        ta[i].n = 1000u + 313u * (unsigned)i;
        ta[i].result = 0;
        pthread_create(&th[i], NULL, thread_main, &ta[i]);
    }
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    CHECK(ta[0].result && ta[1].result && ta[2].result, "launches from three host threads at once");

    /* A destroyed context is not usable. */
    OK(cuCtxDestroy(ctx));
    EXPECT(cuCtxPushCurrent(ctx), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT(cuCtxGetApiVersion(ctx, &api), CUDA_ERROR_INVALID_CONTEXT);

    OK(cuEventDestroy(e0));
    OK(cuEventDestroy(e1));
    OK(cuEventDestroy(nt));
    OK(cuStreamDestroy(s));
    OK(cuMemFree(img));
    OK(cuMemFree(d0));
    OK(cuModuleUnload(mod));
    EXPECT(cuModuleGetFunction(&missing, mod, "vadd_f32"), CUDA_ERROR_INVALID_HANDLE);
    OK(cuDevicePrimaryCtxRelease(dev));
    /* The last release destroys the primary context, which stays current. */
    EXPECT(cuMemAlloc(&p, 16), CUDA_ERROR_CONTEXT_IS_DESTROYED);
    OK(cuCtxSetCurrent(NULL));
    EXPECT(cuMemAlloc(&p, 16), CUDA_ERROR_INVALID_CONTEXT);
    free(ptx);
    printf("driver_api: %d checks passed\n", checks);
    return 0;
}
