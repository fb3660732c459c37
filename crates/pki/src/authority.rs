//! A certificate authority: made once (10 years by default), then issuing serving and
//! client certificates. The CA's key never leaves the data directory.

use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType, SerialNumber,
};
use time::OffsetDateTime;

use crate::PkiError;

/// A certificate and its private key, both PEM.
#[derive(Clone)]
pub struct IssuedCert {
    pub cert_pem: String,
    pub key_pem: String,
}

impl std::fmt::Debug for IssuedCert {
    // Keys are never printed, not even in a debug log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IssuedCert").finish_non_exhaustive()
    }
}

pub struct Authority {
    cert_pem: String,
    key: KeyPair,
}

fn generate_err(what: &str) -> impl FnOnce(rcgen::Error) -> PkiError + '_ {
    move |source| PkiError::Generate {
        what: what.to_string(),
        source,
    }
}

/// Valid from a little before now (clients whose clocks lag still accept it: a minute,
/// or a tenth of a short lifetime, so renewal at a third left still means a third) for
/// `lifetime` from now.
pub(crate) fn validity(params: &mut CertificateParams, lifetime: Duration) {
    let now = OffsetDateTime::now_utc();
    let backdate = (lifetime / 10).min(Duration::from_secs(60));
    params.not_before = now - backdate;
    params.not_after = now + lifetime;
}

pub(crate) fn random_serial() -> SerialNumber {
    let mut bytes: [u8; 16] = rand::random();
    // A positive integer: the top bit clear, as RFC 5280 wants.
    bytes[0] &= 0x7f;
    SerialNumber::from_slice(&bytes)
}

impl Authority {
    /// A new self-signed CA named `common_name`.
    pub fn generate(common_name: &str, lifetime: Duration) -> Result<Authority, PkiError> {
        let key = KeyPair::generate().map_err(generate_err(common_name))?;
        let mut params = CertificateParams::default();
        params.distinguished_name = DistinguishedName::new();
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        params.serial_number = Some(random_serial());
        validity(&mut params, lifetime);
        let cert = params
            .self_signed(&key)
            .map_err(generate_err(common_name))?;
        Ok(Authority {
            cert_pem: cert.pem(),
            key,
        })
    }

    /// A CA from its PEM certificate and key.
    pub fn load(cert_pem: &str, key_pem: &str) -> Result<Authority, PkiError> {
        let key = KeyPair::from_pem(key_pem).map_err(|e| PkiError::Parse {
            what: "CA key".into(),
            reason: e.to_string(),
        })?;
        // Checked now, so that issuing cannot fail on a CA certificate that is not one.
        Issuer::from_ca_cert_pem(cert_pem, &key).map_err(|e| PkiError::Parse {
            what: "CA certificate".into(),
            reason: e.to_string(),
        })?;
        Ok(Authority {
            cert_pem: cert_pem.to_string(),
            key,
        })
    }

    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    pub fn key_pem(&self) -> String {
        self.key.serialize_pem()
    }

    /// A serving certificate for `names` (DNS names and IP addresses).
    pub fn issue_serving(
        &self,
        common_name: &str,
        names: &[String],
        lifetime: Duration,
    ) -> Result<IssuedCert, PkiError> {
        let usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.sign(
            named_leaf(common_name, names, lifetime, usages)?,
            common_name,
        )
    }

    /// A certificate for both ends of a connection, as etcd's members need: each serves
    /// its peers and is their client (kubeadm's `etcd/server` and `etcd/peer`).
    pub fn issue_peer(
        &self,
        common_name: &str,
        names: &[String],
        lifetime: Duration,
    ) -> Result<IssuedCert, PkiError> {
        let usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        self.sign(
            named_leaf(common_name, names, lifetime, usages)?,
            common_name,
        )
    }

    /// A client certificate for `user` in `groups` (CN = user, O = groups, as upstream's
    /// x509 authenticator reads them). At most one group: rcgen's subject holds one value
    /// per attribute type; identities needing more groups use tokens.
    pub fn issue_client(
        &self,
        user: &str,
        groups: &[String],
        lifetime: Duration,
    ) -> Result<IssuedCert, PkiError> {
        if groups.len() > 1 {
            return Err(PkiError::Parse {
                what: format!("client certificate for {user}"),
                reason: format!(
                    "one group per certificate, got {}: {}",
                    groups.len(),
                    groups.join(", ")
                ),
            });
        }
        let mut params = leaf_params(user, groups, lifetime);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        self.sign(params, user)
    }

    /// The CA as rcgen's signer; its subject and key identifier come from the certificate.
    pub(crate) fn issuer(&self) -> Result<Issuer<'_, &KeyPair>, rcgen::Error> {
        Issuer::from_ca_cert_pem(&self.cert_pem, &self.key)
    }

    fn sign(&self, params: CertificateParams, what: &str) -> Result<IssuedCert, PkiError> {
        let key = KeyPair::generate().map_err(generate_err(what))?;
        let issuer = self.issuer().map_err(|e| PkiError::Parse {
            what: "CA certificate".into(),
            reason: e.to_string(),
        })?;
        let cert = params
            .signed_by(&key, &issuer)
            .map_err(generate_err(what))?;
        Ok(IssuedCert {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

fn leaf_params(
    common_name: &str,
    organizations: &[String],
    lifetime: Duration,
) -> CertificateParams {
    let mut params = CertificateParams::default();
    params.distinguished_name = DistinguishedName::new();
    for o in organizations {
        params.distinguished_name.push(DnType::OrganizationName, o);
    }
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.use_authority_key_identifier_extension = true;
    params.serial_number = Some(random_serial());
    validity(&mut params, lifetime);
    params
}

/// A leaf's parameters for `names` (DNS names and IP addresses) and `usages`.
fn named_leaf(
    common_name: &str,
    names: &[String],
    lifetime: Duration,
    usages: Vec<ExtendedKeyUsagePurpose>,
) -> Result<CertificateParams, PkiError> {
    let mut params = leaf_params(common_name, &[], lifetime);
    params.subject_alt_names = names
        .iter()
        .map(|n| san(n))
        .collect::<Result<_, _>>()
        .map_err(generate_err(common_name))?;
    params.extended_key_usages = usages;
    Ok(params)
}

fn san(name: &str) -> Result<SanType, rcgen::Error> {
    Ok(match name.parse::<std::net::IpAddr>() {
        Ok(ip) => SanType::IpAddress(ip),
        Err(_) => SanType::DnsName(name.to_string().try_into()?),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::inspect::CertInfo;

    const YEAR: Duration = Duration::from_secs(365 * 86400);

    #[test]
    fn client_certificates_carry_user_and_groups() {
        let ca = Authority::generate("test-ca", YEAR).unwrap();
        let groups = vec!["system:nodes".to_string()];
        let leaf = ca
            .issue_client("system:node:node-1", &groups, YEAR)
            .unwrap();
        let info = CertInfo::from_pem(&leaf.cert_pem).unwrap();
        assert_eq!(info.common_name, "system:node:node-1");
        assert_eq!(info.organizations, groups);
        assert_eq!(info.issuer_common_name, "test-ca");
        assert!(!info.is_ca);
        let two = ["a".to_string(), "b".to_string()];
        assert!(ca.issue_client("u", &two, YEAR).is_err());
    }

    #[test]
    fn serving_certificates_name_every_address_and_host() {
        let ca = Authority::generate("test-ca", YEAR).unwrap();
        let names = vec![
            "kubernetes.default.svc".to_string(),
            "10.96.0.1".to_string(),
        ];
        let leaf = ca.issue_serving("cairn-control", &names, YEAR).unwrap();
        let info = CertInfo::from_pem(&leaf.cert_pem).unwrap();
        assert_eq!(info.names, names);
    }

    #[test]
    fn a_loaded_ca_issues_like_the_one_it_was_saved_from() {
        let ca = Authority::generate("test-ca", YEAR).unwrap();
        let again = Authority::load(ca.cert_pem(), &ca.key_pem()).unwrap();
        let leaf = again.issue_client("u", &[], YEAR).unwrap();
        assert_eq!(
            CertInfo::from_pem(&leaf.cert_pem)
                .unwrap()
                .issuer_common_name,
            "test-ca"
        );
        assert!(Authority::load("not a cert", &ca.key_pem()).is_err());
    }
}
