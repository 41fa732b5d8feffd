//! Decoding token pieces to code points across token boundaries (`llama_partial_utf8` and the
//! second `decode_utf8` of llama-grammar.cpp): a character split between two tokens is carried
//! as its bits so far and the number of bytes still to come.

/// `llama_partial_utf8`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PartialUtf8 {
    /// The bits decoded so far (unshifted).
    pub value: u32,
    /// Bytes still to come; -1 marks an invalid sequence.
    pub n_remain: i32,
}

/// The code points of `src` continuing `partial`, terminated by a 0 (as llama.cpp returns
/// them), and the partial character left at the end. A NUL byte ends the text. An invalid
/// sequence gives just the terminator and `n_remain == -1`.
pub(crate) fn decode_utf8(src: &[u8], partial: PartialUtf8) -> (Vec<u32>, PartialUtf8) {
    const LOOKUP: [i32; 16] = [1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 2, 2, 3, 4];
    let at = |i: usize| src.get(i).copied().unwrap_or(0);
    let mut pos = 0usize;
    let mut code_points = Vec::with_capacity(src.len() + 1);
    let mut value = partial.value;
    let mut n_remain = partial.n_remain;

    while at(pos) != 0 && n_remain > 0 {
        let next = at(pos);
        if next >> 6 != 2 {
            code_points.push(0);
            return (
                code_points,
                PartialUtf8 {
                    value: 0,
                    n_remain: -1,
                },
            );
        }
        value = (value << 6) + (next as u32 & 0x3F);
        pos += 1;
        n_remain -= 1;
    }
    if partial.n_remain > 0 && n_remain == 0 {
        code_points.push(value);
    }

    while at(pos) != 0 {
        let first = at(pos);
        n_remain = LOOKUP[(first >> 4) as usize] - 1;
        if n_remain < 0 {
            code_points.clear();
            code_points.push(0);
            return (code_points, PartialUtf8 { value: 0, n_remain });
        }
        let mask = (1u32 << (7 - n_remain)) - 1;
        value = first as u32 & mask;
        pos += 1;
        while at(pos) != 0 && n_remain > 0 {
            value = (value << 6) + (at(pos) as u32 & 0x3F);
            pos += 1;
            n_remain -= 1;
        }
        if n_remain == 0 {
            code_points.push(value);
        }
    }
    code_points.push(0);
    (code_points, PartialUtf8 { value, n_remain })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_character_split_across_pieces_completes() {
        let euro = "€".as_bytes();
        let (cps, p) = decode_utf8(&euro[..1], PartialUtf8::default());
        assert_eq!(cps, vec![0]);
        assert_eq!(p.n_remain, 2);
        let (cps, p) = decode_utf8(&euro[1..], p);
        assert_eq!(cps, vec![0x20AC, 0]);
        assert_eq!(p.n_remain, 0);
    }

    #[test]
    fn invalid_bytes_give_only_the_terminator() {
        let (cps, p) = decode_utf8(&[b'a', 0x80], PartialUtf8::default());
        assert_eq!(cps, vec![0]);
        assert_eq!(p.n_remain, -1);
        let (cps, p) = decode_utf8(
            b"x",
            PartialUtf8 {
                value: 3,
                n_remain: 1,
            },
        );
        assert_eq!(cps, vec![0]);
        assert_eq!(p.n_remain, -1);
    }
}
