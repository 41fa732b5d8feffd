//! One option of the table: its names, value hint, help and handler; how it is applied from
//! the command line or the environment; and its `-h` text as `common_arg::to_string` lays it out.

use super::util::{is_falsey, is_truthy, stoi};
use super::{Ctx, Example, Params};

type R = Result<(), String>;

pub enum Handler {
    Void(fn(&mut Params, &mut Ctx) -> R),
    Bool(fn(&mut Params, bool)),
    Int(fn(&mut Params, &mut Ctx, i32) -> R),
    Str(fn(&mut Params, &mut Ctx, &str) -> R),
    StrStr(fn(&mut Params, &str, &str) -> R),
}

pub struct Opt {
    pub args: &'static [&'static str],
    pub args_neg: &'static [&'static str],
    pub hint: Option<&'static str>,
    pub hint2: Option<&'static str>,
    pub help: String,
    pub env: Option<&'static str>,
    pub sparam: bool,
    /// Tools the option belongs to; empty = every common-parser tool.
    pub examples: &'static [Example],
    pub handler: Handler,
}

impl Opt {
    pub(super) fn new(
        args: &'static [&'static str],
        hint: Option<&'static str>,
        help: impl Into<String>,
        handler: Handler,
    ) -> Opt {
        Opt {
            args,
            args_neg: &[],
            hint,
            hint2: None,
            help: help.into(),
            env: None,
            sparam: false,
            examples: &[],
            handler,
        }
    }

    pub(super) fn neg(mut self, n: &'static [&'static str]) -> Opt {
        self.args_neg = n;
        self
    }

    pub(super) fn env(mut self, e: &'static str) -> Opt {
        self.help = format!("{}\n(env: {})", self.help, e);
        self.env = Some(e);
        self
    }

    pub(super) fn sp(mut self) -> Opt {
        self.sparam = true;
        self
    }

    pub(super) fn ex(mut self, e: &'static [Example]) -> Opt {
        self.examples = e;
        self
    }

    pub(super) fn hint2(mut self, h: &'static str) -> Opt {
        self.hint2 = Some(h);
        self
    }

    pub fn in_example(&self, ex: Example) -> bool {
        self.examples.contains(&ex) || (ex == Example::Common && self.examples.is_empty())
    }

    pub fn n_values(&self) -> usize {
        match self.handler {
            Handler::Void(_) | Handler::Bool(_) => 0,
            Handler::Int(_) | Handler::Str(_) => 1,
            Handler::StrStr(_) => 2,
        }
    }

    /// The environment variable and its value, if set (`LLAMA_ARG_NO_X` forces a pair off).
    pub fn env_value(&self) -> Option<(String, String)> {
        let env = self.env?;
        if !self.args_neg.is_empty() {
            let neg = env.replace("LLAMA_ARG_", "LLAMA_ARG_NO_");
            if std::env::var_os(&neg).is_some() {
                return Some((neg, "0".to_string()));
            }
        }
        std::env::var(env).ok().map(|v| (env.to_string(), v))
    }

    pub fn apply_env(&self, p: &mut Params, ctx: &mut Ctx, value: &str) -> R {
        match self.handler {
            Handler::Void(f) => {
                if is_truthy(value) {
                    f(p, ctx)?;
                }
                Ok(())
            }
            Handler::Bool(f) => {
                if is_truthy(value) {
                    f(p, true);
                } else if is_falsey(value) {
                    f(p, false);
                } else {
                    return Err("invalid boolean value".to_string());
                }
                Ok(())
            }
            Handler::Int(f) => f(p, ctx, stoi(value)?),
            Handler::Str(f) => f(p, ctx, value),
            Handler::StrStr(_) => Ok(()),
        }
    }

    pub fn apply(&self, p: &mut Params, ctx: &mut Ctx, positive: bool, values: &[&str]) -> R {
        match self.handler {
            Handler::Void(f) => f(p, ctx),
            Handler::Bool(f) => {
                f(p, positive);
                Ok(())
            }
            Handler::Int(f) => f(p, ctx, stoi(values[0])?),
            Handler::Str(f) => f(p, ctx, values[0]),
            Handler::StrStr(f) => f(p, values[0], values[1]),
        }
    }

    /// `common_arg::to_string`: names padded, help at column 40 wrapped at 70 characters.
    pub fn to_help_string(&self) -> String {
        const LEAD: usize = 40;
        let all: Vec<&str> = self
            .args
            .iter()
            .chain(self.args_neg.iter())
            .copied()
            .collect();
        let mut s = String::new();
        for (i, a) in all.iter().enumerate() {
            if i == 0 {
                if all.len() == 1 {
                    s.push_str(a);
                } else {
                    let tmp = format!("{a}, ");
                    let pad = 7usize.saturating_sub(tmp.len());
                    s.push_str(&tmp);
                    s.push_str(&" ".repeat(pad));
                }
            } else {
                s.push_str(a);
                if i + 1 != all.len() {
                    s.push_str(", ");
                }
            }
        }
        if let Some(h) = self.hint {
            s.push(' ');
            s.push_str(h);
        }
        if let Some(h) = self.hint2 {
            s.push(' ');
            s.push_str(h);
        }
        if s.len() > LEAD - 3 {
            s.push('\n');
            s.push_str(&" ".repeat(LEAD));
        } else {
            let pad = LEAD - s.len();
            s.push_str(&" ".repeat(pad));
        }
        let lines = break_into_lines(&self.help, 70);
        for (i, line) in lines.iter().enumerate() {
            if i > 0 {
                s.push_str(&" ".repeat(LEAD));
            }
            s.push_str(line);
            s.push('\n');
        }
        s
    }
}

/// `break_str_into_lines`: each input line kept if short enough, else re-flowed by words.
fn break_into_lines(input: &str, max: usize) -> Vec<String> {
    let mut out = Vec::new();
    for line in input.split('\n') {
        if line.len() <= max {
            out.push(line.to_string());
            continue;
        }
        let mut cur = String::new();
        for word in line.split_whitespace() {
            if cur.len() + usize::from(!cur.is_empty()) + word.len() > max {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
                cur = word.to_string();
            } else {
                if !cur.is_empty() {
                    cur.push(' ');
                }
                cur.push_str(word);
            }
        }
        if !cur.is_empty() {
            out.push(cur);
        }
    }
    // std::getline yields no final empty line for a trailing newline
    if input.ends_with('\n') {
        out.pop();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn help_layout_matches_common_arg_to_string() {
        let o = Opt::new(
            &["-c", "--ctx-size"],
            Some("N"),
            "size of the prompt context",
            Handler::Int(|_, _, _| Ok(())),
        );
        assert_eq!(
            o.to_help_string(),
            format!("{:<40}size of the prompt context\n", "-c,    --ctx-size N")
        );
        let long = Opt::new(
            &["--override-tensor", "-ot"],
            Some("<tensor name pattern>=<buffer type>,..."),
            "override tensor buffer type",
            Handler::Int(|_, _, _| Ok(())),
        );
        assert_eq!(
            long.to_help_string(),
            format!("--override-tensor, -ot <tensor name pattern>=<buffer type>,...\n{}override tensor buffer type\n", " ".repeat(40))
        );
    }

    #[test]
    fn lines_wrap_at_70() {
        let text = "word ".repeat(30);
        let lines = break_into_lines(text.trim_end(), 70);
        assert!(lines.iter().all(|l| l.len() <= 70));
        assert_eq!(lines.join(" "), text.trim_end());
    }
}
