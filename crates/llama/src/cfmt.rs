//! printf-style number formats that Rust's formatter does not have (`%.Ne`, `%g`), so log lines
//! read exactly as llama.cpp prints them.

/// `%.{prec}e`: mantissa, 'e', sign and at least two exponent digits ("1.0e-05").
pub fn exp(v: f64, prec: usize) -> String {
    if !v.is_finite() {
        return nonfinite(v);
    }
    let s = format!("{:.*e}", prec, v);
    let (mant, e) = s.split_once('e').unwrap_or((&s, "0"));
    let e: i32 = e.parse().unwrap_or(0);
    let sign = if e < 0 { '-' } else { '+' };
    format!("{mant}e{sign}{:02}", e.abs())
}

fn nonfinite(v: f64) -> String {
    if v.is_nan() {
        "nan".into()
    } else if v > 0.0 {
        "inf".into()
    } else {
        "-inf".into()
    }
}

/// `%g` with the default precision of 6.
pub fn g(v: f64) -> String {
    g_prec(v, 6)
}

/// `%.{p}g`: the shorter of %e and %f at p significant digits, trailing zeros removed.
pub fn g_prec(v: f64, p: usize) -> String {
    if !v.is_finite() {
        return nonfinite(v);
    }
    if v == 0.0 {
        return if v.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    let p = p.max(1);
    // the exponent after rounding to p significant digits decides the style
    let e_str = format!("{:.*e}", p - 1, v);
    let x: i32 = e_str
        .split_once('e')
        .map_or(0, |(_, e)| e.parse().unwrap_or(0));
    if x < -4 || x >= p as i32 {
        let s = exp(v, p - 1);
        let (mant, e) = s.split_once('e').unwrap_or((&s, ""));
        format!("{}e{}", strip_zeros(mant), e)
    } else {
        let decimals = (p as i32 - 1 - x).max(0) as usize;
        strip_zeros(&format!("{:.*}", decimals, v))
    }
}

fn strip_zeros(s: &str) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_matches_printf() {
        assert_eq!(exp(1e-5, 1), "1.0e-05");
        assert_eq!(exp(0.0, 1), "0.0e+00");
        assert_eq!(exp(123456.0, 2), "1.23e+05");
    }

    #[test]
    fn g_matches_printf() {
        assert_eq!(g(1.0), "1");
        assert_eq!(g(0.25), "0.25");
        assert_eq!(g(1e-5), "1e-05");
        assert_eq!(g(500000.0), "500000");
        assert_eq!(g(1234567.0), "1.23457e+06");
        assert_eq!(g(0.0001), "0.0001");
    }
}
