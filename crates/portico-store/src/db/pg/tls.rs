//! TLS to PostgreSQL: libpq's `sslmode` and `sslrootcert` read from `[store] url`, and the rustls
//! client each mode needs. tokio-postgres itself knows only `disable`, `prefer` and `require`, never
//! checks a certificate and has no CA file, so those two parameters are taken out of the URL here
//! and the rest is left to it.
//!
//! The modes mean what they mean to libpq: `disable` never encrypts; `prefer` (the default) and
//! `require` encrypt (`prefer` only when the server offers it) without checking the certificate,
//! unless `sslrootcert` is given, then as `verify-ca`; `verify-ca` checks that the certificate chains
//! to `sslrootcert` (or the system's roots); `verify-full` checks that and that it names the host.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, Error as TlsError, RootCertStore,
    SignatureScheme,
};
use tokio_postgres::Config;
use tokio_postgres::config::SslMode as WireMode;
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::error::StoreError;

/// How much a connection insists on TLS and checks the server's certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SslMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    fn parse(value: &str) -> Result<SslMode, StoreError> {
        Ok(match value {
            "disable" => SslMode::Disable,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            other => {
                return Err(StoreError::BadUrl {
                    reason: format!(
                        "sslmode={other} is not one Portico knows (disable, prefer, require, verify-ca, verify-full)"
                    ),
                });
            }
        })
    }
}

/// Why a connection failed at TLS, for advice.
pub(crate) enum Failure {
    /// `require` or stricter, and the server answered that it has no TLS.
    NotOffered,
    /// The handshake or the certificate check failed.
    Certificate,
}

pub(crate) fn failure(error: &tokio_postgres::Error) -> Option<Failure> {
    let (failure, _) = failure_and_words(error)?;
    Some(failure)
}

/// A TLS failure in plain words (rustls shows some of its errors by their Rust names).
pub(crate) fn describe(error: &tokio_postgres::Error) -> Option<String> {
    let (_, words) = failure_and_words(error)?;
    Some(format!("TLS with the server failed: {words}"))
}

fn failure_and_words(error: &tokio_postgres::Error) -> Option<(Failure, String)> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = source {
        // tokio-rustls hands rustls's error over inside an io::Error, whose `source()` skips it.
        let inner = e
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .map(|inner| inner as &(dyn std::error::Error + 'static));
        if let Some(tls) = e
            .downcast_ref::<TlsError>()
            .or_else(|| inner.and_then(|inner| inner.downcast_ref::<TlsError>()))
        {
            return Some((Failure::Certificate, tls_words(tls)));
        }
        if e.to_string().contains("server does not support TLS") {
            return Some((
                Failure::NotOffered,
                "the server does not support TLS".to_string(),
            ));
        }
        source = e.source();
    }
    None
}

fn tls_words(error: &TlsError) -> String {
    let TlsError::InvalidCertificate(certificate) = error else {
        return error.to_string();
    };
    match certificate {
        CertificateError::UnknownIssuer => {
            "the server's certificate is not signed by a CA in sslrootcert (or, without it, the system's CAs)".into()
        }
        CertificateError::NotValidForNameContext { expected, presented } => {
            let expected = match expected {
                ServerName::DnsName(name) => name.as_ref().to_string(),
                ServerName::IpAddress(ip) => std::net::IpAddr::from(*ip).to_string(),
                _ => "the URL's host".to_string(),
            };
            // webpki shows each name as `DnsName("db.internal")` or `IpAddress(10.0.0.5)`.
            let presented: Vec<&str> = presented
                .iter()
                .map(|name| {
                    name.split_once('(')
                        .map_or(name.as_str(), |(_, rest)| rest.trim_end_matches(')'))
                        .trim_matches('"')
                })
                .collect();
            format!(
                "the server's certificate is not for {expected} (it names {})",
                if presented.is_empty() { "no host".to_string() } else { presented.join(", ") }
            )
        }
        CertificateError::NotValidForName => {
            "the server's certificate is not for the URL's host".into()
        }
        CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
            "the server's certificate has expired".into()
        }
        CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
            "the server's certificate is not valid yet".into()
        }
        CertificateError::Revoked => "the server's certificate is revoked".into(),
        _ => error.to_string(),
    }
}

/// `[store] url` read: tokio-postgres's config, and the TLS client its connections use.
pub(crate) struct Target {
    pub(crate) config: Config,
    pub(crate) tls: MakeRustlsConnect,
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) mode: SslMode,
}

/// Reads `url` (a `postgres://` URL, or tokio-postgres's `key=value` form, where only its own three
/// modes exist).
pub(crate) fn target(url: &str) -> Result<Target, StoreError> {
    let (rest, mode, root_cert) = split_tls_params(url)?;
    let mut config: Config = rest.parse().map_err(|error| StoreError::BadUrl {
        reason: super::describe(&error),
    })?;
    let mode = match mode {
        Some(mode) => mode,
        None => match config.get_ssl_mode() {
            WireMode::Disable => SslMode::Disable,
            WireMode::Require => SslMode::Require,
            _ => SslMode::Prefer,
        },
    };
    config.ssl_mode(match mode {
        SslMode::Disable => WireMode::Disable,
        SslMode::Prefer => WireMode::Prefer,
        SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => WireMode::Require,
    });
    let tls = MakeRustlsConnect::new(client_config(mode, root_cert.as_deref())?);
    Ok(Target { config, tls, mode })
}

/// The URL without `sslmode` and `sslrootcert`, and their values.
type Split = (String, Option<SslMode>, Option<String>);

fn split_tls_params(url: &str) -> Result<Split, StoreError> {
    let is_url = url.starts_with("postgres://") || url.starts_with("postgresql://");
    let Some((base, query)) = url.split_once('?').filter(|_| is_url) else {
        return Ok((url.to_string(), None, None));
    };
    let (mut mode, mut root_cert) = (None, None);
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match key {
            "sslmode" => mode = Some(SslMode::parse(&percent_decode(value))?),
            "sslrootcert" => root_cert = Some(percent_decode(value)),
            _ => kept.push(pair),
        }
    }
    let rest = if kept.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    Ok((rest, mode, root_cert))
}

fn percent_decode(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn tls_error(reason: String) -> StoreError {
    StoreError::Tls { reason }
}

fn client_config(mode: SslMode, root_cert: Option<&str>) -> Result<ClientConfig, StoreError> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|error| tls_error(format!("could not set up TLS: {error}")))?;
    let verifier: Arc<dyn ServerCertVerifier> = match (mode, root_cert) {
        (SslMode::Disable | SslMode::Prefer | SslMode::Require, None) => {
            Arc::new(Unchecked(provider))
        }
        (SslMode::Disable | SslMode::Prefer | SslMode::Require | SslMode::VerifyCa, root) => {
            Arc::new(ChainOnly(webpki(provider, root)?))
        }
        (SslMode::VerifyFull, root) => webpki(provider, root)?,
    };
    Ok(builder
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth())
}

/// The standard check against `sslrootcert`'s certificates, or the system's when it is absent or
/// `system` (as in libpq 16).
fn webpki(
    provider: Arc<CryptoProvider>,
    root_cert: Option<&str>,
) -> Result<Arc<WebPkiServerVerifier>, StoreError> {
    let mut roots = RootCertStore::empty();
    match root_cert.filter(|path| *path != "system") {
        Some(path) => {
            for cert in read_pem_certs(Path::new(path))? {
                roots.add(cert).map_err(|error| {
                    tls_error(format!(
                        "sslrootcert {path}: a certificate is unusable: {error}"
                    ))
                })?;
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            roots.add_parsable_certificates(found.certs);
            if roots.is_empty() {
                return Err(tls_error(
                    "no CA certificates found on this system to check the server's certificate with; \
                     add sslrootcert=PATH (a PEM file of the CA that signed it) to [store] url"
                        .into(),
                ));
            }
        }
    }
    WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
        .build()
        .map_err(|error| tls_error(format!("could not set up certificate checks: {error}")))
}

fn read_pem_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, StoreError> {
    let shown = PathBuf::from(path).display().to_string();
    let bytes = std::fs::read(path)
        .map_err(|error| tls_error(format!("could not read sslrootcert {shown}: {error}")))?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| tls_error(format!("sslrootcert {shown} is not PEM: {error}")))?;
    if certs.is_empty() {
        return Err(tls_error(format!(
            "sslrootcert {shown} holds no certificate (expected PEM: -----BEGIN CERTIFICATE-----)"
        )));
    }
    Ok(certs)
}

/// `verify-ca`: the chain is checked, the name is not (the certificate may name another host than
/// the one in the URL, e.g. an address).
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, TlsError> {
        // The chain is checked before the name, so a name mismatch means the chain passed.
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(TlsError::InvalidCertificate(
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
    ) -> Result<HandshakeSignatureValid, TlsError> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// `prefer` and `require` without `sslrootcert`: encrypted, the certificate taken as it comes (as
/// libpq does); the handshake's signatures are still checked.
#[derive(Debug)]
struct Unchecked(Arc<CryptoProvider>);

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, TlsError> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tls_parameters_are_taken_out_of_the_url_and_the_rest_kept() {
        let (rest, mode, root) = split_tls_params(
            "postgres://u:p@db:5432/portico?sslmode=verify-full&application_name=x&sslrootcert=%2Fetc%2Fca.pem",
        )
        .unwrap();
        assert_eq!(rest, "postgres://u:p@db:5432/portico?application_name=x");
        assert_eq!(mode, Some(SslMode::VerifyFull));
        assert_eq!(root.as_deref(), Some("/etc/ca.pem"));
        let (rest, mode, root) = split_tls_params("postgres://db/p?sslmode=require").unwrap();
        assert_eq!(
            (rest.as_str(), mode, root),
            ("postgres://db/p", Some(SslMode::Require), None)
        );
        // Without the parameters, tokio-postgres's own reading stands (libpq's default, prefer).
        assert_eq!(target("postgres://db/p").unwrap().mode, SslMode::Prefer);
        assert_eq!(
            target("host=db dbname=p sslmode=disable").unwrap().mode,
            SslMode::Disable
        );
        let wrong = target("postgres://db/p?sslmode=allow")
            .err()
            .unwrap()
            .to_string();
        assert!(
            wrong.contains("sslmode=allow is not one Portico knows (disable, prefer, require, verify-ca, verify-full)"),
            "{wrong}"
        );
    }

    #[test]
    fn a_missing_or_empty_ca_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope.pem");
        let url = format!(
            "postgres://db/p?sslmode=verify-ca&sslrootcert={}",
            missing.display()
        );
        let error = target(&url).err().unwrap().to_string();
        assert!(
            error.contains(&format!("could not read sslrootcert {}", missing.display())),
            "{error}"
        );
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let url = format!(
            "postgres://db/p?sslmode=verify-full&sslrootcert={}",
            empty.display()
        );
        let error = target(&url).err().unwrap().to_string();
        assert!(error.contains("holds no certificate"), "{error}");
    }

    /// The throw-away cluster `scripts/pg-test-cluster` starts with `ssl = on`, stopped on drop.
    struct SslCluster {
        dir: PathBuf,
        url: String,
    }

    impl Drop for SslCluster {
        fn drop(&mut self) {
            let _ = std::process::Command::new(script())
                .arg("stop")
                .arg(&self.dir)
                .status();
        }
    }

    fn script() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/pg-test-cluster")
    }

    fn openssl(dir: &Path, args: &[&str]) {
        let out = std::process::Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("openssl (the test makes its certificates with it)");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// A CA named `name` in `dir` (`name.crt`, `name.key`).
    fn make_ca(dir: &Path, name: &str) {
        let (key, crt) = (format!("{name}.key"), format!("{name}.crt"));
        openssl(
            dir,
            &[
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-keyout",
                &key,
                "-out",
                &crt,
                "-days",
                "2",
                "-subj",
                &format!("/CN={name}"),
            ],
        );
    }

    /// Whether the session `url` opens is encrypted, or why it could not be opened.
    fn encrypted(url: &str) -> Result<bool, String> {
        let target = target(url).map_err(|e| e.to_string())?;
        let pool =
            super::super::Pool::connect(target.config, target.tls, 1).map_err(|e| e.to_string())?;
        let conn = pool.get().map_err(|e| e.to_string())?;
        crate::db::Db::postgres(&conn)
            .query_one(
                "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
                &[],
                |row| row.get(0),
            )
            .map_err(|e| e.to_string())
    }

    #[test]
    fn each_sslmode_against_a_server_with_ssl_on() {
        let Some(plain) = crate::testing::postgres_test_url() else {
            return;
        };
        let certs = tempfile::tempdir().unwrap();
        let dir = certs.path();
        make_ca(dir, "ca");
        make_ca(dir, "other-ca");
        std::fs::write(
            dir.join("ext.cnf"),
            "subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n",
        )
        .unwrap();
        openssl(
            dir,
            &[
                "req",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-keyout",
                "server.key",
                "-out",
                "server.csr",
                "-subj",
                "/CN=localhost",
            ],
        );
        openssl(
            dir,
            &[
                "x509",
                "-req",
                "-in",
                "server.csr",
                "-CA",
                "ca.crt",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-out",
                "server.crt",
                "-days",
                "2",
                "-extfile",
                "ext.cnf",
            ],
        );
        // Directly under /tmp: as root, the server runs as `postgres`, which must reach it.
        let cluster_dir = PathBuf::from(format!(
            "/tmp/portico-pg-tls-{:016x}",
            rand::random::<u64>()
        ));
        let out = std::process::Command::new(script())
            .arg("start")
            .arg(&cluster_dir)
            .arg("--ssl")
            .arg(dir.join("server.crt"))
            .arg(dir.join("server.key"))
            .output()
            .unwrap();
        let mut cluster = SslCluster {
            dir: cluster_dir,
            url: String::new(),
        };
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        cluster.url = String::from_utf8(out.stdout)
            .unwrap()
            .trim()
            .strip_prefix("PORTICO_TEST_POSTGRES_URL=")
            .unwrap()
            .to_string();
        let url = cluster.url.as_str();
        let by_name = url.replace("@127.0.0.1:", "@localhost:");
        let ca = dir.join("ca.crt").display().to_string();
        let other = dir.join("other-ca.crt").display().to_string();

        assert_eq!(encrypted(&format!("{url}?sslmode=disable")), Ok(false));
        // libpq's default, prefer: encrypted where the server offers it.
        assert_eq!(encrypted(url), Ok(true));
        assert_eq!(encrypted(&format!("{url}?sslmode=require")), Ok(true));
        assert_eq!(
            encrypted(&format!("{by_name}?sslmode=verify-full&sslrootcert={ca}")),
            Ok(true)
        );
        // The certificate names localhost, not the address: verify-ca does not mind, verify-full does.
        assert_eq!(
            encrypted(&format!("{url}?sslmode=verify-ca&sslrootcert={ca}")),
            Ok(true)
        );
        let wrong_name = encrypted(&format!("{url}?sslmode=verify-full&sslrootcert={ca}"));
        assert!(
            wrong_name
                .as_ref()
                .is_err_and(|e| e.contains("TLS with the server failed: the server's certificate is not for 127.0.0.1 (it names localhost)")),
            "{wrong_name:?}"
        );
        // Another CA's certificate: refused by verify-ca, and by require once sslrootcert is given.
        for mode in ["verify-ca", "verify-full", "require"] {
            let refused = encrypted(&format!("{by_name}?sslmode={mode}&sslrootcert={other}"));
            assert!(
                refused
                    .as_ref()
                    .is_err_and(|e| e.contains("TLS with the server failed: the server's certificate is not signed by a CA in sslrootcert")),
                "{mode}: {refused:?}"
            );
        }
        // Through the store, with the advice an operator sees.
        let store = crate::Store::open_postgres(
            &format!("{by_name}?sslmode=verify-full&sslrootcert={ca}"),
            2,
        );
        assert!(store.is_ok(), "{:?}", store.err().map(|e| e.to_string()));
        let refused =
            crate::Store::open_postgres(&format!("{url}?sslmode=verify-full&sslrootcert={ca}"), 2)
                .err()
                .unwrap()
                .to_string();
        assert!(
            refused.contains("connect by a host name the certificate carries"),
            "{refused}"
        );
        // A server without TLS, where TLS is required.
        let no_tls = crate::Store::open_postgres(&format!("{plain}&sslmode=require"), 1)
            .err()
            .unwrap()
            .to_string();
        assert!(no_tls.contains("TLS with the server failed: the server does not support TLS; turn on ssl on the server"), "{no_tls}");
        drop(cluster);
    }
}
