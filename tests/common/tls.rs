//! A certificate authority made per test and a server certificate it signed for `127.0.0.1`
//! and `localhost`: the loopback peers (an LLM provider, a webhook receiver, rsyslog, an SMTP
//! server) serve the certificate, and the service is told to trust the CA's PEM file, as an
//! operator adds a private CA. Peers that ask clients for a certificate (Redis's
//! `tls-auth-clients`) trust the same CA, which signs the service's client certificate too.

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// See the module's documentation.
pub struct TestCa {
    /// The CA's certificate (PEM), for a `tls_ca_file` key.
    pub ca_file: PathBuf,
    /// The server's certificate (PEM).
    pub cert_file: PathBuf,
    /// The server's private key (PKCS #8 PEM).
    pub key_file: PathBuf,
    /// The same certificate and key for a rustls server.
    pub server: Arc<rustls::ServerConfig>,
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl TestCa {
    /// Makes the CA and the certificate, writing the PEM files into `dir` as `NAME-*.pem`.
    pub fn new(dir: &Path, name: &str) -> TestCa {
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
        let leaf_key = KeyPair::generate().unwrap();
        let leaf = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
            .unwrap()
            .signed_by(&leaf_key, &ca)
            .unwrap();
        let ca_file = dir.join(format!("{name}-ca.pem"));
        let cert_file = dir.join(format!("{name}-cert.pem"));
        let key_file = dir.join(format!("{name}-key.pem"));
        std::fs::write(&ca_file, ca.pem()).unwrap();
        std::fs::write(&cert_file, leaf.pem()).unwrap();
        std::fs::write(&key_file, leaf_key.serialize_pem()).unwrap();
        let server = Arc::new(
            rustls::ServerConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![leaf.der().clone()],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der())),
            )
            .unwrap(),
        );
        TestCa {
            ca_file,
            cert_file,
            key_file,
            server,
            issuer: ca,
        }
    }

    /// A client certificate the CA signed, written into `dir` as `NAME-client-{cert,key}.pem`:
    /// the paths of the certificate and of its key.
    pub fn client(&self, dir: &Path, name: &str) -> (PathBuf, PathBuf) {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        let cert_file = dir.join(format!("{name}-client-cert.pem"));
        let key_file = dir.join(format!("{name}-client-key.pem"));
        std::fs::write(&cert_file, cert.pem()).unwrap();
        std::fs::write(&key_file, key.serialize_pem()).unwrap();
        (cert_file, key_file)
    }
}
