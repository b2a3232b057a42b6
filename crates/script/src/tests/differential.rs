//! Differential tests against a real `redis-server` (7.0.15): each script
//! runs once through the server's EVAL and once through this engine, whose
//! host forwards `redis.call` to the same server; the reply bytes must be
//! equal. Skipped (with a note) when `redis-server` is not installed.

use crate::{Host, Interrupt, LogLevel, ReplFlags, Reply};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use vireo_resp::{Args, Protocol, ReplyBuf};

/// A redis-server on a private unix socket, killed on drop.
struct Server {
    /// The process.
    child: Child,
    /// Its socket path.
    socket: String,
}

impl Server {
    /// Starts one, or `None` when redis-server is missing.
    fn start() -> Option<Server> {
        let socket = format!("/tmp/vireo-script-diff-{}.sock", std::process::id());
        let child = Command::new("redis-server")
            .args([
                "--port",
                "0",
                "--unixsocket",
                &socket,
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        for _ in 0..100 {
            if UnixStream::connect(&socket).is_ok() {
                return Some(Server { child, socket });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// A connection speaking `proto`.
    fn connect(&self, proto: Protocol) -> Conn {
        let mut c = Conn(UnixStream::connect(&self.socket).unwrap());
        if proto == Protocol::Resp3 {
            c.raw(&[b"HELLO", b"3"]);
        }
        c
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// One client connection.
struct Conn(UnixStream);

impl Conn {
    /// Sends a command and returns the raw reply bytes.
    fn raw(&mut self, args: &[&[u8]]) -> Vec<u8> {
        let mut req = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            req.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            req.extend_from_slice(a);
            req.extend_from_slice(b"\r\n");
        }
        self.0.write_all(&req).unwrap();
        let mut buf = Vec::new();
        let mut chunk = [0u8; 65536];
        loop {
            if Reply::parse(&buf).is_ok() {
                return buf;
            }
            let n = self.0.read(&mut chunk).unwrap();
            assert!(n > 0, "server closed");
            buf.extend_from_slice(&chunk[..n]);
        }
    }
}

/// A host forwarding calls to the server over a RESP2 and a RESP3 link.
struct ForwardHost {
    /// RESP2 link.
    r2: Conn,
    /// RESP3 link.
    r3: Conn,
    /// The last reply.
    last: Vec<u8>,
}

impl Host for ForwardHost {
    fn call(&mut self, args: Args<'_>, resp: Protocol) -> &[u8] {
        let argv: Vec<&[u8]> = args.iter().collect();
        let conn = if resp == Protocol::Resp3 {
            &mut self.r3
        } else {
            &mut self.r2
        };
        self.last = conn.raw(&argv);
        &self.last
    }
    fn acl_check(&mut self, _: Args<'_>) -> Option<bool> {
        Some(true)
    }
    fn log(&mut self, _: LogLevel, _: &[u8]) {}
    fn set_repl(&mut self, _: ReplFlags) {}
    fn interrupt(&mut self) -> Interrupt {
        Interrupt::Continue
    }
}

/// Scripts whose replies must match Redis byte for byte.
const SCRIPTS: &[&str] = &[
    "return 'hello'",
    "return 100.5",
    "return {redis.call('echo', 2^60), redis.call('echo', -0.0), redis.call('echo', 0.1), redis.call('echo', 1e16 + 1)}",
    "return {1,2,3,'ciao',{1,2}}",
    "return {1,2,nil,4}",
    "return {ok='fine'}",
    "return {err='My Error'}",
    "return redis.error_reply('My Error')",
    "return redis.error_reply('NoSpace')",
    "return redis.status_reply('PONG')",
    "return true",
    "return false",
    "return nil",
    "return _G",
    "return {double=3.14}",
    "return {map={a=1}}",
    "return {set={a=true}}",
    "return {big_number='12345'}",
    "return {verbatim_string={format='txt', string='x'}}",
    "redis.setresp(3) return true",
    "redis.setresp(3) return false",
    "redis.call('set', 'k', 'v') return redis.call('get', 'k')",
    "return redis.call('get', 'nokey')",
    "redis.call('set', 'k', 'v') return redis.pcall('incr', 'k')",
    "redis.call('set', 'k', 'v') return redis.call('incr', 'k')",
    "redis.call('hset', 'h', 'a', '1') return redis.call('hgetall', 'h')",
    "redis.setresp(3) redis.call('hset', 'h', 'a', '1') return redis.call('hgetall', 'h')",
    "redis.setresp(3) redis.call('sadd', 's', 'a') return redis.call('smembers', 's')",
    "redis.setresp(3) redis.call('zadd', 'z', '1.5', 'a') return redis.call('zscore', 'z', 'a')",
    "redis.setresp(3) return redis.call('zscore', 'z', 'nomember')",
    "redis.setresp(3) local r = redis.call('zadd', 'z', '1.5', 'a') return {r, redis.call('zscore', 'z', 'a').double}",
    "a = 1",
    "return b",
    "error('x')",
    "error({err='My Error'})",
    "local t = nil; return t.x",
    "return string.rep(nil)",
    "redis.call = nil",
    "setmetatable(_G, {})",
    "return loadstring(string.dump(function() return 1 end))()",
    "print('x')",
    "return (",
    "return redis.sha1hex('Pizza & Mandolino')",
    "math.randomseed(42) return {math.random(1000), math.random(1000)}",
    "return cjson.encode({1,2,{a=3},{}})",
    "return cjson.encode({[1]=1,[2]=2,[5]=5})",
    "return cjson.encode({1/3, 1e20, -0.5, 12345678901234567})",
    "return cjson.encode('\\1\\127\\255/\"')",
    "return {pcall(cjson.encode, {[20]=1})}",
    "return {pcall(cjson.decode, '{\"a\":')}",
    "return {pcall(cjson.decode, '[1,2')}",
    "return {pcall(cjson.decode, '{1:2}')}",
    "return {pcall(cjson.decode, 'nul')}",
    "return cjson.decode('[1,\"a\",true,{\"b\":2.5}]')[4].b",
    "return cmsgpack.pack(1, -5, 300, -300, 70000, 0.5, 0.1, 'abc', {1,2}, {a=1}, true, false)",
    "return {cmsgpack.unpack(cmsgpack.pack(1, 'x', {2, 3}, -2^40))}",
    "return {pcall(cmsgpack.unpack, '\\205')}",
    "return {pcall(cmsgpack.unpack, '\\193')}",
    "return {bit.tohex(65535, -3), bit.band(7, 3), bit.bor(1, 2^40), bit.lshift(1, 40), bit.arshift(-1, 3)}",
    "return {pcall(bit.band, 'x')}",
    "return {struct.unpack('>I2i4', struct.pack('>I2i4', 513, -7))}",
    "return {pcall(struct.pack, 'q', 1)}",
    "return {pcall(struct.unpack, 'i4', 'ab')}",
    "return struct.size('!8bd')",
    "return {redis.call('ping'), redis.REDIS_VERSION, redis.REDIS_VERSION_NUM}",
    "return tostring(1e15) .. tostring(0.1) .. tostring(-0)",
    "local t = {} t[1] = 'a' t[3] = 'c' return t",
    "return redis.setresp(5)",
    "return redis.log(redis.LOG_WARNING)",
    "local ok, e = pcall(function() error({err='x'}) end) return e",
    "return {xpcall(function() error('y') end, function(e) return e end)}",
    "return {type(__redis__err__handler), type(coroutine), type(gcinfo), type(load)}",
];

/// Every script gives Redis's reply bytes, for RESP2 and RESP3 callers.
#[test]
fn scripts_match_redis() {
    let Some(server) = Server::start() else {
        eprintln!("note: redis-server not installed; differential test skipped");
        return;
    };
    let mut engine = crate::EvalEngine::new(0).unwrap();
    let mut host = ForwardHost {
        r2: server.connect(Protocol::Resp2),
        r3: server.connect(Protocol::Resp3),
        last: Vec::new(),
    };
    let mut failures = Vec::new();
    for proto in [Protocol::Resp2, Protocol::Resp3] {
        let mut client = server.connect(proto);
        for script in SCRIPTS {
            client.raw(&[b"FLUSHALL"]);
            let want = client.raw(&[b"EVAL", script.as_bytes(), b"0"]);
            client.raw(&[b"FLUSHALL"]);
            let mut out = ReplyBuf::new(proto);
            if let Err(e) = engine.eval(script.as_bytes(), &[], &[], &mut host, &mut out) {
                out.raw(format!("-{}\r\n", e.message).as_bytes());
            }
            if out.as_bytes() != want.as_slice() {
                failures.push(format!(
                    "{proto:?} {script}\n  redis: {:?}\n  vireo: {:?}",
                    String::from_utf8_lossy(&want),
                    String::from_utf8_lossy(out.as_bytes())
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
