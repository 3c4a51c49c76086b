// Hand-written twin of `reduce_sum` in twins.cu: a grid-stride slice per
// invocation, subgroup sums, the workgroup's through shared memory.
#version 450
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) readonly buffer X { float x[]; };
layout(std430, set = 0, binding = 1) writeonly buffer P { float partial_sums[]; };
layout(push_constant) uniform Push { uint n; };
shared float sums[64]; // subgroups of at least 4 invocations
void main() {
    uint stride = gl_NumWorkGroups.x * 256u;
    float s = 0.0;
    for (uint i = gl_GlobalInvocationID.x; i < n; i += stride) {
        s += x[i];
    }
    s = subgroupAdd(s);
    if (subgroupElect()) {
        sums[gl_SubgroupID] = s;
    }
    barrier();
    if (gl_SubgroupID == 0u) {
        float t = 0.0;
        for (uint k = gl_SubgroupInvocationID; k < gl_NumSubgroups; k += gl_SubgroupSize) {
            t += sums[k];
        }
        t = subgroupAdd(t);
        if (subgroupElect()) {
            partial_sums[gl_WorkGroupID.x] = t;
        }
    }
}
