//! The Lua debugger behind `SCRIPT DEBUG` (Redis's LDB, `eval.c`).
//!
//! A debugging session is one EVAL run with a line hook installed. The
//! hook stops the script (on the first line, after `step`, at breakpoints,
//! after `redis.breakpoint()`, or when the script ran past the time limit
//! without stopping) and then talks to the debugging client directly over
//! a [`DebugChannel`]: it sends the pending log lines as one array of
//! status replies and reads the client's commands (`step`, `continue`,
//! `list`, `print`, `break`, `eval`, `redis`, `trace`, `maxlen`, `abort`,
//! `help`) as RESP arrays, answering each with its log lines, until a
//! command resumes the script. The log lines are Redis's (`<redis>`,
//! `<reply>`, `<error>`, `<value>`, `<retval>`, `<debug>`, …), so
//! `redis-cli --ldb` works unchanged.
//!
//! While a session runs, the state lives in the VM's app data ([`Ldb`]);
//! `redis.call`, `redis.debug` and `redis.breakpoint` reach it there
//! ([`log_call`], [`log_reply`], [`debug`], [`breakpoint`]). The engine
//! knows nothing of sockets: the server hands it the channel.

use crate::luaerr::{self, raise_table, INTERNAL_CHUNK};
use crate::numfmt::format_g;
use crate::Reply;
use mlua::{Debug, DebugEvent, Function, Lua, MultiValue, Table, Value, VmState};
use std::time::{Duration, Instant};
use vireo_resp::repr::write_repr as repr;
use vireo_resp::Args;

/// The debugging client's connection, as the engine needs it: blocking
/// writes of whole messages and blocking reads.
pub trait DebugChannel {
    /// Writes all of `bytes` to the client.
    fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()>;
    /// Reads what the client sent into `buf`, waiting for at least one
    /// byte; `Ok(0)` when the client closed the connection.
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize>;
}

/// Most breakpoints a session keeps (Redis's `LDB_BREAKPOINTS_MAX`).
const MAX_BREAKPOINTS: usize = 64;
/// Default length logged replies and values are trimmed to.
const DEFAULT_MAXLEN: usize = 256;
/// Largest unparsed command input kept before the session fails.
const MAX_COMMAND_BUFFER: usize = 1 << 20;
/// Deepest table nesting a value dump shows (Redis's `LUA_MINSTACK/2`).
const MAX_VALUE_DEPTH: usize = 10;

/// The state of one debugging session (Redis's `struct ldbState`).
pub(crate) struct Ldb {
    /// The client's connection.
    channel: Box<dyn DebugChannel>,
    /// Log lines not yet sent.
    logs: Vec<Vec<u8>>,
    /// Lines with a breakpoint.
    breakpoints: Vec<i64>,
    /// Stop at the next line (also: `redis.call` logs while set).
    step: bool,
    /// Stop at the next line because `redis.breakpoint()` was called.
    lua_breakpoint: bool,
    /// The script's source, one entry per line.
    src: Vec<Vec<u8>>,
    /// The line the script is at.
    current_line: i64,
    /// Command bytes read but not parsed yet.
    input: Vec<u8>,
    /// Length logged replies and values are trimmed to (0: no limit).
    maxlen: usize,
    /// The hint about `maxlen 0` was given (or the user used `maxlen`).
    maxlen_hint_sent: bool,
    /// How long the script may run without stopping before the debugger
    /// stops it ("timeout reached, infinite loop?").
    time_limit: Duration,
    /// Since when the script runs without stopping.
    running_since: Instant,
}

impl Ldb {
    /// A session over `body` (Redis splits the script at `\n` after
    /// trimming trailing line ends) that first stops at line one.
    pub(crate) fn new(body: &[u8], channel: Box<dyn DebugChannel>, time_limit: Duration) -> Ldb {
        let end = body
            .iter()
            .rposition(|&c| c != b'\n' && c != b'\r')
            .map_or(0, |i| i + 1);
        let src = body[..end].split(|&c| c == b'\n').map(<[u8]>::to_vec);
        Ldb {
            channel,
            logs: Vec::new(),
            breakpoints: Vec::new(),
            step: true,
            lua_breakpoint: false,
            src: if end == 0 { Vec::new() } else { src.collect() },
            current_line: 0,
            input: Vec::new(),
            maxlen: DEFAULT_MAXLEN,
            maxlen_hint_sent: false,
            time_limit,
            running_since: Instant::now(),
        }
    }

    /// Ends the session: the remaining log lines and `<endsession>`.
    pub(crate) fn end(&mut self) {
        self.log("<endsession>");
        self.send_logs();
    }

    /// Appends a log line.
    fn log(&mut self, line: impl Into<Vec<u8>>) {
        self.logs.push(line.into());
    }

    /// Appends a log line trimmed to `maxlen` (`ldbLogWithMaxLen`), with
    /// the one-time hint about `maxlen 0`.
    fn log_trimmed(&mut self, mut line: Vec<u8>) {
        let trimmed = self.maxlen != 0 && line.len() > self.maxlen;
        if trimmed {
            line.truncate(self.maxlen);
            line.extend_from_slice(b" ...");
        }
        self.log(line);
        if trimmed && !self.maxlen_hint_sent {
            self.maxlen_hint_sent = true;
            self.log("<hint> The above reply was trimmed. Use 'maxlen 0' to disable trimming.");
        }
    }

    /// Sends the pending lines as one array of status replies (line ends
    /// inside become spaces). A write error is left for the next read.
    pub(crate) fn send_logs(&mut self) {
        let mut proto = format!("*{}\r\n", self.logs.len()).into_bytes();
        for line in self.logs.drain(..) {
            proto.push(b'+');
            proto.extend(line.iter().map(|&c| match c {
                b'\r' | b'\n' => b' ',
                c => c,
            }));
            proto.extend_from_slice(b"\r\n");
        }
        let _ = self.channel.write_all(&proto);
    }

    /// The text of source line `line` (one-based).
    fn source_line(&self, line: i64) -> &[u8] {
        usize::try_from(line - 1)
            .ok()
            .and_then(|i| self.src.get(i))
            .map_or(b"<out of range source code line>", Vec::as_slice)
    }

    /// Logs a source line with its markers: `->` the current line, `#` a
    /// breakpoint.
    fn log_source_line(&mut self, line: i64) {
        let prefix = match (line == self.current_line, self.breakpoints.contains(&line)) {
            (true, true) => "->#",
            (true, false) => "-> ",
            (false, true) => "  #",
            (false, false) => "   ",
        };
        let mut text = format!("{prefix}{line:<3} ").into_bytes();
        text.extend_from_slice(self.source_line(line));
        self.log(text);
    }

    /// `list`: the lines within `context` of `around` (all when 0).
    fn list(&mut self, around: i64, context: i64) {
        for line in 1..=self.src.len() as i64 {
            if around == 0 || (around - line).abs() <= context {
                self.log_source_line(line);
            }
        }
    }

    /// `break` with its arguments: list, add (`n`), remove (`-n`), clear
    /// (`0`).
    fn breakpoint_command(&mut self, args: &[Vec<u8>]) {
        if args.is_empty() {
            if self.breakpoints.is_empty() {
                return self.log("No breakpoints set. Use 'b <line>' to add one.");
            }
            self.log(format!("{} breakpoints set:", self.breakpoints.len()));
            for line in self.breakpoints.clone() {
                self.log_source_line(line);
            }
            return;
        }
        for arg in args {
            let Some(line) = vireo_resp::number::parse_i64(arg) else {
                let mut msg = b"Invalid argument:'".to_vec();
                msg.extend_from_slice(arg);
                msg.push(b'\'');
                self.log(msg);
                continue;
            };
            if line == 0 {
                self.breakpoints.clear();
                self.log("All breakpoints removed.");
            } else if line > 0 {
                if self.breakpoints.len() == MAX_BREAKPOINTS {
                    self.log("Too many breakpoints set.");
                } else if line <= self.src.len() as i64 && !self.breakpoints.contains(&line) {
                    self.breakpoints.push(line);
                    self.list(line, 1);
                } else {
                    self.log("Wrong line number.");
                }
            } else if let Some(i) = self.breakpoints.iter().position(|&b| b == -line) {
                self.breakpoints.remove(i);
                self.log("Breakpoint removed.");
            } else {
                self.log("No breakpoint in the specified line.");
            }
        }
    }

    /// `maxlen [len]`: sets (lengths up to 60 become 60) and shows it.
    fn maxlen_command(&mut self, args: &[Vec<u8>]) {
        if let [len] = args {
            let len = atoi(len);
            self.maxlen_hint_sent = true;
            self.maxlen = if len <= 0 { 0 } else { len.max(60) as usize };
        }
        if self.maxlen == 0 {
            self.log("<value> replies are unlimited.");
        } else {
            self.log(format!(
                "<value> replies are truncated at {} bytes.",
                self.maxlen
            ));
        }
    }
}

/// C's `atoi` on the leading digits (0 when there are none); saturates.
fn atoi(bytes: &[u8]) -> i64 {
    let s = bytes.iter().skip_while(|c| c.is_ascii_whitespace());
    let mut sign = 1i64;
    let mut n = 0i64;
    for (i, &c) in s.enumerate() {
        match c {
            b'-' | b'+' if i == 0 => sign = if c == b'-' { -1 } else { 1 },
            b'0'..=b'9' => n = n.saturating_mul(10).saturating_add(i64::from(c - b'0')),
            _ => break,
        }
    }
    sign * n
}

/// How parsing the client's input went.
#[derive(Debug, PartialEq, Eq)]
enum Parsed {
    /// A whole command.
    Command(Vec<Vec<u8>>),
    /// More bytes are needed.
    Incomplete,
    /// The bytes are not a command Redis's debugger accepts.
    Invalid,
}

/// Parses one command from the front of `input` the way Redis's
/// debugger does: a `*count` array (1 to 1024 elements) of `$len` bulk
/// strings (1 to 1024 bytes each), anything before the `*` ignored.
fn parse_command(input: &[u8]) -> Parsed {
    let Some(star) = input.iter().position(|&c| c == b'*') else {
        return if input.is_empty() {
            Parsed::Incomplete
        } else {
            Parsed::Invalid
        };
    };
    let mut pos = star + 1;
    let Some(count) = read_number_line(input, &mut pos) else {
        return Parsed::Incomplete;
    };
    if !(1..=1024).contains(&count) {
        return Parsed::Invalid;
    }
    let mut argv = Vec::with_capacity(count as usize);
    while argv.len() < count as usize {
        match input.get(pos) {
            None => return Parsed::Incomplete,
            Some(b'$') => pos += 1,
            Some(_) => return Parsed::Invalid,
        }
        let Some(len) = read_number_line(input, &mut pos) else {
            return Parsed::Incomplete;
        };
        if !(1..=1024).contains(&len) {
            return Parsed::Invalid;
        }
        let len = len as usize;
        if input.len() < pos + len + 2 {
            return Parsed::Incomplete;
        }
        argv.push(input[pos..pos + len].to_vec());
        pos += len;
        if &input[pos..pos + 2] != b"\r\n" {
            return Parsed::Invalid;
        }
        pos += 2;
    }
    Parsed::Command(argv)
}

/// Reads the number (C `atoi` rules) up to the next CRLF from `*pos`,
/// moving past the CRLF; None when there is no CRLF yet.
fn read_number_line(input: &[u8], pos: &mut usize) -> Option<i64> {
    let rest = &input[*pos..];
    let end = rest.windows(2).position(|w| w == b"\r\n")?;
    *pos += end + 2;
    Some(atoi(&rest[..end]))
}

/// A Lua value as the debugger shows it (`ldbCatStackValue`): strings
/// quoted, numbers as `%g`, tables as `{a; b}` when they are arrays and
/// `{[k]=v; ...}` otherwise, functions and other objects by address.
pub(crate) fn format_value(out: &mut Vec<u8>, value: &Value, depth: usize) {
    if depth == MAX_VALUE_DEPTH {
        out.extend_from_slice(b"<max recursion level reached! Nested table?>");
        return;
    }
    match value {
        Value::String(s) => repr(out, &s.as_bytes()),
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Integer(i) => out.extend_from_slice(format_g(*i as f64, 6).as_bytes()),
        Value::Number(n) => out.extend_from_slice(format_g(*n, 6).as_bytes()),
        Value::Nil => out.extend_from_slice(b"nil"),
        Value::Table(t) => format_table(out, t, depth + 1),
        other => {
            let kind = match other {
                Value::Function(_) => "function",
                Value::Thread(_) => "thread",
                Value::LightUserData(_) => "light-userdata",
                _ => "userdata",
            };
            out.extend_from_slice(format!("\"{kind}@{:p}\"", other.to_pointer()).as_bytes());
        }
    }
}

/// A table's two possible forms, the array one chosen when its keys are
/// 1, 2, … in iteration order.
fn format_table(out: &mut Vec<u8>, t: &Table, depth: usize) {
    let mut array = Vec::new();
    let mut full = Vec::new();
    let mut is_array = true;
    for (expected, pair) in (1i64..).zip(t.clone().pairs::<Value, Value>()) {
        let Ok((k, v)) = pair else { break };
        let index = match k {
            Value::Integer(i) => Some(i),
            Value::Number(n) if n == expected as f64 => Some(expected),
            _ => None,
        };
        if index != Some(expected) {
            is_array = false;
        }
        if expected > 1 {
            array.extend_from_slice(b"; ");
            full.extend_from_slice(b"; ");
        }
        format_value(&mut array, &v, depth);
        full.push(b'[');
        format_value(&mut full, &k, depth);
        full.extend_from_slice(b"]=");
        format_value(&mut full, &v, depth);
    }
    out.push(b'{');
    out.extend_from_slice(if is_array { &array } else { &full });
    out.push(b'}');
}

/// A command reply as the debugger shows it (`ldbRedisProtocolToHuman`).
/// Big numbers and verbatim strings, which Redis's debugger does not
/// know, show as nothing.
pub(crate) fn format_reply(out: &mut Vec<u8>, reply: &Reply) {
    let list = |out: &mut Vec<u8>, items: &[Reply], open: &[u8], close: u8| {
        out.extend_from_slice(open);
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            format_reply(out, item);
        }
        out.push(close);
    };
    match reply {
        Reply::Int(n) => out.extend_from_slice(n.to_string().as_bytes()),
        Reply::Bulk(b) => repr(out, b),
        Reply::NullBulk | Reply::NullArray => out.extend_from_slice(b"NULL"),
        Reply::Status(s) => repr(out, &[b"+", &s[..]].concat()),
        Reply::Error(e) => repr(out, &[b"-", &e[..]].concat()),
        Reply::Array(items) => list(out, items, b"[", b']'),
        Reply::Set(items) => list(out, items, b"~(", b')'),
        Reply::Map(pairs) => {
            out.push(b'{');
            for (i, (k, v)) in pairs.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                format_reply(out, k);
                out.extend_from_slice(b" => ");
                format_reply(out, v);
            }
            out.push(b'}');
        }
        Reply::Null => out.extend_from_slice(b"(null)"),
        Reply::Bool(b) => out.extend_from_slice(if *b { b"#true" } else { b"#false" }),
        Reply::Double(d) => {
            out.extend_from_slice(b"(double) ");
            out.extend_from_slice(vireo_resp::number::format_double(*d).as_bytes());
        }
        Reply::BigNumber(_) | Reply::Verbatim { .. } => {}
    }
}

/// Runs `f` on the session of `lua`, if a session is running.
fn with_session<R>(lua: &Lua, f: impl FnOnce(&mut Ldb) -> R) -> Option<R> {
    lua.app_data_mut::<Ldb>().map(|mut ldb| f(&mut ldb))
}

/// Whether `redis.call` logs its commands and replies: a session is
/// running and stepping (Redis's `ldbIsEnabled`).
fn logging(lua: &Lua) -> bool {
    with_session(lua, |l| l.step).unwrap_or(false)
}

/// Logs the command `redis.call` is about to run (`<redis> get k`, the
/// arguments after the tenth counted instead).
pub(crate) fn log_call(lua: &Lua, args: Args<'_>) {
    if !logging(lua) {
        return;
    }
    let mut line = b"<redis>".to_vec();
    for (i, arg) in args.iter().enumerate() {
        if i == 10 {
            line.extend_from_slice(format!(" ... ({} more)", args.len() - i - 1).as_bytes());
            break;
        }
        line.push(b' ');
        line.extend_from_slice(arg);
    }
    with_session(lua, |l| l.log(line));
}

/// Logs what `redis.call` got: a refusal as `<error> msg`, a command's
/// error as `<error> -CODE msg` and its reply, any other reply as
/// `<reply> ...`.
pub(crate) fn log_reply(lua: &Lua, reply: &Reply, refused: bool) {
    if !logging(lua) {
        return;
    }
    with_session(lua, |l| {
        if let Reply::Error(text) = reply {
            l.log([b"<error> ", &refusal_text(text, refused)[..]].concat());
            if refused {
                return;
            }
        }
        let mut line = b"<reply> ".to_vec();
        format_reply(&mut line, reply);
        l.log_trimmed(line);
    });
}

/// An error as Redis's debugger logs it: a command's error reply with its
/// `-`; a refusal as Redis words it before adding a code (its `ERR`
/// refusals carry none, the others are Redis's shared replies, line end
/// included).
fn refusal_text(text: &[u8], refused: bool) -> Vec<u8> {
    match (refused, text.strip_prefix(b"ERR ")) {
        (true, Some(msg)) => msg.to_vec(),
        (true, None) => [b"-", text, b"\r\n"].concat(),
        (false, _) => [b"-", text].concat(),
    }
}

/// `redis.breakpoint()`: stop at the next line; false outside a session.
pub(crate) fn breakpoint(lua: &Lua) -> bool {
    with_session(lua, |l| l.lua_breakpoint = true).is_some()
}

/// `redis.debug(...)`: logs its arguments (nothing outside a session).
pub(crate) fn debug(lua: &Lua, args: &MultiValue) {
    with_session(lua, |l| {
        let mut line = format!("<debug> line {}: ", l.current_line).into_bytes();
        for (i, v) in args.iter().enumerate() {
            if i > 0 {
                line.extend_from_slice(b", ");
            }
            format_value(&mut line, v, 0);
        }
        l.log(line);
    });
}

/// Why the script stopped.
fn stop_reason(breakpoint: bool, lua_breakpoint: bool, timeout: bool) -> &'static str {
    if breakpoint {
        if lua_breakpoint {
            "redis.breakpoint() called"
        } else {
            "break point"
        }
    } else if timeout {
        "timeout reached, infinite loop?"
    } else {
        "step over"
    }
}

/// The line hook of a session (`luaLdbLineHook`): decides whether to stop
/// here and, if so, runs the command loop.
pub(crate) fn hook(lua: &Lua, debug: &Debug) -> mlua::Result<VmState> {
    let line = i64::from(debug.curr_line());
    let in_script = debug
        .source()
        .short_src
        .is_some_and(|s| s.contains("user_script"));
    let decision = with_session(lua, |l| {
        l.current_line = line;
        if !in_script {
            return None;
        }
        let bp = l.breakpoints.contains(&line) || l.lua_breakpoint;
        let mut timeout = false;
        if debug.event() == DebugEvent::Count && !l.step && !bp {
            if l.running_since.elapsed() < l.time_limit {
                return None;
            }
            timeout = true;
            l.step = true;
        }
        if !(l.step || bp) {
            return None;
        }
        let reason = stop_reason(bp, l.lua_breakpoint, timeout);
        l.step = false;
        l.lua_breakpoint = false;
        l.log(format!("* Stopped at {line}, stop reason = {reason}"));
        l.log_source_line(line);
        l.send_logs();
        Some(timeout)
    });
    let Some(Some(timeout)) = decision else {
        return Ok(VmState::Continue);
    };
    let connected = command_loop(lua)?;
    if !connected && timeout {
        return Err(raise_table(
            b"timeout during Lua debugging with client closing connection",
        ));
    }
    with_session(lua, |l| l.running_since = Instant::now());
    Ok(VmState::Continue)
}

/// Reads and runs the client's commands until one resumes the script.
/// Returns false when the client went away (the script then runs to its
/// end without stopping).
fn command_loop(lua: &Lua) -> mlua::Result<bool> {
    loop {
        let Some(argv) = next_command(lua)? else {
            with_session(lua, |l| {
                l.step = false;
                l.breakpoints.clear();
            });
            return Ok(false);
        };
        // Redis compares names as C strings: a NUL ends them.
        let name = argv[0].split(|&c| c == 0).next().unwrap_or_default();
        let name = String::from_utf8_lossy(name).to_ascii_lowercase();
        let args = &argv[1..];
        match name.as_str() {
            "s" | "step" | "n" | "next" => {
                with_session(lua, |l| l.step = true);
                return Ok(true);
            }
            "c" | "continue" => return Ok(true),
            "a" | "abort" => return Err(raise_table(b"script aborted for user request")),
            _ => {}
        }
        run_command(lua, &name, args);
        with_session(lua, Ldb::send_logs);
    }
}

/// Runs one command that does not resume the script; its output is in
/// the session's log.
fn run_command(lua: &Lua, name: &str, args: &[Vec<u8>]) {
    match name {
        "h" | "help" => {
            with_session(lua, |l| HELP.iter().for_each(|line| l.log(*line)));
        }
        "t" | "trace" => trace(lua),
        "m" | "maxlen" => {
            with_session(lua, |l| l.maxlen_command(args));
        }
        "b" | "break" => {
            with_session(lua, |l| l.breakpoint_command(args));
        }
        "e" | "eval" => eval(lua, args),
        "r" | "redis" if !args.is_empty() => redis(lua, args),
        "p" | "print" => match args {
            [name] => print_variable(lua, name),
            _ => print_locals(lua),
        },
        "l" | "list" => {
            with_session(lua, |l| {
                let around = args.first().map(|a| atoi(a)).filter(|&n| n > 0);
                let context = args.get(1).map_or(5, |a| atoi(a));
                l.list(around.unwrap_or(l.current_line), context);
            });
        }
        "w" | "whole" => {
            with_session(lua, |l| l.list(1, 1_000_000));
        }
        _ => {
            with_session(lua, |l| {
                l.log("<error> Unknown Redis Lua debugger command or wrong number of arguments.")
            });
        }
    }
}

/// Waits for the client's next command; None when it went away. Bad or
/// oversized input fails the script, as in Redis.
fn next_command(lua: &Lua) -> mlua::Result<Option<Vec<Vec<u8>>>> {
    let mut ldb = lua
        .app_data_mut::<Ldb>()
        .ok_or_else(|| raise_table(b"debugging session missing"))?;
    loop {
        match parse_command(&ldb.input) {
            Parsed::Command(argv) => {
                ldb.input.clear();
                return Ok(Some(argv));
            }
            Parsed::Invalid => return Err(raise_table(b"protocol error")),
            Parsed::Incomplete => {}
        }
        let mut buf = [0u8; 1024];
        let n = match ldb.channel.read(&mut buf) {
            Ok(n) if n > 0 => n,
            _ => return Ok(None),
        };
        ldb.input.extend_from_slice(&buf[..n]);
        if ldb.input.len() > MAX_COMMAND_BUFFER {
            ldb.input = Vec::new();
            return Err(raise_table(b"max client buffer reached"));
        }
    }
}

/// Redis's debugger help, line by line.
const HELP: &[&str] = &[
    "Redis Lua debugger help:",
    "[h]elp               Show this help.",
    "[s]tep               Run current line and stop again.",
    "[n]ext               Alias for step.",
    "[c]ontinue           Run till next breakpoint.",
    "[l]ist               List source code around current line.",
    "[l]ist [line]        List source code around [line].",
    "                     line = 0 means: current position.",
    "[l]ist [line] [ctx]  In this form [ctx] specifies how many lines",
    "                     to show before/after [line].",
    "[w]hole              List all source code. Alias for 'list 1 1000000'.",
    "[p]rint              Show all the local variables.",
    "[p]rint <var>        Show the value of the specified variable.",
    "                     Can also show global vars KEYS and ARGV.",
    "[b]reak              Show all breakpoints.",
    "[b]reak <line>       Add a breakpoint to the specified line.",
    "[b]reak -<line>      Remove breakpoint from the specified line.",
    "[b]reak 0            Remove all breakpoints.",
    "[t]race              Show a backtrace.",
    "[e]val <code>        Execute some Lua code (in a different callframe).",
    "[r]edis <cmd>        Execute a Redis command.",
    "[m]axlen [len]       Trim logged Redis replies and Lua var dumps to len.",
    "                     Specifying zero as <len> means unlimited.",
    "[a]bort              Stop the execution of the script. In sync",
    "                     mode dataset changes will be retained.",
    "",
    "Debugger functions you can call from Lua scripts:",
    "redis.debug()        Produce logs in the debugger console.",
    "redis.breakpoint()   Stop execution like if there was a breakpoint in the",
    "                     next line of code.",
];

/// `trace`: the script's frames, innermost first.
fn trace(lua: &Lua) {
    let mut lines = Vec::new();
    let mut level = 0;
    while let Some(frame) = lua.inspect_stack(level) {
        let src = frame.source();
        if src.short_src.is_some_and(|s| s.contains("user_script")) {
            let name = frame.names().name.map(|n| n.into_owned());
            let place = if level == 0 { "In" } else { "From" };
            let name = name.unwrap_or_else(|| "top level".to_owned());
            lines.push((format!("{place} {name}:"), i64::from(frame.curr_line())));
        }
        level += 1;
    }
    with_session(lua, |l| {
        if level == 0 {
            l.log("<error> Can't retrieve Lua stack.");
        }
        for (head, line) in lines {
            l.log(head);
            l.log_source_line(line);
        }
    });
}

/// `eval <code>`: runs the code as an expression (`return ...`) or else as
/// a statement, in its own chunk, and shows the first result.
fn eval(lua: &Lua, args: &[Vec<u8>]) {
    let code = args.join(&b' ');
    let compile = |text: &[u8]| {
        lua.load(text)
            .set_name("@ldb_eval")
            .set_mode(mlua::ChunkMode::Text)
            .into_function()
    };
    let line = match compile(&[b"return ", &code[..]].concat()).or_else(|_| compile(&code)) {
        Err(e) => error_line(&e),
        Ok(f) => match f.call::<MultiValue>(()) {
            Ok(values) => {
                let mut line = b"<retval> ".to_vec();
                format_value(&mut line, values.front().unwrap_or(&Value::Nil), 0);
                with_session(lua, |l| l.log_trimmed(line));
                return;
            }
            Err(e) => error_line(&e),
        },
    };
    with_session(lua, |l| l.log(line));
}

/// `<error> message` for a failed `eval`.
fn error_line(e: &mlua::Error) -> Vec<u8> {
    let msg = match luaerr::find_raise(e) {
        // A raised error table shows its `err` (Redis's debugger would
        // print a NULL string there).
        Some(raise) => raise.to_string(),
        // mlua appends a traceback to runtime errors; Lua's message ends
        // before it.
        None => {
            let msg = luaerr::plain_message(e);
            match msg.split_once("\nstack traceback:") {
                Some((head, _)) => head.to_owned(),
                None => msg,
            }
        }
    };
    format!("<error> {msg}").into_bytes()
}

/// `redis <cmd> ...`: runs the command through `redis.call` with logging
/// on, so the command and its reply are logged.
fn redis(lua: &Lua, args: &[Vec<u8>]) {
    let call = lua
        .globals()
        .raw_get::<Table>("redis")
        .and_then(|t| t.raw_get::<Function>("call"));
    let Ok(call) = call else { return };
    let values: mlua::Result<Vec<mlua::String>> =
        args.iter().map(|a| lua.create_string(a)).collect();
    let Ok(values) = values else { return };
    with_session(lua, |l| l.step = true);
    let _ = call.call::<Value>(MultiValue::from_iter(values.into_iter().map(Value::String)));
    with_session(lua, |l| l.step = false);
}

/// The locals of the stopped frame (`level` 0) or of every frame, as
/// (name, value) pairs, innermost frame first.
fn locals(lua: &Lua, all_levels: bool) -> Vec<(String, Value)> {
    // SAFETY: the closure only walks the stack with the debug API, which
    // neither raises errors nor allocates beyond the stack space checked
    // for each pushed value; every value it leaves on the stack becomes
    // part of `exec_raw`'s results.
    let found: mlua::Result<MultiValue> = unsafe {
        lua.exec_raw((), |state| {
            use mlua::ffi;
            // Level 0 is the C function `exec_raw` runs in; the script's
            // stopped frame is level 1.
            let mut level = 1;
            let mut ar: ffi::lua_Debug = std::mem::zeroed();
            while ffi::lua_getstack(state, level, &mut ar) != 0 {
                level += 1;
                ffi::lua_getinfo(state, c"S".as_ptr(), &mut ar);
                let source = std::ffi::CStr::from_ptr(ar.source).to_bytes();
                if source != INTERNAL_CHUNK.as_bytes() {
                    let mut i = 1;
                    while ffi::lua_checkstack(state, 2) != 0 {
                        let name = ffi::lua_getlocal(state, &ar, i);
                        if name.is_null() {
                            break;
                        }
                        ffi::lua_pushstring(state, name);
                        ffi::lua_insert(state, -2);
                        i += 1;
                    }
                }
                if !all_levels {
                    break;
                }
            }
        })
    };
    let values: Vec<Value> = found.map(|m| m.into_iter().collect()).unwrap_or_default();
    values
        .chunks_exact(2)
        .filter_map(|pair| match &pair[0] {
            Value::String(name) => Some((name.to_string_lossy().to_string(), pair[1].clone())),
            _ => None,
        })
        .collect()
}

/// `print <var>`: the innermost local of that name, else the globals KEYS
/// and ARGV.
fn print_variable(lua: &Lua, name: &[u8]) {
    let name = String::from_utf8_lossy(name).into_owned();
    let local = locals(lua, true).into_iter().find(|(n, _)| *n == name);
    let value = match local {
        Some((_, v)) => Some(v),
        None if name == "KEYS" || name == "ARGV" => lua.globals().raw_get::<Value>(name).ok(),
        None => None,
    };
    with_session(lua, |l| match value {
        Some(v) => {
            let mut line = b"<value> ".to_vec();
            format_value(&mut line, &v, 0);
            l.log_trimmed(line);
        }
        None => l.log("No such variable."),
    });
}

/// `print`: every local of the stopped frame.
fn print_locals(lua: &Lua) {
    let vars: Vec<(String, Value)> = locals(lua, false)
        .into_iter()
        .filter(|(n, _)| !n.contains("(*temporary)"))
        .collect();
    with_session(lua, |l| {
        if vars.is_empty() {
            return l.log("No local variables in the current context.");
        }
        for (name, value) in vars {
            let mut line = format!("<value> {name} = ").into_bytes();
            format_value(&mut line, &value, 0);
            l.log_trimmed(line);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::FakeHost;
    use crate::EvalEngine;
    use std::cell::RefCell;
    use std::rc::Rc;
    use vireo_resp::{Protocol, ReplyBuf};

    /// A client that sends `input` (then closes) and records what it gets.
    /// Each read returns one command, as from a client waiting for each
    /// answer (the debugger drops what follows a command in one read, as
    /// Redis's does).
    struct FakeClient {
        input: Vec<Vec<u8>>,
        read_at: usize,
        sent: Rc<RefCell<Vec<u8>>>,
    }

    impl DebugChannel for FakeClient {
        fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
            self.sent.borrow_mut().extend_from_slice(bytes);
            Ok(())
        }
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let Some(cmd) = self.input.get(self.read_at) else {
                return Ok(0);
            };
            self.read_at += 1;
            buf[..cmd.len()].copy_from_slice(cmd);
            Ok(cmd.len())
        }
    }

    /// The RESP form of one command.
    fn command(words: &[&str]) -> Vec<u8> {
        let mut out = format!("*{}\r\n", words.len()).into_bytes();
        for w in words {
            out.extend_from_slice(format!("${}\r\n{w}\r\n", w.len()).as_bytes());
        }
        out
    }

    /// Runs `script` under the debugger with the client sending `cmds`;
    /// returns the status lines it was sent and the script's result.
    fn session(script: &str, cmds: &[&[&str]]) -> (Vec<String>, crate::RunResult, FakeHost) {
        let mut engine = EvalEngine::new(0).unwrap();
        let sha = engine.load(script.as_bytes()).unwrap();
        let sent = Rc::new(RefCell::new(Vec::new()));
        let client = FakeClient {
            input: cmds.iter().map(|c| command(c)).collect(),
            read_at: 0,
            sent: sent.clone(),
        };
        let mut host = FakeHost::default();
        let mut out = ReplyBuf::new(Protocol::Resp2);
        let result = engine.debug_evalsha(
            &sha,
            (&[b"k".as_slice()], &[]),
            &mut host,
            (Box::new(client), Duration::from_secs(60)),
            &mut out,
        );
        let sent = String::from_utf8(sent.borrow().clone()).unwrap();
        let lines = sent
            .split("\r\n")
            .filter_map(|l| l.strip_prefix('+').map(str::to_owned))
            .collect();
        (lines, result, host)
    }

    #[test]
    fn steps_logs_calls_and_ends_the_session() {
        let (lines, result, host) = session(
            "local a = redis.call('set', KEYS[1], 'v')\nredis.debug(a, 2.5)\nreturn 1",
            &[&["s"], &["print"], &["s"], &["c"]],
        );
        assert_eq!(
            lines,
            [
                "* Stopped at 1, stop reason = step over",
                "-> 1   local a = redis.call('set', KEYS[1], 'v')",
                "<redis> set k v",
                "<reply> \"+OK\"",
                "* Stopped at 2, stop reason = step over",
                "-> 2   redis.debug(a, 2.5)",
                "<value> a = {[\"ok\"]=\"OK\"}",
                "<debug> line 2: {[\"ok\"]=\"OK\"}, 2.5",
                "* Stopped at 3, stop reason = step over",
                "-> 3   return 1",
                "<endsession>",
            ]
        );
        assert!(result.is_ok());
        assert_eq!(host.strings.get(b"k".as_slice()), Some(&b"v".to_vec()));
    }

    #[test]
    fn breakpoints_and_lua_breakpoints_stop_the_script() {
        let (lines, _, _) = session(
            "local x = 1\nlocal y = 2\nredis.breakpoint()\nlocal z = 3\nreturn x",
            &[&["b", "2"], &["c"], &["c"], &["c"]],
        );
        assert!(lines.contains(&"* Stopped at 2, stop reason = break point".to_owned()));
        assert!(
            lines.contains(&"* Stopped at 4, stop reason = redis.breakpoint() called".to_owned())
        );
    }

    #[test]
    fn abort_and_bad_input_fail_the_script() {
        let (_, result, _) = session("local x = 1\nreturn x", &[&["abort"]]);
        let e = result.unwrap_err().message;
        assert!(e.starts_with("ERR script aborted for user request"), "{e}");
        let mut engine = EvalEngine::new(0).unwrap();
        let sha = engine.load(b"return 1").unwrap();
        let sent = Rc::new(RefCell::new(Vec::new()));
        let client = FakeClient {
            input: vec![b"not a command\r\n".to_vec()],
            read_at: 0,
            sent,
        };
        let mut out = ReplyBuf::new(Protocol::Resp2);
        let e = engine
            .debug_evalsha(
                &sha,
                (&[], &[]),
                &mut FakeHost::default(),
                (Box::new(client), Duration::from_secs(60)),
                &mut out,
            )
            .unwrap_err();
        assert!(e.message.contains("protocol error"), "{}", e.message);
    }

    #[test]
    fn a_client_gone_lets_the_script_run_to_its_end() {
        // No input at all: the first read says the client closed.
        let (lines, result, host) = session(
            "redis.call('set','a','1')\nredis.breakpoint()\nredis.call('set','b','2')\nreturn 3",
            &[],
        );
        assert_eq!(lines.last().map(String::as_str), Some("<endsession>"));
        assert!(result.is_ok());
        assert_eq!(host.strings.len(), 2);
    }

    #[test]
    fn values_and_replies_print_as_redis_prints_them() {
        let mut out = Vec::new();
        repr(&mut out, b"a\n\"\\\x00\xc8 b");
        assert_eq!(out, br#""a\n\"\\\x00\xc8 b""#);
        let mut out = Vec::new();
        format_reply(
            &mut out,
            &Reply::Array(vec![
                Reply::Int(1),
                Reply::NullBulk,
                Reply::Map(vec![(Reply::Bulk(b"f".to_vec()), Reply::Double(1.5))]),
                Reply::Set(vec![Reply::Bool(true)]),
                Reply::Null,
            ]),
        );
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "[1,NULL,{\"f\" => (double) 1.5},~(#true),(null)]"
        );
        assert_eq!(atoi(b" 42x"), 42);
        assert_eq!(atoi(b"-7"), -7);
        assert_eq!(atoi(b"x"), 0);
    }

    #[test]
    fn command_parser_takes_what_redis_takes() {
        assert_eq!(
            parse_command(b"*2\r\n$1\r\ns\r\n$2\r\nab\r\n"),
            Parsed::Command(vec![b"s".to_vec(), b"ab".to_vec()])
        );
        assert_eq!(parse_command(b"*2\r\n$1\r\ns\r\n"), Parsed::Incomplete);
        assert_eq!(parse_command(b"*1\r\n$0\r\n\r\n"), Parsed::Invalid);
        assert_eq!(parse_command(b"*1025\r\n"), Parsed::Invalid);
        assert_eq!(parse_command(b"hello"), Parsed::Invalid);
        assert_eq!(parse_command(b""), Parsed::Incomplete);
    }

    #[test]
    fn command_parser_survives_random_bytes() {
        let mut rng = crate::rand48::Rand48::default();
        let pieces: [&[u8]; 8] = [b"*", b"$", b"\r\n", b"1", b"3", b"-1", b"abc", b"\x00"];
        for _ in 0..20_000 {
            let mut input = Vec::new();
            for _ in 0..rng.next() % 24 {
                let r = rng.next() as usize;
                if r.is_multiple_of(5) {
                    input.push((r >> 8) as u8);
                } else {
                    input.extend_from_slice(pieces[r % pieces.len()]);
                }
            }
            if let Parsed::Command(argv) = parse_command(&input) {
                assert!(!argv.is_empty() && argv.len() <= 1024);
                assert!(argv.iter().all(|a| !a.is_empty() && a.len() <= 1024));
            }
        }
    }
}
