// Warp shuffles, votes, match and redux.
extern "C" __global__ void warp_shuffle(const int* in, int* out, float* fout, double* dout, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = i < n ? in[i] : 0;
    unsigned full = 0xffffffffu;
    int a = __shfl_sync(full, v, 3);
    int b = __shfl_up_sync(full, v, 1);
    int c = __shfl_down_sync(full, v, 2);
    int d = __shfl_xor_sync(full, v, 16);
    int e = __shfl_sync(full, v, threadIdx.x + 1, 16);
    float f = __shfl_xor_sync(full, (float)v, 1);
    double g = __shfl_down_sync(full, (double)v, 4);
    long long h = __shfl_sync(full, (long long)v << 20, 0);
    for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(full, v, o);
    if (i < n) {
        out[4 * i] = a + b;
        out[4 * i + 1] = c ^ d;
        out[4 * i + 2] = e + v;
        out[4 * i + 3] = (int)(h >> 3);
        fout[i] = f;
        dout[i] = g;
    }
}

extern "C" __global__ void warp_vote(const int* in, unsigned* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = i < n ? in[i] : 0;
    unsigned m = __activemask();
    unsigned ballot = __ballot_sync(m, v > 0);
    int all = __all_sync(m, v != 0);
    int any = __any_sync(m, v < 0);
    int uni = __uni_sync(m, v == 5);
    if (v & 1) {
        __syncwarp(__activemask());
        ballot += __popc(__activemask());
    }
    __syncwarp();
    if (i < n) out[i] = ballot + all * 2 + any * 4 + uni * 8;
}

extern "C" __global__ void warp_match_redux(const int* in, unsigned* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = i < n ? in[i] : 0;
    unsigned r = 0;
#if __CUDA_ARCH__ >= 700
    int pred;
    r += __match_any_sync(0xffffffffu, v);
    r += __match_all_sync(0xffffffffu, v & 1, &pred) + pred;
    r += __match_any_sync(0xffffffffu, (unsigned long long)v * 3);
#endif
#if __CUDA_ARCH__ >= 800
    r += __reduce_add_sync(0xffffffffu, (unsigned)v);
    r += __reduce_min_sync(0xffffffffu, (unsigned)v) + __reduce_max_sync(0xffffffffu, v);
    r += __reduce_and_sync(0xffffffffu, (unsigned)v) ^ __reduce_or_sync(0xffffffffu, (unsigned)v) ^
         __reduce_xor_sync(0xffffffffu, (unsigned)v);
#endif
    if (i < n) out[i] = r;
}

extern "C" __global__ void warp_lanemask(unsigned* out) {
    unsigned lt, le, gt, ge, eq, lane, warpid;
    asm("mov.u32 %0, %%lanemask_lt;" : "=r"(lt));
    asm("mov.u32 %0, %%lanemask_le;" : "=r"(le));
    asm("mov.u32 %0, %%lanemask_gt;" : "=r"(gt));
    asm("mov.u32 %0, %%lanemask_ge;" : "=r"(ge));
    asm("mov.u32 %0, %%lanemask_eq;" : "=r"(eq));
    asm("mov.u32 %0, %%laneid;" : "=r"(lane));
    asm volatile("mov.u32 %0, %%warpid;" : "=r"(warpid));
    out[threadIdx.x] = lt + le + gt + ge + eq + lane + warpid;
}
