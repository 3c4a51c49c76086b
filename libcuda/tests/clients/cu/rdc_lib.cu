// The other half of rdc_main.cu: device code it links against.
#include <cstdint>

__device__ uint32_t d_table[16];

__host__ __device__ static uint32_t rotl(uint32_t x, uint32_t r) { return (x << r) | (x >> ((32 - r) & 31)); }

__device__ uint32_t scramble(uint32_t x, uint32_t round) { return rotl(x * 0x9E3779B1u, round * 5 + 3) ^ (x >> 7); }

uint32_t host_scramble(uint32_t x, uint32_t round, const uint32_t *) {
    return rotl(x * 0x9E3779B1u, round * 5 + 3) ^ (x >> 7);
}
