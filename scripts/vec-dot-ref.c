// Runs llama.cpp's own dot products on the cases that ggml-cpu's tests_ggml writes (see
// tests/fixtures/vec-dot-avx2/README.md and vec-dot-avx512/README.md): for each case,
// ggml_vec_dot_<name> (the kernel of the libggml-cpu it is linked against: AVX2 or AVX-512)
// and ggml_vec_dot_<name>_generic, printed as f32 bits. vec.cpp's F32/F16/BF16 dot products
// have no generic twin: for them both columns hold the kernel of the build.
//
// With `--bench ROWS`, each case's x holds ROWS weight rows and the kernel of the build is
// timed over all of them against the one activation row (one thread, best of 3 runs of at
// least 0.2 s): printed as "name n ns-per-row" (crates/ggml-cpu/benches/vec_dot_ggml.rs).
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef void (*vec_dot_t)(int, float *, size_t, const void *, size_t, const void *, size_t, int);

#define DOT(name)                                                                              \
    void ggml_vec_dot_##name(int, float *, size_t, const void *, size_t, const void *, size_t, \
                             int);                                                             \
    void ggml_vec_dot_##name##_generic(int, float *, size_t, const void *, size_t,             \
                                       const void *, size_t, int);
DOT(iq2_xxs_q8_K) DOT(iq2_xs_q8_K) DOT(iq2_s_q8_K) DOT(iq3_xxs_q8_K) DOT(iq3_s_q8_K)
DOT(iq1_s_q8_K) DOT(iq1_m_q8_K) DOT(iq4_xs_q8_K) DOT(tq1_0_q8_K) DOT(tq2_0_q8_K)
DOT(mxfp4_q8_0) DOT(nvfp4_q8_0) DOT(q1_0_q8_0)
DOT(q4_0_q8_0) DOT(q4_1_q8_1) DOT(q5_0_q8_0) DOT(q5_1_q8_1) DOT(q8_0_q8_0) DOT(iq4_nl_q8_0)
DOT(q2_K_q8_K) DOT(q3_K_q8_K) DOT(q4_K_q8_K) DOT(q5_K_q8_K) DOT(q6_K_q8_K)
// x86 has no Q2_0 kernel: arch-fallback.h names the generic one ggml_vec_dot_q2_0_q8_0
void ggml_vec_dot_q2_0_q8_0(int, float *, size_t, const void *, size_t, const void *, size_t, int);
// vec.cpp's float dot products take typed pointers; the calling convention is the same
void ggml_vec_dot_f32(int, float *, size_t, const void *, size_t, const void *, size_t, int);
void ggml_vec_dot_f16(int, float *, size_t, const void *, size_t, const void *, size_t, int);
void ggml_vec_dot_bf16(int, float *, size_t, const void *, size_t, const void *, size_t, int);
void ggml_cpu_init(void);

#define ENTRY(name) {#name, ggml_vec_dot_##name, ggml_vec_dot_##name##_generic}
static const struct {
    const char *name;
    vec_dot_t fast, generic;
} table[] = {
    ENTRY(iq2_xxs_q8_K), ENTRY(iq2_xs_q8_K), ENTRY(iq2_s_q8_K), ENTRY(iq3_xxs_q8_K),
    ENTRY(iq3_s_q8_K),   ENTRY(iq1_s_q8_K),  ENTRY(iq1_m_q8_K), ENTRY(iq4_xs_q8_K),
    ENTRY(tq1_0_q8_K),   ENTRY(tq2_0_q8_K),  ENTRY(mxfp4_q8_0), ENTRY(nvfp4_q8_0),
    ENTRY(q1_0_q8_0),    {"q2_0_q8_0", ggml_vec_dot_q2_0_q8_0, ggml_vec_dot_q2_0_q8_0},
    ENTRY(q4_0_q8_0),    ENTRY(q4_1_q8_1),   ENTRY(q5_0_q8_0),  ENTRY(q5_1_q8_1),
    ENTRY(q8_0_q8_0),    ENTRY(iq4_nl_q8_0), ENTRY(q2_K_q8_K),  ENTRY(q3_K_q8_K),
    ENTRY(q4_K_q8_K),    ENTRY(q5_K_q8_K),   ENTRY(q6_K_q8_K),
    {"f32", ggml_vec_dot_f32, ggml_vec_dot_f32},
    {"f16", ggml_vec_dot_f16, ggml_vec_dot_f16},
    {"bf16", ggml_vec_dot_bf16, ggml_vec_dot_bf16},
};

static uint8_t *part(FILE *f, uint32_t *len) {
    if (fread(len, 4, 1, f) != 1) return NULL;
    uint8_t *p = malloc(*len + 1);
    if (!p || fread(p, 1, *len, f) != *len) { fprintf(stderr, "truncated case file\n"); exit(1); }
    p[*len] = 0;
    return p;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static double bench(vec_dot_t fn, uint32_t n, const uint8_t *x, size_t row, int rows,
                    const uint8_t *y) {
    double best = 1e30;
    volatile float sink = 0;
    for (int run = 0; run < 3; run++) {
        double start = now(), el;
        long passes = 0;
        do {
            for (int r = 0; r < rows; r++) {
                float s;
                fn(n, &s, 0, x + r * row, 0, y, 0, 1);
                sink += s;
            }
            passes++;
        } while ((el = now() - start) < 0.2);
        if (el / passes < best) best = el / passes;
    }
    (void)sink;
    return best / rows * 1e9;
}

int main(int argc, char **argv) {
    int rows = 0;
    const char *path = argc == 2 ? argv[1] : NULL;
    if (argc == 4 && strcmp(argv[1], "--bench") == 0) {
        rows = atoi(argv[2]);
        path = rows > 0 ? argv[3] : NULL;
    }
    if (!path) {
        fprintf(stderr, "usage: %s [--bench ROWS] CASES\n", argv[0]);
        return 1;
    }
    FILE *f = fopen(path, "rb");
    if (!f) { perror(path); return 1; }
    ggml_cpu_init();
    if (!rows) printf("# name n ggml_build_bits ggml_generic_bits\n");
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
        if (rows) {
            double ns = bench(table[k].fast, n, x, xl / rows, rows, y);
            printf("%s %u %.1f\n", (char *)name, n, ns);
            free(name); free(np); free(x); free(y);
            continue;
        }
        float a = 0, b = 0;
        table[k].fast(n, &a, 0, x, 0, y, 0, 1);
        table[k].generic(n, &b, 0, x, 0, y, 0, 1);
        uint32_t ab, bb;
        memcpy(&ab, &a, 4);
        memcpy(&bb, &b, 4);
        printf("%s %u 0x%08x 0x%08x\n", (char *)name, n, ab, bb);
        free(name); free(np); free(x); free(y);
    }
    return 0;
}
