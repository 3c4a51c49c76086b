// Thrust (CUB underneath) on the shim (test_cudart.py):
//
//   nvcc -arch=sm_80 -O2 thrust_algorithms.cu -o thrust_algorithms
//
// reduce, transform, inclusive and exclusive scans (CUB's decoupled
// look-back), count_if and, on devices with the 48 KiB of shared memory per
// block CUB's sm_80 radix sort is tuned for, sort. CUB picks its tuning from
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

int main() {
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

        cudaDeviceProp prop;
        CHECK(cudaGetDeviceProperties(&prop, 0) == cudaSuccess, "cudaGetDeviceProperties");
        if (prop.sharedMemPerBlock >= 48 * 1024) {
            thrust::sort(d.begin(), d.end());
            thrust::host_vector<unsigned> sorted = d;
            std::vector<unsigned> want(h.begin(), h.end());
            std::sort(want.begin(), want.end());
            CHECK(std::equal(want.begin(), want.end(), sorted.begin()), "sort");
            printf("ok     sort\n");
        } else {
            printf("skip   sort: CUB's sm_80 radix sort needs 48 KiB of shared memory per block, the device has %zu\n",
                   prop.sharedMemPerBlock);
        }
    } catch (const std::exception &e) {
        printf("FAILED: %s\n", e.what());
        return 1;
    }
    printf("ok     reduce, transform, scans, count_if\n%d checks passed\n", checks);
    return 0;
}
