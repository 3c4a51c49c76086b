// Hand-written twin of `transpose` in twins.cu: a padded 32 x 33 shared
// tile, workgroups of 32 x 8, four elements per invocation.
#version 450
layout(local_size_x = 32, local_size_y = 8) in;
layout(std430, set = 0, binding = 0) readonly buffer In { float src[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Out { float dst[]; };
layout(push_constant) uniform Push { uint n; };
shared float tile[32][33];
void main() {
    uint lx = gl_LocalInvocationID.x, ly = gl_LocalInvocationID.y;
    uint x = gl_WorkGroupID.x * 32u + lx;
    uint y = gl_WorkGroupID.y * 32u + ly;
    for (uint j = 0u; j < 32u; j += 8u) {
        tile[ly + j][lx] = src[(y + j) * n + x];
    }
    barrier();
    x = gl_WorkGroupID.y * 32u + lx;
    y = gl_WorkGroupID.x * 32u + ly;
    for (uint j = 0u; j < 32u; j += 8u) {
        dst[(y + j) * n + x] = tile[lx][ly + j];
    }
}
