/* Work on several streams at once: chains of launches on each stream
 * (blocking and non-blocking), queued round robin so that the streams' work
 * may overlap on the device; cross-stream dependencies through events; the
 * legacy default stream's implicit synchronisation with blocking streams;
 * asynchronous copies to pinned memory. Every result is compared with the
 * chain's, computed on the host (integer-valued floats: exact).
 *
 *   streams <data dir>     (vadd_f32.ptx: c[i] = a[i] + b[i]) */
#define RNG_SEED 0x5EED5u
#include "check.h"
#include <string.h>

#define S 4
#define N 3000
#define STEPS 6

static uint32_t small(void) { return next_u32() % 1000; }

static void vadd(CUfunction f, CUdeviceptr a, CUdeviceptr b, CUdeviceptr c, CUstream s) {
    int n = N;
    void *args[] = {&a, &b, &c, &n};
    OK(cuLaunchKernel(f, (N + 127) / 128, 1, 1, 128, 1, 1, 0, s, args, NULL));
}

int main(int argc, char **argv) {
    char *ptx = read_in(data_dir(argc, argv), "vadd_f32.ptx", NULL);

    OK(cuInit(0));
    CUdevice dev;
    CUcontext ctx;
    OK(cuDeviceGet(&dev, 0));
    OK(cuDevicePrimaryCtxRetain(&ctx, dev));
    OK(cuCtxSetCurrent(ctx));
    CUmodule mod;
    CUfunction f;
    OK(cuModuleLoadData(&mod, ptx));
    OK(cuModuleGetFunction(&f, mod, "vadd_f32"));

    const size_t bytes = N * sizeof(float);
    for (int round = 0; round < 3; round++) {
        CUstream s[S];
        CUevent done[S];
        CUdeviceptr x[S][2], y[S], out[S], total;
        float *hx[S], *hy[S], *hout[S], *htotal;
        for (int k = 0; k < S; k++) {
            OK(cuStreamCreate(&s[k], k < 2 ? CU_STREAM_DEFAULT : CU_STREAM_NON_BLOCKING));
            OK(cuEventCreate(&done[k], CU_EVENT_DISABLE_TIMING));
            OK(cuMemAlloc(&x[k][0], bytes));
            OK(cuMemAlloc(&x[k][1], bytes));
            OK(cuMemAlloc(&y[k], bytes));
            OK(cuMemAlloc(&out[k], bytes));
            OK(cuMemsetD32(out[k], 0x7fc00001u, N)); /* poison: a NaN */
            OK(cuMemAllocHost((void **)&hx[k], bytes));
            OK(cuMemAllocHost((void **)&hy[k], bytes));
            OK(cuMemAllocHost((void **)&hout[k], bytes));
            for (int i = 0; i < N; i++) {
                hx[k][i] = (float)small();
                hy[k][i] = (float)small();
                hout[k][i] = -1.0f;
            }
        }
        OK(cuMemAlloc(&total, bytes));
        OK(cuMemAllocHost((void **)&htotal, bytes));
        memset(htotal, 0xff, bytes);

        for (int k = 0; k < S; k++) {
            OK(cuMemcpyHtoDAsync(x[k][0], hx[k], bytes, s[k]));
            OK(cuMemcpyHtoDAsync(y[k], hy[k], bytes, s[k]));
        }
        /* Each stream: x += y, STEPS times (ping-pong), round robin. */
        for (int step = 0; step < STEPS; step++)
            for (int k = 0; k < S; k++)
                vadd(f, x[k][step & 1], y[k], x[k][(step + 1) & 1], s[k]);
        const int fin = STEPS & 1;
        for (int k = 0; k < S; k++)
            OK(cuEventRecord(done[k], s[k]));
        /* Stream k waits for stream k+1: out[k] = x[k] + x[k+1]. */
        for (int k = 0; k < S; k++) {
            int j = (k + 1) % S;
            OK(cuStreamWaitEvent(s[k], done[j], 0));
            vadd(f, x[k][fin], x[j][fin], out[k], s[k]);
            OK(cuMemcpyDtoHAsync(hout[k], out[k], bytes, s[k]));
        }
        /* The legacy stream waits for the blocking streams 0 and 1. */
        vadd(f, out[0], out[1], total, NULL);
        OK(cuMemcpyDtoHAsync(htotal, total, bytes, NULL));
        OK(cuCtxSynchronize());

        for (int k = 0; k < S; k++)
            OK(cuStreamQuery(s[k]));
        int bad = 0;
        for (int k = 0; k < S && !bad; k++) {
            int j = (k + 1) % S;
            for (int i = 0; i < N; i++) {
                float xk = hx[k][i] + STEPS * hy[k][i], xj = hx[j][i] + STEPS * hy[j][i];
                if (hout[k][i] != xk + xj) {
                    printf("round %d stream %d element %d: %g, want %g\n", round, k, i, hout[k][i], xk + xj);
                    bad = 1;
                    break;
                }
            }
        }
        CHECK(!bad, "each stream's chain and its cross-stream sum");
        for (int i = 0; i < N && !bad; i++) {
            float x0 = hx[0][i] + STEPS * hy[0][i], x1 = hx[1][i] + STEPS * hy[1][i];
            float x2 = hx[2][i] + STEPS * hy[2][i];
            if (htotal[i] != (x0 + x1) + (x1 + x2)) {
                printf("round %d total element %d: %g, want %g\n", round, i, htotal[i], (x0 + x1) + (x1 + x2));
                bad = 1;
            }
        }
        CHECK(!bad, "the legacy stream after the blocking streams");

        for (int k = 0; k < S; k++) {
            OK(cuStreamDestroy(s[k]));
            OK(cuEventDestroy(done[k]));
            OK(cuMemFree(x[k][0]));
            OK(cuMemFree(x[k][1]));
            OK(cuMemFree(y[k]));
            OK(cuMemFree(out[k]));
            OK(cuMemFreeHost(hx[k]));
            OK(cuMemFreeHost(hy[k]));
            OK(cuMemFreeHost(hout[k]));
        }
        OK(cuMemFree(total));
        OK(cuMemFreeHost(htotal));
    }
    OK(cuModuleUnload(mod));
    OK(cuDevicePrimaryCtxRelease(dev));
    free(ptx);
    printf("streams: %d checks passed\n", checks);
    return 0;
}
