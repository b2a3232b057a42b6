//! redis-server's command line as config text.
//!
//! Redis does not parse options itself: it turns `--name value …` into
//! config lines appended after the config file and parses them all alike,
//! so an option's errors read as a config file's (`>>> 'port "6379"
//! "6380"'`). The rules, as 7.0.15's `main()` applies them:
//! - an argument starting with `--` starts a new line with the name (raw,
//!   so `"--maxmemory 700mb"` in one argument is a whole line);
//! - once a line has a value, every other argument is a value, quoted as
//!   `sdscatrepr` quotes (so `--port --bla` gives `port "--bla"`);
//! - a `--` argument right after a name alone is that name's value, but
//!   `--save` followed by another option, or last, means `save ""`;
//! - `-` as the first or last argument reads config from stdin.

use vireo_resp::repr::write_repr;

/// What the arguments after the program name ask for.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct CommandLine {
    /// The config file (the first argument, when it does not start with `-`).
    pub file: Option<String>,
    /// `-` given first or last: config is read from stdin after the file.
    pub stdin: bool,
    /// The options as config lines, to parse after the file and stdin.
    pub options: String,
}

/// Splits redis-server arguments (program name excluded) the way Redis's
/// `main()` does.
pub fn parse(args: &[String]) -> CommandLine {
    let mut line = CommandLine::default();
    let mut rest = args;
    if let Some(first) = args.first().filter(|a| !a.starts_with('-')) {
        line.file = Some(first.clone());
        rest = &args[1..];
    }
    let at_edge = |i: usize| (line.file.is_none() && i == 0) || i + 1 == rest.len();
    let mut stdin = false;
    let mut out: Vec<u8> = Vec::new();
    // False while the line just started has a name but no value yet.
    let mut has_value = true;
    for (i, arg) in rest.iter().enumerate() {
        if arg == "-" && at_edge(i) {
            stdin = true;
        } else if has_value && arg.starts_with("--") {
            if !out.is_empty() {
                out.push(b'\n');
            }
            out.extend_from_slice(&arg.as_bytes()[2..]);
            out.push(b' ');
            has_value = crate::config::split_args(arg).is_none_or(|w| w.len() != 1);
            let next_is_option = rest.get(i + 1).is_some_and(|n| n.starts_with("--"));
            if !has_value && arg.eq_ignore_ascii_case("--save") {
                // An empty `--save` (followed by an option, or last)
                // means `save ""`, as before 7.0.1.
                if next_is_option || i + 1 == rest.len() {
                    out.extend_from_slice(b"\"\"");
                    has_value = next_is_option;
                }
            } else if !has_value && arg.eq_ignore_ascii_case("--sentinel") && next_is_option {
                has_value = true;
            }
        } else {
            write_repr(&mut out, arg.as_bytes());
            out.push(b' ');
            has_value = true;
        }
    }
    line.stdin = stdin;
    line.options = String::from_utf8_lossy(&out).into_owned();
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(args: &[&str]) -> String {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        parse(&args).options
    }

    #[test]
    fn names_start_lines_and_values_are_quoted() {
        assert_eq!(
            options(&["--port", "6379", "6380"]),
            "port \"6379\" \"6380\" "
        );
        assert_eq!(
            options(&["--port", "--loglevel", "verbose"]),
            "port \"--loglevel\" \"verbose\" "
        );
        assert_eq!(
            options(&["--port", "--bla", "--loglevel", "verbose"]),
            "port \"--bla\" \nloglevel \"verbose\" "
        );
        assert_eq!(
            options(&["--maxmemory 700mb", "--maxmemory-policy volatile-lru"]),
            "maxmemory 700mb \nmaxmemory-policy volatile-lru "
        );
        assert_eq!(options(&["--port"]), "port ");
    }

    #[test]
    fn empty_save_becomes_an_empty_string() {
        assert_eq!(
            options(&["--save", "--loglevel", "verbose"]),
            "save \"\"\nloglevel \"verbose\" "
        );
        assert_eq!(
            options(&["--loglevel", "verbose", "--save"]),
            "loglevel \"verbose\" \nsave \"\""
        );
        assert_eq!(
            options(&[
                "--proc-title-template",
                "--save",
                "--save",
                "",
                "--loglevel",
                "x"
            ]),
            "proc-title-template \"--save\" \nsave \"\" \nloglevel \"x\" "
        );
    }

    #[test]
    fn config_file_and_stdin() {
        let args: Vec<String> = ["/x.conf", "loglevel", "verbose", "-"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let line = parse(&args);
        assert_eq!(line.file.as_deref(), Some("/x.conf"));
        assert!(line.stdin);
        assert_eq!(line.options, "\"loglevel\" \"verbose\" ");
        let line = parse(&["-".to_string(), "--port".into(), "1".into()]);
        assert_eq!((line.file, line.stdin), (None, true));
    }

    /// Random argument vectors never panic, and values after a name come
    /// back from the line exactly as given.
    #[test]
    fn random_arguments_round_trip() {
        let mut rng = fastrand::Rng::with_seed(26);
        let pieces = [
            "--port", "--save", "-", "", "a b", "\"q\"", "x\ny", "é", "--", "'", "\\",
        ];
        for _ in 0..2000 {
            let args: Vec<String> = (0..rng.usize(0..8))
                .map(|_| pieces[rng.usize(..pieces.len())].to_string())
                .collect();
            let _ = parse(&args);
            let values: Vec<String> = args.into_iter().filter(|a| !a.starts_with('-')).collect();
            let mut with_name = vec!["--name".to_string(), "v".to_string()];
            with_name.extend(values.iter().cloned());
            let words = crate::config::split_args(&parse(&with_name).options).unwrap();
            assert_eq!(words[0], "name");
            assert_eq!(words[1], "v");
            assert_eq!(&words[2..], &values[..]);
        }
    }
}
