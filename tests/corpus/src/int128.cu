// 128-bit integer arithmetic (lowered to 64-bit pieces with carries).
extern "C" __global__ void int128_ops(const unsigned long long* a, const unsigned long long* b, unsigned long long* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned __int128 x = ((unsigned __int128)a[2 * i] << 64) | a[2 * i + 1];
    unsigned __int128 y = ((unsigned __int128)b[2 * i] << 64) | b[2 * i + 1];
    unsigned __int128 s = x + y, p = x * y, d = x - y;
    __int128 q = (__int128)x >> 7;
    unsigned __int128 r = s ^ p ^ d ^ (unsigned __int128)q ^ (x << (i & 63));
    if (y != 0) r += x / y + x % y;
    out[2 * i] = (unsigned long long)(r >> 64);
    out[2 * i + 1] = (unsigned long long)r;
}

extern "C" __global__ void carry_chain(const unsigned* a, const unsigned* b, unsigned* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned r0, r1, r2, r3;
    asm("add.cc.u32 %0, %4, %5;\n\t"
        "addc.cc.u32 %1, %4, %5;\n\t"
        "addc.cc.u32 %2, %5, %4;\n\t"
        "addc.u32 %3, 0, 0;\n\t"
        : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
        : "r"(a[i]), "r"(b[i]));
    unsigned s0, s1;
    asm("sub.cc.u32 %0, %2, %3;\n\tsubc.u32 %1, %3, %2;" : "=r"(s0), "=r"(s1) : "r"(a[i]), "r"(b[i]));
    unsigned m0, m1;
    asm("mad.lo.cc.u32 %0, %2, %3, %2;\n\tmadc.hi.u32 %1, %2, %3, %3;" : "=r"(m0), "=r"(m1) : "r"(a[i]), "r"(b[i]));
    out[i] = r0 + r1 + r2 + r3 + s0 + s1 + m0 + m1;
}
