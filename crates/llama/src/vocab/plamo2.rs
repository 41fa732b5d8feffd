//! PLaMo-2's tokenizer (llama.cpp's `llm_tokenizer_plamo2`): a table of every suffix of every
//! token, each row listing the token prefixes that start it, and a right-to-left dynamic
//! program that picks the segmentation of best total score (integer scores, score * 1e4);
//! characters no token covers become byte tokens.

use std::collections::HashMap;

use super::{attr, unicode, FxBuild, Token, TokenData};

const INVALID_SCORE: i32 = -20_000_000;
const UNKNOWN_SCORE: i32 = -10_000_000;

#[derive(Clone, Copy)]
struct Row {
    piece_length: i32,
    token_id: i32,
    score: i32,
    piece_id: i32,
}

pub struct Plamo2 {
    bytes: Vec<Token>,
    to_suffix_id: HashMap<i64, i32, FxBuild>,
    table: Vec<Row>,
}

fn cpts_of(s: &str) -> Vec<u32> {
    unicode::cpts_from_utf8(s.as_bytes())
}

fn utf8_of(cps: &[u32]) -> String {
    let mut v = Vec::new();
    for &c in cps {
        unicode::push_utf8(&mut v, c);
    }
    String::from_utf8_lossy(&v).into_owned()
}

impl Plamo2 {
    pub fn new(tokens: &[TokenData]) -> Result<Plamo2, String> {
        let mut bytes: Vec<Token> = vec![0; 256];
        let mut suffix_to_score: HashMap<String, f32> = HashMap::new();
        let mut token_to_id: HashMap<&str, Token> = HashMap::new();
        for (id, t) in tokens.iter().enumerate() {
            token_to_id.insert(t.text.as_str(), id as Token);
            if t.attr & attr::BYTE != 0 {
                let b = t.text.as_bytes();
                if b.len() == 6 && b.starts_with(b"<0x") && b[5] == b'>' {
                    if let Ok(v) = u8::from_str_radix(&t.text[3..5], 16) {
                        bytes[v as usize] = id as Token;
                    }
                }
                continue;
            }
            suffix_to_score.insert(t.text.clone(), t.score);
            let cps = cpts_of(&t.text);
            for i in 1..cps.len() {
                suffix_to_score
                    .entry(utf8_of(&cps[i..]))
                    .or_insert(f32::NAN);
            }
        }
        if let Some(i) = bytes.iter().position(|&b| b == 0) {
            return Err(format!("Byte token for <0x{i}> is not set"));
        }

        let mut suffixes: Vec<&str> = suffix_to_score.keys().map(String::as_str).collect();
        suffixes.push("");
        let reversed = |s: &str| s.bytes().rev().collect::<Vec<u8>>();
        suffixes.sort_by_cached_key(|s| reversed(s));

        let mut suffix_to_id: HashMap<&str, i32> = HashMap::new();
        let mut to_suffix_id: HashMap<i64, i32, FxBuild> = HashMap::default();
        let mut num_pieces: i32 = 0;
        let mut prefixes: Vec<Vec<String>> = Vec::with_capacity(suffixes.len());
        for &suffix in &suffixes {
            suffix_to_id.insert(suffix, num_pieces);
            let cps = cpts_of(suffix);
            let mut known = Vec::new();
            if !cps.is_empty() {
                let remaining = utf8_of(&cps[1..]);
                let rem_id = suffix_to_id.get(remaining.as_str()).copied().unwrap_or(0);
                let code = ((cps[0] as i64) << 32) | rem_id as i64;
                to_suffix_id.insert(code, num_pieces);
                for len in (1..=cps.len()).rev() {
                    let piece = utf8_of(&cps[..len]);
                    if suffix_to_score.contains_key(&piece) {
                        known.push(piece);
                    }
                }
                num_pieces += 1 + known.len() as i32;
            } else {
                num_pieces += 1;
            }
            prefixes.push(known);
        }

        let mut table = Vec::with_capacity(num_pieces.max(0) as usize);
        for known in &prefixes {
            for piece in known {
                let score = suffix_to_score[piece];
                table.push(Row {
                    piece_length: cpts_of(piece).len() as i32,
                    token_id: token_to_id.get(piece.as_str()).copied().unwrap_or(-1),
                    score: if score.is_finite() {
                        (score as f64 * 1e4).round() as i32
                    } else {
                        INVALID_SCORE
                    },
                    piece_id: suffix_to_id.get(piece.as_str()).copied().unwrap_or(0),
                });
            }
            table.push(Row {
                piece_length: 1,
                token_id: -1,
                score: UNKNOWN_SCORE,
                piece_id: 0,
            });
        }
        Ok(Plamo2 {
            bytes,
            to_suffix_id,
            table,
        })
    }

    pub fn tokenize(&self, text: &[u8], out: &mut Vec<Token>) {
        let mut cps = unicode::cpts_from_utf8(text);
        if cps.first() == Some(&0xFEFF) {
            cps.remove(0);
        }
        let n = cps.len();
        if n == 0 {
            return;
        }
        let mut scores = vec![1i64 << 60; n + 1];
        scores[n] = 0;
        // (token length, token id, number of tokens)
        let mut path = vec![(0i32, 0i32, 0i32); n + 1];
        let mut suffix_id: i32 = 0;
        for i in (0..n).rev() {
            let c = cps[i];
            for p in suffix_id.max(0) as usize..self.table.len() {
                let code = ((c as i64) << 32) | self.table[p].piece_id as i64;
                suffix_id = self.to_suffix_id.get(&code).copied().unwrap_or(0);
                if suffix_id > 0 || self.table[p].score == UNKNOWN_SCORE {
                    break;
                }
            }
            for p in suffix_id.max(0) as usize..self.table.len() {
                let row = self.table[p];
                if row.score > INVALID_SCORE {
                    let end = (i + row.piece_length.max(0) as usize).min(n);
                    let s = scores[end] - row.score as i64;
                    if s < scores[i] {
                        scores[i] = s;
                        let mut count = path[end].2 + 1;
                        if row.score == UNKNOWN_SCORE {
                            count +=
                                (c >= 0x80) as i32 + (c >= 0x800) as i32 + (c >= 0x10000) as i32;
                        }
                        path[i] = (row.piece_length, row.token_id, count);
                    }
                }
                if row.score == UNKNOWN_SCORE {
                    break;
                }
            }
        }
        let mut pos = 0usize;
        while pos < n {
            let (len, id, _) = path[pos];
            if id >= 0 {
                out.push(id);
            } else {
                let c = cps[pos];
                let s = 1 + (c >= 0x80) as u32 + (c >= 0x800) as u32 + (c >= 0x10000) as u32;
                for i in 0..s {
                    let b: u32 = if s == 1 {
                        c
                    } else if i == 0 {
                        (0xF00 >> s) & 0xFF
                    } else {
                        0x80
                    };
                    let idx = (b | ((c >> ((s - i - 1) * 6)) & 0x3F)) as usize;
                    out.push(self.bytes[idx & 0xFF]);
                }
            }
            pos += len.max(1) as usize;
        }
    }
}
