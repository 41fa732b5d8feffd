// Shared by every shader: the storage extensions ggml-vulkan relies on too (16- and 8-bit
// loads and stores, no 16-bit arithmetic), and the grid-stride helpers.
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : enable

// A flat invocation index over a 2-D grid of workgroups (the x count is limited to 65535).
// WG_SIZE is the shader's local_size_x, defined before this file is included
// (gl_WorkGroupSize is not yet set here: the layout declaration comes later).
uint flat_gid() {
    return gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * WG_SIZE;
}

uint flat_nthreads() {
    return gl_NumWorkGroups.x * gl_NumWorkGroups.y * WG_SIZE;
}

float bf16_to_f32(uint v) {
    return uintBitsToFloat(v << 16);
}

// Round to nearest even, NaN kept quiet (ggml_compute_fp32_to_bf16).
uint f32_to_bf16(float f) {
    uint u = floatBitsToUint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        return (u >> 16) | 64u;
    }
    return (u + (0x7fffu + ((u >> 16) & 1u))) >> 16;
}
