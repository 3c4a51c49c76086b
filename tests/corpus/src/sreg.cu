// Special registers: ids, sizes, clocks, timers, sleep.
extern "C" __global__ void special_regs(unsigned* out, long long* t) {
    unsigned idx = ((blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x) * (blockDim.x * blockDim.y * blockDim.z) +
                   (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
    long long c0 = clock64();
    unsigned c = clock();
    unsigned smid, nsmid, gridid_lo;
    unsigned long long gt, gridid;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    asm volatile("mov.u32 %0, %%nsmid;" : "=r"(nsmid));
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(gt));
    asm volatile("mov.u64 %0, %%gridid;" : "=l"(gridid));
    gridid_lo = (unsigned)gridid;
#if __CUDA_ARCH__ >= 700
    __nanosleep(100);
#endif
    out[idx] = warpSize + smid + nsmid + gridid_lo + c;
    t[idx] = clock64() - c0 + (long long)gt;
}

extern "C" __global__ void env_regs(unsigned* out) {
    unsigned e0, dsm, tsm;
    asm volatile("mov.u32 %0, %%envreg0;" : "=r"(e0));
    asm volatile("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dsm));
    asm volatile("mov.u32 %0, %%total_smem_size;" : "=r"(tsm));
    out[threadIdx.x] = e0 + dsm + tsm;
}
