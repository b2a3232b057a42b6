//! X.509 version 1 certificates, as OpenSSL accepts them and Redis's test
//! suite makes them (`utils/gen-test-certs.sh`'s `redis.crt`): as the
//! server's own certificate, as a client certificate verified against the
//! CA, and on a replica's outgoing link. The chain checks of
//! `security::cert_v1` are exercised directly too (other CA, dates,
//! intermediates that are not CAs, purposes, mismatched keys).
//!
//! rcgen cannot make version 1 certificates, so the `openssl` command
//! makes them here; every test prints a note and returns without it.
//! OpenSSL's `s_client` is the TLS client, so OpenSSL's own verification
//! is the reference for what the server presents.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{free_port, fresh_dir, ok, Server};
use rustls::crypto::ring::default_provider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use rustls::{CertificateError, Error};
use vireo_server::security::cert_v1::{certified_key, is_v1, verify_chain, Purpose};

/// Runs `openssl` with `args` in `dir`; panics with its output on failure.
fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run openssl");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn have_openssl() -> bool {
    let found = Command::new("openssl")
        .arg("version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        eprintln!("note: openssl not found, version 1 certificate test skipped");
    }
    found
}

/// A directory of certificates made as Redis's `gen-test-certs.sh` makes
/// them, and a few more:
/// - `ca` (v3, self-signed), `other-ca` (another v3 CA);
/// - `redis`, `peer` (v1, signed by `ca`), `rogue` (v1, by `other-ca`);
/// - `server-only` (v3 with Netscape type `server`, signed by `ca`);
/// - `v1ca` (v1, self-signed: a CA by OpenSSL's rule), `leaf-of-v1ca` (v1);
/// - `v1mid` (v1 signed by `ca`, not self-signed: not a CA) and
///   `leaf-of-v1mid` (v1, signed by `v1mid`).
struct Pki {
    dir: PathBuf,
}

impl Pki {
    fn make() -> Pki {
        let dir = fresh_dir();
        let conf =
            "[ server_only ]\nkeyUsage = digitalSignature, keyEncipherment\nnsCertType = server\n";
        std::fs::write(dir.join("ext.cnf"), conf).unwrap();
        let pki = Pki { dir };
        pki.self_signed("ca");
        pki.self_signed("other-ca");
        pki.v1_self_signed("v1ca");
        pki.signed("redis", "ca", &[]);
        pki.signed("peer", "ca", &[]);
        pki.signed("rogue", "other-ca", &[]);
        pki.signed(
            "server-only",
            "ca",
            &["-extfile", "ext.cnf", "-extensions", "server_only"],
        );
        pki.signed("leaf-of-v1ca", "v1ca", &[]);
        pki.signed("v1mid", "ca", &[]);
        pki.signed("leaf-of-v1mid", "v1mid", &[]);
        pki
    }

    fn path(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }

    fn key(&self, name: &str) {
        openssl(
            &self.dir,
            &[
                "genpkey",
                "-algorithm",
                "RSA",
                "-pkeyopt",
                "rsa_keygen_bits:2048",
                "-out",
                &format!("{name}.key"),
            ],
        );
    }

    /// A self-signed v3 CA, as `openssl req -x509` makes it.
    fn self_signed(&self, name: &str) {
        self.key(name);
        openssl(
            &self.dir,
            &[
                "req",
                "-x509",
                "-new",
                "-sha256",
                "-key",
                &format!("{name}.key"),
                "-days",
                "3650",
                "-subj",
                &format!("/O=Vireo Test/CN={name}"),
                "-out",
                &format!("{name}.crt"),
            ],
        );
    }

    /// A self-signed version 1 certificate (no extensions).
    fn v1_self_signed(&self, name: &str) {
        self.key(name);
        self.request(name);
        openssl(
            &self.dir,
            &[
                "x509",
                "-req",
                "-sha256",
                "-in",
                &format!("{name}.csr"),
                "-signkey",
                &format!("{name}.key"),
                "-days",
                "3650",
                "-out",
                &format!("{name}.crt"),
            ],
        );
    }

    fn request(&self, name: &str) {
        openssl(
            &self.dir,
            &[
                "req",
                "-new",
                "-sha256",
                "-key",
                &format!("{name}.key"),
                "-subj",
                &format!("/O=Vireo Test/CN={name}"),
                "-out",
                &format!("{name}.csr"),
            ],
        );
    }

    /// `name` signed by `issuer`: version 1 unless `extra` adds
    /// extensions (`openssl x509 -req`, as gen-test-certs.sh).
    fn signed(&self, name: &str, issuer: &str, extra: &[&str]) {
        self.key(name);
        self.request(name);
        let (csr, ca, ca_key) = (
            format!("{name}.csr"),
            format!("{issuer}.crt"),
            format!("{issuer}.key"),
        );
        let mut args = vec![
            "x509",
            "-req",
            "-sha256",
            "-in",
            &csr,
            "-CA",
            &ca,
            "-CAkey",
            &ca_key,
            "-CAcreateserial",
            "-days",
            "365",
            "-out",
        ];
        let out = format!("{name}.crt");
        args.push(&out);
        args.extend_from_slice(extra);
        openssl(&self.dir, &args);
    }

    fn der(&self, name: &str) -> CertificateDer<'static> {
        CertificateDer::from_pem_file(self.path(&format!("{name}.crt"))).unwrap()
    }
}

/// `verify_chain` of `leaf` (with `intermediates`) to `anchor` at `now`.
fn check(
    pki: &Pki,
    leaf: &str,
    intermediates: &[&str],
    anchor: &str,
    now: UnixTime,
    purpose: Purpose,
) -> Result<(), Error> {
    let mids: Vec<_> = intermediates.iter().map(|n| pki.der(n)).collect();
    verify_chain(
        &pki.der(leaf),
        &mids,
        &[pki.der(anchor)],
        &default_provider().signature_verification_algorithms,
        now,
        purpose,
    )
}

fn in_days(days: i64) -> UnixTime {
    let now = UnixTime::now().as_secs() as i64;
    UnixTime::since_unix_epoch(Duration::from_secs((now + days * 86_400) as u64))
}

#[test]
fn chains_with_version_1_certificates_are_checked_as_openssl_does() {
    if !have_openssl() {
        return;
    }
    let pki = Pki::make();
    let now = UnixTime::now();
    assert!(is_v1(&pki.der("redis")));
    assert!(!is_v1(&pki.der("ca")));
    for purpose in [Purpose::ClientAuth, Purpose::ServerAuth] {
        check(&pki, "redis", &[], "ca", now, purpose).unwrap();
    }
    let unknown = Err(Error::InvalidCertificate(CertificateError::UnknownIssuer));
    assert_eq!(
        check(&pki, "rogue", &[], "ca", now, Purpose::ClientAuth),
        unknown
    );
    assert_eq!(
        check(&pki, "redis", &[], "other-ca", now, Purpose::ClientAuth),
        unknown
    );
    // Dates: the leaf expires in a year, the CA in ten.
    assert_eq!(
        check(&pki, "redis", &[], "ca", in_days(400), Purpose::ClientAuth),
        Err(Error::InvalidCertificate(CertificateError::Expired))
    );
    assert_eq!(
        check(&pki, "redis", &[], "ca", in_days(-2), Purpose::ClientAuth),
        Err(Error::InvalidCertificate(CertificateError::NotValidYet))
    );
    // A self-signed v1 certificate is a CA; a v1 one signed by another
    // CA is not, so it cannot issue.
    check(&pki, "leaf-of-v1ca", &[], "v1ca", now, Purpose::ClientAuth).unwrap();
    assert_eq!(
        check(
            &pki,
            "leaf-of-v1mid",
            &["v1mid"],
            "ca",
            now,
            Purpose::ClientAuth
        ),
        unknown
    );
    // The leaf's Netscape type allows server use only.
    check(&pki, "server-only", &[], "ca", now, Purpose::ServerAuth).unwrap();
    assert_eq!(
        check(&pki, "server-only", &[], "ca", now, Purpose::ClientAuth),
        Err(Error::InvalidCertificate(CertificateError::InvalidPurpose))
    );
    // Garbage is refused, not panicked on.
    let junk = CertificateDer::from(vec![0x30, 0x82, 0xff, 0xff, 1, 2, 3]);
    assert!(verify_chain(
        &junk,
        &[],
        &[pki.der("ca")],
        &default_provider().signature_verification_algorithms,
        now,
        Purpose::ClientAuth
    )
    .is_err());
}

#[test]
fn a_version_1_certificate_loads_only_with_its_own_key() {
    if !have_openssl() {
        return;
    }
    let pki = Pki::make();
    let key = |name: &str| PrivateKeyDer::from_pem_file(pki.path(&format!("{name}.key"))).unwrap();
    let provider = default_provider();
    assert!(certified_key(vec![pki.der("redis")], key("redis"), &provider).is_ok());
    let e = certified_key(vec![pki.der("redis")], key("peer"), &provider).unwrap_err();
    assert!(e.contains("KeyMismatch"), "{e}");
}

/// Starts Vireo with TLS on a free port, serving `cert`, trusting `ca`
/// and requiring client certificates, plus `extra`.
fn start(pki: &Pki, cert: &str, ca: &str, extra: &[&str]) -> (Server, u16) {
    let port = free_port();
    let (port_s, crt, key, ca) = (
        port.to_string(),
        pki.path(&format!("{cert}.crt")),
        pki.path(&format!("{cert}.key")),
        pki.path(&format!("{ca}.crt")),
    );
    let mut args = vec![
        "--tls-port",
        &port_s,
        "--tls-cert-file",
        &crt,
        "--tls-key-file",
        &key,
        "--tls-ca-cert-file",
        &ca,
        "--tls-auth-clients",
        "yes",
    ];
    args.extend_from_slice(extra);
    (Server::start(&args), port)
}

/// PING over TLS with OpenSSL's client presenting `client` and verifying
/// the server against `ca`; the bytes the server sent.
fn openssl_ping(pki: &Pki, port: u16, client: &str, ca: &str) -> String {
    let mut child = Command::new("openssl")
        .args([
            "s_client",
            "-connect",
            &format!("127.0.0.1:{port}"),
            "-cert",
            &pki.path(&format!("{client}.crt")),
            "-key",
            &pki.path(&format!("{client}.key")),
            "-CAfile",
            &pki.path(&format!("{ca}.crt")),
            "-verify_return_error",
            "-quiet",
            "-ign_eof",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"PING\r\nQUIT\r\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A server with a v1 certificate (Redis's `redis.crt` case) serves
/// OpenSSL's client, which verifies it; v1 client certificates from its
/// CA are accepted, from another CA refused. (A version 3 chain goes to
/// webpki, which ignores the Netscape certificate type: `server-only` is
/// refused as a client certificate by `verify_chain` above but accepted
/// here, where OpenSSL would refuse it; a difference left.)
#[test]
fn version_1_certificates_serve_and_authenticate_clients() {
    if !have_openssl() {
        return;
    }
    let pki = Pki::make();
    let (_server, port) = start(&pki, "redis", "ca", &[]);
    assert_eq!(openssl_ping(&pki, port, "peer", "ca"), "+PONG\r\n+OK\r\n");
    assert_eq!(openssl_ping(&pki, port, "redis", "ca"), "+PONG\r\n+OK\r\n");
    assert_eq!(openssl_ping(&pki, port, "rogue", "ca"), "");
}

/// Redis's "tls-cert-file is also used as a client cert" case: a replica
/// whose only certificate is a v1 one follows a master that requires
/// client certificates and serves a v1 certificate too.
#[test]
fn replica_links_with_version_1_certificates() {
    if !have_openssl() {
        return;
    }
    let pki = Pki::make();
    let (master, master_port) = start(&pki, "peer", "ca", &[]);
    ok(&mut master.conn(), &["SET", "k", "v"]);
    let (replica, _) = start(&pki, "redis", "ca", &["--tls-replication", "yes"]);
    let mut rc = replica.conn();
    ok(
        &mut rc,
        &["REPLICAOF", "127.0.0.1", &master_port.to_string()],
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while common::info_field(&mut rc, "master_link_status") != "up" {
        assert!(Instant::now() < deadline, "the replica never linked");
        std::thread::sleep(Duration::from_millis(50));
    }
    let got: Option<String> = redis::cmd("GET").arg("k").query(&mut rc).unwrap();
    assert_eq!(got.as_deref(), Some("v"));
}
