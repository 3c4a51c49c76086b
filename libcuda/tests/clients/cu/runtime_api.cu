// A CUDA runtime program as nvcc builds it (cudart linked statically), run
// through ptxvk's libcuda.so.1 by test_cudart.py:
//
//   nvcc -arch=sm_80 -O2 runtime_api.cu -o runtime_api
//
// Memory (cudaMalloc, cudaMemcpy in every direction, cudaMemset, pinned
// host memory), several kernels launched with <<<>>> (1-D and 2-D grids,
// dynamic shared memory, global atomics, __constant__ and __device__
// variables reached with cudaMemcpyTo/FromSymbol), streams, events and
// cudaEventElapsedTime, cudaDeviceSynchronize, cudaGetDeviceProperties,
// cudaFuncGetAttributes, graphs captured from a stream, opt-in dynamic
// shared memory, pitched 2-D copies, cudaDeviceReset, host threads with a
// stream each, a cooperative launch with grid.sync(), the error of a bad
// launch through cudaGetLastError, and device-side printf. Inputs are random with a fixed seed, outputs are
// poisoned before each kernel, and every result is compared on the host.
// Prints one line per check and "N checks passed" at the end; exits 1 at
// the first failure.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include <cooperative_groups.h>

#include "check.cuh"

__constant__ uint32_t c_coeffs[4];
__device__ uint32_t d_counter;

// y[i] = a * x[i] + y[i], grid-stride.
__global__ void saxpy(int n, float a, const float *x, float *y) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = a * x[i] + y[i];
}

// out[i] = c0 * in[i] ^ c1 + (in[i] >> c2) * c3, with the coefficients in constant memory.
__global__ void mix(int n, const uint32_t *in, uint32_t *out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = (c_coeffs[0] * in[i] ^ c_coeffs[1]) + (in[i] >> (c_coeffs[2] & 31)) * c_coeffs[3];
}

// Per block the sum of its blockDim.x inputs, through dynamic shared memory.
__global__ void block_sum(const uint32_t *in, uint32_t *out) {
    extern __shared__ uint32_t partial[];
    unsigned t = threadIdx.x;
    partial[t] = in[blockIdx.x * blockDim.x + t];
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s)
            partial[t] += partial[t + s];
        __syncthreads();
    }
    if (t == 0)
        out[blockIdx.x] = partial[0];
}

// A 16-bin histogram of the low nibbles, with global atomics; counts the
// elements seen in the __device__ variable d_counter.
__global__ void histogram(int n, const uint32_t *in, uint32_t *bins) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        atomicAdd(&bins[in[i] & 15], 1u);
        atomicAdd(&d_counter, 1u);
    }
}

// out[x][y] = in[y][x] for a rows x cols matrix, on a 2-D grid.
__global__ void transpose(int rows, int cols, const uint32_t *in, uint32_t *out) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < cols && y < rows)
        out[x * rows + y] = in[y * cols + x];
}

// p[i] = p[i] * 3 + k.
__global__ void step(int n, uint32_t *p, uint32_t k) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        p[i] = p[i] * 3 + k;
}

// out[i] = in[n - 1 - i] for one block of n threads, through dynamic shared memory.
__global__ void reverse_block(const uint32_t *in, uint32_t *out) {
    extern __shared__ uint32_t staged[];
    unsigned t = threadIdx.x, n = blockDim.x;
    staged[t] = in[t];
    __syncthreads();
    out[t] = staged[n - 1 - t];
}

// Every thread of the grid writes its rank, the grid synchronises, and
// thread 0 sums what all wrote.
__global__ void grid_total(uint32_t *p) {
    cooperative_groups::grid_group g = cooperative_groups::this_grid();
    p[g.thread_rank()] = (uint32_t)g.thread_rank() * 7 + 1;
    g.sync();
    if (g.thread_rank() == 0) {
        uint32_t s = 0;
        for (unsigned long long i = 0; i < g.size(); i++)
            s += p[i];
        p[g.size()] = s;
    }
}

__global__ void say_hello(int tag) {
    printf("device printf: block %d thread %d tag %d\n", (int)blockIdx.x, (int)threadIdx.x, tag);
}

static void check_device() {
    int count = 0;
    OK(cudaGetDeviceCount(&count));
    CHECK(count >= 1, "cudaGetDeviceCount: %d", count);
    OK(cudaSetDevice(0));
    int dev = -1;
    OK(cudaGetDevice(&dev));
    CHECK(dev == 0, "cudaGetDevice: %d", dev);
    cudaDeviceProp prop;
    memset(&prop, 0, sizeof prop);
    OK(cudaGetDeviceProperties(&prop, 0));
    CHECK(prop.name[0] != 0, "device name");
    CHECK(prop.warpSize == 32, "warpSize %d", prop.warpSize);
    CHECK(prop.maxThreadsPerBlock >= 256, "maxThreadsPerBlock %d", prop.maxThreadsPerBlock);
    CHECK(prop.major >= 7, "compute capability %d.%d", prop.major, prop.minor);
    CHECK(prop.totalGlobalMem > 0, "totalGlobalMem");
    CHECK(prop.multiProcessorCount > 0, "multiProcessorCount");
    CHECK(prop.sharedMemPerBlock >= 16384, "sharedMemPerBlock %zu", prop.sharedMemPerBlock);
    int attr = 0;
    OK(cudaDeviceGetAttribute(&attr, cudaDevAttrWarpSize, 0));
    CHECK(attr == 32, "cudaDevAttrWarpSize %d", attr);
    size_t free_b = 0, total_b = 0;
    OK(cudaMemGetInfo(&free_b, &total_b));
    CHECK(total_b > 0 && free_b <= total_b, "cudaMemGetInfo %zu of %zu", free_b, total_b);
    printf("ok     device %s, sm_%d%d, %d SMs\n", prop.name, prop.major, prop.minor, prop.multiProcessorCount);
}

// Copies in every direction and cudaMemset.
static void check_memory() {
    const size_t n = 4099;
    std::vector<uint8_t> h(n), back(n, 0x5A);
    for (auto &b : h)
        b = (uint8_t)next_random();
    uint8_t *a = nullptr, *b = nullptr;
    OK(cudaMalloc(&a, n));
    OK(cudaMalloc(&b, n));
    OK(cudaMemset(b, 0xC3, n));
    OK(cudaMemcpy(a, h.data(), n, cudaMemcpyHostToDevice));
    OK(cudaMemcpy(b + 7, a + 3, n - 64, cudaMemcpyDeviceToDevice));
    OK(cudaMemcpy(back.data(), b, n, cudaMemcpyDeviceToHost));
    bool same = true;
    for (size_t i = 0; i < n; i++) {
        uint8_t want = (i >= 7 && i < 7 + n - 64) ? h[i - 7 + 3] : 0xC3;
        same &= back[i] == want;
    }
    CHECK(same, "device-to-device copy between cudaMemset bytes");
    OK(cudaMemset(a + 100, 0, 1000));
    OK(cudaMemcpy(back.data(), a, n, cudaMemcpyDefault));
    same = true;
    for (size_t i = 0; i < n; i++)
        same &= back[i] == ((i >= 100 && i < 1100) ? 0 : h[i]);
    CHECK(same, "cudaMemset of a range, cudaMemcpyDefault back");
    OK(cudaFree(a));
    OK(cudaFree(b));
    printf("ok     memory\n");
}

static void check_kernels() {
    const int n = 50000;
    std::vector<float> x(n), y(n), yout(n, NAN);
    for (int i = 0; i < n; i++) {
        x[i] = (float)(next_random() % 20001) / 100.0f - 100.0f;
        y[i] = (float)(next_random() % 20001) / 100.0f - 100.0f;
    }
    const float a = 1.75f;
    float *dx, *dy;
    OK(cudaMalloc(&dx, n * sizeof(float)));
    OK(cudaMalloc(&dy, n * sizeof(float)));
    OK(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    OK(cudaMemcpy(dy, y.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    saxpy<<<64, 256>>>(n, a, dx, dy);
    OK(cudaGetLastError());
    OK(cudaMemcpy(yout.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int i = 0; i < n; i++) {
        // nvcc contracts a * x + y into one fma; either rounding is accepted.
        float fused = fmaf(a, x[i], y[i]), separate = a * x[i] + y[i];
        bad += yout[i] != fused && yout[i] != separate;
    }
    CHECK(bad == 0, "saxpy: %d of %d wrong", bad, n);
    OK(cudaFree(dx));
    OK(cudaFree(dy));

    // Constant memory through cudaMemcpyToSymbol.
    std::vector<uint32_t> in(n), out(n);
    for (auto &v : in)
        v = next_random();
    uint32_t coeffs[4] = {next_random() | 1, next_random(), next_random() % 32, next_random()};
    OK(cudaMemcpyToSymbol(c_coeffs, coeffs, sizeof coeffs));
    uint32_t *din, *dout;
    OK(cudaMalloc(&din, n * sizeof(uint32_t)));
    OK(cudaMalloc(&dout, n * sizeof(uint32_t)));
    OK(cudaMemcpy(din, in.data(), n * sizeof(uint32_t), cudaMemcpyHostToDevice));
    OK(cudaMemset(dout, 0xFF, n * sizeof(uint32_t)));
    mix<<<(n + 127) / 128, 128>>>(n, din, dout);
    OK(cudaGetLastError());
    OK(cudaMemcpy(out.data(), dout, n * sizeof(uint32_t), cudaMemcpyDeviceToHost));
    bad = 0;
    for (int i = 0; i < n; i++)
        bad += out[i] != (coeffs[0] * in[i] ^ coeffs[1]) + (in[i] >> (coeffs[2] & 31)) * coeffs[3];
    CHECK(bad == 0, "mix with __constant__ coefficients: %d wrong", bad);

    // Dynamic shared memory.
    const int block = 256, blocks = n / block;
    OK(cudaMemset(dout, 0xFF, blocks * sizeof(uint32_t)));
    block_sum<<<blocks, block, block * sizeof(uint32_t)>>>(din, dout);
    OK(cudaGetLastError());
    OK(cudaMemcpy(out.data(), dout, blocks * sizeof(uint32_t), cudaMemcpyDeviceToHost));
    bad = 0;
    for (int b = 0; b < blocks; b++) {
        uint32_t s = 0;
        for (int t = 0; t < block; t++)
            s += in[b * block + t];
        bad += out[b] != s;
    }
    CHECK(bad == 0, "block_sum with %zu bytes of dynamic shared memory: %d wrong", block * sizeof(uint32_t), bad);

    // Global atomics and a __device__ variable.
    uint32_t zero = 0, seen = 0xFFFFFFFF, bins[16];
    OK(cudaMemcpyToSymbol(d_counter, &zero, sizeof zero));
    OK(cudaMemset(dout, 0, 16 * sizeof(uint32_t)));
    histogram<<<(n + 255) / 256, 256>>>(n, din, dout);
    OK(cudaGetLastError());
    OK(cudaMemcpy(bins, dout, sizeof bins, cudaMemcpyDeviceToHost));
    OK(cudaMemcpyFromSymbol(&seen, d_counter, sizeof seen));
    uint32_t want[16] = {0};
    for (int i = 0; i < n; i++)
        want[in[i] & 15]++;
    CHECK(memcmp(bins, want, sizeof bins) == 0, "histogram");
    CHECK(seen == (uint32_t)n, "__device__ counter %u, want %d", seen, n);

    // A 2-D grid.
    const int rows = 123, cols = 77;
    OK(cudaMemset(dout, 0xFF, rows * cols * sizeof(uint32_t)));
    dim3 threads(16, 8), grid((cols + 15) / 16, (rows + 7) / 8);
    transpose<<<grid, threads>>>(rows, cols, din, dout);
    OK(cudaGetLastError());
    OK(cudaMemcpy(out.data(), dout, rows * cols * sizeof(uint32_t), cudaMemcpyDeviceToHost));
    bad = 0;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++)
            bad += out[c * rows + r] != in[r * cols + c];
    CHECK(bad == 0, "transpose on a %ux%u grid: %d wrong", grid.x, grid.y, bad);

    cudaFuncAttributes fa;
    memset(&fa, 0, sizeof fa);
    OK(cudaFuncGetAttributes(&fa, block_sum));
    CHECK(fa.maxThreadsPerBlock >= block, "cudaFuncGetAttributes maxThreadsPerBlock %d", fa.maxThreadsPerBlock);
    // ptxVersion is the virtual architecture of the PTX the driver loaded
    // (CUB chooses its tuning by it): the first of nvcc's targets.
    const int arch_list[] = {__CUDA_ARCH_LIST__};
    CHECK(fa.ptxVersion == arch_list[0] / 10, "cudaFuncGetAttributes ptxVersion %d, want %d", fa.ptxVersion,
          arch_list[0] / 10);
    OK(cudaFree(din));
    OK(cudaFree(dout));
    printf("ok     kernels\n");
}

// Two streams each copy in, run and copy out their half from pinned memory;
// events time the work of the first.
static void check_streams_events() {
    const int n = 1 << 16, half = n / 2;
    uint32_t *h_in, *h_out;
    OK(cudaMallocHost(&h_in, n * sizeof(uint32_t)));
    OK(cudaMallocHost(&h_out, n * sizeof(uint32_t)));
    for (int i = 0; i < n; i++) {
        h_in[i] = next_random();
        h_out[i] = 0xDEADBEEF;
    }
    uint32_t coeffs[4] = {3, 0x5555, 7, 11};
    OK(cudaMemcpyToSymbol(c_coeffs, coeffs, sizeof coeffs));
    uint32_t *din, *dout;
    OK(cudaMalloc(&din, n * sizeof(uint32_t)));
    OK(cudaMalloc(&dout, n * sizeof(uint32_t)));
    cudaStream_t s[2];
    OK(cudaStreamCreate(&s[0]));
    OK(cudaStreamCreateWithFlags(&s[1], cudaStreamNonBlocking));
    cudaEvent_t start, stop;
    OK(cudaEventCreate(&start));
    OK(cudaEventCreate(&stop));
    OK(cudaEventRecord(start, s[0]));
    for (int k = 0; k < 2; k++) {
        size_t off = (size_t)k * half;
        OK(cudaMemsetAsync(dout + off, 0xFF, half * sizeof(uint32_t), s[k]));
        OK(cudaMemcpyAsync(din + off, h_in + off, half * sizeof(uint32_t), cudaMemcpyHostToDevice, s[k]));
        mix<<<half / 256, 256, 0, s[k]>>>(half, din + off, dout + off);
        OK(cudaGetLastError());
        OK(cudaMemcpyAsync(h_out + off, dout + off, half * sizeof(uint32_t), cudaMemcpyDeviceToHost, s[k]));
    }
    OK(cudaEventRecord(stop, s[0]));
    // s[1] waits for s[0]'s work, then reads what it wrote.
    cudaEvent_t first_done;
    OK(cudaEventCreateWithFlags(&first_done, cudaEventDisableTiming));
    OK(cudaEventRecord(first_done, s[0]));
    OK(cudaStreamWaitEvent(s[1], first_done, 0));
    uint32_t *copy_of_first;
    OK(cudaMalloc(&copy_of_first, half * sizeof(uint32_t)));
    OK(cudaMemcpyAsync(copy_of_first, dout, half * sizeof(uint32_t), cudaMemcpyDeviceToDevice, s[1]));
    OK(cudaStreamSynchronize(s[1]));
    std::vector<uint32_t> first(half);
    OK(cudaMemcpy(first.data(), copy_of_first, half * sizeof(uint32_t), cudaMemcpyDeviceToHost));
    int late = 0;
    for (int i = 0; i < half; i++)
        late += first[i] != (coeffs[0] * h_in[i] ^ coeffs[1]) + (h_in[i] >> coeffs[2]) * coeffs[3];
    CHECK(late == 0, "cudaStreamWaitEvent: %d values copied before they were written", late);
    OK(cudaFree(copy_of_first));
    OK(cudaEventDestroy(first_done));
    OK(cudaEventSynchronize(stop));
    OK(cudaEventQuery(stop));
    OK(cudaStreamQuery(s[0]));
    float ms = -1;
    OK(cudaEventElapsedTime(&ms, start, stop));
    CHECK(ms >= 0 && std::isfinite(ms), "cudaEventElapsedTime %f ms", ms);
    int bad = 0;
    for (int i = 0; i < n; i++)
        bad += h_out[i] != (coeffs[0] * h_in[i] ^ coeffs[1]) + (h_in[i] >> coeffs[2]) * coeffs[3];
    CHECK(bad == 0, "two streams from pinned memory: %d wrong", bad);
    printf("ok     streams and events (%.3f ms)\n", ms);

    // Stream-ordered allocation: allocate, fill, copy out and free on s[1].
    uint32_t *tmp = nullptr;
    OK(cudaMallocAsync(&tmp, half * sizeof(uint32_t), s[1]));
    OK(cudaMemcpyAsync(tmp, din, half * sizeof(uint32_t), cudaMemcpyDeviceToDevice, s[1]));
    step<<<half / 256, 256, 0, s[1]>>>(half, tmp, 9);
    OK(cudaGetLastError());
    OK(cudaMemcpyAsync(h_out, tmp, half * sizeof(uint32_t), cudaMemcpyDeviceToHost, s[1]));
    OK(cudaFreeAsync(tmp, s[1]));
    OK(cudaStreamSynchronize(s[1]));
    bad = 0;
    for (int i = 0; i < half; i++)
        bad += h_out[i] != h_in[i] * 3 + 9;
    CHECK(bad == 0, "cudaMallocAsync/cudaFreeAsync around a kernel: %d wrong", bad);
    OK(cudaEventDestroy(start));
    OK(cudaEventDestroy(stop));
    OK(cudaStreamDestroy(s[0]));
    OK(cudaStreamDestroy(s[1]));
    OK(cudaFree(din));
    OK(cudaFree(dout));
    OK(cudaFreeHost(h_in));
    OK(cudaFreeHost(h_out));
}

static void CUDART_CB count_call(void *arg) { *(int *)arg += 1; }

// A graph captured from a stream (two kernels and a host function) launched
// twice; the opt-in dynamic shared memory limit; pitched 2-D copies; and
// cudaDeviceReset, after which the runtime starts over.
static void check_graph_pitch_reset() {
    const int n = 3000;
    std::vector<uint32_t> h(n), out(n);
    for (auto &v : h)
        v = next_random();
    uint32_t *d;
    OK(cudaMalloc(&d, n * sizeof(uint32_t)));
    OK(cudaMemcpy(d, h.data(), n * sizeof(uint32_t), cudaMemcpyHostToDevice));
    cudaStream_t s;
    OK(cudaStreamCreate(&s));
    int calls = 0;
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    step<<<(n + 255) / 256, 256, 0, s>>>(n, d, 5);
    step<<<(n + 127) / 128, 128, 0, s>>>(n, d, 11);
    OK(cudaLaunchHostFunc(s, count_call, &calls));
    OK(cudaStreamEndCapture(s, &graph));
    size_t nodes = 0;
    OK(cudaGraphGetNodes(graph, nullptr, &nodes));
    CHECK(nodes == 3, "captured graph has %zu nodes, want 3", nodes);
    OK(cudaGraphInstantiate(&exec, graph, 0));
    OK(cudaGraphLaunch(exec, s));
    OK(cudaGraphLaunch(exec, s));
    OK(cudaStreamSynchronize(s));
    OK(cudaMemcpy(out.data(), d, n * sizeof(uint32_t), cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int i = 0; i < n; i++) {
        uint32_t v = h[i];
        for (int r = 0; r < 2; r++)
            v = (v * 3 + 5) * 3 + 11;
        bad += out[i] != v;
    }
    CHECK(bad == 0 && calls == 2, "graph launched twice: %d wrong, host function ran %d times", bad, calls);
    OK(cudaGraphExecDestroy(exec));
    OK(cudaGraphDestroy(graph));
    OK(cudaStreamDestroy(s));

    int blocks = 0;
    OK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, step, 256, 0));
    CHECK(blocks >= 1, "occupancy %d blocks of 256", blocks);

    // As much dynamic shared memory as the device allows a block, opted in.
    cudaDeviceProp prop;
    OK(cudaGetDeviceProperties(&prop, 0));
    int threads = 1024;
    size_t smem = prop.sharedMemPerBlockOptin;
    if (smem > threads * sizeof(uint32_t) * 16)
        smem = threads * sizeof(uint32_t) * 16;
    OK(cudaFuncSetAttribute(reverse_block, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    uint32_t *r;
    OK(cudaMalloc(&r, threads * sizeof(uint32_t)));
    OK(cudaMemset(r, 0xFF, threads * sizeof(uint32_t)));
    reverse_block<<<1, threads, smem>>>(d, r);
    OK(cudaGetLastError());
    OK(cudaMemcpy(out.data(), r, threads * sizeof(uint32_t), cudaMemcpyDeviceToHost));
    OK(cudaMemcpy(h.data(), d, threads * sizeof(uint32_t), cudaMemcpyDeviceToHost));
    bad = 0;
    for (int t = 0; t < threads; t++)
        bad += out[t] != h[threads - 1 - t];
    CHECK(bad == 0, "reverse_block with %zu bytes of opted-in dynamic shared memory: %d wrong", smem, bad);
    OK(cudaFree(r));

    // A 37 x 19 sub-matrix through pitched memory and back.
    const int w = 37, rows = 19, src_pitch = 50;
    std::vector<uint32_t> src(src_pitch * rows), dst(w * rows, 0xABABABAB);
    for (auto &v : src)
        v = next_random();
    uint32_t *pd;
    size_t pitch = 0;
    OK(cudaMallocPitch(&pd, &pitch, w * sizeof(uint32_t), rows));
    CHECK(pitch >= w * sizeof(uint32_t), "pitch %zu", pitch);
    OK(cudaMemcpy2D(pd, pitch, src.data() + 3, src_pitch * sizeof(uint32_t), w * sizeof(uint32_t), rows,
                    cudaMemcpyHostToDevice));
    OK(cudaMemcpy2D(dst.data(), w * sizeof(uint32_t), pd, pitch, w * sizeof(uint32_t), rows, cudaMemcpyDeviceToHost));
    bad = 0;
    for (int y = 0; y < rows; y++)
        for (int x = 0; x < w; x++)
            bad += dst[y * w + x] != src[y * src_pitch + 3 + x];
    CHECK(bad == 0, "cudaMemcpy2D through a pitch of %zu: %d wrong", pitch, bad);
    OK(cudaFree(pd));
    OK(cudaFree(d));

    // cudaDeviceReset drops everything; the next call starts a new context
    // and loads the program's kernels again.
    OK(cudaDeviceReset());
    OK(cudaMalloc(&d, n * sizeof(uint32_t)));
    OK(cudaMemset(d, 0, n * sizeof(uint32_t)));
    step<<<(n + 255) / 256, 256>>>(n, d, 7);
    OK(cudaGetLastError());
    OK(cudaMemcpy(out.data(), d, n * sizeof(uint32_t), cudaMemcpyDeviceToHost));
    bad = 0;
    for (int i = 0; i < n; i++)
        bad += out[i] != 7;
    CHECK(bad == 0, "a kernel after cudaDeviceReset: %d wrong", bad);
    OK(cudaFree(d));
    printf("ok     graphs, opt-in shared memory, pitched copies, reset\n");
}

// Four host threads, each with its own stream and buffers, at once; then a
// cooperative launch of as many blocks as fit on the device at once.
static void check_threads_cooperative() {
    const int n = 20000, workers = 4;
    int bad[workers] = {0};
    cudaError_t err[workers] = {cudaSuccess};
    std::vector<std::thread> threads;
    for (int t = 0; t < workers; t++)
        threads.emplace_back([t, &bad, &err] {
            std::vector<uint32_t> h(n), out(n, 0);
            uint32_t seed = 0x9E3779B9u * (t + 1);
            for (auto &v : h)
                v = seed = seed * 1664525u + 1013904223u;
            uint32_t *din = nullptr, *dout = nullptr;
            cudaStream_t s;
            cudaError_t e = cudaStreamCreate(&s);
            if (e == cudaSuccess)
                e = cudaMalloc(&din, n * sizeof(uint32_t));
            if (e == cudaSuccess)
                e = cudaMalloc(&dout, n * sizeof(uint32_t));
            if (e == cudaSuccess)
                e = cudaMemcpyAsync(din, h.data(), n * sizeof(uint32_t), cudaMemcpyHostToDevice, s);
            if (e == cudaSuccess)
                e = cudaMemsetAsync(dout, 0xFF, n * sizeof(uint32_t), s);
            for (int r = 0; e == cudaSuccess && r < 3; r++) {
                step<<<(n + 255) / 256, 256, 0, s>>>(n, din, (uint32_t)t);
                e = cudaGetLastError();
            }
            if (e == cudaSuccess)
                e = cudaMemcpyAsync(out.data(), din, n * sizeof(uint32_t), cudaMemcpyDeviceToHost, s);
            if (e == cudaSuccess)
                e = cudaStreamSynchronize(s);
            for (int i = 0; i < n; i++) {
                uint32_t v = h[i];
                for (int r = 0; r < 3; r++)
                    v = v * 3 + (uint32_t)t;
                bad[t] += out[i] != v;
            }
            cudaFree(din);
            cudaFree(dout);
            cudaStreamDestroy(s);
            err[t] = e;
        });
    for (auto &th : threads)
        th.join();
    for (int t = 0; t < workers; t++)
        CHECK(err[t] == cudaSuccess && bad[t] == 0, "host thread %d: %s, %d wrong", t, cudaGetErrorName(err[t]), bad[t]);

    int coop = 0, per_sm = 0, sms = 0;
    OK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, 0));
    OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const int threads_per_block = 128;
    OK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, grid_total, threads_per_block, 0));
    int blocks = per_sm * sms;
    if (coop && blocks > 0) {
        unsigned total = (unsigned)(blocks * threads_per_block);
        uint32_t *p;
        OK(cudaMalloc(&p, (total + 1) * sizeof(uint32_t)));
        OK(cudaMemset(p, 0xFF, (total + 1) * sizeof(uint32_t)));
        void *args[] = {&p};
        OK(cudaLaunchCooperativeKernel((void *)grid_total, dim3(blocks), dim3(threads_per_block), args, 0, 0));
        uint32_t got = 0, want = 0;
        OK(cudaMemcpy(&got, p + total, sizeof got, cudaMemcpyDeviceToHost));
        for (unsigned i = 0; i < total; i++)
            want += i * 7 + 1;
        CHECK(got == want, "grid.sync() across %d blocks: %u, want %u", blocks, got, want);
        OK(cudaFree(p));
        // One block more than fit at once is refused.
        cudaError_t e = cudaLaunchCooperativeKernel((void *)grid_total, dim3(blocks + 1), dim3(threads_per_block), args, 0, 0);
        CHECK(e == cudaErrorCooperativeLaunchTooLarge, "%d blocks: %s", blocks + 1, cudaGetErrorName(e));
    }
    printf("ok     %d host threads, cooperative launch of %d blocks\n", workers, coop ? blocks : 0);
}

static void check_errors_and_printf() {
    // More threads per block than any device allows: the launch fails and
    // the error is not sticky (reading it clears it). NVIDIA's stack says
    // cudaErrorInvalidConfiguration; through ptxvk cudart reports the
    // driver's CUDA_ERROR_INVALID_VALUE as cudaErrorInvalidValue.
    say_hello<<<1, 4096>>>(0);
    cudaError_t bad = cudaGetLastError();
    CHECK(bad == cudaErrorInvalidConfiguration || bad == cudaErrorInvalidValue,
          "a launch of 4096 threads per block fails (%s)", cudaGetErrorName(bad));
    EXPECT(cudaGetLastError(), cudaSuccess);
    say_hello<<<1, 1, 1 << 30>>>(0);
    cudaError_t e = cudaGetLastError();
    CHECK(e != cudaSuccess, "a launch asking 1 GiB of dynamic shared memory fails (%s)", cudaGetErrorName(e));
    EXPECT(cudaGetLastError(), cudaSuccess);
    CHECK(strcmp(cudaGetErrorString(cudaErrorInvalidConfiguration), "invalid configuration argument") == 0,
          "cudaGetErrorString");
    say_hello<<<2, 3>>>(42);
    OK(cudaGetLastError());
    OK(cudaDeviceSynchronize());
    fflush(stdout);
    printf("ok     errors and printf\n");
}

int main() {
    check_device();
    check_memory();
    check_kernels();
    check_streams_events();
    check_graph_pitch_reset();
    check_threads_cooperative();
    check_errors_and_printf();
    printf("%d checks passed\n", checks);
    return 0;
}
