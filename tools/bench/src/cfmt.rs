//! C formatting that Rust's `format!` lacks: `%g` (what `std::ostream << double` prints) and
//! printf's byte-counted field widths.

/// printf `%.<prec>g`.
pub fn fmt_g(v: f64, prec: usize) -> String {
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v < 0.0 { "-inf".into() } else { "inf".into() };
    }
    let p = prec.max(1);
    if v == 0.0 {
        return if v.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    // the exponent after rounding to p significant digits decides the style
    let e_form = format!("{:.*e}", p - 1, v);
    let (mant, exp) = e_form.split_once('e').unwrap_or((&e_form, "0"));
    let x: i32 = exp.parse().unwrap_or(0);
    if x < -4 || x >= p as i32 {
        let mant = strip_zeros(mant);
        let sign = if x < 0 { '-' } else { '+' };
        format!("{mant}e{sign}{:02}", x.abs())
    } else {
        let decimals = (p as i32 - 1 - x).max(0) as usize;
        strip_zeros(&format!("{v:.decimals$}")).to_string()
    }
}

fn strip_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// printf `%*s` with a signed width: negative pads on the right. Like C, the width counts bytes,
/// so a multi-byte character (the `±` of the t/s column) takes two columns of it.
pub fn pad(s: &str, width: i32) -> String {
    let w = width.unsigned_abs() as usize;
    if s.len() >= w {
        return s.to_string();
    }
    let fill = " ".repeat(w - s.len());
    if width < 0 {
        format!("{s}{fill}")
    } else {
        format!("{fill}{s}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn g_matches_printf() {
        assert_eq!(fmt_g(7535.14, 6), "7535.14");
        assert_eq!(fmt_g(113.5, 6), "113.5");
        assert_eq!(fmt_g(8000.0, 6), "8000");
        assert_eq!(fmt_g(1234567.0, 6), "1.23457e+06");
        assert_eq!(fmt_g(0.0001, 6), "0.0001");
        assert_eq!(fmt_g(0.00001234, 6), "1.234e-05");
        assert_eq!(fmt_g(999999.5, 6), "1e+06");
        assert_eq!(fmt_g(17.062, 6), "17.062");
        assert_eq!(fmt_g(-2.5, 6), "-2.5");
        assert_eq!(fmt_g(0.0, 6), "0");
    }

    #[test]
    fn byte_widths() {
        assert_eq!(pad("ab", 4), "  ab");
        assert_eq!(pad("ab", -4), "ab  ");
        assert_eq!(pad("abcdef", 4), "abcdef");
        assert_eq!(pad("1 ± 2", 7), " 1 ± 2");
    }
}
