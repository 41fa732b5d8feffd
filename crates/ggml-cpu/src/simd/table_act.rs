//! Activations looked up in an f16 table (ggml's GGML_GELU_FP16 path: GELU, GEGLU): each x is
//! rounded to f16 (F16C, to nearest even, as GGML_CPU_FP32_TO_FP16), its table entry widened
//! back and, for a GLU, multiplied by the gate. Eight lanes at a time where F16C is present;
//! the lookup itself stays scalar (no 16-bit gather), the conversions and products do not.

use crate::fp;

/// y[i] = f(x[i]) (times g[i] when given), f(x) = table[f16(x)]; with `clamp`, GGML_GELU_FP16's
/// bounds: f(x) = 0 for x <= -10 and x for x >= 10.
pub(crate) fn table_act(y: &mut [f32], x: &[f32], g: Option<&[f32]>, table: &[u16], clamp: bool) {
    let n = y.len().min(x.len()).min(g.map_or(usize::MAX, |g| g.len()));
    assert!(table.len() > u16::MAX as usize, "a table of every half");
    let mut i = 0;
    #[cfg(target_arch = "x86_64")]
    {
        let f = super::features::cpu();
        if f.avx2 && f.f16c() {
            // SAFETY: AVX2 and F16C are available (checked above); x, y (and g) hold n; the
            // table holds every half.
            i = unsafe { x86::table_act(&mut y[..n], &x[..n], g.map(|g| &g[..n]), table, clamp) };
        }
    }
    for j in i..n {
        let v = if clamp && x[j] <= -10.0 {
            0.0
        } else if clamp && x[j] >= 10.0 {
            x[j]
        } else {
            fp::f16_to_f32(table[fp::f32_to_f16(x[j]) as usize])
        };
        y[j] = match g {
            // (ggml's geglu: 0 for x <= -10 without the product)
            Some(_) if clamp && x[j] <= -10.0 => 0.0,
            Some(g) => v * g[j],
            None => v,
        };
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// `table_act` eight at a time; returns how many it did (a multiple of 8).
    ///
    /// # Safety
    /// AVX2 and F16C are available; y, x (and g) have the same length; table.len() > 65535.
    #[target_feature(enable = "avx2,f16c")]
    pub unsafe fn table_act(
        y: &mut [f32],
        x: &[f32],
        g: Option<&[f32]>,
        table: &[u16],
        clamp: bool,
    ) -> usize {
        let n = y.len() / 8 * 8;
        let (lo, hi) = (_mm256_set1_ps(-10.0), _mm256_set1_ps(10.0));
        let mut i = 0;
        while i < n {
            // SAFETY: i + 8 <= n <= every slice's length; every u16 indexes the table.
            unsafe {
                let xv = _mm256_loadu_ps(x.as_ptr().add(i));
                let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(xv);
                let mut k = [0u16; 8];
                _mm_storeu_si128(k.as_mut_ptr() as *mut __m128i, h);
                let v = k.map(|k| *table.get_unchecked(k as usize));
                let t = _mm256_cvtph_ps(_mm_loadu_si128(v.as_ptr() as *const __m128i));
                let (mut r, big) = match g {
                    Some(g) => {
                        let gv = _mm256_loadu_ps(g.as_ptr().add(i));
                        (_mm256_mul_ps(t, gv), _mm256_mul_ps(xv, gv))
                    }
                    None => (t, xv),
                };
                if clamp {
                    r = _mm256_blendv_ps(r, big, _mm256_cmp_ps::<_CMP_GE_OQ>(xv, hi));
                    r = _mm256_andnot_ps(_mm256_cmp_ps::<_CMP_LE_OQ>(xv, lo), r);
                }
                _mm256_storeu_ps(y.as_mut_ptr().add(i), r);
            }
            i += 8;
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vector path against the one-by-one definition, bit for bit, over x that round to
    /// every f16 neighbourhood of the table's range, ties included, and past the bounds.
    #[test]
    fn vector_lookup_equals_the_scalar_one() {
        // any table: a value per half
        let table: Vec<u16> = (0..=u16::MAX).map(|h| h.rotate_left(3) ^ 0x1234).collect();
        let table: Vec<u16> = table.into_iter().map(|h| h & 0x7bff).collect();
        let mut x: Vec<f32> = (0..40000)
            .map(|i| (i as f32 - 20000.0) * 0.000_61)
            .collect();
        // halfway between two halves (ties to even), the bounds, beyond them
        x.extend([
            1.0 + 1.0 / 2048.0,
            1.0 + 3.0 / 2048.0,
            -10.0,
            10.0,
            -10.5,
            12.0,
            0.0,
            -0.0,
        ]);
        let g: Vec<f32> = (0..x.len()).map(|i| 1.0 + (i % 13) as f32 * 0.37).collect();
        for clamp in [false, true] {
            for gate in [None, Some(&g[..])] {
                let mut got = vec![0.0f32; x.len()];
                table_act(&mut got, &x, gate, &table, clamp);
                for (j, &xj) in x.iter().enumerate() {
                    let v = if clamp && xj <= -10.0 {
                        0.0
                    } else if clamp && xj >= 10.0 {
                        xj
                    } else {
                        fp::f16_to_f32(table[fp::f32_to_f16(xj) as usize])
                    };
                    let want = match gate {
                        Some(_) if clamp && xj <= -10.0 => 0.0,
                        Some(g) => v * g[j],
                        None => v,
                    };
                    assert_eq!(got[j].to_bits(), want.to_bits(), "x {xj} clamp {clamp}");
                }
            }
        }
    }
}
