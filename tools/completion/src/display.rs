//! `-co`/`--color`: console::set_display's colours on stdout (the prompt yellow, what the user
//! types bold green, back to the default when generation starts). Off with `--simple-io`, as
//! llama.cpp's advanced display is.

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Reset,
    Prompt,
    UserInput,
}

pub struct Display {
    on: bool,
    current: Kind,
}

impl Display {
    pub fn new(use_color: bool, simple_io: bool) -> Display {
        Display {
            on: use_color && !simple_io,
            current: Kind::Reset,
        }
    }

    /// The escape sequence that switches to `k`, if colours are on and it is a change.
    pub fn set(&mut self, k: Kind) -> Option<&'static str> {
        if !self.on || self.current == k {
            return None;
        }
        self.current = k;
        Some(match k {
            Kind::Reset => "\x1b[0m",
            Kind::Prompt => "\x1b[33m",
            Kind::UserInput => "\x1b[1m\x1b[32m",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_changes_are_written() {
        let mut d = Display::new(true, false);
        assert_eq!(d.set(Kind::Reset), None);
        assert_eq!(d.set(Kind::Prompt), Some("\x1b[33m"));
        assert_eq!(d.set(Kind::Prompt), None);
        assert_eq!(d.set(Kind::Reset), Some("\x1b[0m"));
        assert_eq!(Display::new(true, true).set(Kind::Prompt), None);
        assert_eq!(Display::new(false, false).set(Kind::Prompt), None);
    }
}
