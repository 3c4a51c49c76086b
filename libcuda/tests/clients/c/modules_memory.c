/* A driver-API program written against NVIDIA's cuda.h (run by
 * test_c_programs.py): linking two relocatable PTX files with cuLink*,
 * module globals (__constant__ and __device__), dynamic shared memory with
 * cuFuncSetAttribute, 3-D copies, registered host memory, 2-D memsets, the
 * library API, and the errors of each misuse.
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

#define RNG_SEED 0x2545F491u
#include "check.h"

/* The stencil of link_a.cu with power-of-two coefficients: every product is
 * exact, so fused or not, the device's float result equals this one. */
static float stencil_ref(const float *in, int n, int i, const float c[3]) {
    float l = i > 0 ? in[i - 1] : 0.0f, m = in[i], r = i + 1 < n ? in[i + 1] : 0.0f;
    return (c[0] * l + c[1] * m) + c[2] * r;
}

int main(int argc, char **argv) {
    const char *dir = data_dir(argc, argv);
    size_t len_a, len_b;
    char *ptx_a = read_in(dir, "link_a.ptx", &len_a);
    char *ptx_b = read_in(dir, "link_b.ptx", &len_b);

    OK(cuInit(0));
    CUdevice dev;
    CUcontext ctx;
    OK(cuDeviceGet(&dev, 0));
    OK(cuDevicePrimaryCtxRetain(&ctx, dev));
    OK(cuCtxSetCurrent(ctx));

    /* link_a alone has an unresolved function. */
    CUmodule lone;
    char log[8192] = {0};
    CUjit_option lo[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *lv[] = {log, (void *)(uintptr_t)sizeof log};
    CUresult lone_rc = cuModuleLoadDataEx(&lone, ptx_a, 2, lo, lv);
    CHECK(lone_rc != CUDA_SUCCESS, "a module with an undefined .extern function does not load");
    CHECK(strstr(log, "_Z7combineff") != NULL, "the JIT log names the undefined function");

    /* Linking both. */
    CUlinkState link;
    OK(cuLinkCreate(0, NULL, NULL, &link));
    OK(cuLinkAddData(link, CU_JIT_INPUT_PTX, ptx_a, len_a, "link_a.ptx", 0, NULL, NULL));
    OK(cuLinkAddData(link, CU_JIT_INPUT_PTX, ptx_b, len_b, "link_b.ptx", 0, NULL, NULL));
    const unsigned char elf[] = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0};
    CUresult elf_rc = cuLinkAddData(link, CU_JIT_INPUT_CUBIN, (void *)elf, sizeof elf, "x.cubin", 0, NULL, NULL);
    CHECK(elf_rc != CUDA_SUCCESS, "a cubin input is refused");
    void *image = NULL;
    size_t image_size = 0;
    OK(cuLinkComplete(link, &image, &image_size));
    CHECK(image != NULL && image_size > 0, "cuLinkComplete gives an image");
    CUmodule mod;
    OK(cuModuleLoadData(&mod, image));
    OK(cuLinkDestroy(link));
    CUfunction stencil;
    OK(cuModuleGetFunction(&stencil, mod, "stencil"));

    /* Module globals. */
    CUdeviceptr coeffs, hits;
    size_t coeffs_size = 0, hits_size = 0;
    OK(cuModuleGetGlobal(&coeffs, &coeffs_size, mod, "coeffs"));
    OK(cuModuleGetGlobal(&hits, &hits_size, mod, "hits"));
    CHECK(coeffs_size == 3 * sizeof(float) && hits_size == sizeof(unsigned), "global sizes");
    CUdeviceptr none;
    EXPECT(cuModuleGetGlobal(&none, NULL, mod, "no_such_global"), CUDA_ERROR_NOT_FOUND);
    const float c[3] = {0.25f, 0.5f, -0.125f};
    OK(cuMemcpyHtoD(coeffs, c, sizeof c));
    OK(cuMemsetD32(hits, 0, 1));

    /* Dynamic shared memory past the static default needs the attribute. */
    int max_optin = 0;
    OK(cuDeviceGetAttribute(&max_optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev));
    const int n = 50000, block = 256;
    float *in = malloc(n * sizeof(float)), *out = malloc(n * sizeof(float));
    for (int i = 0; i < n; i++)
        in[i] = (float)((int32_t)next_u32() >> 8) / 1024.0f;
    CUdeviceptr din, dout;
    OK(cuMemAlloc(&din, n * sizeof(float)));
    OK(cuMemAlloc(&dout, n * sizeof(float)));
    OK(cuMemcpyHtoD(din, in, n * sizeof(float)));
    OK(cuMemsetD32(dout, 0x7FC00000u, n));
    int nn = n;
    void *params[] = {&din, &dout, &nn};
    unsigned shared = (unsigned)(block + 2) * sizeof(float);
    EXPECT(cuLaunchKernel(stencil, (n + block - 1) / block, 1, 1, block, 1, 1, (unsigned)max_optin + 1024, NULL,
                          params, NULL),
           CUDA_ERROR_INVALID_VALUE);
    OK(cuFuncSetAttribute(stencil, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)shared));
    OK(cuLaunchKernel(stencil, (n + block - 1) / block, 1, 1, block, 1, 1, shared, NULL, params, NULL));
    OK(cuCtxSynchronize());
    OK(cuMemcpyDtoH(out, dout, n * sizeof(float)));
    int good = 1;
    for (int i = 0; i < n; i++)
        good &= out[i] == stencil_ref(in, n, i, c);
    CHECK(good, "linked stencil with dynamic shared memory and __constant__ coefficients");
    unsigned count = 0;
    OK(cuMemcpyDtoH(&count, hits, sizeof count));
    CHECK(count == (unsigned)n, "__device__ counter from atomicAdd");

    /* 3-D copy of a sub-box between a host volume and a device volume. */
    enum { W = 13, H = 7, D = 5 };
    static uint16_t vol[D][H][W], back[D][H][W];
    for (int z = 0; z < D; z++)
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++)
                vol[z][y][x] = (uint16_t)next_u32();
    size_t dpitch = 0;
    CUdeviceptr dvol;
    EXPECT(cuMemAllocPitch(&dvol, &dpitch, W * sizeof(uint16_t), H * D, 2), CUDA_ERROR_INVALID_VALUE); /* 4, 8 or 16 */
    OK(cuMemAllocPitch(&dvol, &dpitch, W * sizeof(uint16_t), H * D, 4));
    OK(cuMemsetD2D16(dvol, dpitch, 0xA5A5, W, H * D));
    CUDA_MEMCPY3D up;
    memset(&up, 0, sizeof up);
    up.srcMemoryType = CU_MEMORYTYPE_HOST;
    up.srcHost = vol;
    up.srcPitch = W * sizeof(uint16_t);
    up.srcHeight = H;
    up.srcXInBytes = 2 * sizeof(uint16_t);
    up.srcY = 1;
    up.srcZ = 1;
    up.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    up.dstDevice = dvol;
    up.dstPitch = dpitch;
    up.dstHeight = H;
    up.dstXInBytes = 2 * sizeof(uint16_t);
    up.dstY = 1;
    up.dstZ = 1;
    up.WidthInBytes = (W - 4) * sizeof(uint16_t);
    up.Height = H - 2;
    up.Depth = D - 2;
    OK(cuMemcpy3D(&up));
    CUDA_MEMCPY3D down;
    memset(&down, 0, sizeof down);
    down.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    down.srcDevice = dvol;
    down.srcPitch = dpitch;
    down.srcHeight = H;
    down.dstMemoryType = CU_MEMORYTYPE_HOST;
    down.dstHost = back;
    down.dstPitch = W * sizeof(uint16_t);
    down.dstHeight = H;
    down.WidthInBytes = W * sizeof(uint16_t);
    down.Height = H;
    down.Depth = D;
    OK(cuMemcpy3D(&down));
    int box = 1;
    for (int z = 0; z < D; z++)
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++) {
                int inside = z >= 1 && z < D - 1 && y >= 1 && y < H - 1 && x >= 2 && x < W - 2;
                box &= back[z][y][x] == (inside ? vol[z][y][x] : 0xA5A5);
            }
    CHECK(box, "cuMemcpy3D of a sub-box, cuMemsetD2D16 around it");
    up.WidthInBytes = (size_t)W * 4; /* runs past the source rows */
    EXPECT(cuMemcpy3D(&up), CUDA_ERROR_INVALID_VALUE);

    /* Registered host memory used by copies. */
    size_t reg_bytes = 1 << 16;
    void *host = aligned_alloc(4096, reg_bytes);
    memset(host, 0x3C, reg_bytes);
    OK(cuMemHostRegister(host, reg_bytes, 0));
    EXPECT(cuMemHostRegister(host, reg_bytes, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    CUdeviceptr dreg;
    OK(cuMemAlloc(&dreg, reg_bytes));
    OK(cuMemcpyHtoDAsync(dreg, host, reg_bytes, NULL));
    OK(cuMemsetD8Async(dreg + 100, 0x77, 10, NULL));
    OK(cuMemcpyDtoHAsync(host, dreg, reg_bytes, NULL));
    OK(cuCtxSynchronize());
    unsigned char *hb = host;
    CHECK(hb[99] == 0x3C && hb[100] == 0x77 && hb[109] == 0x77 && hb[110] == 0x3C, "copies through registered memory");
    OK(cuMemHostUnregister(host));
    EXPECT(cuMemHostUnregister(host), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    free(host);

    /* The library API on the same PTX: context-independent loading. */
    CUlibrary lib;
    OK(cuLibraryLoadData(&lib, ptx_b, NULL, NULL, 0, NULL, NULL, 0));
    CUkernel k;
    EXPECT(cuLibraryGetKernel(&k, lib, "_Z7combineff"), CUDA_ERROR_NOT_FOUND); /* a .func, not a kernel */
    OK(cuLibraryUnload(lib));

    OK(cuMemFree(din));
    OK(cuMemFree(dout));
    OK(cuMemFree(dvol));
    OK(cuMemFree(dreg));
    OK(cuModuleUnload(mod));
    EXPECT(cuModuleGetGlobal(&none, NULL, mod, "coeffs"), CUDA_ERROR_INVALID_HANDLE);
    OK(cuCtxSetCurrent(NULL));
    OK(cuDevicePrimaryCtxRelease(dev));
    free(ptx_a);
    free(ptx_b);
    free(in);
    free(out);
    printf("modules_memory: %d checks passed\n", checks);
    return 0;
}
