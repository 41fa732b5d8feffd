#version 450
// SET_ROWS: f32 rows of src0 written, converted to dst's type (u1: 0 F32, 1 F16, 2 BF16), at the
// row indices of src1 (i64 when u0 = 1, i32 when u0 = 0; broadcast over dims 2 and 3).
#define WG_SIZE 256
#include "common.glsl"
#include "generic.glsl"

layout(local_size_x = WG_SIZE) in;
layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer I { int idx[]; };
layout(std430, binding = 3) writeonly buffer D32 { float d32[]; };
layout(std430, binding = 3) writeonly buffer D16 { float16_t d16[]; };
layout(std430, binding = 3) writeonly buffer DU16 { uint16_t du16[]; };

void main() {
    uint n = p.ne00 * p.ne01 * p.ne02 * p.ne03;
    for (uint i = flat_gid(); i < n; i += flat_nthreads()) {
        uvec4 c = coords(i, p.ne00, p.ne01, p.ne02);
        // index strides are in i32 units; an i64 index is read as its low word
        uint ii = p.off1 + c.y * p.nb10 + (c.z % p.ne11) * p.nb11 + (c.w % p.ne12) * p.nb12;
        int row = idx[ii];
        if (row < 0 || uint(row) >= p.ne1) {
            continue;
        }
        float v = a[p.off0 + c.x * p.nb00 + c.y * p.nb01 + c.z * p.nb02 + c.w * p.nb03];
        uint id = p.offd + c.x * p.nb0 + uint(row) * p.nb1 + c.z * p.nb2 + c.w * p.nb3;
        if (p.u1 == 0) {
            d32[id] = v;
        } else if (p.u1 == 1) {
            d16[id] = float16_t(v);
        } else {
            du16[id] = uint16_t(f32_to_bf16(v));
        }
    }
}
