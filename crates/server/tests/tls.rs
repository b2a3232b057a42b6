//! TLS: the `tls-port` listener beside the plaintext one, client
//! certificates under each `tls-auth-clients` mode, protocol and cipher
//! settings, reloading by CONFIG SET, and hostile peers (plaintext, garbage
//! and stalled handshakes on the TLS port). Certificates are made here with
//! `rcgen`; clients are `rustls` ones, and `redis-cli --tls` when installed.

mod common;

use common::eventually;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{err, free_port, fresh_dir, ok, Server};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};

/// A CA and the files of certificates it signed, in a directory.
struct Pki {
    dir: PathBuf,
}

impl Pki {
    fn path(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }
}

/// Writes `ca.crt`, `server.{crt,key}`, `client.{crt,key}`, `server2.*`
/// (the same CA, another key) and `rogue.*` (a client certificate from
/// another CA) into a fresh directory.
fn make_pki() -> Pki {
    let dir = fresh_dir();
    let ca = make_ca("Vireo Test CA");
    let rogue_ca = make_ca("Rogue CA");
    std::fs::write(dir.join("ca.crt"), &ca.0).unwrap();
    leaf(&dir, "server", &ca.1, ExtendedKeyUsagePurpose::ServerAuth);
    leaf(&dir, "server2", &ca.1, ExtendedKeyUsagePurpose::ServerAuth);
    leaf(&dir, "client", &ca.1, ExtendedKeyUsagePurpose::ClientAuth);
    leaf(
        &dir,
        "rogue",
        &rogue_ca.1,
        ExtendedKeyUsagePurpose::ClientAuth,
    );
    Pki { dir }
}

/// A self-signed CA: its PEM and an issuer for leaves.
fn make_ca(name: &str) -> (String, Issuer<'static, KeyPair>) {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name.push(DnType::CommonName, name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let key = KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    (cert.pem(), Issuer::new(params, key))
}

/// A leaf certificate for `localhost` signed by `issuer`, as NAME.crt and
/// NAME.key.
fn leaf(dir: &Path, name: &str, issuer: &Issuer<'_, KeyPair>, usage: ExtendedKeyUsagePurpose) {
    let mut params = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    params.distinguished_name.push(DnType::CommonName, name);
    params.extended_key_usages = vec![usage];
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, issuer).unwrap();
    std::fs::write(dir.join(format!("{name}.crt")), cert.pem()).unwrap();
    std::fs::write(dir.join(format!("{name}.key")), key.serialize_pem()).unwrap();
}

/// Starts Vireo with plaintext on `port` and TLS on a free port, with the
/// server certificate and CA of `pki` plus `extra`.
fn start_tls(pki: &Pki, extra: &[&str]) -> (Server, u16) {
    let tls_port = free_port();
    let tls_port_s = tls_port.to_string();
    let (cert, key, ca) = (
        pki.path("server.crt"),
        pki.path("server.key"),
        pki.path("ca.crt"),
    );
    let mut args = vec![
        "--tls-port",
        &tls_port_s,
        "--tls-cert-file",
        &cert,
        "--tls-key-file",
        &key,
        "--tls-ca-cert-file",
        &ca,
    ];
    args.extend_from_slice(extra);
    (Server::start(&args), tls_port)
}

/// How a test client presents itself.
struct ClientOpts<'a> {
    cert: Option<&'a str>,
    versions: &'a [&'static rustls::SupportedProtocolVersion],
    suites: Option<Vec<rustls::SupportedCipherSuite>>,
}

impl Default for ClientOpts<'_> {
    fn default() -> Self {
        ClientOpts {
            cert: Some("client"),
            versions: rustls::ALL_VERSIONS,
            suites: None,
        }
    }
}

type TlsClient = StreamOwned<ClientConnection, TcpStream>;

/// A rustls client connection to `port`, trusting `pki`'s CA.
fn tls_connect(pki: &Pki, port: u16, opts: &ClientOpts<'_>) -> TlsClient {
    connect_with(client_config(pki, opts), port)
}

/// A client connection with `config` (shared, it resumes sessions).
fn connect_with(config: Arc<ClientConfig>, port: u16) -> TlsClient {
    let conn = ClientConnection::new(config, ServerName::try_from("localhost").unwrap()).unwrap();
    let sock = TcpStream::connect(("127.0.0.1", port)).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    StreamOwned::new(conn, sock)
}

/// A client configuration trusting `pki`'s CA.
fn client_config(pki: &Pki, opts: &ClientOpts<'_>) -> Arc<ClientConfig> {
    let mut provider = rustls::crypto::ring::default_provider();
    if let Some(suites) = &opts.suites {
        provider.cipher_suites = suites.clone();
    }
    let mut roots = RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(pki.path("ca.crt")).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let builder = ClientConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(opts.versions)
        .unwrap()
        .with_root_certificates(roots);
    let config = match opts.cert {
        Some(name) => {
            let chain = CertificateDer::pem_file_iter(pki.path(&format!("{name}.crt")))
                .unwrap()
                .map(Result::unwrap)
                .collect();
            let key = PrivateKeyDer::from_pem_file(pki.path(&format!("{name}.key"))).unwrap();
            builder.with_client_auth_cert(chain, key).unwrap()
        }
        None => builder.with_no_client_auth(),
    };
    Arc::new(config)
}

/// Sends PING over TLS; the reply, or the error that ended the connection.
fn tls_ping(pki: &Pki, port: u16, opts: &ClientOpts<'_>) -> Result<String, String> {
    let mut c = tls_connect(pki, port, opts);
    exchange(&mut c, b"PING\r\n")
}

fn exchange(c: &mut TlsClient, req: &[u8]) -> Result<String, String> {
    c.write_all(req).map_err(|e| e.to_string())?;
    c.flush().map_err(|e| e.to_string())?;
    let mut buf = [0u8; 256];
    match c.read(&mut buf) {
        Ok(0) => Err("closed".into()),
        Ok(n) => Ok(String::from_utf8_lossy(&buf[..n]).into_owned()),
        Err(e) => Err(e.to_string()),
    }
}

/// Reads until EOF or error; true when the peer closed within `within`.
fn closed_within(s: &mut TcpStream, within: Duration) -> bool {
    s.set_read_timeout(Some(within)).unwrap();
    let mut buf = [0u8; 64];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::TimedOut => {
                return false
            }
            Err(_) => return true,
        }
    }
}

#[test]
fn tls_and_plaintext_listeners_serve_side_by_side() {
    let pki = make_pki();
    let (server, tls_port) = start_tls(&pki, &[]);
    let mut c = tls_connect(&pki, tls_port, &ClientOpts::default());
    assert_eq!(exchange(&mut c, b"SET k v\r\n").unwrap(), "+OK\r\n");
    // A big reply crosses several TLS records and socket writes.
    let big = "x".repeat(300_000);
    let req = format!(
        "*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n${}\r\n{big}\r\n",
        big.len()
    );
    assert_eq!(exchange(&mut c, req.as_bytes()).unwrap(), "+OK\r\n");
    c.write_all(b"GET big\r\n").unwrap();
    let mut got = Vec::new();
    let want = format!("${}\r\n{big}\r\n", big.len());
    let mut buf = vec![0u8; 65536];
    while got.len() < want.len() {
        let n = c.read(&mut buf).unwrap();
        assert!(n > 0, "closed early");
        got.extend_from_slice(&buf[..n]);
    }
    assert_eq!(got, want.as_bytes());
    // Pipelined commands over TLS.
    let pipeline = "PING\r\n".repeat(500);
    c.write_all(pipeline.as_bytes()).unwrap();
    let mut got = Vec::new();
    while got.len() < 500 * 7 {
        let n = c.read(&mut buf).unwrap();
        assert!(n > 0);
        got.extend_from_slice(&buf[..n]);
    }
    assert_eq!(got, "+PONG\r\n".repeat(500).as_bytes());
    // The plaintext port sees the same data.
    let mut plain = server.conn();
    assert_eq!(
        ok(&mut plain, &["GET", "k"]),
        redis::Value::BulkString(b"v".to_vec())
    );
    let info: String = redis::cmd("INFO").arg("server").query(&mut plain).unwrap();
    assert!(
        info.contains(&format!("tcp_port:{}", server.port)),
        "{info}"
    );
}

#[test]
fn auth_clients_modes_decide_who_may_connect() {
    let pki = make_pki();
    let (server, port) = start_tls(&pki, &[]);
    let mut plain = server.conn();
    let anonymous = ClientOpts {
        cert: None,
        ..Default::default()
    };
    let rogue = ClientOpts {
        cert: Some("rogue"),
        ..Default::default()
    };
    let good = ClientOpts::default();
    // Default `yes`: a certificate from our CA is required.
    assert_eq!(tls_ping(&pki, port, &good).unwrap(), "+PONG\r\n");
    assert!(tls_ping(&pki, port, &anonymous).is_err());
    assert!(tls_ping(&pki, port, &rogue).is_err());
    ok(&mut plain, &["CONFIG", "SET", "tls-auth-clients", "no"]);
    assert_eq!(tls_ping(&pki, port, &anonymous).unwrap(), "+PONG\r\n");
    assert_eq!(tls_ping(&pki, port, &good).unwrap(), "+PONG\r\n");
    ok(
        &mut plain,
        &["CONFIG", "SET", "tls-auth-clients", "optional"],
    );
    assert_eq!(tls_ping(&pki, port, &anonymous).unwrap(), "+PONG\r\n");
    assert_eq!(tls_ping(&pki, port, &good).unwrap(), "+PONG\r\n");
    // A certificate that is presented must still be valid.
    assert!(tls_ping(&pki, port, &rogue).is_err());
    ok(&mut plain, &["CONFIG", "SET", "tls-auth-clients", "yes"]);
    assert!(tls_ping(&pki, port, &anonymous).is_err());
}

#[test]
fn hostile_peers_on_the_tls_port_are_closed_without_harm() {
    let pki = make_pki();
    let dir = fresh_dir();
    let log = dir.join("vireo.log").display().to_string();
    let (server, port) = start_tls(&pki, &["--logfile", &log]);
    // A stalled handshake: connected, never says anything.
    let mut stalled = TcpStream::connect(("127.0.0.1", port)).unwrap();
    // Plaintext RESP on the TLS port: closed at once, with no reply.
    let mut plain = TcpStream::connect(("127.0.0.1", port)).unwrap();
    plain.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
    assert!(closed_within(&mut plain, Duration::from_secs(10)));
    // Garbage after a TLS record header, and random bytes.
    let mut rng = 0x2545F4914F6CDD1Du64;
    for i in 0..20 {
        let mut bytes = if i % 2 == 0 {
            vec![0x16, 0x03, 0x01, 0x00, 0x40]
        } else {
            Vec::new()
        };
        for _ in 0..200 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            bytes.push(rng as u8);
        }
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let _ = s.write_all(&bytes);
        assert!(closed_within(&mut s, Duration::from_secs(10)), "case {i}");
    }
    // Meanwhile others are served, on both ports.
    assert_eq!(
        tls_ping(&pki, port, &ClientOpts::default()).unwrap(),
        "+PONG\r\n"
    );
    let mut con = server.conn();
    assert_eq!(
        ok(&mut con, &["PING"]),
        redis::Value::SimpleString("PONG".into())
    );
    // The stalled one is let go once the handshake time is over.
    let start = Instant::now();
    assert!(closed_within(&mut stalled, Duration::from_secs(30)));
    assert!(start.elapsed() >= Duration::from_secs(3));
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("Error accepting a client connection: "),
        "{text}"
    );
    assert!(text.contains("handshake timed out"), "{text}");
}

#[test]
fn config_set_reloads_certificates_and_refuses_bad_files() {
    let pki = make_pki();
    let (server, port) = start_tls(&pki, &[]);
    let mut con = server.conn();
    let fingerprint = |pki: &Pki| {
        let mut c = tls_connect(pki, port, &ClientOpts::default());
        exchange(&mut c, b"PING\r\n").unwrap();
        c.conn.peer_certificates().unwrap()[0].to_vec()
    };
    let first = fingerprint(&pki);
    let refused = |con: &mut redis::Connection, name: &str, value: &str| {
        let e = err(con, &["CONFIG", "SET", name, value]);
        assert!(
            e.contains(&format!("CONFIG SET failed (possibly related to argument '{name}') - Unable to update TLS configuration. Check server logs.")),
            "{e}"
        );
    };
    refused(&mut con, "tls-cert-file", "/nonexistent/cert.pem");
    refused(&mut con, "tls-key-file", &pki.path("ca.crt"));
    // A key that does not match the certificate.
    refused(&mut con, "tls-key-file", &pki.path("server2.key"));
    refused(&mut con, "tls-ca-cert-file", &pki.path("server.key"));
    refused(&mut con, "tls-protocols", "TLSv1");
    refused(&mut con, "tls-ciphers", "AES128-SHA256");
    refused(&mut con, "tls-ciphersuites", "TLS_BOGUS");
    // The failed settings were rolled back and TLS still works.
    let cert: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("tls-cert-file")
        .query::<Vec<String>>(&mut con)
        .unwrap();
    assert_eq!(cert[1], pki.path("server.crt"));
    assert_eq!(fingerprint(&pki), first);
    // Both files at once: new connections get the new certificate.
    ok(
        &mut con,
        &[
            "CONFIG",
            "SET",
            "tls-cert-file",
            &pki.path("server2.crt"),
            "tls-key-file",
            &pki.path("server2.key"),
        ],
    );
    assert_ne!(fingerprint(&pki), first);
    // Other settings apply too.
    ok(&mut con, &["CONFIG", "SET", "tls-session-caching", "no"]);
    ok(&mut con, &["CONFIG", "SET", "tls-replication", "yes"]);
    assert_eq!(
        tls_ping(&pki, port, &ClientOpts::default()).unwrap(),
        "+PONG\r\n"
    );
}

/// Whether a TLS PING on `port` gets its PONG.
fn tls_answers(pki: &Pki, port: u16) -> bool {
    TcpStream::connect(("127.0.0.1", port)).is_ok()
        && tls_ping(pki, port, &ClientOpts::default()).as_deref() == Ok("+PONG\r\n")
}

/// CONFIG SET tls-port moves the TLS listener (connections made before
/// stay), refuses a port it cannot bind with Redis's error, closes it with
/// 0, and configures TLS first on a server started without it.
#[test]
fn config_set_tls_port_moves_the_listener() {
    let pki = make_pki();
    let (server, old_port) = start_tls(&pki, &[]);
    let mut con = server.conn();
    let mut before = tls_connect(&pki, old_port, &ClientOpts::default());
    assert_eq!(exchange(&mut before, b"PING\r\n").unwrap(), "+PONG\r\n");
    let new_port = free_port();
    ok(
        &mut con,
        &["CONFIG", "SET", "tls-port", &new_port.to_string()],
    );
    assert!(tls_answers(&pki, new_port));
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", old_port)).is_ok() {
        assert!(Instant::now() < deadline, "the old TLS port still listens");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(exchange(&mut before, b"PING\r\n").unwrap(), "+PONG\r\n");
    // A port in use (the plaintext one) is refused and nothing changes.
    let e = err(
        &mut con,
        &["CONFIG", "SET", "tls-port", &server.port.to_string()],
    );
    assert!(
        e.contains("CONFIG SET failed (possibly related to argument 'tls-port') - Unable to listen on this port. Check server logs."),
        "{e}"
    );
    let got: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("tls-port")
        .query(&mut con)
        .unwrap();
    assert_eq!(got[1], new_port.to_string());
    assert!(tls_answers(&pki, new_port));
    ok(&mut con, &["CONFIG", "SET", "tls-port", "0"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", new_port)).is_ok() {
        assert!(Instant::now() < deadline, "tls-port 0 still listens");
        std::thread::sleep(Duration::from_millis(20));
    }

    // A server without TLS: the port needs a certificate first.
    let plain = Server::start(&[]);
    let mut pc = plain.conn();
    let port = free_port().to_string();
    let e = err(&mut pc, &["CONFIG", "SET", "tls-port", &port]);
    assert!(e.contains("Unable to update TLS configuration"), "{e}");
    assert!(TcpStream::connect(("127.0.0.1", port.parse::<u16>().unwrap())).is_err());
    ok(
        &mut pc,
        &[
            "CONFIG",
            "SET",
            "tls-cert-file",
            &pki.path("server.crt"),
            "tls-key-file",
            &pki.path("server.key"),
            "tls-ca-cert-file",
            &pki.path("ca.crt"),
        ],
    );
    ok(&mut pc, &["CONFIG", "SET", "tls-port", &port]);
    assert!(tls_answers(&pki, port.parse().unwrap()));
}

#[test]
fn sessions_resume_while_caching_is_on() {
    let pki = make_pki();
    let (server, port) = start_tls(&pki, &[]);
    let kind = |cfg: &Arc<ClientConfig>| {
        let mut c = connect_with(cfg.clone(), port);
        exchange(&mut c, b"PING\r\n").unwrap();
        c.conn.handshake_kind()
    };
    let cfg = client_config(&pki, &ClientOpts::default());
    assert_eq!(kind(&cfg), Some(rustls::HandshakeKind::Full));
    assert_eq!(kind(&cfg), Some(rustls::HandshakeKind::Resumed));
    let mut con = server.conn();
    ok(&mut con, &["CONFIG", "SET", "tls-session-caching", "no"]);
    let cfg = client_config(&pki, &ClientOpts::default());
    assert_eq!(kind(&cfg), Some(rustls::HandshakeKind::Full));
    assert_eq!(kind(&cfg), Some(rustls::HandshakeKind::Full));
}

#[test]
fn protocols_and_ciphers_are_enforced() {
    let pki = make_pki();
    let (server, port) = start_tls(&pki, &["--tls-protocols", "TLSv1.2"]);
    let mut con = server.conn();
    let tls13_only = ClientOpts {
        versions: &[&rustls::version::TLS13],
        ..Default::default()
    };
    assert!(tls_ping(&pki, port, &tls13_only).is_err());
    let mut c = tls_connect(&pki, port, &ClientOpts::default());
    exchange(&mut c, b"PING\r\n").unwrap();
    assert_eq!(
        c.conn.protocol_version(),
        Some(rustls::ProtocolVersion::TLSv1_2)
    );
    // Cipher order: the client's unless tls-prefer-server-ciphers.
    use rustls::crypto::ring::cipher_suite as cs;
    ok(
        &mut con,
        &[
            "CONFIG",
            "SET",
            "tls-ciphers",
            "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384",
        ],
    );
    let client_prefers_256 = || ClientOpts {
        suites: Some(vec![
            cs::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
            cs::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        ]),
        ..Default::default()
    };
    let negotiated = || {
        let mut c = tls_connect(&pki, port, &client_prefers_256());
        exchange(&mut c, b"PING\r\n").unwrap();
        c.conn.negotiated_cipher_suite().unwrap().suite()
    };
    assert_eq!(
        negotiated(),
        rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384
    );
    ok(
        &mut con,
        &["CONFIG", "SET", "tls-prefer-server-ciphers", "yes"],
    );
    assert_eq!(
        negotiated(),
        rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
    );
    // A client with no suite in common is refused.
    ok(
        &mut con,
        &["CONFIG", "SET", "tls-ciphers", "DEFAULT:-AES256"],
    );
    let only_256 = ClientOpts {
        suites: Some(vec![cs::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384]),
        ..Default::default()
    };
    assert!(tls_ping(&pki, port, &only_256).is_err());
}

/// `openssl` makes the PKCS#8 encrypted key (`tls-key-file-pass`); skipped
/// without it.
#[test]
fn encrypted_key_needs_its_password() {
    let pki = make_pki();
    let encrypted = pki.path("server.key.enc");
    let made = Command::new("openssl")
        .args([
            "pkcs8",
            "-topk8",
            "-v2",
            "aes-256-cbc",
            "-passout",
            "pass:1234",
        ])
        .args(["-in", &pki.path("server.key"), "-out", &encrypted])
        .stderr(Stdio::null())
        .status();
    if !made.is_ok_and(|s| s.success()) {
        eprintln!("openssl not available: skipping the encrypted key test");
        return;
    }
    let (server, port) = start_tls(&pki, &[]);
    let mut con = server.conn();
    let e = err(&mut con, &["CONFIG", "SET", "tls-key-file", &encrypted]);
    assert!(e.contains("Unable to update TLS"), "{e}");
    ok(&mut con, &["CONFIG", "SET", "tls-key-file-pass", "wrong"]);
    let e = err(&mut con, &["CONFIG", "SET", "tls-key-file", &encrypted]);
    assert!(e.contains("Unable to update TLS"), "{e}");
    ok(
        &mut con,
        &[
            "CONFIG",
            "SET",
            "tls-key-file-pass",
            "1234",
            "tls-key-file",
            &encrypted,
        ],
    );
    assert_eq!(
        tls_ping(&pki, port, &ClientOpts::default()).unwrap(),
        "+PONG\r\n"
    );
}

/// Kills a server started by hand when the test ends, even by a panic.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// With `port 0`, only the TLS port listens, and INFO shows it.
#[test]
fn tls_port_alone_with_port_zero() {
    let pki = make_pki();
    let dir = fresh_dir();
    let tls_port = free_port();
    let _child = Killed(
        Command::new(env!("CARGO_BIN_EXE_vireo"))
            .args(["--port", "0", "--bind", "127.0.0.1", "--tls-port"])
            .arg(tls_port.to_string())
            .args(["--tls-cert-file", &pki.path("server.crt")])
            .args(["--tls-key-file", &pki.path("server.key")])
            .args(["--tls-ca-cert-file", &pki.path("ca.crt")])
            .arg("--dir")
            .arg(&dir)
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", tls_port)).is_err() {
        assert!(Instant::now() < deadline, "no TLS server");
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut c = tls_connect(&pki, tls_port, &ClientOpts::default());
    c.write_all(b"INFO server\r\n").unwrap();
    let mut reply = String::new();
    let mut buf = [0u8; 4096];
    while !reply.contains("listener") && !reply.contains("config_file") {
        let n = c.read(&mut buf).unwrap();
        assert!(n > 0, "closed: {reply}");
        reply.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    assert!(
        reply.contains(&format!("tcp_port:{tls_port}\r\n")),
        "{reply}"
    );
}

#[test]
fn startup_refuses_a_tls_config_that_does_not_load() {
    let pki = make_pki();
    let out = Command::new(env!("CARGO_BIN_EXE_vireo"))
        .args(["--port", &free_port().to_string(), "--bind", "127.0.0.1"])
        .args(["--tls-port", &free_port().to_string()])
        .args(["--tls-cert-file", &pki.path("server.crt")])
        .args(["--tls-key-file", &pki.path("server.crt")])
        .args(["--tls-ca-cert-file", &pki.path("ca.crt")])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("Failed to load private key"), "{text}");
}

/// Debian's redis-cli is built with TLS; skipped where it is missing.
#[test]
fn redis_cli_connects_with_tls() {
    let pki = make_pki();
    let (_server, port) = start_tls(&pki, &[]);
    let out = Command::new("redis-cli")
        .args(["--tls", "--cacert", &pki.path("ca.crt")])
        .args(["--cert", &pki.path("client.crt")])
        .args(["--key", &pki.path("client.key")])
        .args(["-h", "localhost", "-p", &port.to_string(), "PING"])
        .output();
    match out {
        Ok(out) if String::from_utf8_lossy(&out.stderr).contains("not supported") => {
            eprintln!("redis-cli has no TLS: skipping");
        }
        Ok(out) => assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "PONG"),
        Err(_) => eprintln!("redis-cli not installed: skipping"),
    }
}

/// A replica connecting over TLS (PSYNC) gets the full sync and then the
/// stream through the same TLS session, on the link's own threads.
#[test]
fn replica_link_over_tls_gets_sync_and_stream() {
    let pki = make_pki();
    let (server, port) = start_tls(&pki, &[]);
    let mut c = tls_connect(&pki, port, &ClientOpts::default());
    assert_eq!(
        exchange(&mut c, b"REPLCONF listening-port 1234\r\n").unwrap(),
        "+OK\r\n"
    );
    c.write_all(b"PSYNC ? -1\r\n").unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let mut read_until = |got: &mut Vec<u8>, needle: &[u8]| {
        while !got.windows(needle.len()).any(|w| w == needle) {
            let n = c.read(&mut buf).unwrap();
            assert!(n > 0, "closed: {}", String::from_utf8_lossy(got));
            got.extend_from_slice(&buf[..n]);
        }
    };
    read_until(&mut got, b"+FULLRESYNC ");
    read_until(&mut got, b"REDIS");
    let mut plain = server.conn();
    ok(&mut plain, &["SET", "over-tls", "yes"]);
    read_until(&mut got, b"over-tls");
}

/// The arguments that give a server `pki`'s client identity for its
/// outgoing links.
fn client_identity(pki: &Pki) -> [String; 4] {
    [
        "--tls-client-cert-file".into(),
        pki.path("client.crt"),
        "--tls-client-key-file".into(),
        pki.path("client.key"),
    ]
}

/// Starts a TLS server whose outgoing links use `pki`'s client certificate,
/// with `extra` arguments; returns it, its TLS port and its log file.
fn start_outgoing(pki: &Pki, extra: &[&str]) -> (Server, u16, PathBuf) {
    let log = fresh_dir().join("vireo.log");
    let identity = client_identity(pki);
    let mut args: Vec<&str> = identity.iter().map(String::as_str).collect();
    args.extend_from_slice(&["--logfile", log.to_str().unwrap()]);
    args.extend_from_slice(extra);
    let (server, port) = start_tls(pki, &args);
    (server, port, log)
}

fn get(con: &mut redis::Connection, key: &str) -> Option<String> {
    redis::cmd("GET").arg(key).query(con).unwrap()
}

/// With `tls-replication yes` a Vireo replica follows a Vireo master on its
/// TLS port (the master requiring client certificates): full sync, then
/// the stream; the master lists the replica at its TLS port, as Redis's
/// replica announces it.
#[test]
fn replica_follows_a_master_over_tls() {
    let pki = make_pki();
    let (master, master_tls, _) = start_outgoing(&pki, &[]);
    let mut mc = master.conn();
    ok(&mut mc, &["SET", "before", "1"]);
    let (replica, replica_tls, _) = start_outgoing(&pki, &["--tls-replication", "yes"]);
    let mut rc = replica.conn();
    ok(
        &mut rc,
        &["REPLICAOF", "127.0.0.1", &master_tls.to_string()],
    );
    eventually("the link over TLS", || {
        common::info_field(&mut rc, "master_link_status") == "up"
    });
    assert_eq!(get(&mut rc, "before").as_deref(), Some("1"));
    ok(&mut mc, &["SET", "after", "2"]);
    eventually("the stream over TLS", || {
        get(&mut rc, "after").as_deref() == Some("2")
    });
    let slave = common::info_field(&mut mc, "slave0");
    assert!(slave.contains(&format!("port={replica_tls},")), "{slave}");
}

/// A replica that cannot verify its master's certificate (another CA)
/// never syncs, and logs why as Redis does.
#[test]
fn replica_refuses_a_master_it_cannot_verify() {
    let pki = make_pki();
    let other = make_pki();
    let (master, master_tls, _) = start_outgoing(&pki, &[]);
    let (replica, _, log) = start_outgoing(&other, &["--tls-replication", "yes"]);
    let mut rc = replica.conn();
    ok(
        &mut rc,
        &["REPLICAOF", "127.0.0.1", &master_tls.to_string()],
    );
    eventually("the failed handshake in the log", || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("Error condition on socket for SYNC:")
    });
    assert_eq!(common::info_field(&mut rc, "master_link_status"), "down");
    assert_eq!(
        common::info_field(&mut master.conn(), "connected_slaves"),
        "0"
    );
}

/// With `tls-cluster yes`, MIGRATE opens its connection with TLS (Redis
/// 7.0's rule); a target that does not speak TLS fails as unreachable.
#[test]
fn migrate_speaks_tls_with_tls_cluster() {
    let pki = make_pki();
    let (target, target_tls, _) = start_outgoing(&pki, &[]);
    let (source, _, _) = start_outgoing(&pki, &["--tls-cluster", "yes"]);
    let mut sc = source.conn();
    ok(&mut sc, &["SET", "moving", "v"]);
    let tls_port = target_tls.to_string();
    ok(
        &mut sc,
        &["MIGRATE", "127.0.0.1", &tls_port, "moving", "0", "5000"],
    );
    assert_eq!(get(&mut target.conn(), "moving").as_deref(), Some("v"));
    assert_eq!(get(&mut sc, "moving"), None);
    // The cached connection carries the next one.
    ok(&mut sc, &["SET", "second", "w"]);
    ok(
        &mut sc,
        &["MIGRATE", "127.0.0.1", &tls_port, "second", "0", "5000"],
    );
    assert_eq!(get(&mut target.conn(), "second").as_deref(), Some("w"));
    ok(&mut sc, &["SET", "stays", "x"]);
    let plain_port = target.port.to_string();
    let e = err(
        &mut sc,
        &["MIGRATE", "127.0.0.1", &plain_port, "stays", "0", "2000"],
    );
    assert!(e.contains("IOERR error or timeout connecting"), "{e}");
    assert_eq!(get(&mut sc, "stays").as_deref(), Some("x"));
}

/// A Vireo replica of a real redis-server over TLS (Debian's build has
/// TLS); skipped without redis-server.
#[test]
fn replica_follows_redis_server_over_tls() {
    if !common::diff::redis_server_available() {
        return;
    }
    let pki = make_pki();
    let redis_tls = free_port();
    let master = common::diff::start_redis_with(&[
        "--tls-port",
        &redis_tls.to_string(),
        "--tls-cert-file",
        &pki.path("server.crt"),
        "--tls-key-file",
        &pki.path("server.key"),
        "--tls-ca-cert-file",
        &pki.path("ca.crt"),
        "--tls-replication",
        "yes",
        "--repl-diskless-sync-delay",
        "0",
    ]);
    let mut mc = redis::Client::open(format!("redis://127.0.0.1:{}/", master.port))
        .unwrap()
        .get_connection()
        .unwrap();
    ok(&mut mc, &["HSET", "h", "a", "1"]);
    let (replica, _, _) = start_outgoing(&pki, &["--tls-replication", "yes"]);
    let mut rc = replica.conn();
    ok(&mut rc, &["REPLICAOF", "127.0.0.1", &redis_tls.to_string()]);
    eventually("the link to redis-server over TLS", || {
        common::info_field(&mut rc, "master_link_status") == "up"
    });
    ok(&mut mc, &["SET", "streamed", "yes"]);
    eventually("redis-server's stream over TLS", || {
        get(&mut rc, "streamed").as_deref() == Some("yes")
    });
    assert_eq!(common::dataset(master.port), common::dataset(replica.port));
}

/// CONFIG SET port moves the plaintext listener as tls-port moves the TLS
/// one, and the old port is free when CONFIG SET replies: one port goes
/// from TLS to plaintext and back (the suite's "switch between tcp and tls
/// ports"); a port in use is refused with Redis's error.
#[test]
fn config_set_port_switches_a_port_between_tcp_and_tls() {
    let pki = make_pki();
    let (server, tls_port) = start_tls(&pki, &[]);
    let mut con = server.conn();
    // Refused, and the whole CONFIG SET rolled back, as Redis does.
    let e = err(
        &mut con,
        &[
            "CONFIG",
            "SET",
            "maxmemory",
            "10000001",
            "port",
            &tls_port.to_string(),
        ],
    );
    assert!(
        e.contains("CONFIG SET failed (possibly related to argument 'port') - Unable to listen on this port. Check server logs."),
        "{e}"
    );
    assert_eq!(common::info_field(&mut con, "maxmemory"), "0");
    ok(&mut con, &["CONFIG", "SET", "tls-port", "0"]);
    ok(&mut con, &["CONFIG", "SET", "port", &tls_port.to_string()]);
    assert!(common::answers_ping(tls_port));
    assert!(TcpStream::connect(("127.0.0.1", server.port)).is_err());
    let mut moved = redis::Client::open(format!("redis://127.0.0.1:{tls_port}/"))
        .unwrap()
        .get_connection()
        .unwrap();
    assert_eq!(
        common::info_field(&mut moved, "tcp_port"),
        tls_port.to_string()
    );
    ok(&mut moved, &["CONFIG", "SET", "port", "0"]);
    ok(
        &mut moved,
        &["CONFIG", "SET", "tls-port", &tls_port.to_string()],
    );
    assert!(tls_answers(&pki, tls_port));
    // The connection made on the plaintext port outlives its listener.
    assert_eq!(
        ok(&mut moved, &["PING"]),
        redis::Value::SimpleString("PONG".into())
    );
}
