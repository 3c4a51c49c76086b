// SIMD-within-a-word intrinsics and dot products.
extern "C" __global__ void simd_video(const unsigned* a, const unsigned* b, unsigned* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned x = a[i], y = b[i];
    out[8 * i + 0] = __vadd2(x, y) ^ __vsub4(x, y);
    out[8 * i + 1] = __vabsdiffu4(x, y) + __vabsdiffs2(x, y);
    out[8 * i + 2] = __vmaxu4(x, y) + __vmins2(x, y);
    out[8 * i + 3] = __vcmpeq4(x, y) | __vcmpgtu2(x, y);
    out[8 * i + 4] = __vavgu4(x, y) + __vhaddu2(x, y);
    out[8 * i + 5] = __vsads4(x, y) + __vsetltu4(x, y);
    out[8 * i + 6] = (unsigned)__dp4a((int)x, (int)y, 5) + __dp4a(x, y, 7u);
    out[8 * i + 7] = (unsigned)__dp2a_lo((int)x, (int)y, 1) + __dp2a_hi(x, y, 2u);
}

extern "C" __global__ void simd_sm90(const unsigned* a, const unsigned* b, unsigned* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned x = a[i], y = b[i];
    out[i] = __vimax3_u32(x, y, 7u) + __vimin_s16x2_relu(x, y) + __viaddmax_u32(x, y, 9u) + __vimax_s32_relu((int)x, (int)y);
}
