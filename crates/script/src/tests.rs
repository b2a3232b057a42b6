//! Engine tests: a fake host for unit tests, and a differential harness
//! that runs the same scripts on a real `redis-server` (skipped when it is
//! not installed) with the engine's host forwarding `redis.call` to that
//! server, comparing reply bytes.

mod differential;
mod engine;
mod libraries;

use crate::{Host, Interrupt, LogLevel, ReplFlags, Reply};
use std::collections::HashMap;
use vireo_resp::{Args, Protocol, ReplyBuf};

/// A hash field and its value.
type Field = (Vec<u8>, Vec<u8>);

/// A tiny in-memory host: GET/SET/INCR/DEL/HSET/HGETALL/PING, logs kept,
/// and a kill switch after `kill_after` interrupts.
#[derive(Default)]
pub(crate) struct FakeHost {
    /// String and hash keys.
    pub(crate) strings: HashMap<Vec<u8>, Vec<u8>>,
    /// Hashes.
    pub(crate) hashes: HashMap<Vec<u8>, Vec<Field>>,
    /// Every call made, as argument lists.
    pub(crate) calls: Vec<Vec<Vec<u8>>>,
    /// Log lines.
    pub(crate) logs: Vec<(LogLevel, Vec<u8>)>,
    /// Interrupt calls so far.
    pub(crate) interrupts: usize,
    /// Kill on this many interrupts.
    pub(crate) kill_after: Option<usize>,
    /// Replication flags set.
    pub(crate) repl: Option<ReplFlags>,
    /// What the `canned` command replies.
    pub(crate) canned: Option<Reply>,
    /// The bytes the `raw` command replies, as they are (malformed ones too).
    pub(crate) raw: Vec<u8>,
    /// The last reply, as RESP.
    last: Vec<u8>,
}

impl Host for FakeHost {
    fn call(&mut self, args: Args<'_>, resp: Protocol) -> &[u8] {
        if args.get(0) == b"raw" {
            return &self.raw;
        }
        let reply = self.reply(args, resp);
        self.last.clear();
        encode(&reply, &mut self.last);
        &self.last
    }

    fn acl_check(&mut self, args: Args<'_>) -> Option<bool> {
        match args.get(0) {
            b"get" | b"GET" => Some(true),
            b"set" | b"SET" => Some(false),
            _ => None,
        }
    }

    fn log(&mut self, level: LogLevel, message: &[u8]) {
        self.logs.push((level, message.to_vec()));
    }

    fn set_repl(&mut self, flags: ReplFlags) {
        self.repl = Some(flags);
    }

    fn interrupt(&mut self) -> Interrupt {
        self.interrupts += 1;
        match self.kill_after {
            Some(n) if self.interrupts >= n => Interrupt::Kill,
            _ => Interrupt::Continue,
        }
    }
}

impl FakeHost {
    /// The reply to `args`.
    fn reply(&mut self, args: Args<'_>, resp: Protocol) -> Reply {
        let argv: Vec<Vec<u8>> = args.iter().map(<[u8]>::to_vec).collect();
        self.calls.push(argv.clone());
        let name = String::from_utf8_lossy(&argv[0]).to_ascii_lowercase();
        match (name.as_str(), argv.len()) {
            ("ping", 1) => Reply::Status(b"PONG".to_vec()),
            ("set", 3) => {
                self.strings.insert(argv[1].clone(), argv[2].clone());
                Reply::Status(b"OK".to_vec())
            }
            ("get", 2) => self
                .strings
                .get(&argv[1])
                .map_or(Reply::NullBulk, |v| Reply::Bulk(v.clone())),
            ("incr", 2) => {
                let v = self
                    .strings
                    .entry(argv[1].clone())
                    .or_insert_with(|| b"0".to_vec());
                match std::str::from_utf8(v)
                    .ok()
                    .and_then(|s| s.parse::<i64>().ok())
                {
                    Some(n) => {
                        *v = (n + 1).to_string().into_bytes();
                        Reply::Int(n + 1)
                    }
                    None => Reply::Error(b"ERR value is not an integer or out of range".to_vec()),
                }
            }
            ("hset", 4) => {
                self.hashes
                    .entry(argv[1].clone())
                    .or_default()
                    .push((argv[2].clone(), argv[3].clone()));
                Reply::Int(1)
            }
            ("hgetall", 2) => {
                let pairs = self.hashes.get(&argv[1]).cloned().unwrap_or_default();
                match resp {
                    Protocol::Resp3 => Reply::Map(
                        pairs
                            .into_iter()
                            .map(|(k, v)| (Reply::Bulk(k), Reply::Bulk(v)))
                            .collect(),
                    ),
                    Protocol::Resp2 => Reply::Array(
                        pairs
                            .into_iter()
                            .flat_map(|(k, v)| [Reply::Bulk(k), Reply::Bulk(v)])
                            .collect(),
                    ),
                }
            }
            ("echo", 2) => Reply::Bulk(argv[1].clone()),
            ("canned", _) => self.canned.clone().unwrap_or(Reply::Null),
            _ => Reply::Error(b"ERR Unknown Redis command called from script".to_vec()),
        }
    }
}

/// Appends `reply` as RESP (RESP3 types as RESP3).
pub(crate) fn encode(reply: &Reply, out: &mut Vec<u8>) {
    let line = |out: &mut Vec<u8>, prefix: &str, body: &[u8]| {
        out.extend_from_slice(prefix.as_bytes());
        out.extend_from_slice(body);
        out.extend_from_slice(b"\r\n");
    };
    match reply {
        Reply::Status(s) => line(out, "+", s),
        Reply::Error(e) => line(out, "-", e),
        Reply::Int(i) => line(out, ":", i.to_string().as_bytes()),
        Reply::Bulk(b) => {
            line(out, "$", b.len().to_string().as_bytes());
            line(out, "", b);
        }
        Reply::NullBulk => line(out, "$-1", b""),
        Reply::NullArray => line(out, "*-1", b""),
        Reply::Null => line(out, "_", b""),
        Reply::Bool(b) => line(out, "#", if *b { b"t" } else { b"f" }),
        Reply::Double(d) => line(out, ",", d.to_string().as_bytes()),
        Reply::BigNumber(n) => line(out, "(", n),
        Reply::Verbatim { format, text } => {
            line(out, "=", (text.len() + 4).to_string().as_bytes());
            line(out, "", &[&format[..], b":", text].concat());
        }
        Reply::Array(items) | Reply::Set(items) => {
            let kind = if matches!(reply, Reply::Set(_)) {
                "~"
            } else {
                "*"
            };
            line(out, kind, items.len().to_string().as_bytes());
            items.iter().for_each(|r| encode(r, out));
        }
        Reply::Map(pairs) => {
            line(out, "%", pairs.len().to_string().as_bytes());
            for (k, v) in pairs {
                encode(k, out);
                encode(v, out);
            }
        }
    }
}

/// Runs `body` with EVAL on a fresh engine and fake host; returns the
/// reply bytes (an error is rendered `-msg\r\n`).
pub(crate) fn eval_bytes(body: &str, keys: &[&str], args: &[&str], proto: Protocol) -> String {
    let mut engine = crate::EvalEngine::new(64 << 20).unwrap();
    let mut host = FakeHost::default();
    run_eval(&mut engine, &mut host, body, keys, args, proto)
}

/// Runs `body` on `engine` with `host`; reply bytes as text.
pub(crate) fn run_eval(
    engine: &mut crate::EvalEngine,
    host: &mut dyn Host,
    body: &str,
    keys: &[&str],
    args: &[&str],
    proto: Protocol,
) -> String {
    let keys: Vec<&[u8]> = keys.iter().map(|k| k.as_bytes()).collect();
    let args: Vec<&[u8]> = args.iter().map(|k| k.as_bytes()).collect();
    let mut out = ReplyBuf::new(proto);
    if let Err(e) = engine.eval(body.as_bytes(), &keys, &args, host, &mut out) {
        out.raw(format!("-{}\r\n", e.message).as_bytes());
    }
    String::from_utf8_lossy(out.as_bytes()).into_owned()
}
