#version 450
// ADD_ID: dst[i0, i1, i2] = a[i0, i1, i2] + b[i0, ids[i1, i2]] (f32; ids i32 in binding 2,
// its element strides in u0, u1).
#define WG_SIZE 256
#include "common.glsl"
#include "generic.glsl"

layout(local_size_x = WG_SIZE) in;
layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 2) readonly buffer I { int ids[]; };
layout(std430, binding = 3) writeonly buffer D { float d[]; };

void main() {
    uint n = p.ne0 * p.ne1 * p.ne2;
    for (uint i = flat_gid(); i < n; i += flat_nthreads()) {
        uvec4 c = coords(i, p.ne0, p.ne1, p.ne2);
        // op holds the ids' element offset
        int e = ids[p.op + c.y * p.u0 + c.z * p.u1];
        float x = a[p.off0 + c.x * p.nb00 + c.y * p.nb01 + c.z * p.nb02];
        float y = b[p.off1 + c.x * p.nb10 + uint(e) * p.nb11];
        d[p.offd + c.x * p.nb0 + c.y * p.nb1 + c.z * p.nb2] = x + y;
    }
}
