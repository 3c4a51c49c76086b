// Thread block clusters and distributed shared memory (sm_90+).
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

#if __CUDA_ARCH__ >= 900
extern "C" __global__ void __cluster_dims__(2, 1, 1) cluster_exchange(const int* in, int* out) {
    __shared__ int s[128];
    cg::cluster_group cluster = cg::this_cluster();
    unsigned rank = cluster.block_rank();
    s[threadIdx.x] = in[blockIdx.x * 128 + threadIdx.x];
    cluster.sync();
    int* peer = cluster.map_shared_rank(s, rank ^ 1);
    int v = peer[threadIdx.x];
    cluster.sync();
    out[blockIdx.x * 128 + threadIdx.x] = v + (int)cluster.num_blocks() + (int)cluster.dim_blocks().x;
}

extern "C" __global__ void cluster_sregs(unsigned* out) {
    unsigned a, b, c, d, e;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(a));
    asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(b));
    asm volatile("mov.u32 %0, %%clusterid.x;" : "=r"(c));
    asm volatile("mov.u32 %0, %%nclusterid.x;" : "=r"(d));
    asm volatile("{\n .reg .pred p;\n mov.pred p, %%is_explicit_cluster;\n selp.u32 %0, 1, 0, p;\n}" : "=r"(e));
    asm volatile("barrier.cluster.arrive.relaxed;\nbarrier.cluster.wait;" ::: "memory");
    unsigned elected;
    asm volatile("{\n .reg .pred p;\n elect.sync _|p, 0xffffffff;\n selp.u32 %0, 1, 0, p;\n}" : "=r"(elected));
    out[threadIdx.x] = a + b + c + d + e + elected;
}

extern "C" __global__ void setmaxnreg_fence(float* out) {
    asm volatile("fence.proxy.alias;");
    asm volatile("fence.acq_rel.cluster;");
    asm volatile("griddepcontrol.wait;");
    asm volatile("griddepcontrol.launch_dependents;");
    out[threadIdx.x] = 1.0f;
}
#else
extern "C" __global__ void cluster_unsupported(int* out) { out[threadIdx.x] = 0; }
#endif
