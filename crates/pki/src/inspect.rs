//! What a certificate says: subject, issuer, names and validity, and when it is due for
//! renewal (a third of its lifetime left, as the issue asks and kubelet's rotation
//! roughly does).

use x509_parser::prelude::{FromDer, GeneralName, X509Certificate};

use crate::PkiError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertInfo {
    pub common_name: String,
    pub organizations: Vec<String>,
    pub issuer_common_name: String,
    /// Subject alternative names: DNS names and IP addresses as text.
    pub names: Vec<String>,
    /// Unix seconds.
    pub not_before: i64,
    pub not_after: i64,
    pub is_ca: bool,
    pub serial: String,
}

fn parse_err(reason: impl ToString) -> PkiError {
    PkiError::Parse {
        what: "certificate".into(),
        reason: reason.to_string(),
    }
}

impl CertInfo {
    /// The first certificate of a PEM bundle.
    pub fn from_pem(pem: &str) -> Result<CertInfo, PkiError> {
        let (_, pem) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).map_err(parse_err)?;
        CertInfo::from_der(&pem.contents)
    }

    pub fn from_der(der: &[u8]) -> Result<CertInfo, PkiError> {
        let (_, cert) = X509Certificate::from_der(der).map_err(parse_err)?;
        let text = |v: &x509_parser::x509::AttributeTypeAndValue| {
            v.as_str().map(str::to_string).unwrap_or_default()
        };
        let subject = cert.subject();
        let names = match cert.subject_alternative_name() {
            Ok(Some(san)) => san
                .value
                .general_names
                .iter()
                .filter_map(name_text)
                .collect(),
            _ => Vec::new(),
        };
        let info = CertInfo {
            common_name: subject
                .iter_common_name()
                .next()
                .map(text)
                .unwrap_or_default(),
            organizations: subject.iter_organization().map(text).collect(),
            issuer_common_name: cert
                .issuer()
                .iter_common_name()
                .next()
                .map(text)
                .unwrap_or_default(),
            names,
            not_before: cert.validity().not_before.timestamp(),
            not_after: cert.validity().not_after.timestamp(),
            is_ca: cert.is_ca(),
            serial: cert.raw_serial_as_string(),
        };
        Ok(info)
    }

    /// Whether less than a third of the lifetime is left at `now` (unix seconds).
    pub fn renewal_due(&self, now: i64) -> bool {
        let lifetime = (self.not_after - self.not_before).max(0);
        self.not_after - now < lifetime / 3
    }

    pub fn expired(&self, now: i64) -> bool {
        now > self.not_after || now < self.not_before
    }

    /// Every name in `wanted` is among the certificate's names.
    pub fn names_cover(&self, wanted: &[String]) -> bool {
        wanted.iter().all(|w| self.names.contains(w))
    }
}

/// Whether the first certificate of `cert_pem` carries a signature `ca_pem`'s key made:
/// a leaf left from another CA (one replaced, or copied in from another member) is not.
pub fn issued_by(cert_pem: &str, ca_pem: &str) -> bool {
    let der = |pem: &str| {
        x509_parser::pem::parse_x509_pem(pem.as_bytes())
            .ok()
            .map(|(_, p)| p.contents)
    };
    let (Some(cert), Some(ca)) = (der(cert_pem), der(ca_pem)) else {
        return false;
    };
    let (Ok((_, cert)), Ok((_, ca))) = (
        X509Certificate::from_der(&cert),
        X509Certificate::from_der(&ca),
    ) else {
        return false;
    };
    cert.verify_signature(Some(ca.public_key())).is_ok()
}

fn name_text(name: &GeneralName) -> Option<String> {
    match name {
        GeneralName::DNSName(d) => Some((*d).to_string()),
        GeneralName::IPAddress(b) => match b.len() {
            4 => <[u8; 4]>::try_from(*b)
                .ok()
                .map(|a| std::net::Ipv4Addr::from(a).to_string()),
            16 => <[u8; 16]>::try_from(*b)
                .ok()
                .map(|a| std::net::Ipv6Addr::from(a).to_string()),
            _ => None,
        },
        _ => None,
    }
}

/// Unix seconds now.
pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::Authority;
    use std::time::Duration;

    #[test]
    fn renewal_is_due_with_a_third_of_the_lifetime_left() {
        let info = CertInfo {
            common_name: String::new(),
            organizations: vec![],
            issuer_common_name: String::new(),
            names: vec![],
            not_before: 0,
            not_after: 300,
            is_ca: false,
            serial: String::new(),
        };
        assert!(!info.renewal_due(199));
        assert!(info.renewal_due(201));
        assert!(!info.expired(300));
        assert!(info.expired(301));
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(CertInfo::from_pem("").is_err());
        assert!(CertInfo::from_pem(
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
        )
        .is_err());
        assert!(CertInfo::from_der(&[0x30, 0x82, 0xff]).is_err());
    }

    #[test]
    fn validity_is_read_back() {
        let ca = Authority::generate("ca", Duration::from_secs(3600)).unwrap();
        let info = CertInfo::from_pem(ca.cert_pem()).unwrap();
        assert!(info.is_ca);
        let left = info.not_after - now();
        assert!((3500..=3600).contains(&left), "{left}");
    }
}
