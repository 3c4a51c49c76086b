// Device printf of every argument type, and assert.
#include <cstdio>
#include <cassert>

extern "C" __global__ void print_values(const int* in, const double* d, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    printf("thread %d block %u: %d\n", i, blockIdx.x, in[i]);
    printf("%f %e %g %lld %llu %c %s %p\n", d[i], (float)d[i], d[i] * 2, (long long)in[i] << 33,
           (unsigned long long)i, 'A' + (i & 15), "str", in);
    if (in[i] < 0) printf("negative\n");
}

extern "C" __global__ void check_values(const int* in, int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    assert(in[i] >= 0);
    assert(in[i] < 1000 && "value in range");
    out[i] = in[i] * 2;
}

extern "C" __global__ void trap_on_zero(const int* in, int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    if (in[i] == 0) __trap();
    if (in[i] == 1) __brkpt();
    out[i] = 100 / in[i];
}
