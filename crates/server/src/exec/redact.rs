//! The arguments MONITOR and SLOWLOG show as `(redacted)`: passwords and
//! user rules, as Redis 7.0's `redactClientCommandArgument` hides them
//! (AUTH, HELLO … AUTH, MIGRATE … AUTH/AUTH2, ACL SETUSER, CONFIG SET of a
//! sensitive parameter).

use vireo_resp::Args;

/// What a hidden argument is shown as.
pub const REDACTED: &[u8] = b"(redacted)";

/// CONFIG SET parameters whose values are secrets (Redis's
/// `SENSITIVE_CONFIG`).
const SENSITIVE_CONFIGS: [&str; 3] = ["masteruser", "masterauth", "requirepass"];

/// Positions of `args` (the command name at 0) that must not be shown;
/// empty for every command but the few that carry secrets.
pub fn redacted_positions(args: Args<'_>) -> Vec<usize> {
    let name = args.get(0);
    let is =
        |i: usize, word: &str| i < args.len() && args.get(i).eq_ignore_ascii_case(word.as_bytes());
    let mut hidden = Vec::new();
    if name.eq_ignore_ascii_case(b"auth") {
        hidden.extend(1..args.len());
    } else if name.eq_ignore_ascii_case(b"hello") {
        let mut j = 2;
        while j < args.len() {
            if is(j, "auth") && j + 2 < args.len() {
                hidden.extend([j + 1, j + 2]);
                j += 2;
            }
            j += 1;
        }
    } else if name.eq_ignore_ascii_case(b"migrate") {
        let mut j = 6;
        while j < args.len() && !is(j, "keys") {
            if is(j, "auth") && j + 1 < args.len() {
                hidden.push(j + 1);
                j += 1;
            } else if is(j, "auth2") && j + 2 < args.len() {
                hidden.extend([j + 1, j + 2]);
                j += 2;
            }
            j += 1;
        }
    } else if name.eq_ignore_ascii_case(b"acl") && is(1, "setuser") {
        hidden.extend(2..args.len());
    } else if name.eq_ignore_ascii_case(b"config") && is(1, "set") {
        let mut j = 2;
        while j + 1 < args.len() {
            if SENSITIVE_CONFIGS.iter().any(|c| is(j, c)) {
                hidden.push(j + 1);
            }
            j += 2;
        }
    }
    hidden
}

#[cfg(test)]
mod tests {
    use super::*;
    use vireo_resp::OwnedArgs;

    fn hidden(words: &[&str]) -> Vec<usize> {
        let owned = OwnedArgs::from_slices(words);
        redacted_positions(owned.as_args())
    }

    #[test]
    fn secrets_are_found_where_redis_hides_them() {
        assert_eq!(hidden(&["GET", "k"]), Vec::<usize>::new());
        assert_eq!(hidden(&["auth", "pw"]), [1]);
        assert_eq!(hidden(&["AUTH", "user", "pw"]), [1, 2]);
        assert_eq!(
            hidden(&["hello", "2", "AUTH", "u", "p", "SETNAME", "n"]),
            [3, 4]
        );
        let migrate = ["migrate", "h", "1", "key", "9", "5000"];
        assert_eq!(hidden(&migrate), Vec::<usize>::new());
        assert_eq!(hidden(&[&migrate[..], &["AUTH", "pw"]].concat()), [7]);
        assert_eq!(
            hidden(&[&migrate[..], &["COPY", "AUTH2", "u", "p"]].concat()),
            [8, 9]
        );
        assert_eq!(
            hidden(&[&migrate[..], &["KEYS", "AUTH", "x"]].concat()),
            Vec::<usize>::new()
        );
        assert_eq!(hidden(&["acl", "setuser", "bob", "on", ">pw"]), [2, 3, 4]);
        assert_eq!(hidden(&["acl", "deluser", "bob"]), Vec::<usize>::new());
        assert_eq!(
            hidden(&["config", "set", "maxmemory", "1", "MASTERAUTH", "pw"]),
            [5]
        );
    }
}
