#version 450
// CPY, DUP, CONT: element i of src0 (in its own ne order) to element i of dst (in dst's ne
// order), converting between F32 (type 0), F16 (1) and BF16 (2): u0 is src0's type, u1 dst's.
#define WG_SIZE 256
#include "common.glsl"
#include "generic.glsl"

layout(local_size_x = WG_SIZE) in;
layout(std430, binding = 0) readonly buffer A32 { float a32[]; };
layout(std430, binding = 0) readonly buffer A16 { float16_t a16[]; };
layout(std430, binding = 0) readonly buffer AU16 { uint16_t au16[]; };
layout(std430, binding = 3) writeonly buffer D32 { float d32[]; };
layout(std430, binding = 3) writeonly buffer D16 { float16_t d16[]; };
layout(std430, binding = 3) writeonly buffer DU16 { uint16_t du16[]; };

void main() {
    uint n = p.ne0 * p.ne1 * p.ne2 * p.ne3;
    for (uint i = flat_gid(); i < n; i += flat_nthreads()) {
        uvec4 s = coords(i, p.ne00, p.ne01, p.ne02);
        uvec4 c = coords(i, p.ne0, p.ne1, p.ne2);
        uint ia = p.off0 + s.x * p.nb00 + s.y * p.nb01 + s.z * p.nb02 + s.w * p.nb03;
        uint id = p.offd + c.x * p.nb0 + c.y * p.nb1 + c.z * p.nb2 + c.w * p.nb3;
        float v;
        if (p.u0 == 0) {
            v = a32[ia];
        } else if (p.u0 == 1) {
            v = float(a16[ia]);
        } else {
            v = bf16_to_f32(uint(au16[ia]));
        }
        if (p.u1 == 0) {
            d32[id] = v;
        } else if (p.u1 == 1) {
            d16[id] = float16_t(v);
        } else {
            du16[id] = uint16_t(f32_to_bf16(v));
        }
    }
}
