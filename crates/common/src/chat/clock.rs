//! Local wall-clock text for templates (`strftime_now`, the `datetime`/`date_string` context),
//! formatted by the C library as llama.cpp's `std::strftime(std::localtime(now))` does.

use std::ffi::CString;

/// `fmt` applied to the local time now; `None` where the C library writes nothing (an empty
/// or over-long result, llama.cpp's "failed to format time") or `fmt` holds a NUL.
pub fn strftime_now(fmt: &str) -> Option<String> {
    let cfmt = CString::new(fmt).ok()?;
    // SAFETY: time(NULL) only reads the clock; localtime_r writes into our zeroed tm;
    // strftime writes at most buf.len() bytes into buf and returns how many it wrote.
    unsafe {
        let now = libc::time(std::ptr::null_mut());
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&now, &mut tm).is_null() {
            return None;
        }
        // llama.cpp's buffer is 100 bytes
        let mut buf = [0u8; 100];
        let n = libc::strftime(buf.as_mut_ptr().cast(), buf.len(), cfmt.as_ptr(), &tm);
        if n == 0 {
            return None;
        }
        Some(String::from_utf8_lossy(&buf[..n]).into_owned())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn formats_the_year() {
        let y = super::strftime_now("%Y").unwrap();
        assert_eq!(y.len(), 4);
        assert!(y.parse::<u32>().unwrap() >= 2024);
        assert_eq!(super::strftime_now(""), None);
        assert_eq!(super::strftime_now("a\0b"), None);
    }
}
