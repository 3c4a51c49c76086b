// Integer arithmetic of every width and signedness.
#include <cstdint>

template <typename T>
__device__ T int_ops(T a, T b, int s) {
    T r = a + b;
    r ^= a - b;
    r += a * b;
    if (b != 0) {
        r += a / b;
        r ^= a % b;
    }
    r += (a << (s & 7)) | (b >> (s & 7));
    r = r < a ? a : r;
    r = r > b ? r - b : r;
    r += ~a & (b | r);
    return r;
}

#define INT_KERNEL(T, name)                                                            \
    extern "C" __global__ void name(const T* a, const T* b, T* out, int n, int s) {    \
        int i = blockIdx.x * blockDim.x + threadIdx.x;                                   \
        if (i < n) out[i] = int_ops<T>(a[i], b[i], s);                                   \
    }

INT_KERNEL(int8_t, ops_s8)
INT_KERNEL(uint8_t, ops_u8)
INT_KERNEL(int16_t, ops_s16)
INT_KERNEL(uint16_t, ops_u16)
INT_KERNEL(int32_t, ops_s32)
INT_KERNEL(uint32_t, ops_u32)
INT_KERNEL(int64_t, ops_s64)
INT_KERNEL(uint64_t, ops_u64)

extern "C" __global__ void int_intrinsics(const unsigned* a, const unsigned* b, unsigned* out,
                                          unsigned long long* out64, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned x = a[i], y = b[i];
    out[8 * i + 0] = __popc(x) + __clz(y) + __ffs(x);
    out[8 * i + 1] = __brev(x) ^ __byte_perm(x, y, 0x5140);
    out[8 * i + 2] = __umulhi(x, y) + __mulhi((int)x, (int)y);
    out[8 * i + 3] = __funnelshift_l(x, y, i) ^ __funnelshift_r(x, y, i & 31);
    out[8 * i + 4] = __sad((int)x, (int)y, 7u) + __usad(x, y, 3u);
    out[8 * i + 5] = __umul24(x, y) + __mul24((int)x, (int)y);
    out[8 * i + 6] = __hadd((int)x, (int)y) + __uhadd(x, y) + __rhadd((int)x, (int)y) + __urhadd(x, y);
    out[8 * i + 7] = (unsigned)abs((int)x) + min(x, y) + max((int)x, (int)y);
    unsigned long long X = ((unsigned long long)x << 32) | y;
    out64[2 * i] = __umul64hi(X, X + 3) + __popcll(X) + __clzll((long long)X) + __ffsll((long long)X);
    out64[2 * i + 1] = __brevll(X) + (unsigned long long)llabs((long long)X) + __mul64hi((long long)X, 77);
}

extern "C" __global__ void mad_wide(const int* a, const int* b, long long* out, unsigned long long* uout, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    long long w = (long long)a[i] * b[i] + out[i];
    out[i] = w;
    uout[i] = (unsigned long long)(unsigned)a[i] * (unsigned)b[i] + 12345ull;
}
