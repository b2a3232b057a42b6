//! X.509 version 1 certificates, which OpenSSL (so Redis) accepts and
//! webpki, rustls' verifier, refuses. Redis's own test certificates make
//! one (`utils/gen-test-certs.sh` signs `redis.crt` without extensions),
//! and older private CAs still issue them.
//!
//! Design: a chain without a version 1 certificate goes to webpki
//! unchanged. A chain with one is checked here, as OpenSSL's default
//! verification checks it: each certificate is parsed with `x509-parser`;
//! each link's signature is checked with the crypto provider's signature
//! verification algorithms (through webpki's raw public key check, the
//! same code webpki runs for version 3 chains), matched to the signature
//! algorithm the certificate names; every certificate, trust anchor
//! included, must be within its validity dates; issuers must be CAs as
//! OpenSSL decides (basic constraints with CA set, or no basic constraints
//! and a self-signed version 1 certificate, key usage allowing
//! certificate signing when present, path length respected); the leaf's
//! extended key usage, key usage and Netscape certificate type, when
//! present, must allow the purpose (client or server authentication); an
//! unknown critical extension refuses the certificate. Host names are not
//! checked, as Redis does not check them.
//!
//! The handshake's own signature (CertificateVerify) is checked against
//! the leaf's public key the same way. The server's and the client's own
//! certificate is loaded with [`certified_key`], which checks that the
//! key matches a version 1 certificate itself (rustls asks webpki).

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::{
    CertificateDer, PrivateKeyDer, ServerName, SignatureVerificationAlgorithm,
    SubjectPublicKeyInfoDer, UnixTime,
};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::sign::CertifiedKey;
use rustls::{
    CertificateError, DigitallySignedStruct, DistinguishedName, Error, InconsistentKeys,
    SignatureScheme,
};
use x509_parser::asn1_rs::ToDer;
use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::ParsedExtension;
use x509_parser::prelude::FromDer;
use x509_parser::x509::X509Version;

/// The longest chain followed (OpenSSL's default depth is 100; real
/// chains have a handful of links, and each costs a signature check).
const MAX_DEPTH: usize = 16;

/// What the leaf certificate must be good for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Purpose {
    /// A client presenting it to a server.
    ClientAuth,
    /// A server presenting it to a client.
    ServerAuth,
}

fn parse(der: &[u8]) -> Result<X509Certificate<'_>, Error> {
    match X509Certificate::from_der(der) {
        Ok(([], cert)) => Ok(cert),
        _ => Err(Error::InvalidCertificate(CertificateError::BadEncoding)),
    }
}

/// Whether `der` is a well-formed version 1 certificate.
pub fn is_v1(der: &[u8]) -> bool {
    parse(der).is_ok_and(|c| c.version() == X509Version::V1)
}

/// Whether webpki would refuse the chain for holding a version 1
/// certificate, so it must be checked here.
fn chain_has_v1(end_entity: &CertificateDer<'_>, intermediates: &[CertificateDer<'_>]) -> bool {
    std::iter::once(end_entity)
        .chain(intermediates)
        .any(|c| is_v1(c))
}

/// The DER of a certificate's signature algorithm identifier without its
/// SEQUENCE header, the form the provider's algorithms name themselves by.
fn signature_alg_id(cert: &X509Certificate<'_>) -> Option<Vec<u8>> {
    let alg = &cert.signature_algorithm;
    let mut out = alg.algorithm.to_der_vec().ok()?;
    if let Some(params) = &alg.parameters {
        out.extend(params.to_der_vec().ok()?);
    }
    Some(out)
}

/// Checks a signature by the public key `spki` (a DER
/// SubjectPublicKeyInfo) with the first of `candidates` that fits the
/// key's type.
fn verify_with_key(
    spki: &[u8],
    candidates: &[&'static dyn SignatureVerificationAlgorithm],
    message: &[u8],
    signature: &[u8],
) -> Result<(), Error> {
    let spki = SubjectPublicKeyInfoDer::from(spki);
    let key = webpki::RawPublicKeyEntity::try_from(&spki)
        .map_err(|_| Error::InvalidCertificate(CertificateError::BadEncoding))?;
    for alg in candidates {
        match key.verify_signature(*alg, message, signature) {
            Ok(()) => return Ok(()),
            Err(webpki::Error::UnsupportedSignatureAlgorithmForPublicKeyContext(_)) => continue,
            Err(_) => return Err(Error::InvalidCertificate(CertificateError::BadSignature)),
        }
    }
    // No algorithm of the provider fits the key and the named algorithm.
    Err(Error::InvalidCertificate(CertificateError::BadSignature))
}

/// Whether `issuer`'s key signed `child`, with the algorithm `child`
/// names.
fn signed_by(
    child: &X509Certificate<'_>,
    issuer: &X509Certificate<'_>,
    algs: &WebPkiSupportedAlgorithms,
) -> bool {
    if child.issuer().as_raw() != issuer.subject().as_raw() {
        return false;
    }
    let Some(alg_id) = signature_alg_id(child) else {
        return false;
    };
    let candidates: Vec<_> = algs
        .all
        .iter()
        .copied()
        .filter(|a| a.signature_alg_id().as_ref() == alg_id.as_slice())
        .collect();
    verify_with_key(
        issuer.public_key().raw,
        &candidates,
        child.tbs_certificate.as_ref(),
        &child.signature_value.data,
    )
    .is_ok()
}

/// The certificate is valid at `now`.
fn check_dates(cert: &X509Certificate<'_>, now: UnixTime) -> Result<(), Error> {
    let now = i64::try_from(now.as_secs()).unwrap_or(i64::MAX);
    let validity = cert.validity();
    if now < validity.not_before.timestamp() {
        return Err(Error::InvalidCertificate(CertificateError::NotValidYet));
    }
    if now > validity.not_after.timestamp() {
        return Err(Error::InvalidCertificate(CertificateError::Expired));
    }
    Ok(())
}

/// No critical extension this check does not understand.
fn check_critical(cert: &X509Certificate<'_>) -> Result<(), Error> {
    let unknown = cert.extensions().iter().any(|e| {
        e.critical
            && matches!(
                e.parsed_extension(),
                ParsedExtension::UnsupportedExtension { .. } | ParsedExtension::ParseError { .. }
            )
    });
    if unknown {
        return Err(Error::InvalidCertificate(CertificateError::Other(
            rustls::OtherError(Arc::new(UnhandledCritical)),
        )));
    }
    Ok(())
}

/// An unknown critical extension (OpenSSL's "unhandled critical
/// extension").
#[derive(Debug)]
struct UnhandledCritical;

impl std::fmt::Display for UnhandledCritical {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("unhandled critical extension")
    }
}

impl std::error::Error for UnhandledCritical {}

/// Whether `cert` may issue certificates with `below` non-self-issued
/// intermediates under it, as OpenSSL's CA test decides.
fn acts_as_ca(cert: &X509Certificate<'_>, below: usize) -> bool {
    let key_usage = cert.key_usage().ok().flatten();
    if key_usage
        .as_ref()
        .is_some_and(|ku| !ku.value.key_cert_sign())
    {
        return false;
    }
    match cert.basic_constraints() {
        Ok(Some(bc)) => {
            bc.value.ca
                && bc
                    .value
                    .path_len_constraint
                    .is_none_or(|n| below <= n as usize)
        }
        Ok(None) => {
            let self_signed = cert.subject().as_raw() == cert.issuer().as_raw();
            (cert.version() == X509Version::V1 && self_signed)
                || key_usage.is_some()
                || netscape_type(cert).is_some_and(|t| t.ssl_ca())
        }
        Err(_) => false,
    }
}

fn netscape_type<'a>(
    cert: &'a X509Certificate<'_>,
) -> Option<&'a x509_parser::extensions::NSCertType> {
    cert.extensions()
        .iter()
        .find_map(|e| match e.parsed_extension() {
            ParsedExtension::NSCertType(t) => Some(t),
            _ => None,
        })
}

/// The leaf's usages, when it states them, allow `purpose`.
fn check_purpose(cert: &X509Certificate<'_>, purpose: Purpose) -> Result<(), Error> {
    let client = purpose == Purpose::ClientAuth;
    let eku_ok = match cert.extended_key_usage() {
        Ok(Some(eku)) => {
            if client {
                eku.value.client_auth
            } else {
                eku.value.server_auth
            }
        }
        Ok(None) => true,
        Err(_) => false,
    };
    let ku_ok = match cert.key_usage() {
        Ok(Some(ku)) => {
            let ku = ku.value;
            ku.digital_signature() || ku.key_agreement() || (!client && ku.key_encipherment())
        }
        Ok(None) => true,
        Err(_) => false,
    };
    let ns_ok = netscape_type(cert).is_none_or(|t| {
        if client {
            t.ssl_client()
        } else {
            t.ssl_server()
        }
    });
    if eku_ok && ku_ok && ns_ok {
        Ok(())
    } else {
        Err(Error::InvalidCertificate(CertificateError::InvalidPurpose))
    }
}

/// Verifies a chain holding version 1 certificates: `end_entity` for
/// `purpose`, through `intermediates`, to one of `anchors` (the CA
/// certificates as loaded).
pub fn verify_chain(
    end_entity: &CertificateDer<'_>,
    intermediates: &[CertificateDer<'_>],
    anchors: &[CertificateDer<'static>],
    algs: &WebPkiSupportedAlgorithms,
    now: UnixTime,
    purpose: Purpose,
) -> Result<(), Error> {
    let leaf = parse(end_entity)?;
    check_dates(&leaf, now)?;
    check_critical(&leaf)?;
    check_purpose(&leaf, purpose)?;
    // Unparsable intermediates are skipped as OpenSSL skips certificates
    // it cannot use; the chain must still be found without them.
    let pool: Vec<X509Certificate<'_>> =
        intermediates.iter().filter_map(|c| parse(c).ok()).collect();
    let roots: Vec<X509Certificate<'_>> = anchors.iter().filter_map(|c| parse(c).ok()).collect();
    let mut current = &leaf;
    let mut below = 0;
    for _ in 0..MAX_DEPTH {
        if let Some(root) = roots.iter().find(|r| signed_by(current, r, algs)) {
            check_dates(root, now)?;
            check_critical(root)?;
            return if acts_as_ca(root, below) {
                Ok(())
            } else {
                Err(Error::InvalidCertificate(CertificateError::UnknownIssuer))
            };
        }
        let Some(next) = pool
            .iter()
            .find(|i| i.as_raw() != current.as_raw() && signed_by(current, i, algs))
        else {
            return Err(Error::InvalidCertificate(CertificateError::UnknownIssuer));
        };
        check_dates(next, now)?;
        check_critical(next)?;
        if !acts_as_ca(next, below) {
            return Err(Error::InvalidCertificate(CertificateError::UnknownIssuer));
        }
        if next.subject().as_raw() != next.issuer().as_raw() {
            below += 1;
        }
        current = next;
    }
    Err(Error::InvalidCertificate(CertificateError::UnknownIssuer))
}

/// Checks the handshake's signature (TLS 1.2 or 1.3 CertificateVerify,
/// or a TLS 1.2 ServerKeyExchange) by a version 1 certificate's key.
fn verify_handshake_signature(
    message: &[u8],
    cert: &CertificateDer<'_>,
    dss: &DigitallySignedStruct,
    algs: &WebPkiSupportedAlgorithms,
    tls13: bool,
) -> Result<HandshakeSignatureValid, Error> {
    let leaf = parse(cert)?;
    let spki = leaf.public_key().raw;
    if tls13 {
        let spki = SubjectPublicKeyInfoDer::from(spki);
        return rustls::crypto::verify_tls13_signature_with_raw_key(message, &spki, dss, algs);
    }
    let candidates = algs
        .mapping
        .iter()
        .find(|(scheme, _)| *scheme == dss.scheme)
        .map(|(_, a)| *a)
        .ok_or(Error::PeerMisbehaved(
            rustls::PeerMisbehaved::SignedHandshakeWithUnadvertisedSigScheme,
        ))?;
    verify_with_key(spki, candidates, message, dss.signature())?;
    Ok(HandshakeSignatureValid::assertion())
}

/// A certificate and its private key as rustls serves them; a version 1
/// certificate's key is matched here, since rustls asks webpki, which
/// cannot read the certificate. Err is the reason.
pub fn certified_key(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    provider: &CryptoProvider,
) -> Result<Arc<CertifiedKey>, String> {
    let signer = provider
        .key_provider
        .load_private_key(key)
        .map_err(|e| e.to_string())?;
    let v1 = chain.first().is_some_and(|c| is_v1(c));
    let certified = CertifiedKey::new(chain, signer);
    if v1 {
        let cert = parse(certified.end_entity_cert().map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
        let ours = certified.key.public_key();
        if ours.is_some_and(|k| k.as_ref() != cert.public_key().raw) {
            return Err(Error::InconsistentKeys(InconsistentKeys::KeyMismatch).to_string());
        }
        return Ok(Arc::new(certified));
    }
    match certified.keys_match() {
        Ok(()) | Err(Error::InconsistentKeys(InconsistentKeys::Unknown)) => Ok(Arc::new(certified)),
        Err(e) => Err(e.to_string()),
    }
}

/// Verifies client certificates: webpki's verifier for version 3 chains,
/// [`verify_chain`] for chains holding a version 1 certificate.
#[derive(Debug)]
pub struct ClientVerifier {
    webpki: Arc<dyn ClientCertVerifier>,
    anchors: Arc<Vec<CertificateDer<'static>>>,
    algs: WebPkiSupportedAlgorithms,
}

impl ClientVerifier {
    /// Wraps `webpki`, built over the same `anchors` and `provider`.
    pub fn new(
        webpki: Arc<dyn ClientCertVerifier>,
        anchors: Arc<Vec<CertificateDer<'static>>>,
        provider: &CryptoProvider,
    ) -> Arc<Self> {
        Arc::new(ClientVerifier {
            webpki,
            anchors,
            algs: provider.signature_verification_algorithms,
        })
    }
}

impl ClientCertVerifier for ClientVerifier {
    fn offer_client_auth(&self) -> bool {
        self.webpki.offer_client_auth()
    }

    fn client_auth_mandatory(&self) -> bool {
        self.webpki.client_auth_mandatory()
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.webpki.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, Error> {
        if !chain_has_v1(end_entity, intermediates) {
            return self
                .webpki
                .verify_client_cert(end_entity, intermediates, now);
        }
        verify_chain(
            end_entity,
            intermediates,
            &self.anchors,
            &self.algs,
            now,
            Purpose::ClientAuth,
        )?;
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        if is_v1(cert) {
            return verify_handshake_signature(message, cert, dss, &self.algs, false);
        }
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        if is_v1(cert) {
            return verify_handshake_signature(message, cert, dss, &self.algs, true);
        }
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}

/// Verifies the servers outgoing links reach: `inner` (webpki, host
/// names ignored) for version 3 chains, [`verify_chain`] for chains
/// holding a version 1 certificate.
#[derive(Debug)]
pub struct ServerVerifier {
    inner: Arc<dyn ServerCertVerifier>,
    anchors: Arc<Vec<CertificateDer<'static>>>,
    algs: WebPkiSupportedAlgorithms,
}

impl ServerVerifier {
    /// Wraps `inner`, built over the same `anchors` and `provider`.
    pub fn new(
        inner: Arc<dyn ServerCertVerifier>,
        anchors: Arc<Vec<CertificateDer<'static>>>,
        provider: &CryptoProvider,
    ) -> Arc<Self> {
        Arc::new(ServerVerifier {
            inner,
            anchors,
            algs: provider.signature_verification_algorithms,
        })
    }
}

impl ServerCertVerifier for ServerVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        if !chain_has_v1(end_entity, intermediates) {
            return self.inner.verify_server_cert(
                end_entity,
                intermediates,
                server_name,
                ocsp,
                now,
            );
        }
        verify_chain(
            end_entity,
            intermediates,
            &self.anchors,
            &self.algs,
            now,
            Purpose::ServerAuth,
        )?;
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        if is_v1(cert) {
            return verify_handshake_signature(message, cert, dss, &self.algs, false);
        }
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        if is_v1(cert) {
            return verify_handshake_signature(message, cert, dss, &self.algs, true);
        }
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}
