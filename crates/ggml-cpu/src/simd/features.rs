//! The CPU feature probe every kernel consults: the instruction sets are detected once per
//! process, and each kernel family asks for the combination its code is compiled for.
//!
//! # Numerics policy
//! The reference outputs come from llama.cpp built for x86 with AVX2 (GGML_NATIVE on a CPU
//! without AVX-512), so on such a CPU our kernels keep llama.cpp's float order and give its
//! digits: the dot products (`dot::x86`, `dot::x86_k23`: ggml's AVX2 accumulators and
//! reductions, e.g. GGML_F32x8_REDUCE for F32/F16; `dot::x86_iq*`, `dot::x86_fp4`: the IQ, TQ,
//! MXFP4, NVFP4 and Q1_0 kernels of ggml's x86 quants.c, whose bits `dot::tests_ggml` checks
//! against llama.cpp's own functions; ggml has no AVX2 Q2_0 kernel, so its scalar code is the
//! order there), the Q8_0/Q8_1/Q8_K activation quantizers,
//! the register tiles that follow llama.cpp's repacked and tiled kernels (`ops::qtile` for
//! Q4_0 / Q8_0 / Q5_0, `ops::ktile` for the K-quants, `ops::gemm` for F32/F16 as tinyBLAS
//! sums), FLASH_ATTN_EXT (one query row: ggml's online softmax with the f16 accumulator and
//! GCC's contraction of `S*ms + vs`; many rows: the tiled kernel), ROPE (GCC's fused first
//! product), SILU/SWIGLU/SOFT_MAX (ggml_v_expf), RMS_NORM and the f16 conversions (F16C).
//! The order of a Q4_0, IQ4_NL or Q4_K matmul follows where its weight lives, as llama.cpp's
//! does: in the CPU_REPACK buffer (`crate::repack`, the default where AVX2 is present) the
//! repacked gemm / gemv orders (q4_0_8x8, iq4_nl_8x8, q4_K_8x8, mxfp4_8x8 and, with AVX-512F,
//! q2_K_8x8); in a plain buffer (`-nr`, or a host buffer of a GPU device) the dot product's
//! order and, for K types, the tiled one. The AVX2 kernels of prompt processing that are not
//! ggml's own (`ops::qtile`'s nibble-panel kernels and its Q4_1/Q5_1 tiles (`dot::x86`
//! `q4_1_tile_k2`), `dot::x86_k4x8` (repacked Q4_K, 8 rows), `dot::x86_mxfp4_repack`'s
//! `panel_avx2`) are, like the AVX-512 ones below, new kernels for those orders: exact integer
//! block sums (vpmaddubsw pairs added in i16 only where the bound is checked), the same float
//! chain per cell, and a bit test against the kernel or reference whose order they keep.
//!
//! On an AVX-512 CPU the kernels follow ggml's AVX-512 code where one exists (its AVX-512 build's
//! logs are the fixtures there: `test_fixtures::simd_class()`); the IQ/TQ/FP4 types run their AVX2
//! kernels, as ggml's AVX-512 build compiles the same AVX2 code for them, except IQ4_XS
//! (`dot::x86_iq4_xs`) and Q3_K (`dot::x86_k23`, with GFNI), whose 512-bit kernels compute ggml's
//! AVX2 integer lanes and float steps (same digits; the AVX-512 fixture checks them). The AVX-512
//! VNNI tiles of prompt processing (`ops::qtile`'s Q4_0/IQ4_NL panels and two-cell Q8_0 tile,
//! `dot::x86_k512`'s Q3_K/Q5_K/Q6_K tiles and multi-row mat-vecs, the 16-row gemms of
//! `dot::x86_k4x16` (repacked Q4_K), `dot::x86_kt16` (tiled K-quants) and `dot::x86_q0x16`
//! (Q8_0/Q4_0/Q5_0), `dot::x86_mxfp4_repack`'s VNNI panels (repacked MXFP4), the eight-row
//! Q8_0/Q4_1 mat-vecs of `dot::x86_rows8`, the Q8_0 row loop of `dot::x86_q8_0_rows`, `ops::gemm`'s
//! 4 x 6 F16 tile) are new kernels for llama.cpp's orders, not new orders: they compute each
//! block's integer sum, which is exact, with other instructions, and keep every output cell's chain
//! of float operations, so they give the same digits (each has a test against the kernel it
//! replaces). Not llama.cpp's digits: the scalar kernels of a CPU without AVX2/FMA, which are the
//! portable definitions every SIMD kernel is tested against (equal up to summation order). On
//! aarch64 the NEON dot products give the bits of ggml's NEON build (armv8-a, or +dotprod where
//! FEAT_DotProd is detected; `dot::tests_neon`).

use std::sync::OnceLock;

/// The instruction sets this process may use.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Features {
    pub avx: bool,
    pub avx2: bool,
    pub fma: bool,
    pub f16c: bool,
    pub avx512f: bool,
    pub avx512bw: bool,
    pub avx512vl: bool,
    pub avx512dq: bool,
    pub avx512vnni: bool,
    /// vdpbf16ps (ggml's `__AVX512BF16__` BF16 dot product).
    pub avx512bf16: bool,
    /// GF(2) affine byte transforms (vgf2p8affineqb): any bits of a byte moved in one step.
    pub gfni: bool,
    /// BMI2 (pdep).
    pub bmi2: bool,
    /// CPUID's vendor is AuthenticAMD (see `prefetch_rows`).
    pub amd: bool,
    #[cfg(target_arch = "aarch64")]
    pub neon: bool,
    /// FEAT_DotProd (SDOT/UDOT), ggml's `__ARM_FEATURE_DOTPROD`.
    #[cfg(target_arch = "aarch64")]
    pub dotprod: bool,
}

impl Features {
    fn detect() -> Features {
        #[allow(unused_mut)]
        let mut f = Features::default();
        #[cfg(target_arch = "x86_64")]
        {
            f.avx = is_x86_feature_detected!("avx");
            f.avx2 = is_x86_feature_detected!("avx2");
            f.fma = is_x86_feature_detected!("fma");
            f.f16c = is_x86_feature_detected!("f16c");
            f.avx512f = is_x86_feature_detected!("avx512f");
            f.avx512bw = is_x86_feature_detected!("avx512bw");
            f.avx512vl = is_x86_feature_detected!("avx512vl");
            f.avx512dq = is_x86_feature_detected!("avx512dq");
            f.avx512vnni = is_x86_feature_detected!("avx512vnni");
            f.avx512bf16 = is_x86_feature_detected!("avx512bf16");
            f.gfni = is_x86_feature_detected!("gfni");
            f.bmi2 = is_x86_feature_detected!("bmi2");
            f.amd = is_amd();
        }
        #[cfg(target_arch = "aarch64")]
        {
            f.neon = std::arch::is_aarch64_feature_detected!("neon");
            f.dotprod = std::arch::is_aarch64_feature_detected!("dotprod");
        }
        f
    }

    /// AVX2 with FMA: the 8-lane float kernels (tiles, expf, rope, attention).
    pub fn avx2_fma(&self) -> bool {
        self.avx2 && self.fma
    }

    /// AVX2, FMA and F16C: the AVX2 dot products (their block scales are halves).
    pub fn avx2_dot(&self) -> bool {
        self.avx2_fma() && self.f16c
    }

    /// The AVX-512 dot products: F, BW, VL and VNNI on top of the AVX2 set.
    pub fn avx512_dot(&self) -> bool {
        self.avx2_dot() && self.avx512f && self.avx512bw && self.avx512vl && self.avx512vnni
    }

    /// The AVX-512 Q3_K kernels (`dot::x86_k23::q3_k_avx512`, `q3_k_rows`): the dot-product
    /// set and GFNI, which takes each code's bits apart in one step.
    pub fn avx512_q3_k(&self) -> bool {
        self.avx512_dot() && self.gfni
    }

    /// The AVX-512 IQ4_XS kernels (`dot::x86_iq4_xs`): the dot-product set and BMI2 (the
    /// block's scales spread by pdep).
    pub fn avx512_iq4_xs(&self) -> bool {
        self.avx512_dot() && self.bmi2
    }

    /// 512-bit integer work on bytes and words, and its 256/128-bit forms (the Q8 activation
    /// quantizer).
    pub fn avx512bw_vl(&self) -> bool {
        self.avx512f && self.avx512bw && self.avx512vl
    }

    /// VNNI integer sums in the 256-bit quantized tiles.
    pub fn avx2_vnni(&self) -> bool {
        self.avx2_fma() && self.avx512vnni && self.avx512vl
    }

    /// F16C conversions (VEX-encoded, so AVX too).
    pub fn f16c(&self) -> bool {
        self.avx && self.f16c
    }

    /// The 8-lane f16 accumulations of FLASH_ATTN_EXT.
    pub fn f16c_fma(&self) -> bool {
        self.f16c() && self.fma
    }

    /// The 16-lane f16 accumulation.
    pub fn avx512_f16(&self) -> bool {
        self.avx512f && self.f16c && self.fma
    }

    /// Whether a one-column product of weight rows of `row_bytes` each prefetches the weight
    /// ahead in software. Measured faster on an Intel Xeon for every row size. On an AMD EPYC
    /// (Zen 3) faster for short rows (Gemma 3 270M tg32 -t 1 26-28 -> 36-39 t/s, SmolLM2
    /// 48-52 -> 58-75) but slower for rows of a page or more, where its hardware prefetchers
    /// keep up alone (1.1B F16, 4 KiB rows: tg16 -t 1 4.8 -> 6.6 t/s without them).
    /// F32 weights streamed faster there without them even in short rows (the
    /// reference model's 151936 x 256 F32 output, 1 KiB rows: tg64 -t 1 86-91 -> 92-109 t/s),
    /// while quantized rows of 1-2 KiB still gain (Gemma 3's 1680-byte Q6_K rows 88-95 -> 83-87
    /// us a node; the 1.1B q8_0's 2176-byte rows tg16 -t 2 19.4-19.6 -> 20.8-21.2 t/s).
    /// CPU_REPACK's Q4_0 / IQ4_NL nibble panels (`ops::qtile::packed_gemv`) count as rows of a
    /// panel's length (18 KiB at 2048 wide): without the prefetches the 1.1B q4_0 tg32 went
    /// from 22-24 to 31-35 t/s at -t 2 and 14-17 to 22 at -t 1 (three alternated rounds).
    /// Repacked Q4_K's 8-row gemv (`dot::x86_k4x8::gemv8`) keeps its prefetches: without them
    /// the 1.1B q4_k_m tg32 fell from 25 to 22-24 t/s (-t 2) and 14-18 to 12-13.5 (-t 1).
    /// On an AMD EPYC with AVX-512 VNNI (Zen 4) only Q4_0 rows (the four-row
    /// `ops::qtile::column` passes, and the repacked nibble panels) keep them: without them
    /// Gemma 3's 440-byte Q5_0 rows fell from 17 to 12-13 GB/s at -t 2 (in four-row passes;
    /// they now go one by one, see `several_rows`), while the rows taken
    /// one by one and the K-quant passes gained (SmolLM2 tg128 -t 1 92-99 -> 104-109 t/s,
    /// Gemma 3's 1680-byte Q6_K rows 15-17 -> 17.5-22 GB/s at -t 1, the reference q4_k_m
    /// model's tg128 491-497 -> 527-564 at -t 1 and 742-767 -> 798-963 at -t 2).
    pub fn prefetch_rows(&self, ty: ggml::Type, row_bytes: usize) -> bool {
        use ggml::Type::{F32, Q4_0};
        if !self.amd {
            return true;
        }
        let zen4_keeps = !self.amd_avx512() || ty == Q4_0;
        row_bytes < 4096 && ty != F32 && zen4_keeps
    }

    /// Whether a one-column product of quantized weight rows of `row_bytes` each goes down the
    /// column several rows a pass (`ops::qtile::column`, the four-row kernels) rather than row
    /// after row. On the AMD EPYC (Zen 3) only for short rows, where one row's call and
    /// horizontal sum weigh most; longer rows streamed faster one at a time (Gemma 3 270M
    /// tg32 -t 1 38.9 -> 49.6 t/s: its 680-byte Q8_0 output rows 11.0 -> 16.0 GB/s, its
    /// 1680-byte Q6_K rows 6.3 -> 15.3; the 1.1B shape q8_0 10.4 -> 12.0; but the reference
    /// model's 272-byte Q8_0 rows 259 -> 181-215 t/s; SmolLM2's 360-byte Q4_1 rows 73 -> 54).
    /// On an AMD EPYC with AVX-512 VNNI (Zen 4), whose several-row kernels for Q8_0, Q4_1 and
    /// Q5_1 are the eight-row `dot::x86_rows8` ones, those types go row by row at every length:
    /// SmolLM2's 360-byte Q4_1 rows, tg128 -t 1 83-92 -> 111-113 t/s and -t 2 132-134 ->
    /// 158-178 (its 576 x 1536 products 69-75 -> 48 us at -t 1); the reference model's
    /// 272-byte Q8_0 output rows 2.8-3.2 -> 2.3-2.5 ms at -t 1 (tg128 268-305 -> 340-359 t/s)
    /// and 1.3-1.7 -> 1.1-1.5 ms at -t 2. Its K-quant rows measured faster several at a
    /// time, as on Zen 3. (Q8_0 rows one by one now go through `dot::x86_q8_0_rows`' loop: the
    /// same 272-byte rows 2.1 -> 1.5 ms at -t 1; and Q5_0 rows too, which were faster in
    /// four-row passes than through mul_mat's row loop: Gemma 3's 440-byte rows, 640 x 2048
    /// products 80-91 -> 65-68 us at -t 1, tg64 -t 1 58-60 -> 62-66 t/s, -t 2 94-99 ->
    /// 100-107, in three alternated rounds; and Q4_1 / Q5_1 rows: SmolLM2 tg128 averaged 116
    /// -> 120 t/s at -t 1 and 171 -> 183 at -t 2 over eight alternated rounds, within the
    /// noise of each.)
    pub fn several_rows(&self, ty: ggml::Type, row_bytes: usize) -> bool {
        use ggml::Type::{Q4_1, Q5_0, Q5_1, Q8_0};
        let one_by_one = matches!(ty, Q4_1 | Q5_1 | Q5_0 | Q8_0) && self.amd_avx512();
        !self.amd || (row_bytes < 512 && !one_by_one)
    }

    /// Whether a one-column product of F16 rows of `row_bytes` each takes them four at a time
    /// (`dot::rows4_kernel`'s F16 kernels) rather than one after another. The AVX2 kernel
    /// reads four separate pages at once where a row is a page or less; on the AMD EPYC
    /// (Zen 3) that measured slower than one row after another (1.1B shape, -t 1: 2048-wide
    /// rows 12.4 GB/s four at a time, 15.3 one by one; 5632-wide rows 16.2 and 15.2), so it
    /// takes only longer rows. On the EPYC with AVX-512 (Zen 4) the four-row AVX-512 kernel
    /// halved the 1.1B f16 generation (tg16 -t 1 6.1-6.7 t/s four at a time, 11.4-12.6 one by
    /// one; -t 2 10.2-12.9 and 20.9-21.8), so rows go one by one there at every length.
    pub fn f16_rows4(&self, row_bytes: usize) -> bool {
        !self.amd_avx512() && (self.avx512_dot() || row_bytes > 4096)
    }

    /// How far ahead, and into which cache, the AVX-512 eight-row Q4_K gemv
    /// (`dot::x86_k512::q4_k_gemv8_strided`, CPU_REPACK's Q4_K weights) prefetches its rows'
    /// blocks. On the AMD EPYC with AVX-512 (Zen 4) into L2 only, 16 blocks (18 KiB) ahead: the
    /// 1.1B q4_k_m's 5632-wide Q4_K rows 316-338 -> 248-258 us a node at -t 1 (2048-wide ones
    /// unchanged at 255-280), tg16 -t 1 34.6-35.8 -> 35.5-36.9 t/s in three alternated pairs;
    /// into L1 at that distance 360-440 us (it evicts the rows in use), and without prefetches
    /// the earlier 1.1B q4_k_m tg32 -t 1 was faster than with the L1 ones 4 blocks ahead
    /// (25.7-28.2 -> 28.4-31.5 t/s). Elsewhere 4 blocks ahead into L1, as measured before.
    pub fn q4_k_gemv_prefetch(&self) -> Ahead {
        if self.amd_avx512() {
            Ahead {
                blocks: 16,
                to_l2: true,
            }
        } else {
            Ahead {
                blocks: 4,
                to_l2: false,
            }
        }
    }

    /// How many bytes past the page a row of `ty` ends on the row loops of one column touch,
    /// one line a page into L2 (`simd::prefetch_page_ahead`; F16's loop at every page its
    /// loads enter, inside a row too); 0: none. The hardware prefetcher
    /// stops at every 4 KiB page, and weights in the file's map come in 4 KiB pages wherever
    /// the page cache holds them so. On the AMD EPYC with AVX-512 (Zen 4):
    ///
    /// - Q8_0 / Q5_0 rows (`dot::x86_q8_0_rows`), one page: Gemma 3's 262144 x 640 output
    ///   (680-byte rows) 11.9-12.5 -> 9.5-10.4 ms a node at -t 1 and 6.8-7.3 -> 6.5-6.7 ms at
    ///   -t 2 in three alternated rounds (two pages ahead alike); Q5_0 rows take the same (not
    ///   measured apart), Q4_1 / Q5_1 rows none (SmolLM2's, within the noise either way).
    /// - F32 rows (`dot::x86::f32_rows_k512`), two pages: the reference model's 151936 x 256
    ///   output (1 KiB rows) at -t 1 averaged 6.4, 7.1 and 6.5 ms a node against 7.4, 7.7 and
    ///   6.8 with every line prefetched into L2 one page ahead (three sets of three or four
    ///   alternated rounds; one page ahead 6.4 and 7.7, none 6.7 and 7.4), tg128 -t 1 135-148
    ///   against 120-131 t/s (llama.cpp 112-135 in the same rounds); at -t 2 within the noise
    ///   (4.4-4.9 against 3.9-5.3 ms). Every line one page ahead had measured best the session
    ///   before (6.3-6.8 -> 5.5-5.6 ms against none).
    /// - F16 rows taken one after another (`dot::x86_f16_rows`, rows longer than a page), one
    ///   page, at every page the loads enter inside a row: the 1.1B f16's 11 KiB rows (5632 x
    ///   2048) at -t 1 took 1.10-1.16 times the time of the 2048 x 5632 node (the same bytes,
    ///   4 KiB rows by halves) in six alternated rounds, 1.03-1.06 times so (923-1023 -> 853-991
    ///   us); two pages ahead alike; at -t 2 1.09-1.12 against 1.07-1.15 (not worse). The same
    ///   touch for the rows by halves, and for Q6_K's 4620-byte rows, within the noise.
    ///
    /// The same touch in mul_mat's one-by-one row loop: the 1.1B q4_k_m's Q6_K rows 400-435 ->
    /// 625-675 us a 5632 x 2048 node two pages ahead, unchanged one page ahead (not kept); F16
    /// rows measured slower with every line prefetched (the 1.1B f16's 4 KiB rows, one row
    /// ahead into L2, 850-900 -> 1030 us a 2048 x 5632 node).
    pub fn rows_page_ahead(&self, ty: ggml::Type) -> usize {
        use ggml::Type::{Bf16, F16, F32, Q5_0, Q8_0};
        match ty {
            Q8_0 | Q5_0 | F16 | Bf16 if self.amd_avx512() => 4096,
            F32 if self.amd_avx512() => 8192,
            _ => 0,
        }
    }

    /// Whether one column's rows of `ty` taken one by one go two at a time instead, row r of a
    /// chunk's first half beside row r of its second half (two chains in flight, from two
    /// streams far apart): Q8_0 rows (`dot::x86_q8_0_rows`) and Q6_K rows
    /// (`dot::x86_k512::q6_k_rows_halves`) on the AMD EPYC with AVX-512 (Zen 4). There Gemma
    /// 3's 262144 x 640 Q8_0 output ran 10.1 -> 8.3-8.6 ms a node at -t 1 in three alternated
    /// rounds (tg64 -t 1 62-66 -> 70-73 t/s), the 1.1B q8_0 tg16 -t 1 23.5-23.8 -> 25.8 (the
    /// reference model's 272-byte rows unchanged); the 1.1B q4_k_m's Q6_K rows, 5632 x 2048
    /// 440-539 -> 411-448 us and the 2048 x 32000 output 3.1-3.5 -> 2.9 ms at -t 1. Gemma 3's
    /// 440-byte Q5_0 rows measured 3-5% slower so, and go one after another. Two adjacent
    /// rows side by side ran at half the speed: the prefetcher sees no stream.
    ///
    /// F16 rows (`dot::x86_f16_rows`) of a page or less (`row_bytes`): the 1.1B f16's 4 KiB
    /// rows at -t 1, 2048 x 5632 850-867 -> 768-772 us a node, 2048 x 2048 312-319 -> 277-280,
    /// the 2048 x 32000 output 4.65-4.76 -> 4.27-4.35 ms (tg16 12.6-12.8 -> 13.8 t/s, one
    /// round of three within the noise); at -t 2 within the host's swings (4 alternated
    /// rounds, 3 faster). Its 11 KiB rows (5632 x 2048) ran 860-880 -> 975-1015 us so, and go
    /// one after another through the same loop (as fast as mul_mat's row loop). BF16 rows
    /// (`dot::x86_bf16::rows`) take F16's rule (by halves or not: alike in four alternated
    /// rounds of the 1.1B bf16 at -t 1 and -t 2, within the host's swings). Q3_K rows
    /// (`dot::x86_k23::q3_k_rows`, compute-bound at 10-11 GB/s) go one after another: the
    /// 1.1B Q3_K_M's 2048 x 5632 nodes 433-473 us so against 463-524 by halves at -t 1.
    ///
    /// IQ4_XS rows (`dot::x86_iq4_xs::rows`) go by halves: the 1.1B IQ4_XS's 2048 x 5632
    /// nodes at -t 1 389-392 us one after another, 320-328 by halves (15.7 -> 19 GB/s).
    pub fn rows_in_halves(&self, ty: ggml::Type, row_bytes: usize) -> bool {
        use ggml::Type::{Bf16, Iq4Xs, F16, Q6K, Q8_0};
        self.amd_avx512()
            && (matches!(ty, Q8_0 | Q6K | Iq4Xs) || (matches!(ty, F16 | Bf16) && row_bytes <= 4096))
    }

    /// Whether one column's BF16 rows go through `dot::x86_bf16::rows` (the vdpbf16ps dot
    /// product row after row, a page ahead, or two a pass from the chunk's halves, as F16's
    /// rows go) instead of mul_mat's row loop: on the AMD EPYC with AVX-512 (Zen 4), where the
    /// row loop read the 1.1B bf16's weights at 18-19 GB/s against F16's 25-27.
    pub fn bf16_rows(&self) -> bool {
        self.amd_avx512() && self.avx512bf16
    }

    /// An AMD EPYC with the AVX-512 dot products (Zen 4 class): the CPU the Zen 4 rules above
    /// were measured on, apart from Zen 3's AVX2-only EPYC.
    fn amd_avx512(&self) -> bool {
        self.amd && self.avx512_dot()
    }

    /// Whether a one-column product taken row by row reads several stretches of the weight
    /// side by side (`ops::matmul`'s STREAMS): faster on the Xeon; on the EPYC no better (the
    /// reference q4_k_m model, whose Q6_K output matrix goes row by row: tg -t 1 / -t 2 0.65 /
    /// 0.70 of llama.cpp with them, 0.65-0.77 / 0.97-1.01 without them; noisy host).
    pub fn stream_rows(&self) -> bool {
        !self.amd
    }

    /// The 16-lane expf (its range reduction uses AVX-512DQ).
    pub fn avx512_exp(&self) -> bool {
        self.avx512f && self.avx512dq && self.fma
    }
}

/// A prefetch policy: this many blocks ahead, into L2 only or into L1.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ahead {
    pub blocks: usize,
    pub to_l2: bool,
}

/// Whether CPUID names the vendor AuthenticAMD.
#[cfg(target_arch = "x86_64")]
fn is_amd() -> bool {
    let r = std::arch::x86_64::__cpuid(0);
    let name: Vec<u8> = [r.ebx, r.edx, r.ecx]
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .collect();
    name == b"AuthenticAMD"
}

/// This CPU's features, probed on first use.
pub(crate) fn cpu() -> &'static Features {
    static F: OnceLock<Features> = OnceLock::new();
    F.get_or_init(Features::detect)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combinations_imply_their_parts() {
        let f = cpu();
        assert!(!f.avx512_dot() || f.avx2_dot());
        assert!(!f.avx2_dot() || (f.avx2 && f.fma && f.f16c));
        assert!(!f.f16c_fma() || f.f16c());
        #[cfg(target_arch = "x86_64")]
        assert_eq!(
            f.avx2_fma(),
            is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
        );
    }
}
