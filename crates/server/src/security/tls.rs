//! TLS configuration: Redis's `tls-*` parameters turned into `rustls`
//! server and client configurations.
//!
//! This is security policy (which certificates, which peers are trusted,
//! which protocol versions and cipher suites), so it lives here rather than
//! in `net/`; the per-connection record layer that uses it is
//! `net/tls.rs`, which knows nothing of files or parameters.
//!
//! Redis builds one OpenSSL context from the parameters (`tlsConfigure`)
//! and swaps it in atomically: a failed reconfiguration leaves the old one
//! in force and CONFIG SET fails with "Unable to update TLS configuration.
//! Check server logs.", the reason being logged. [`Tls::configure`] does
//! the same. Connections accepted later use the new configuration; open
//! ones keep the one they were accepted with.
//!
//! Differences forced by `rustls` (documented for users in the report):
//! it implements TLS 1.2 and 1.3 only, and only AEAD suites with ECDHE key
//! exchange, so `tls-ciphers` names outside that set are refused when they
//! would add a suite (removing one is harmless, as in OpenSSL), and
//! `tls-dh-params-file` is checked but unused (there is no DHE).
//! `tls-auth-clients` is read for each accepted connection, as in Redis:
//! the three server variants are built together.

use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{ring, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::server::{NoServerSessionStorage, StoresServerSessions, WebPkiClientVerifier};
use rustls::sign::SingleCertAndKey;
use rustls::{
    CertificateError, CipherSuite, ClientConfig, DigitallySignedStruct, RootCertStore,
    ServerConfig, SignatureScheme, SupportedCipherSuite, SupportedProtocolVersion,
};

use super::cert_v1;
use crate::config::Config;

/// The error CONFIG SET replies when the new TLS settings do not load
/// (Redis's `applyTlsCfg`); the reason is in the log.
pub const UPDATE_FAILED: &str = "Unable to update TLS configuration. Check server logs.";

/// The parameters whose change rebuilds the TLS configuration (Redis's
/// `applyTlsCfg` ones, plus `tls-port`, which needs one to accept with).
const APPLIED_BY_CONFIGURE: &[&str] = &[
    "tls-port",
    "tls-cert-file",
    "tls-key-file",
    "tls-key-file-pass",
    "tls-client-cert-file",
    "tls-client-key-file",
    "tls-client-key-file-pass",
    "tls-dh-params-file",
    "tls-ca-cert-file",
    "tls-ca-cert-dir",
    "tls-protocols",
    "tls-ciphers",
    "tls-ciphersuites",
    "tls-prefer-server-ciphers",
    "tls-session-caching",
    "tls-session-cache-size",
    "tls-session-cache-timeout",
    "tls-replication",
    "tls-cluster",
];

/// Whether changing parameter `name` (canonical, lower case) rebuilds the
/// TLS configuration.
pub fn applied_by_configure(name: &str) -> bool {
    APPLIED_BY_CONFIGURE
        .iter()
        .any(|p| p.eq_ignore_ascii_case(name))
}

/// `tls-auth-clients`: whether a TLS client must present a certificate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuthClients {
    No,
    Yes,
    Optional,
}

impl AuthClients {
    /// The parameter's current value.
    pub fn from_config(config: &Config) -> AuthClients {
        match config.get_one("tls-auth-clients").as_deref() {
            Some("no") => AuthClients::No,
            Some("optional") => AuthClients::Optional,
            _ => AuthClients::Yes,
        }
    }
}

/// The `tls-*` parameters as one value, read from the configuration.
#[derive(Clone, Debug, Default)]
pub struct Settings {
    pub cert_file: Option<String>,
    pub key_file: Option<String>,
    pub key_file_pass: Option<String>,
    pub client_cert_file: Option<String>,
    pub client_key_file: Option<String>,
    pub client_key_file_pass: Option<String>,
    pub dh_params_file: Option<String>,
    pub ca_cert_file: Option<String>,
    pub ca_cert_dir: Option<String>,
    pub protocols: Option<String>,
    pub ciphers: Option<String>,
    pub ciphersuites: Option<String>,
    pub prefer_server_ciphers: bool,
    pub session_caching: bool,
    pub session_cache_size: usize,
    pub session_cache_timeout: u64,
    /// Client certificates are verified (auth-clients other than `no`),
    /// or peers are (tls-replication, tls-cluster): a CA is required.
    pub verifies_peers: bool,
}

impl Settings {
    /// Reads the parameters; empty strings mean "not set", as Redis's
    /// `EMPTY_STRING_IS_NULL`.
    pub fn from_config(config: &Config) -> Settings {
        let s = |name: &str| config.get_one(name).filter(|v| !v.is_empty());
        let n = |name: &str| s(name).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        Settings {
            cert_file: s("tls-cert-file"),
            key_file: s("tls-key-file"),
            key_file_pass: s("tls-key-file-pass"),
            client_cert_file: s("tls-client-cert-file"),
            client_key_file: s("tls-client-key-file"),
            client_key_file_pass: s("tls-client-key-file-pass"),
            dh_params_file: s("tls-dh-params-file"),
            ca_cert_file: s("tls-ca-cert-file"),
            ca_cert_dir: s("tls-ca-cert-dir"),
            protocols: s("tls-protocols"),
            ciphers: s("tls-ciphers"),
            ciphersuites: s("tls-ciphersuites"),
            prefer_server_ciphers: config.flag("tls-prefer-server-ciphers"),
            session_caching: config.flag("tls-session-caching"),
            session_cache_size: n("tls-session-cache-size") as usize,
            session_cache_timeout: n("tls-session-cache-timeout"),
            verifies_peers: AuthClients::from_config(config) != AuthClients::No
                || config.flag("tls-replication")
                || config.flag("tls-cluster"),
        }
    }
}

/// Whether the server needs a TLS configuration at all: a TLS port, or
/// TLS for the replication or cluster links (Redis's condition).
pub fn wanted(config: &Config) -> bool {
    config.get_one("tls-port").is_some_and(|p| p != "0")
        || config.flag("tls-replication")
        || config.flag("tls-cluster")
}

/// One built configuration: the server side in each `tls-auth-clients`
/// mode, and the client side for outgoing links.
pub struct TlsContext {
    anonymous: Arc<ServerConfig>,
    /// None without a CA to verify client certificates with.
    optional: Option<Arc<ServerConfig>>,
    required: Option<Arc<ServerConfig>>,
    /// None without a CA to verify the servers we connect to.
    client: Option<Arc<ClientConfig>>,
}

impl TlsContext {
    /// Loads every file and builds the configurations. Err is the line to
    /// log, worded as Redis's `tlsConfigure` words it.
    pub fn build(settings: &Settings) -> Result<TlsContext, String> {
        let cert_file = settings
            .cert_file
            .as_deref()
            .ok_or("No tls-cert-file configured!")?;
        let key_file = settings
            .key_file
            .as_deref()
            .ok_or("No tls-key-file configured!")?;
        if settings.verifies_peers
            && settings.ca_cert_file.is_none()
            && settings.ca_cert_dir.is_none()
        {
            return Err("Either tls-ca-cert-file or tls-ca-cert-dir must be specified when tls-cluster, tls-replication or tls-auth-clients are enabled!".into());
        }
        let versions = parse_protocols(settings.protocols.as_deref())?;
        let suites = select_suites(settings, &versions)?;
        let provider = Arc::new(CryptoProvider {
            cipher_suites: suites,
            ..ring::default_provider()
        });
        let chain = load_certs(cert_file)
            .map_err(|e| format!("Failed to load certificate: {cert_file}: {e}"))?;
        let key = load_key(key_file, settings.key_file_pass.as_deref())
            .map_err(|e| format!("Failed to load private key: {key_file}: {e}"))?;
        let roots = load_roots(settings)
            .map_err(|e| format!("Failed to configure CA certificate(s) file/directory: {e}"))?;
        let certified = cert_v1::certified_key(chain, key, &provider)
            .map_err(|e| format!("Failed to load private key: {key_file}: {e}"))?;
        check_dh_params(settings.dh_params_file.as_deref())?;
        let server = |verifier: Arc<dyn rustls::server::danger::ClientCertVerifier>| {
            let mut cfg = ServerConfig::builder_with_provider(provider.clone())
                .with_protocol_versions(&versions)
                .map_err(|e| format!("Invalid tls-protocols: {e}"))?
                .with_client_cert_verifier(verifier)
                .with_cert_resolver(Arc::new(SingleCertAndKey::from(certified.clone())));
            cfg.ignore_client_order = settings.prefer_server_ciphers;
            // A store per variant: a session made without a client
            // certificate must not resume where one is required.
            cfg.session_storage = session_store(settings);
            if !settings.session_caching {
                cfg.send_tls13_tickets = 0;
            }
            Ok::<_, String>(Arc::new(cfg))
        };
        let anonymous = server(WebPkiClientVerifier::no_client_auth())?;
        let (optional, required) = match &roots {
            Some(roots) => {
                let builder = || {
                    WebPkiClientVerifier::builder_with_provider(
                        roots.store.clone(),
                        provider.clone(),
                    )
                };
                let verify_err = |e: rustls::server::VerifierBuilderError| {
                    format!("Failed to configure CA certificate(s) file/directory: {e}")
                };
                // Version 1 certificates, which webpki refuses, are
                // verified by `cert_v1` around it.
                let with_v1 =
                    |webpki| cert_v1::ClientVerifier::new(webpki, roots.certs.clone(), &provider);
                let optional = builder()
                    .allow_unauthenticated()
                    .build()
                    .map_err(verify_err)?;
                let required = builder().build().map_err(verify_err)?;
                (
                    Some(server(with_v1(optional))?),
                    Some(server(with_v1(required))?),
                )
            }
            None => (None, None),
        };
        let client = match &roots {
            Some(roots) => Some(client_config(settings, &provider, &versions, roots)?),
            None => None,
        };
        Ok(TlsContext {
            anonymous,
            optional,
            required,
            client,
        })
    }

    /// The server configuration for a connection accepted now. Err when
    /// client certificates must be verified but no CA was configured.
    pub fn for_accept(&self, auth: AuthClients) -> Result<Arc<ServerConfig>, &'static str> {
        let cfg = match auth {
            AuthClients::No => Some(&self.anonymous),
            AuthClients::Optional => self.optional.as_ref(),
            AuthClients::Yes => self.required.as_ref(),
        };
        cfg.cloned()
            .ok_or("tls-auth-clients needs tls-ca-cert-file or tls-ca-cert-dir")
    }
}

/// The server's TLS state: the configuration in force, swapped whole.
#[derive(Default)]
pub struct Tls {
    current: RwLock<Option<Arc<TlsContext>>>,
}

impl Tls {
    /// Builds a configuration from `config` and puts it in force. On Err
    /// (the reason, already logged) the previous one stays.
    pub fn configure(&self, config: &Config) -> Result<(), String> {
        match TlsContext::build(&Settings::from_config(config)) {
            Ok(ctx) => {
                *self.current.write() = Some(Arc::new(ctx));
                Ok(())
            }
            Err(e) => {
                tracing::warn!("{e}");
                Err(e)
            }
        }
    }

    /// Rebuilds after CONFIG SET changed `names`, when TLS is in use (as
    /// Redis's `applyTlsCfg`). Err is CONFIG SET's reason.
    pub fn apply_config_set(&self, config: &Config, names: &[&[u8]]) -> Result<(), &'static str> {
        let touched = names
            .iter()
            .any(|n| applied_by_configure(&String::from_utf8_lossy(n)));
        if touched && wanted(config) {
            self.configure(config).map_err(|_| UPDATE_FAILED)?;
        }
        Ok(())
    }

    /// The configuration in force, if TLS was configured.
    pub fn context(&self) -> Option<Arc<TlsContext>> {
        self.current.read().clone()
    }

    /// The identity and trust used for outgoing TLS links (replication,
    /// MIGRATE, cluster bus): `tls-client-cert-file`/`-key-file`, or the
    /// server's own certificate when those are not set, as in Redis; the
    /// peer's chain is checked against the configured CA, its host name is
    /// not (Redis does not check it either). None without a CA.
    pub fn client_config(&self) -> Option<Arc<ClientConfig>> {
        self.current.read().as_ref().and_then(|c| c.client.clone())
    }
}

/// `tls-protocols`: a space-separated list of TLSv1, TLSv1.1, TLSv1.2 and
/// TLSv1.3 (any case); unset means TLS 1.2 and 1.3, Redis's default.
/// rustls has no TLS 1.0 or 1.1: naming them only is refused.
pub fn parse_protocols(
    value: Option<&str>,
) -> Result<Vec<&'static SupportedProtocolVersion>, String> {
    let Some(value) = value else {
        return Ok(vec![&rustls::version::TLS13, &rustls::version::TLS12]);
    };
    let mut versions: Vec<&'static SupportedProtocolVersion> = Vec::new();
    let mut legacy = false;
    for word in value.split(' ').filter(|w| !w.is_empty()) {
        match word.to_ascii_lowercase().as_str() {
            "tlsv1" | "tlsv1.1" => legacy = true,
            "tlsv1.2" => versions.push(&rustls::version::TLS12),
            "tlsv1.3" => versions.push(&rustls::version::TLS13),
            _ => {
                return Err("Invalid tls-protocols specified. Use a combination of 'TLSv1', 'TLSv1.1', 'TLSv1.2' and 'TLSv1.3'.".into())
            }
        }
    }
    if versions.is_empty() {
        return Err(if legacy {
            "Invalid tls-protocols specified: TLSv1 and TLSv1.1 are not supported, use TLSv1.2 or TLSv1.3.".into()
        } else {
            "Invalid tls-protocols configuration string".into()
        });
    }
    if legacy {
        tracing::warn!("tls-protocols: TLSv1 and TLSv1.1 are not supported and are ignored");
    }
    versions.sort_by_key(|v| std::cmp::Reverse(u16::from(v.version)));
    versions.dedup_by_key(|v| v.version);
    Ok(versions)
}

/// OpenSSL's names of the TLS 1.2 suites rustls implements, in OpenSSL's
/// default order of preference.
const TLS12_SUITES: &[(&str, CipherSuite)] = &[
    (
        "ECDHE-ECDSA-AES256-GCM-SHA384",
        CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
    ),
    (
        "ECDHE-RSA-AES256-GCM-SHA384",
        CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
    ),
    (
        "ECDHE-ECDSA-CHACHA20-POLY1305",
        CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
    (
        "ECDHE-RSA-CHACHA20-POLY1305",
        CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
    (
        "ECDHE-ECDSA-AES128-GCM-SHA256",
        CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
    ),
    (
        "ECDHE-RSA-AES128-GCM-SHA256",
        CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
    ),
];

/// The TLS 1.3 suites (`tls-ciphersuites` names), OpenSSL's default order.
const TLS13_SUITES: &[(&str, CipherSuite)] = &[
    (
        "TLS_AES_256_GCM_SHA384",
        CipherSuite::TLS13_AES_256_GCM_SHA384,
    ),
    (
        "TLS_CHACHA20_POLY1305_SHA256",
        CipherSuite::TLS13_CHACHA20_POLY1305_SHA256,
    ),
    (
        "TLS_AES_128_GCM_SHA256",
        CipherSuite::TLS13_AES_128_GCM_SHA256,
    ),
];

/// The cipher suites of the provider: the TLS 1.3 ones from
/// `tls-ciphersuites`, then the TLS 1.2 ones from `tls-ciphers`, each in
/// the configured order (the server's preference with
/// `tls-prefer-server-ciphers`).
fn select_suites(
    settings: &Settings,
    versions: &[&'static SupportedProtocolVersion],
) -> Result<Vec<SupportedCipherSuite>, String> {
    let tls13 = match settings.ciphersuites.as_deref() {
        Some(list) => parse_ciphersuites(list)
            .map_err(|e| format!("Failed to configure ciphersuites: {list}: {e}"))?,
        None => TLS13_SUITES.iter().map(|(_, s)| *s).collect(),
    };
    let tls12 = match settings.ciphers.as_deref() {
        Some(list) => parse_cipher_list(list)
            .map_err(|e| format!("Failed to configure ciphers: {list}: {e}"))?,
        None => TLS12_SUITES.iter().map(|(_, s)| *s).collect(),
    };
    let has = |v: &SupportedProtocolVersion| versions.iter().any(|x| x.version == v.version);
    if has(&rustls::version::TLS12) && !has(&rustls::version::TLS13) && tls12.is_empty() {
        return Err(format!(
            "Failed to configure ciphers: {}: no cipher match",
            settings.ciphers.as_deref().unwrap_or_default()
        ));
    }
    let all = ring::ALL_CIPHER_SUITES;
    let find = |id: &CipherSuite| all.iter().find(|s| s.suite() == *id).copied();
    Ok(tls13.iter().chain(tls12.iter()).filter_map(find).collect())
}

/// `tls-ciphersuites`: TLS 1.3 suite names separated by colons; every
/// name must be one rustls implements.
pub fn parse_ciphersuites(list: &str) -> Result<Vec<CipherSuite>, String> {
    let mut out = Vec::new();
    for name in list.split(':').filter(|n| !n.is_empty()) {
        let (_, suite) = TLS13_SUITES
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .ok_or_else(|| unknown_cipher(name, TLS13_SUITES))?;
        if !out.contains(suite) {
            out.push(*suite);
        }
    }
    Ok(out)
}

fn unknown_cipher(name: &str, known: &[(&str, CipherSuite)]) -> String {
    let names: Vec<&str> = known.iter().map(|(n, _)| *n).collect();
    format!(
        "unknown or unsupported cipher '{name}' (supported: {})",
        names.join(" ")
    )
}

/// `tls-ciphers`: an OpenSSL cipher list for TLS 1.2. Elements are
/// separated by `:`, `,` or spaces; `!name` removes for good, `-name`
/// removes, `+name` moves to the end, `a+b` is the suites both select;
/// `@STRENGTH` and `@SECLEVEL=n` are accepted and change nothing here.
/// Names are suite names or OpenSSL's group words (DEFAULT, ALL, HIGH,
/// ECDHE, AESGCM, CHACHA20, aRSA, aECDSA …). A name that would add a suite
/// rustls lacks is an error; removing one is not (OpenSSL's lists remove
/// suites that may not exist, such as `DEFAULT:-AES128-SHA256`).
pub fn parse_cipher_list(list: &str) -> Result<Vec<CipherSuite>, String> {
    let mut chosen: Vec<CipherSuite> = Vec::new();
    let mut banned: Vec<CipherSuite> = Vec::new();
    for element in list
        .split([':', ',', ' '])
        .filter(|e| !e.is_empty() && !e.starts_with('@'))
    {
        let (op, body) = match element.as_bytes()[0] {
            b'!' | b'-' | b'+' => (element.as_bytes()[0], &element[1..]),
            _ => (b' ', element),
        };
        let suites = match cipher_group(body) {
            Some(s) => s,
            None if op == b'-' || op == b'!' => Vec::new(),
            None => return Err(unknown_cipher(body, TLS12_SUITES)),
        };
        match op {
            b'!' => {
                chosen.retain(|s| !suites.contains(s));
                banned.extend(suites);
            }
            b'-' => chosen.retain(|s| !suites.contains(s)),
            b'+' => {
                let (moved, kept): (Vec<_>, Vec<_>) =
                    chosen.iter().partition(|s| suites.contains(s));
                chosen = kept.into_iter().chain(moved).collect();
            }
            _ => {
                for s in suites {
                    if !chosen.contains(&s) && !banned.contains(&s) {
                        chosen.push(s);
                    }
                }
            }
        }
    }
    Ok(chosen)
}

/// The TLS 1.2 suites `name` selects (`a+b`: those both parts select);
/// None for a name that is neither a known suite nor a group word.
fn cipher_group(name: &str) -> Option<Vec<CipherSuite>> {
    let mut parts = name.split('+');
    let mut set = cipher_word(parts.next()?)?;
    for part in parts {
        let other = cipher_word(part)?;
        set.retain(|s| other.contains(s));
    }
    Some(set)
}

/// One word of a cipher list: a suite name or an OpenSSL group.
fn cipher_word(word: &str) -> Option<Vec<CipherSuite>> {
    let all = || TLS12_SUITES.iter().map(|(_, s)| *s);
    let with = |part: &str| {
        TLS12_SUITES
            .iter()
            .filter(|(n, _)| n.split('-').any(|p| p == part) || n.contains(part))
            .map(|(_, s)| *s)
            .collect::<Vec<_>>()
    };
    let upper = word.to_ascii_uppercase();
    let set = match upper.as_str() {
        "DEFAULT" | "ALL" | "HIGH" | "ECDHE" | "EECDH" | "KECDHE" | "AEAD" | "TLSV1.2" => {
            all().collect()
        }
        "COMPLEMENTOFDEFAULT"
        | "COMPLEMENTOFALL"
        | "ENULL"
        | "NULL"
        | "ANULL"
        | "LOW"
        | "MEDIUM"
        | "EXPORT"
        | "EXP"
        | "RC4"
        | "DES"
        | "3DES"
        | "MD5"
        | "PSK"
        | "SRP"
        | "KRSA"
        | "DHE"
        | "EDH"
        | "KDHE"
        | "CAMELLIA"
        | "ARIA"
        | "SEED"
        | "IDEA"
        | "SHA1"
        | "SSLV3" => Vec::new(),
        "AESGCM" => with("GCM"),
        "AES" => with("AES"),
        "AES128" => with("AES128"),
        "AES256" => with("AES256"),
        "CHACHA20" => with("CHACHA20"),
        "ARSA" | "RSA" => with("RSA"),
        "AECDSA" | "ECDSA" => with("ECDSA"),
        "SHA256" => with("SHA256"),
        "SHA384" => with("SHA384"),
        _ => {
            let (_, s) = TLS12_SUITES.iter().find(|(n, _)| *n == upper)?;
            vec![*s]
        }
    };
    Some(set)
}

/// Every certificate of a PEM file (a chain: leaf first).
fn load_certs(path: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{e:?}"))?;
    if certs.is_empty() {
        return Err("no certificate found".into());
    }
    Ok(certs)
}

/// A PEM private key: PKCS#8, PKCS#1 (RSA) or SEC1 (EC) in the clear, or
/// PKCS#8 encrypted with `pass` (`tls-key-file-pass`; OpenSSL 3's `rsa
/// -aes256` and `genpkey -aes256` write that form).
pub fn load_key(path: &str, pass: Option<&str>) -> Result<PrivateKeyDer<'static>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    decode_key(&text, pass)
}

/// [`load_key`] on the file's text.
pub fn decode_key(text: &str, pass: Option<&str>) -> Result<PrivateKeyDer<'static>, String> {
    const ENCRYPTED: &str = "-----BEGIN ENCRYPTED PRIVATE KEY-----";
    const ENCRYPTED_END: &str = "-----END ENCRYPTED PRIVATE KEY-----";
    if let Some(start) = text.find(ENCRYPTED) {
        let end = text[start..]
            .find(ENCRYPTED_END)
            .ok_or("unterminated ENCRYPTED PRIVATE KEY block")?
            + start
            + ENCRYPTED_END.len();
        let pass = pass.ok_or("bad decrypt: the key is encrypted and no password is set")?;
        use pkcs8::der::Decode;
        // Decoded to DER first: the PEM reader cannot parse PBES2's
        // parameters in place.
        let invalid = |e: &dyn std::fmt::Display| format!("invalid encrypted key: {e}");
        let (_, der) =
            pkcs8::der::pem::decode_vec(&text.as_bytes()[start..end]).map_err(|e| invalid(&e))?;
        let info = pkcs8::EncryptedPrivateKeyInfoOwned::from_der(&der).map_err(|e| invalid(&e))?;
        let doc = info.decrypt(pass).map_err(|_| "bad decrypt")?;
        return Ok(PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
            doc.as_bytes().to_vec(),
        )));
    }
    if text.contains("Proc-Type: 4,ENCRYPTED") {
        return Err("keys in OpenSSL's legacy encrypted PEM form are not supported: convert with `openssl pkcs8 -topk8`".into());
    }
    PrivateKeyDer::from_pem_slice(text.as_bytes()).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => "no private key found".to_string(),
        e => format!("{e:?}"),
    })
}

/// The trust anchors of `tls-ca-cert-file` and every certificate file in
/// `tls-ca-cert-dir` (files that are not certificates are skipped, as
/// OpenSSL's lookup skips them). None when neither is set.
fn load_roots(settings: &Settings) -> Result<Option<Trust>, String> {
    if settings.ca_cert_file.is_none() && settings.ca_cert_dir.is_none() {
        return Ok(None);
    }
    let mut roots = RootCertStore::empty();
    let mut certs = Vec::new();
    if let Some(file) = &settings.ca_cert_file {
        for cert in load_certs(file).map_err(|e| format!("{file}: {e}"))? {
            roots
                .add(cert.clone())
                .map_err(|e| format!("{file}: {e}"))?;
            certs.push(cert);
        }
    }
    if let Some(dir) = &settings.ca_cert_dir {
        let entries = std::fs::read_dir(dir).map_err(|e| format!("{dir}: {e}"))?;
        for entry in entries.flatten() {
            let path = entry.path();
            if let Some(found) = path.to_str().and_then(|p| load_certs(p).ok()) {
                certs.extend(found.iter().cloned());
                let _ = roots.add_parsable_certificates(found);
            }
        }
    }
    if roots.is_empty() {
        return Err("no CA certificate found".into());
    }
    Ok(Some(Trust {
        store: Arc::new(roots),
        certs: Arc::new(certs),
    }))
}

/// The CA certificates: as webpki's trust anchors, and as loaded, for
/// the chains with version 1 certificates that `cert_v1` verifies.
struct Trust {
    store: Arc<RootCertStore>,
    certs: Arc<Vec<CertificateDer<'static>>>,
}

/// `tls-dh-params-file` must name a readable PEM "DH PARAMETERS" file, as
/// Redis requires; rustls negotiates ECDHE only, so the parameters are not
/// used.
fn check_dh_params(path: Option<&str>) -> Result<(), String> {
    let Some(path) = path else {
        return Ok(());
    };
    let text = std::fs::read_to_string(Path::new(path))
        .map_err(|e| format!("Failed to load {path}: {e}"))?;
    if !text.contains("-----BEGIN DH PARAMETERS-----") {
        return Err(format!("{path}: failed to read DH params."));
    }
    Ok(())
}

/// The client side: our certificate (the client one, else the server's)
/// and the CA to verify servers with.
fn client_config(
    settings: &Settings,
    provider: &Arc<CryptoProvider>,
    versions: &[&'static SupportedProtocolVersion],
    roots: &Trust,
) -> Result<Arc<ClientConfig>, String> {
    let (cert_file, key_file, pass) = match (&settings.client_cert_file, &settings.client_key_file)
    {
        (Some(c), Some(k)) => (c.as_str(), k.as_str(), &settings.client_key_file_pass),
        _ => (
            settings.cert_file.as_deref().unwrap_or_default(),
            settings.key_file.as_deref().unwrap_or_default(),
            &settings.key_file_pass,
        ),
    };
    let chain = load_certs(cert_file)
        .map_err(|e| format!("Failed to load certificate: {cert_file}: {e}"))?;
    let key = load_key(key_file, pass.as_deref())
        .map_err(|e| format!("Failed to load private key: {key_file}: {e}"))?;
    let certified = cert_v1::certified_key(chain, key, provider)
        .map_err(|e| format!("Failed to load private key: {key_file}: {e}"))?;
    let webpki = WebPkiServerVerifier::builder_with_provider(roots.store.clone(), provider.clone())
        .build()
        .map_err(|e| format!("Failed to configure CA certificate(s) file/directory: {e}"))?;
    let verifier =
        cert_v1::ServerVerifier::new(Arc::new(ChainOnly(webpki)), roots.certs.clone(), provider);
    let cfg = ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(versions)
        .map_err(|e| format!("Invalid tls-protocols: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_client_cert_resolver(Arc::new(SingleCertAndKey::from(certified)));
    Ok(Arc::new(cfg))
}

/// Verifies a server's chain against our CA but not its host name, as
/// Redis (OpenSSL with SSL_VERIFY_PEER and no host check) does for its
/// replication and cluster links.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// The session store for `tls-session-caching`.
fn session_store(settings: &Settings) -> Arc<dyn StoresServerSessions> {
    if !settings.session_caching {
        return Arc::new(NoServerSessionStorage {});
    }
    Arc::new(SessionCache::new(
        settings.session_cache_size,
        Duration::from_secs(settings.session_cache_timeout),
    ))
}

/// A server-side session cache as OpenSSL's: at most `max` sessions
/// (`tls-session-cache-size`; 0 means no limit, as in OpenSSL), each
/// usable for `ttl` (`tls-session-cache-timeout`), the oldest dropped first
/// when full.
#[derive(Debug)]
pub struct SessionCache {
    max: usize,
    ttl: Duration,
    inner: Mutex<Sessions>,
}

#[derive(Debug, Default)]
struct Sessions {
    by_id: HashMap<Vec<u8>, (Vec<u8>, Instant)>,
    /// Insertion order, for expiry and eviction; entries whose session was
    /// replaced or taken are skipped when reached.
    order: VecDeque<(Instant, Vec<u8>)>,
}

impl SessionCache {
    /// An empty cache.
    pub fn new(max: usize, ttl: Duration) -> Self {
        SessionCache {
            max,
            ttl,
            inner: Mutex::new(Sessions::default()),
        }
    }

    /// Number of sessions held.
    pub fn len(&self) -> usize {
        self.inner.lock().by_id.len()
    }

    /// Whether no session is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn fresh(&self, stored: Instant) -> bool {
        stored.elapsed() < self.ttl
    }
}

impl Sessions {
    /// Drops the oldest entry; false when there is none.
    fn pop_oldest(&mut self) -> bool {
        let Some((at, id)) = self.order.pop_front() else {
            return false;
        };
        if self.by_id.get(&id).is_some_and(|(_, t)| *t == at) {
            self.by_id.remove(&id);
        }
        true
    }
}

impl StoresServerSessions for SessionCache {
    fn put(&self, key: Vec<u8>, value: Vec<u8>) -> bool {
        let mut s = self.inner.lock();
        while s.order.front().is_some_and(|(at, _)| !self.fresh(*at)) {
            s.pop_oldest();
        }
        while self.max > 0 && s.by_id.len() >= self.max && s.pop_oldest() {}
        let now = Instant::now();
        s.order.push_back((now, key.clone()));
        s.by_id.insert(key, (value, now));
        true
    }

    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        let s = self.inner.lock();
        let (value, at) = s.by_id.get(key)?;
        self.fresh(*at).then(|| value.clone())
    }

    fn take(&self, key: &[u8]) -> Option<Vec<u8>> {
        let (value, at) = self.inner.lock().by_id.remove(key)?;
        self.fresh(at).then_some(value)
    }

    fn can_cache(&self) -> bool {
        !self.ttl.is_zero()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocols_parse_as_redis_names_them() {
        let v = parse_protocols(Some("TLSv1.2 tlsv1.3")).unwrap();
        assert_eq!(v.len(), 2);
        let v = parse_protocols(Some("TLSv1.2")).unwrap();
        assert_eq!(v[0].version, rustls::ProtocolVersion::TLSv1_2);
        assert!(parse_protocols(Some("TLSv1")).is_err());
        assert!(parse_protocols(Some("SSLv3"))
            .unwrap_err()
            .contains("Invalid"));
        assert_eq!(parse_protocols(None).unwrap().len(), 2);
        assert_eq!(parse_protocols(Some("TLSv1 TLSv1.3")).unwrap().len(), 1);
    }

    #[test]
    fn cipher_lists_follow_openssl_operators() {
        let all = parse_cipher_list("DEFAULT").unwrap();
        assert_eq!(all.len(), TLS12_SUITES.len());
        let no_chacha = parse_cipher_list("DEFAULT:-CHACHA20").unwrap();
        assert_eq!(no_chacha.len(), 4);
        // Removing a suite rustls lacks is harmless, adding one is not.
        assert_eq!(
            parse_cipher_list("DEFAULT:-AES128-SHA256").unwrap().len(),
            6
        );
        let e = parse_cipher_list("AES128-SHA256").unwrap_err();
        assert!(e.contains("AES128-SHA256"), "{e}");
        // `!` bans for good; `+` moves to the end; `a+b` intersects.
        let v = parse_cipher_list("!AES128:ALL").unwrap();
        assert!(v.iter().all(|s| !format!("{s:?}").contains("AES_128")));
        let v =
            parse_cipher_list("ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-AES256-GCM-SHA384:+AES128")
                .unwrap();
        assert_eq!(v[0], CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384);
        assert_eq!(parse_cipher_list("ECDHE+AESGCM+aRSA").unwrap().len(), 2);
        assert!(parse_cipher_list("DEFAULT:@STRENGTH").is_ok());
    }

    #[test]
    fn ciphersuites_reject_unknown_names() {
        let v = parse_ciphersuites("TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384").unwrap();
        assert_eq!(v[0], CipherSuite::TLS13_AES_128_GCM_SHA256);
        let e = parse_ciphersuites("TLS_AES_128_CCM_SHA256").unwrap_err();
        assert!(e.contains("TLS_AES_128_CCM_SHA256") && e.contains("supported"));
    }

    #[test]
    fn cipher_list_parser_survives_random_input() {
        let mut rng = fastrand::Rng::with_seed(27);
        let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ-+!:@=, 0123456789abcdef";
        for _ in 0..20_000 {
            let len = rng.usize(0..40);
            let s: String = (0..len)
                .map(|_| alphabet[rng.usize(0..alphabet.len())] as char)
                .collect();
            let _ = parse_cipher_list(&s);
            let _ = parse_ciphersuites(&s);
            let _ = parse_protocols(Some(&s));
        }
    }

    #[test]
    fn key_decoding_reports_what_is_wrong() {
        assert!(decode_key("nothing here", None)
            .unwrap_err()
            .contains("no private key"));
        let legacy = "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-256-CBC,00\n\nAAAA\n-----END RSA PRIVATE KEY-----\n";
        assert!(decode_key(legacy, Some("x"))
            .unwrap_err()
            .contains("legacy"));
        let enc =
            "-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n";
        assert!(decode_key(enc, None).unwrap_err().contains("bad decrypt"));
        assert!(decode_key(enc, Some("pw")).unwrap_err().contains("invalid"));
    }

    #[test]
    fn session_cache_bounds_size_and_age() {
        let cache = SessionCache::new(2, Duration::from_secs(60));
        for i in 0..5u8 {
            assert!(cache.put(vec![i], vec![i]));
        }
        assert_eq!(cache.len(), 2);
        assert_eq!(cache.get(&[4]), Some(vec![4]));
        assert_eq!(cache.get(&[0]), None);
        assert_eq!(cache.take(&[3]), Some(vec![3]));
        assert_eq!(cache.take(&[3]), None);
        let expiring = SessionCache::new(0, Duration::ZERO);
        expiring.put(vec![1], vec![1]);
        assert_eq!(expiring.get(&[1]), None);
        assert!(!expiring.can_cache());
    }

    /// A CA and one certificate it signed for `localhost`, written to
    /// `dir` as ca.crt, NAME.crt and NAME.key.
    fn write_pki(dir: &Path, names: &[&str]) {
        use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca_key = KeyPair::generate().unwrap();
        std::fs::write(dir.join("ca.crt"), ca.self_signed(&ca_key).unwrap().pem()).unwrap();
        let issuer = Issuer::new(ca, ca_key);
        for name in names {
            let key = KeyPair::generate().unwrap();
            let params = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
            let cert = params.signed_by(&key, &issuer).unwrap();
            std::fs::write(dir.join(format!("{name}.crt")), cert.pem()).unwrap();
            std::fs::write(dir.join(format!("{name}.key")), key.serialize_pem()).unwrap();
        }
    }

    /// Moves records from one side to the other until neither has any.
    fn pump(client: &mut rustls::ClientConnection, server: &mut rustls::ServerConnection) {
        for _ in 0..20 {
            let mut buf = Vec::new();
            client.write_tls(&mut buf).unwrap();
            if !buf.is_empty() {
                server.read_tls(&mut buf.as_slice()).unwrap();
                server.process_new_packets().unwrap();
            }
            let mut back = Vec::new();
            server.write_tls(&mut back).unwrap();
            if !back.is_empty() {
                client.read_tls(&mut back.as_slice()).unwrap();
                client.process_new_packets().unwrap();
            }
            if buf.is_empty() && back.is_empty() {
                return;
            }
        }
    }

    /// The outgoing identity (for the replication link and MIGRATE) is
    /// accepted by a server requiring client certificates, and it checks
    /// the peer's chain but not its host name, as Redis.
    #[test]
    fn client_identity_completes_a_mutual_handshake() {
        let dir = std::env::temp_dir().join(format!("vireo-tls-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        write_pki(&dir, &["server", "client"]);
        let path = |n: &str| Some(dir.join(n).display().to_string());
        let settings = Settings {
            cert_file: path("server.crt"),
            key_file: path("server.key"),
            client_cert_file: path("client.crt"),
            client_key_file: path("client.key"),
            ca_cert_dir: Some(dir.display().to_string()),
            session_caching: true,
            session_cache_size: 10,
            session_cache_timeout: 60,
            verifies_peers: true,
            ..Settings::default()
        };
        let ctx = TlsContext::build(&settings).unwrap();
        let client_cfg = ctx.client.clone().expect("a client identity");
        let name = ServerName::try_from("some-replica-host").unwrap();
        let mut client = rustls::ClientConnection::new(client_cfg, name).unwrap();
        let mut server =
            rustls::ServerConnection::new(ctx.for_accept(AuthClients::Yes).unwrap()).unwrap();
        pump(&mut client, &mut server);
        assert!(!client.is_handshaking() && !server.is_handshaking());
        assert!(server.peer_certificates().is_some_and(|c| !c.is_empty()));
        // Without a CA there is nothing to verify peers with.
        let no_ca = Settings {
            ca_cert_dir: None,
            ..settings
        };
        let refused = TlsContext::build(&no_ca).err().unwrap_or_default();
        assert!(refused.contains("tls-ca-cert-file"), "{refused}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
