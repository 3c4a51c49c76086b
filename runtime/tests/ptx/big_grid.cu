// nvcc: nvcc -ptx -arch=sm_80 -O3 big_grid.cu -o big_grid.ptx
// out[i] = blockIdx.x * 7 + threadIdx.x (u32, wrapping) for
// i = blockIdx.x * blockDim.x + threadIdx.x < n. Meant to be launched with
// more than 65535 blocks in x.
extern "C" __global__ void big_grid(unsigned* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = blockIdx.x * 7u + threadIdx.x;
    }
}
