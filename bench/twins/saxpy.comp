// Hand-written twin of `saxpy` in twins.cu. 16M elements need 65536
// workgroups, one more than a dimension is guaranteed: a 2-D dispatch.
#version 450
layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) readonly buffer X { float x[]; };
layout(std430, set = 0, binding = 1) buffer Y { float y[]; };
layout(push_constant) uniform Push { uint n; float a; };
void main() {
    uint i = gl_GlobalInvocationID.y * (gl_NumWorkGroups.x * 256u) + gl_GlobalInvocationID.x;
    if (i < n) {
        y[i] = fma(a, x[i], y[i]);
    }
}
