//! Code point properties and UTF-8 helpers with llama.cpp's exact semantics: its own category
//! tables (unicode_data.bin), its lenient UTF-8 decoding (an invalid byte becomes U+FFFD and
//! decoding resumes at the next byte) and GPT-2's byte-to-unicode mapping.

use std::sync::OnceLock;

pub const FLAG_UNDEFINED: u16 = 0x0001;
pub const FLAG_NUMBER: u16 = 0x0002;
pub const FLAG_LETTER: u16 = 0x0004;
pub const FLAG_SEPARATOR: u16 = 0x0008;
pub const FLAG_ACCENT_MARK: u16 = 0x0010;
pub const FLAG_PUNCTUATION: u16 = 0x0020;
pub const FLAG_SYMBOL: u16 = 0x0040;
pub const FLAG_CONTROL: u16 = 0x0080;
pub const MASK_CATEGORIES: u16 = 0x00FF;
pub const FLAG_WHITESPACE: u16 = 0x0100;

const MAX_CODEPOINTS: usize = 0x110000;

/// The category flags of one code point; out-of-range values have no flags at all, which is
/// what llama.cpp's splitters see past the end of a chunk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flags(pub u16);

impl Flags {
    #[inline]
    pub fn is_number(self) -> bool {
        self.0 & FLAG_NUMBER != 0
    }
    #[inline]
    pub fn is_letter(self) -> bool {
        self.0 & FLAG_LETTER != 0
    }
    #[inline]
    pub fn is_accent_mark(self) -> bool {
        self.0 & FLAG_ACCENT_MARK != 0
    }
    #[inline]
    pub fn is_punctuation(self) -> bool {
        self.0 & FLAG_PUNCTUATION != 0
    }
    #[inline]
    pub fn is_symbol(self) -> bool {
        self.0 & FLAG_SYMBOL != 0
    }
    #[inline]
    pub fn is_control(self) -> bool {
        self.0 & FLAG_CONTROL != 0
    }
    #[inline]
    pub fn is_whitespace(self) -> bool {
        self.0 & FLAG_WHITESPACE != 0
    }
    #[inline]
    pub fn is_separator(self) -> bool {
        self.0 & FLAG_SEPARATOR != 0
    }
    #[inline]
    pub fn category(self) -> u16 {
        self.0 & MASK_CATEGORIES
    }
    #[inline]
    pub fn any(self) -> bool {
        self.0 != 0
    }
}

struct Tables {
    flags: Vec<u16>,
    lowercase: Vec<(u32, u32)>,
    nfd: Vec<(u32, u32, u32)>,
}

static DATA: &[u8] = include_bytes!("unicode_data.bin");

fn tables() -> &'static Tables {
    static T: OnceLock<Tables> = OnceLock::new();
    T.get_or_init(|| {
        let mut words = DATA
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]));
        let mut next = || words.next().unwrap_or(0);
        let mut flags = vec![FLAG_UNDEFINED; MAX_CODEPOINTS];
        let n = next() as usize;
        let ranges: Vec<(u32, u32)> = (0..n).map(|_| (next(), next())).collect();
        for w in ranges.windows(2) {
            let (start, f) = w[0];
            let end = (w[1].0 as usize).min(MAX_CODEPOINTS);
            for v in &mut flags[(start as usize).min(end)..end] {
                *v = f as u16;
            }
        }
        let n = next() as usize;
        for _ in 0..n {
            let cp = next() as usize;
            if cp < MAX_CODEPOINTS {
                flags[cp] |= FLAG_WHITESPACE;
            }
        }
        let n = next() as usize;
        let lowercase: Vec<(u32, u32)> = (0..n).map(|_| (next(), next())).collect();
        let n = next() as usize;
        let nfd: Vec<(u32, u32, u32)> = (0..n).map(|_| (next(), next(), next())).collect();
        Tables {
            flags,
            lowercase,
            nfd,
        }
    })
}

#[inline]
pub fn flags(cp: u32) -> Flags {
    let t = tables();
    match t.flags.get(cp as usize) {
        Some(&f) => Flags(f),
        None => Flags(FLAG_UNDEFINED),
    }
}

/// The whole flags table, for hot loops that look up many code points.
pub fn flags_table() -> &'static [u16] {
    &tables().flags
}

pub fn to_lower(cp: u32) -> u32 {
    let t = &tables().lowercase;
    match t.binary_search_by_key(&cp, |p| p.0) {
        Ok(i) => t[i].1,
        Err(_) => cp,
    }
}

/// First code point of the canonical decomposition (what BERT's accent stripping keeps).
pub fn nfd_first(cp: u32) -> u32 {
    let t = &tables().nfd;
    let i = t.partition_point(|r| r.0 <= cp);
    if i == 0 {
        return cp;
    }
    let r = t[i - 1];
    if r.0 <= cp && cp <= r.1 {
        r.2
    } else {
        cp
    }
}

pub fn is_han(cp: u32) -> bool {
    matches!(cp,
        0x4E00..=0x9FFF
        | 0x3400..=0x4DBF
        | 0x20000..=0x2A6DF
        | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F
        | 0x2B820..=0x2CEAF
        | 0x2CEB0..=0x2EBEF
        | 0xF900..=0xFAFF
        | 0x2F800..=0x2FA1F)
}

/// Length of the UTF-8 sequence a lead byte announces (1 for continuation bytes), as llama.cpp
/// splits text into "characters".
#[inline]
pub fn utf8_len(b: u8) -> usize {
    const LOOKUP: [usize; 16] = [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4];
    LOOKUP[(b >> 4) as usize]
}

/// Decode one code point at `*off`; `None` (offset unchanged) for an invalid sequence.
#[inline]
pub fn decode_at(s: &[u8], off: &mut usize) -> Option<u32> {
    let o = *off;
    let b0 = s[o];
    let cont = |i: usize| o + i < s.len() && s[o + i] & 0xC0 == 0x80;
    if b0 & 0x80 == 0 {
        *off = o + 1;
        return Some(b0 as u32);
    }
    if b0 & 0x40 == 0 {
        return None;
    }
    if b0 & 0x20 == 0 {
        if !cont(1) {
            return None;
        }
        *off = o + 2;
        return Some(((b0 as u32 & 0x1f) << 6) | (s[o + 1] as u32 & 0x3f));
    }
    if b0 & 0x10 == 0 {
        if !cont(1) || !cont(2) {
            return None;
        }
        *off = o + 3;
        return Some(
            ((b0 as u32 & 0x0f) << 12) | ((s[o + 1] as u32 & 0x3f) << 6) | (s[o + 2] as u32 & 0x3f),
        );
    }
    if b0 & 0x08 == 0 {
        if !cont(1) || !cont(2) || !cont(3) {
            return None;
        }
        *off = o + 4;
        return Some(
            ((b0 as u32 & 0x07) << 18)
                | ((s[o + 1] as u32 & 0x3f) << 12)
                | ((s[o + 2] as u32 & 0x3f) << 6)
                | (s[o + 3] as u32 & 0x3f),
        );
    }
    None
}

/// Code points of `s`; each byte that does not start a valid sequence becomes U+FFFD.
pub fn cpts_from_utf8(s: &[u8]) -> Vec<u32> {
    let mut out = Vec::with_capacity(s.len());
    let mut off = 0;
    while off < s.len() {
        match decode_at(s, &mut off) {
            Some(c) => out.push(c),
            None => {
                off += 1;
                out.push(0xFFFD);
            }
        }
    }
    out
}

/// Append the UTF-8 encoding of `cp`. Values past U+10FFFF cannot occur here (they come from
/// our own decoder or tables); they are encoded as U+FFFD rather than aborting.
#[inline]
pub fn push_utf8(out: &mut Vec<u8>, cp: u32) {
    if cp <= 0x7f {
        out.push(cp as u8);
    } else if cp <= 0x7ff {
        out.push(0xc0 | ((cp >> 6) & 0x1f) as u8);
        out.push(0x80 | (cp & 0x3f) as u8);
    } else if cp <= 0xffff {
        out.push(0xe0 | ((cp >> 12) & 0x0f) as u8);
        out.push(0x80 | ((cp >> 6) & 0x3f) as u8);
        out.push(0x80 | (cp & 0x3f) as u8);
    } else if cp <= 0x10ffff {
        out.push(0xf0 | ((cp >> 18) & 0x07) as u8);
        out.push(0x80 | ((cp >> 12) & 0x3f) as u8);
        out.push(0x80 | ((cp >> 6) & 0x3f) as u8);
        out.push(0x80 | (cp & 0x3f) as u8);
    } else {
        out.extend_from_slice("\u{FFFD}".as_bytes());
    }
}

pub fn cpt_to_utf8(cp: u32) -> Vec<u8> {
    let mut v = Vec::with_capacity(4);
    push_utf8(&mut v, cp);
    v
}

/// GPT-2's reversible byte -> code point map: printable Latin-1 bytes map to themselves, the
/// rest to U+0100 onwards in byte order.
pub fn byte_to_cpt(b: u8) -> u32 {
    static MAP: OnceLock<[u32; 256]> = OnceLock::new();
    MAP.get_or_init(|| {
        let mut map = [0u32; 256];
        let mut n = 0;
        for (ch, slot) in map.iter_mut().enumerate() {
            let printable = (0x21..=0x7E).contains(&ch)
                || (0xA1..=0xAC).contains(&ch)
                || (0xAE..=0xFF).contains(&ch);
            if printable {
                *slot = ch as u32;
            } else {
                *slot = 256 + n;
                n += 1;
            }
        }
        map
    })[b as usize]
}

/// Inverse of [`byte_to_cpt`] (whose image lies below U+0144).
pub fn cpt_to_byte(cp: u32) -> Option<u8> {
    static INV: OnceLock<[i16; 0x144]> = OnceLock::new();
    let inv = INV.get_or_init(|| {
        let mut t = [-1i16; 0x144];
        for b in 0..=255u8 {
            t[byte_to_cpt(b) as usize] = b as i16;
        }
        t
    });
    inv.get(cp as usize).and_then(|&v| u8::try_from(v).ok())
}

/// The UTF-8 text of the GPT-2 byte-encoding of one byte.
pub fn byte_to_utf8(b: u8) -> Vec<u8> {
    cpt_to_utf8(byte_to_cpt(b))
}
