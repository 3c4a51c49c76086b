// Thrust (CUB underneath) on the shim (test_cudart.py):
//
//   nvcc -arch=sm_80 -O2 thrust_algorithms.cu -o thrust_algorithms
//
// reduce, transform, inclusive and exclusive scans (CUB's decoupled
// look-back), count_if, and with the argument `sort` also sort and
// sort_by_key (CUB's onesweep radix sort, tuned for sm_80's 48 KiB of shared
// memory per block; llvmpipe takes more than ten minutes to compile its
// kernel, so test_cudart.py runs it only when asked). CUB picks its tuning from
// cudaFuncGetAttributes' ptxVersion. Random inputs (fixed seed), results
// compared on the host; prints "N checks passed".
#include <thrust/count.h>
#include <thrust/device_vector.h>
#include <thrust/host_vector.h>
#include <thrust/reduce.h>
#include <thrust/scan.h>
#include <thrust/sort.h>
#include <thrust/transform.h>

#include <algorithm>
#include <string>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "check.cuh"

struct square_plus_one {
    __host__ __device__ unsigned operator()(unsigned x) const { return x * x + 1; }
};

struct is_odd {
    __host__ __device__ bool operator()(unsigned x) const { return x & 1; }
};

int main(int argc, char **argv) {
    bool with_sort = argc > 1 && std::string(argv[1]) == "sort";
    const int n = 200000;
    thrust::host_vector<unsigned> h(n);
    unsigned s = 0xC0FFEEu;
    for (auto &v : h)
        v = s = s * 1664525u + 1013904223u;
    try {
        thrust::device_vector<unsigned> d = h, t(n, 0xDEADBEEF), scan(n, 0xDEADBEEF);

        unsigned long long sum = thrust::reduce(d.begin(), d.end(), 0ull), want_sum = 0;
        for (unsigned v : h)
            want_sum += v;
        CHECK(sum == want_sum, "reduce: %llu, want %llu", sum, want_sum);

        thrust::transform(d.begin(), d.end(), t.begin(), square_plus_one());
        thrust::inclusive_scan(t.begin(), t.end(), scan.begin());
        thrust::host_vector<unsigned> got = scan;
        unsigned acc = 0;
        int bad = 0;
        for (int i = 0; i < n; i++) {
            acc += h[i] * h[i] + 1;
            bad += got[i] != acc;
        }
        CHECK(bad == 0, "transform + inclusive_scan: %d of %d wrong", bad, n);

        thrust::exclusive_scan(d.begin(), d.end(), scan.begin(), 7u);
        got = scan;
        acc = 7;
        bad = 0;
        for (int i = 0; i < n; i++) {
            bad += got[i] != acc;
            acc += h[i];
        }
        CHECK(bad == 0, "exclusive_scan: %d of %d wrong", bad, n);

        long odd = thrust::count_if(d.begin(), d.end(), is_odd()), want_odd = 0;
        for (unsigned v : h)
            want_odd += v & 1;
        CHECK(odd == want_odd, "count_if: %ld, want %ld", odd, want_odd);

        // CUB's sm_80 radix sort takes 48 KiB of shared memory per block;
        // beyond the device's Workgroup memory it lives in device memory.
        cudaDeviceProp prop;
        CHECK(cudaGetDeviceProperties(&prop, 0) == cudaSuccess, "cudaGetDeviceProperties");
        CHECK(prop.sharedMemPerBlock == 48 * 1024, "sharedMemPerBlock %zu", prop.sharedMemPerBlock);
        if (!with_sort) {
            printf("ok     reduce, transform, scans, count_if\n%d checks passed\n", checks);
            return 0;
        }
        thrust::sort(d.begin(), d.end());
        thrust::host_vector<unsigned> sorted = d;
        std::vector<unsigned> want(h.begin(), h.end());
        std::sort(want.begin(), want.end());
        CHECK(std::equal(want.begin(), want.end(), sorted.begin()), "sort");

        // 64-bit keys with values: a stable sort by key.
        thrust::host_vector<unsigned long long> hk(n);
        thrust::host_vector<int> hv(n);
        for (int i = 0; i < n; i++) {
            hk[i] = ((unsigned long long)h[i] << 20) % 1000003ull;
            hv[i] = i;
        }
        thrust::device_vector<unsigned long long> dk = hk;
        thrust::device_vector<int> dv = hv;
        thrust::sort_by_key(dk.begin(), dk.end(), dv.begin());
        thrust::host_vector<unsigned long long> gk = dk;
        thrust::host_vector<int> gv = dv;
        std::vector<int> order(n);
        for (int i = 0; i < n; i++)
            order[i] = i;
        std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return hk[a] < hk[b]; });
        bad = 0;
        for (int i = 0; i < n; i++)
            bad += gk[i] != hk[order[i]] || gv[i] != order[i];
        CHECK(bad == 0, "sort_by_key: %d of %d wrong", bad, n);
        printf("ok     sort, sort_by_key\n");
    } catch (const std::exception &e) {
        printf("FAILED: %s\n", e.what());
        return 1;
    }
    printf("ok     reduce, transform, scans, count_if\n%d checks passed\n", checks);
    return 0;
}
