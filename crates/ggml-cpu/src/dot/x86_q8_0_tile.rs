//! Q8_0 weights times Q8_0 columns on AVX2, four weight rows by one or two columns a pass,
//! laid out as llamafile's gemm4xN: the four rows' block scales converted together (one
//! cvtph2ps) and multiplied by each column's, and each row's |codes| taken once for both
//! columns. A weight row is read from memory by its instructions rather than held in a
//! register, so the eight sums, the columns and their scales fit AVX2's 16 registers. Each
//! cell is the per-cell tile's (`ops::qtile`'s Q8_0) chain to the bit: per block
//! f32(dx) * f32(dy) (F16C converts exactly) times the exact i32 sum, fused into one 8-lane
//! accumulator, then the tile's horizontal sum.

use super::x86::hsum_ps as hsum;
use std::arch::x86_64::*;

/// out[r * C + c] = dot(a[r], b[c]) over `nb` Q8_0 blocks, for C of 1 or 2.
///
/// # Safety
/// The CPU has AVX2, FMA and F16C; every a[r] and b[c] points at nb Q8_0 blocks; out holds
/// 4 * C floats.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn q8_0_4xc<const C: usize>(
    nb: usize,
    a: &[*const u8; 4],
    b: &[*const u8; C],
    out: &mut [f32],
) {
    const BS: usize = 34;
    let ones = _mm256_set1_epi16(1);
    let mut acc = [[_mm256_setzero_ps(); C]; 4];
    for ib in 0..nb {
        let o = ib * BS;
        // the four rows' scales as halves in one quadword, widened together
        let h = |r: usize| (a[r].add(o) as *const u16).read_unaligned() as u64;
        let hx = h(0) | h(1) << 16 | h(2) << 32 | h(3) << 48;
        let dx = _mm_cvtph_ps(_mm_cvtsi64_si128(hx as i64));
        let mut qy = [_mm256_setzero_si256(); C];
        let mut dv = [_mm256_setzero_ps(); C];
        for c in 0..C {
            let yb = b[c].add(o);
            qy[c] = _mm256_loadu_si256(yb.add(2) as *const __m256i);
            let hy = (yb as *const u16).read_unaligned() as i32;
            let dy = _mm_cvtph_ps(_mm_cvtsi32_si128(hy));
            // the four products dx[r] * dy in both halves
            let d4 = _mm_mul_ps(dx, _mm_broadcastss_ps(dy));
            dv[c] = _mm256_set_m128(d4, d4);
        }
        macro_rules! row {
            ($r:literal, $imm:literal) => {
                let qx = _mm256_loadu_si256(a[$r].add(o + 2) as *const __m256i);
                let ax = _mm256_abs_epi8(qx);
                for c in 0..C {
                    let p = _mm256_maddubs_epi16(ax, _mm256_sign_epi8(qy[c], qx));
                    let s = _mm256_cvtepi32_ps(_mm256_madd_epi16(p, ones));
                    let d = _mm256_permute_ps::<$imm>(dv[c]);
                    acc[$r][c] = _mm256_fmadd_ps(d, s, acc[$r][c]);
                }
            };
        }
        row!(0, 0x00);
        row!(1, 0x55);
        row!(2, 0xAA);
        row!(3, 0xFF);
    }
    for (o, v) in out.iter_mut().zip(acc.iter().flatten()) {
        *o = hsum(*v);
    }
}

/// `q8_0_4xc::<2>`'s cells with its loop in assembly: its eight sums, two columns, their
/// scales and the i16 ones fill 13 of the 16 registers, and LLVM's schedule of the intrinsics
/// kept one sum on the stack (a store and a load in its chain every block).
///
/// # Safety
/// As for `q8_0_4xc`, with two columns; out holds 8 floats.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn q8_0_4x2(nb: usize, a: &[*const u8; 4], b: &[*const u8; 2], out: &mut [f32]) {
    // SAFETY: the caller's promise.
    let c = unsafe { sums_4x2(nb, a, b) };
    for (o, v) in out.iter_mut().zip(c) {
        *o = hsum(v);
    }
}

/// `q8_0_4x2` storing each column's four cells as one vector at `dst[c]` (rows r..r + 4 of
/// an f32 column): the four horizontal sums taken together, each in `hsum`'s order.
///
/// # Safety
/// As for `q8_0_4x2`; each dst[c] has 4 writable floats.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn q8_0_4x2_to(
    nb: usize,
    a: &[*const u8; 4],
    b: &[*const u8; 2],
    dst: [*mut f32; 2],
) {
    // SAFETY: the caller's promise.
    let [c0, c1, c2, c3, c4, c5, c6, c7] = unsafe { sums_4x2(nb, a, b) };
    // SAFETY: the caller's promise.
    unsafe {
        _mm_storeu_ps(dst[0], hsum4(c0, c2, c4, c6));
        _mm_storeu_ps(dst[1], hsum4(c1, c3, c5, c7));
    }
}

/// [hsum(a), hsum(b), hsum(c), hsum(d)] with every sum in `hsum`'s order: lo + hi, then
/// (s0 + s2) + (s1 + s3).
#[inline]
#[target_feature(enable = "avx2")]
fn hsum4(a: __m256, b: __m256, c: __m256, d: __m256) -> __m128 {
    // [s_a | s_b] and [s_c | s_d]: each lane lo_i + hi_i
    let ab = _mm256_add_ps(
        _mm256_permute2f128_ps::<0x20>(a, b),
        _mm256_permute2f128_ps::<0x31>(a, b),
    );
    let cd = _mm256_add_ps(
        _mm256_permute2f128_ps::<0x20>(c, d),
        _mm256_permute2f128_ps::<0x31>(c, d),
    );
    // per half: [s0 + s2 of a|b, of c|d, s1 + s3 of a|b, of c|d]
    let t = _mm256_add_ps(_mm256_unpacklo_ps(ab, cd), _mm256_unpackhi_ps(ab, cd));
    // lanes 0, 1 of each half: (s0 + s2) + (s1 + s3) of a|b and c|d
    let u = _mm256_add_ps(t, _mm256_permute_ps::<0b01_00_11_10>(t));
    _mm_unpacklo_ps(_mm256_castps256_ps128(u), _mm256_extractf128_ps::<1>(u))
}

/// The eight 8-lane sums of `q8_0_4x2`, cell (r, c) at 2r + c.
///
/// # Safety
/// As for `q8_0_4x2`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn sums_4x2(nb: usize, a: &[*const u8; 4], b: &[*const u8; 2]) -> [__m256; 8] {
    let z = _mm256_setzero_ps();
    let [mut c0, mut c1, mut c2, mut c3, mut c4, mut c5, mut c6, mut c7] = [z; 8];
    if nb > 0 {
        // SAFETY: every pointer covers nb blocks of 34 bytes, read at byte offsets o (the
        // scale, 2 bytes) and o + 2 (the codes, 32 bytes) for o = 0, 34, .., 34 * (nb - 1);
        // the loop writes only the named registers and flags, and no memory.
        std::arch::asm!(
            // i16 ones
            "vpcmpeqw ymm8, ymm8, ymm8",
            "vpsrlw ymm8, ymm8, 15",
            "2:",
            // the four rows' scales in one quadword, widened together
            "movzx {t:e}, word ptr [{a0} + {o}]",
            "movzx {u:e}, word ptr [{a1} + {o}]",
            "shl {u}, 16",
            "or {t}, {u}",
            "movzx {u:e}, word ptr [{a2} + {o}]",
            "shl {u}, 32",
            "or {t}, {u}",
            "movzx {u:e}, word ptr [{a3} + {o}]",
            "shl {u}, 48",
            "or {t}, {u}",
            "vmovq xmm13, {t}",
            "vcvtph2ps xmm13, xmm13",
            // each column's scale times the four, in both halves
            "vpbroadcastw xmm14, word ptr [{b0} + {o}]",
            "vcvtph2ps xmm14, xmm14",
            "vmulps xmm14, xmm13, xmm14",
            "vinsertf128 ymm11, ymm14, xmm14, 1",
            "vpbroadcastw xmm14, word ptr [{b1} + {o}]",
            "vcvtph2ps xmm14, xmm14",
            "vmulps xmm14, xmm13, xmm14",
            "vinsertf128 ymm12, ymm14, xmm14, 1",
            "vmovdqu ymm9, ymmword ptr [{b0} + {o} + 2]",
            "vmovdqu ymm10, ymmword ptr [{b1} + {o} + 2]",
            // row 0
            "vpabsb ymm13, ymmword ptr [{a0} + {o} + 2]",
            "vpsignb ymm14, ymm9, ymmword ptr [{a0} + {o} + 2]",
            "vpmaddubsw ymm14, ymm13, ymm14",
            "vpmaddwd ymm14, ymm14, ymm8",
            "vcvtdq2ps ymm14, ymm14",
            "vpermilps ymm15, ymm11, 0x00",
            "vfmadd231ps ymm0, ymm15, ymm14",
            "vpsignb ymm14, ymm10, ymmword ptr [{a0} + {o} + 2]",
            "vpmaddubsw ymm14, ymm13, ymm14",
            "vpmaddwd ymm14, ymm14, ymm8",
            "vcvtdq2ps ymm14, ymm14",
            "vpermilps ymm15, ymm12, 0x00",
            "vfmadd231ps ymm1, ymm15, ymm14",
            // row 1
            "vpabsb ymm13, ymmword ptr [{a1} + {o} + 2]",
            "vpsignb ymm14, ymm9, ymmword ptr [{a1} + {o} + 2]",
            "vpmaddubsw ymm14, ymm13, ymm14",
            "vpmaddwd ymm14, ymm14, ymm8",
            "vcvtdq2ps ymm14, ymm14",
            "vpermilps ymm15, ymm11, 0x55",
            "vfmadd231ps ymm2, ymm15, ymm14",
            "vpsignb ymm14, ymm10, ymmword ptr [{a1} + {o} + 2]",
            "vpmaddubsw ymm14, ymm13, ymm14",
            "vpmaddwd ymm14, ymm14, ymm8",
            "vcvtdq2ps ymm14, ymm14",
            "vpermilps ymm15, ymm12, 0x55",
            "vfmadd231ps ymm3, ymm15, ymm14",
            // row 2
            "vpabsb ymm13, ymmword ptr [{a2} + {o} + 2]",
            "vpsignb ymm14, ymm9, ymmword ptr [{a2} + {o} + 2]",
            "vpmaddubsw ymm14, ymm13, ymm14",
            "vpmaddwd ymm14, ymm14, ymm8",
            "vcvtdq2ps ymm14, ymm14",
            "vpermilps ymm15, ymm11, 0xAA",
            "vfmadd231ps ymm4, ymm15, ymm14",
            "vpsignb ymm14, ymm10, ymmword ptr [{a2} + {o} + 2]",
            "vpmaddubsw ymm14, ymm13, ymm14",
            "vpmaddwd ymm14, ymm14, ymm8",
            "vcvtdq2ps ymm14, ymm14",
            "vpermilps ymm15, ymm12, 0xAA",
            "vfmadd231ps ymm5, ymm15, ymm14",
            // row 3
            "vpabsb ymm13, ymmword ptr [{a3} + {o} + 2]",
            "vpsignb ymm14, ymm9, ymmword ptr [{a3} + {o} + 2]",
            "vpmaddubsw ymm14, ymm13, ymm14",
            "vpmaddwd ymm14, ymm14, ymm8",
            "vcvtdq2ps ymm14, ymm14",
            "vpermilps ymm15, ymm11, 0xFF",
            "vfmadd231ps ymm6, ymm15, ymm14",
            "vpsignb ymm14, ymm10, ymmword ptr [{a3} + {o} + 2]",
            "vpmaddubsw ymm14, ymm13, ymm14",
            "vpmaddwd ymm14, ymm14, ymm8",
            "vcvtdq2ps ymm14, ymm14",
            "vpermilps ymm15, ymm12, 0xFF",
            "vfmadd231ps ymm7, ymm15, ymm14",
            "add {o}, 34",
            "cmp {o}, {end}",
            "jb 2b",
            a0 = in(reg) a[0],
            a1 = in(reg) a[1],
            a2 = in(reg) a[2],
            a3 = in(reg) a[3],
            b0 = in(reg) b[0],
            b1 = in(reg) b[1],
            o = inout(reg) 0usize => _,
            end = in(reg) nb * 34,
            t = out(reg) _,
            u = out(reg) _,
            inout("ymm0") c0,
            inout("ymm1") c1,
            inout("ymm2") c2,
            inout("ymm3") c3,
            inout("ymm4") c4,
            inout("ymm5") c5,
            inout("ymm6") c6,
            inout("ymm7") c7,
            out("ymm8") _,
            out("ymm9") _,
            out("ymm10") _,
            out("ymm11") _,
            out("ymm12") _,
            out("ymm13") _,
            out("ymm14") _,
            out("ymm15") _,
            options(nostack, readonly),
        );
    }
    [c0, c1, c2, c3, c4, c5, c6, c7]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_assembly_tile_equals_the_intrinsics() {
        let f = crate::simd::features::cpu();
        if !(f.avx2_fma() && f.f16c()) {
            return;
        }
        for nb in [0usize, 1, 2, 7, 64] {
            // blocks with scales of many exponents (and zeros), codes over -127..=127
            let block = |seed: usize, i: usize| -> Vec<u8> {
                let e = ((seed * 31 + i * 7) % 40) as f32 * 0.37 - 6.0;
                let d = if (seed + i).is_multiple_of(11) {
                    0.0
                } else {
                    e.exp2()
                };
                let mut v = crate::fp::f32_to_f16(d).to_le_bytes().to_vec();
                v.extend((0..32).map(|j| ((seed * 131 + i * 37 + j * 53) % 255) as u8 ^ 0x80));
                v
            };
            let mat = |seed: usize| -> Vec<u8> { (0..nb).flat_map(|i| block(seed, i)).collect() };
            let rows: Vec<Vec<u8>> = (0..4).map(mat).collect();
            let cols: Vec<Vec<u8>> = (0..2).map(|c| mat(10 + c)).collect();
            let ap: [*const u8; 4] = std::array::from_fn(|r| rows[r].as_ptr());
            let bp: [*const u8; 2] = std::array::from_fn(|c| cols[c].as_ptr());
            let (mut got, mut want) = ([0.0f32; 8], [0.0f32; 8]);
            // SAFETY: the features hold; every pointer covers nb blocks.
            unsafe {
                q8_0_4x2(nb, &ap, &bp, &mut got);
                q8_0_4xc::<2>(nb, &ap, &bp, &mut want);
            }
            assert_eq!(got.map(f32::to_bits), want.map(f32::to_bits), "nb {nb}");
            // the same cells stored column by column
            let mut cols_out = [[0.0f32; 4]; 2];
            // SAFETY: as above; each column holds 4 floats.
            unsafe {
                let dst = [cols_out[0].as_mut_ptr(), cols_out[1].as_mut_ptr()];
                q8_0_4x2_to(nb, &ap, &bp, dst);
            }
            for r in 0..4 {
                for c in 0..2 {
                    assert_eq!(
                        cols_out[c][r].to_bits(),
                        want[2 * r + c].to_bits(),
                        "nb {nb}"
                    );
                }
            }
        }
    }
}
