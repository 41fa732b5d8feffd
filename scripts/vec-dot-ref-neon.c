// Runs llama.cpp's own aarch64 dot products (ggml/src/ggml-cpu/arch/arm/quants.c and, for
// F32/F16/BF16, ggml-cpu/vec.cpp, compiled here from the pinned source) on the cases that ggml-cpu's tests_neon writes, and prints
// each result as f32 bits: "name n bits". Built twice by scripts/record-vec-dot-neon, for
// armv8-a (ggml's vdotq emulation) and armv8.2-a+dotprod (SDOT), and run under qemu-aarch64;
// see tests/fixtures/vec-dot-neon/README.md.
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-impl.h"

typedef void (*vec_dot_t)(int, float *, size_t, const void *, size_t, const void *, size_t, int);

// what the quants files need from ggml-base and ggml-cpu.c, none of it on the dot path
float ggml_table_f32_ue4m3[1 << 8];
void ggml_abort(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s:%d: ", file, line);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    abort();
}
size_t ggml_row_size(enum ggml_type t, int64_t ne) { (void)t; (void)ne; abort(); }
size_t ggml_type_size(enum ggml_type t) { (void)t; abort(); }
const char *ggml_type_name(enum ggml_type t) { (void)t; return "?"; }

#define DOT(name) \
    void ggml_vec_dot_##name(int, float *, size_t, const void *, size_t, const void *, size_t, int);
DOT(q4_0_q8_0) DOT(q4_1_q8_1) DOT(q5_0_q8_0) DOT(q5_1_q8_1) DOT(q8_0_q8_0) DOT(iq4_nl_q8_0)
DOT(q2_K_q8_K) DOT(q3_K_q8_K) DOT(q4_K_q8_K) DOT(q5_K_q8_K) DOT(q6_K_q8_K) DOT(iq4_xs_q8_K)
DOT(mxfp4_q8_0) DOT(nvfp4_q8_0) DOT(tq1_0_q8_K) DOT(tq2_0_q8_K)
DOT(q1_0_q8_0) DOT(q2_0_q8_0) DOT(iq2_xxs_q8_K) DOT(iq2_xs_q8_K) DOT(iq2_s_q8_K)
DOT(iq3_xxs_q8_K) DOT(iq3_s_q8_K) DOT(iq1_s_q8_K) DOT(iq1_m_q8_K)
// vec.cpp's float dot products take typed pointers; the calling convention is the same
void ggml_vec_dot_f32(int, float *, size_t, const float *, size_t, const float *, size_t, int);
void ggml_vec_dot_f16(int, float *, size_t, ggml_fp16_t *, size_t, ggml_fp16_t *, size_t, int);
void ggml_vec_dot_bf16(int, float *, size_t, ggml_bf16_t *, size_t, ggml_bf16_t *, size_t, int);

#define ENTRY(name) {#name, ggml_vec_dot_##name}
static const struct {
    const char *name;
    vec_dot_t fn;
} table[] = {
    ENTRY(q4_0_q8_0), ENTRY(q4_1_q8_1), ENTRY(q5_0_q8_0), ENTRY(q5_1_q8_1),
    ENTRY(q8_0_q8_0), ENTRY(iq4_nl_q8_0), ENTRY(q2_K_q8_K), ENTRY(q3_K_q8_K),
    ENTRY(q4_K_q8_K), ENTRY(q5_K_q8_K), ENTRY(q6_K_q8_K), ENTRY(iq4_xs_q8_K),
    ENTRY(mxfp4_q8_0), ENTRY(nvfp4_q8_0), ENTRY(tq1_0_q8_K), ENTRY(tq2_0_q8_K),
    ENTRY(q1_0_q8_0), ENTRY(q2_0_q8_0), ENTRY(iq2_xxs_q8_K), ENTRY(iq2_xs_q8_K),
    ENTRY(iq2_s_q8_K), ENTRY(iq3_xxs_q8_K), ENTRY(iq3_s_q8_K), ENTRY(iq1_s_q8_K),
    ENTRY(iq1_m_q8_K),
    {"f32", (vec_dot_t)ggml_vec_dot_f32}, {"f16", (vec_dot_t)ggml_vec_dot_f16},
    {"bf16", (vec_dot_t)ggml_vec_dot_bf16},
};

static uint8_t *part(FILE *f, uint32_t *len) {
    if (fread(len, 4, 1, f) != 1) return NULL;
    uint8_t *p = malloc(*len + 1);
    if (!p || fread(p, 1, *len, f) != *len) { fprintf(stderr, "truncated case file\n"); exit(1); }
    p[*len] = 0;
    return p;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s CASES\n", argv[0]);
        return 1;
    }
    FILE *f = fopen(argv[1], "rb");
    if (!f) { perror(argv[1]); return 1; }
    for (int i = 0; i < 256; i++) ggml_table_f32_ue4m3[i] = ggml_ue4m3_to_fp32((uint8_t)i);
#if defined(__ARM_FEATURE_DOTPROD)
    printf("# name n bits (ggml's NEON kernels, armv8.2-a+dotprod)\n");
#else
    printf("# name n bits (ggml's NEON kernels, armv8-a)\n");
#endif
    uint32_t len;
    uint8_t *name;
    while ((name = part(f, &len)) != NULL) {
        uint32_t nl, xl, yl, n;
        uint8_t *np = part(f, &nl), *x = part(f, &xl), *y = part(f, &yl);
        memcpy(&n, np, 4);
        int k = -1;
        for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
            if (strcmp(table[i].name, (char *)name) == 0) k = (int)i;
        if (k < 0) { fprintf(stderr, "unknown kernel %s\n", name); return 1; }
        float a = 0;
        table[k].fn(n, &a, 0, x, 0, y, 0, 1);
        uint32_t ab;
        memcpy(&ab, &a, 4);
        printf("%s %u 0x%08x\n", (char *)name, n, ab);
        free(name); free(np); free(x); free(y);
    }
    return 0;
}
