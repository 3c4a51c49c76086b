// Separate compilation (test_cudart.py): built with rdc_lib.cu as
//
//   nvcc -rdc=true -arch=sm_80 rdc_main.cu rdc_lib.cu -o rdc
//
// The kernel here calls a __device__ function and reads a __device__ table
// defined in rdc_lib.cu, so the device code of the two files must be linked.
// nvlink's output is machine code (or empty with PTX-only targets); the
// driver links the PTX of the two files' pre-link fat binaries itself.
// Random inputs (fixed seed), a poisoned output, compared on the host.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

extern __device__ uint32_t scramble(uint32_t x, uint32_t round);
extern __device__ uint32_t d_table[16];
uint32_t host_scramble(uint32_t x, uint32_t round, const uint32_t *table);

__global__ void apply(int n, const uint32_t *in, uint32_t *out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = scramble(in[i], (uint32_t)i & 3) + d_table[i & 15];
}

int main() {
    int checks = 0;
    const int n = 10000;
    std::vector<uint32_t> in(n), out(n, 0), table(16);
    uint32_t seed = 0x1234567u;
    for (auto &v : in)
        v = seed = seed * 1103515245u + 12345u;
    for (auto &v : table)
        v = seed = seed * 1103515245u + 12345u;
    uint32_t *din, *dout;
    cudaError_t e = cudaMalloc(&din, n * sizeof(uint32_t));
    if (e == cudaSuccess)
        e = cudaMalloc(&dout, n * sizeof(uint32_t));
    if (e == cudaSuccess)
        e = cudaMemcpyToSymbol(d_table, table.data(), 16 * sizeof(uint32_t));
    if (e == cudaSuccess)
        e = cudaMemcpy(din, in.data(), n * sizeof(uint32_t), cudaMemcpyHostToDevice);
    if (e == cudaSuccess)
        e = cudaMemset(dout, 0xFF, n * sizeof(uint32_t));
    if (e == cudaSuccess) {
        apply<<<(n + 255) / 256, 256>>>(n, din, dout);
        e = cudaGetLastError();
    }
    if (e == cudaSuccess)
        e = cudaMemcpy(out.data(), dout, n * sizeof(uint32_t), cudaMemcpyDeviceToHost);
    checks++;
    if (e != cudaSuccess) {
        printf("FAILED: %s\n", cudaGetErrorName(e));
        return 1;
    }
    int bad = 0;
    for (int i = 0; i < n; i++)
        bad += out[i] != host_scramble(in[i], (uint32_t)i & 3, table.data()) + table[i & 15];
    checks++;
    if (bad) {
        printf("FAILED: %d of %d wrong\n", bad, n);
        return 1;
    }
    printf("ok     a kernel calling device code of another file\n%d checks passed\n", checks);
    return 0;
}
