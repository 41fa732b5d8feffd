//! llama-list-devices' command line: no options but the ones every tool answers.

/// What the command line asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Action {
    List,
    Help,
    Version,
    /// The first argument that is not understood.
    Invalid(String),
}

/// Arguments are read in order, as the common parser reads them: `-h`/`--help`/`--usage` or
/// `--version` ends the reading, any other argument is an error.
pub fn parse(args: &[String]) -> Action {
    match args.first().map(String::as_str) {
        None => Action::List,
        Some("-h" | "--help" | "--usage") => Action::Help,
        Some("--version") => Action::Version,
        Some(a) => Action::Invalid(a.to_string()),
    }
}

pub fn usage(argv0: &str) -> String {
    format!(
        "usage: {argv0} [-h] [--version]\n\n\
         Print the offload devices (GPUs, accelerators) of the compiled backends with their memory.\n\n\
         -h,    --help, --usage                  print usage and exit\n\
         --version                               show version and build info\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn help_version_and_unknown_arguments() {
        assert_eq!(parse(&[]), Action::List);
        assert_eq!(parse(&v("-h")), Action::Help);
        assert_eq!(parse(&v("--usage")), Action::Help);
        assert_eq!(parse(&v("--version -x")), Action::Version);
        assert_eq!(parse(&v("--foo")), Action::Invalid("--foo".into()));
        assert_eq!(parse(&v("list")), Action::Invalid("list".into()));
        assert!(usage("llama-list-devices").starts_with("usage: llama-list-devices [-h]"));
    }
}
