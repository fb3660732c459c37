//! Certificate signing requests, as Kubernetes' CertificateSigningRequest flow uses them:
//! a node or component makes a key and a PKCS#10 request ([`generate_request`]), the
//! cluster reads and checks it ([`parse_request`]) and a signer issues the certificate
//! ([`Authority::sign_request`]).
//!
//! rcgen's subject holds one value per attribute type, so requests made here, and
//! certificates signed here, carry at most one organization (one group). Requests from
//! elsewhere with several are still read in full by [`parse_request`].

use std::net::IpAddr;
use std::time::Duration;

use rcgen::string::{Ia5String, PrintableString};
use rcgen::{
    CertificateParams, DistinguishedName, DnType, DnValue, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose, SanType, SubjectPublicKeyInfo, PKCS_ECDSA_P256_SHA256,
};
use time::OffsetDateTime;
use x509_parser::certification_request::X509CertificationRequest;
use x509_parser::der_parser::asn1_rs::Tag;
use x509_parser::prelude::{FromDer, GeneralName, ParsedExtension, X509Name};
use x509_parser::x509::AttributeTypeAndValue;

use crate::authority::{random_serial, validity, Authority};

/// Who a new request is for. At most one organization: see the module documentation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestSubject {
    pub common_name: String,
    pub organizations: Vec<String>,
    pub dns_names: Vec<String>,
    pub ip_addresses: Vec<IpAddr>,
}

/// What a verified request asks for: its subject and the subject alternative names of
/// its extensionRequest attribute.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestInfo {
    pub common_name: String,
    pub organizations: Vec<String>,
    pub dns_names: Vec<String>,
    pub ip_addresses: Vec<IpAddr>,
    pub email_addresses: Vec<String>,
    pub uris: Vec<String>,
}

/// What a signed certificate may be used for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Usage {
    DigitalSignature,
    KeyEncipherment,
    ClientAuth,
    ServerAuth,
}

/// The usage a Kubernetes CertificateSigningRequest names (`spec.usages`), if it is one
/// of ours.
pub fn usage_from_k8s(name: &str) -> Option<Usage> {
    match name {
        "digital signature" => Some(Usage::DigitalSignature),
        "key encipherment" => Some(Usage::KeyEncipherment),
        "client auth" => Some(Usage::ClientAuth),
        "server auth" => Some(Usage::ServerAuth),
        _ => None,
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CsrError {
    #[error("generating {what}: {source}")]
    Generate { what: String, source: rcgen::Error },
    #[error(
        "certificate request for {common_name}: at most one organization \
         (rcgen's subject holds one value per attribute), got {count}: {organizations}"
    )]
    TooManyOrganizations {
        common_name: String,
        count: usize,
        organizations: String,
    },
    #[error("reading certificate request: {reason}")]
    Parse { reason: String },
    #[error("certificate request signature does not verify: {reason}")]
    BadSignature { reason: String },
    #[error("signing certificate request for {common_name}: {reason}")]
    Refused { common_name: String, reason: String },
    #[error("CA certificate: {reason}")]
    Authority { reason: String },
}

fn generate_err(what: &str) -> impl Fn(rcgen::Error) -> CsrError + '_ {
    move |source| CsrError::Generate {
        what: what.to_string(),
        source,
    }
}

fn parse_err(reason: impl ToString) -> CsrError {
    CsrError::Parse {
        reason: reason.to_string(),
    }
}

fn refused(common_name: &str) -> impl Fn(String) -> CsrError + '_ {
    move |reason| CsrError::Refused {
        common_name: common_name.to_string(),
        reason,
    }
}

/// A new ECDSA P-256 key and a request for `subject`: `(private_key_pem, csr_pem)`.
pub fn generate_request(subject: &RequestSubject) -> Result<(String, String), CsrError> {
    let cn = &subject.common_name;
    if subject.organizations.len() > 1 {
        return Err(CsrError::TooManyOrganizations {
            common_name: cn.clone(),
            count: subject.organizations.len(),
            organizations: subject.organizations.join(", "),
        });
    }
    let what = format!("certificate request for {cn}");
    let mut params = CertificateParams::default();
    // rcgen's default subject is a placeholder name; the request names only what it was asked.
    params.distinguished_name = DistinguishedName::new();
    for o in &subject.organizations {
        params
            .distinguished_name
            .push(DnType::OrganizationName, o.as_str());
    }
    if !cn.is_empty() {
        params
            .distinguished_name
            .push(DnType::CommonName, cn.as_str());
    }
    for dns in &subject.dns_names {
        let dns = Ia5String::try_from(dns.as_str()).map_err(generate_err(&what))?;
        params.subject_alt_names.push(SanType::DnsName(dns));
    }
    params.subject_alt_names.extend(
        subject
            .ip_addresses
            .iter()
            .map(|ip| SanType::IpAddress(*ip)),
    );
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(generate_err(&what))?;
    let csr = params
        .serialize_request(&key)
        .map_err(generate_err(&what))?;
    let csr_pem = csr.pem().map_err(generate_err(&what))?;
    Ok((key.serialize_pem(), csr_pem))
}

/// Reads a PEM `CERTIFICATE REQUEST`, checks its self-signature and says what it asks for.
pub fn parse_request(csr_pem: &str) -> Result<RequestInfo, CsrError> {
    let der = request_der(csr_pem)?;
    let csr = verified(&der)?;
    request_info(&csr)
}

fn request_der(csr_pem: &str) -> Result<Vec<u8>, CsrError> {
    let (_, pem) = x509_parser::pem::parse_x509_pem(csr_pem.as_bytes()).map_err(parse_err)?;
    if pem.label != "CERTIFICATE REQUEST" {
        return Err(parse_err(format!(
            "a PEM {} block, not a CERTIFICATE REQUEST",
            pem.label
        )));
    }
    Ok(pem.contents)
}

fn verified(der: &[u8]) -> Result<X509CertificationRequest<'_>, CsrError> {
    let (rest, csr) = X509CertificationRequest::from_der(der).map_err(parse_err)?;
    if !rest.is_empty() {
        return Err(parse_err(format!("{} bytes after the request", rest.len())));
    }
    // The self-signature proves the requester holds the key it wants certified, and that
    // nothing changed the request on its way here.
    csr.verify_signature().map_err(|e| CsrError::BadSignature {
        reason: e.to_string(),
    })?;
    Ok(csr)
}

fn request_info(csr: &X509CertificationRequest<'_>) -> Result<RequestInfo, CsrError> {
    let subject = &csr.certification_request_info.subject;
    let mut common_names = subject.iter_common_name().map(attr_text);
    let common_name = common_names.next().transpose()?.unwrap_or_default();
    // Parsers disagree on which of several to take (Go takes the last): refuse to guess
    // whose identity is asked for.
    if common_names.next().is_some() {
        return Err(parse_err("more than one common name"));
    }
    let mut info = RequestInfo {
        common_name,
        organizations: subject
            .iter_organization()
            .map(attr_text)
            .collect::<Result<_, _>>()?,
        ..RequestInfo::default()
    };
    for ext in csr.requested_extensions().into_iter().flatten() {
        match ext {
            ParsedExtension::SubjectAlternativeName(san) => {
                for name in &san.general_names {
                    add_name(&mut info, name)?;
                }
            }
            // An unreadable extension (a SAN among them) must not silently drop out of
            // what a signer approves.
            ParsedExtension::ParseError { error } => {
                return Err(parse_err(format!("requested extension: {error}")));
            }
            _ => {}
        }
    }
    Ok(info)
}

fn attr_text(attr: &AttributeTypeAndValue<'_>) -> Result<String, CsrError> {
    attr.as_str()
        .map(str::to_string)
        .map_err(|e| parse_err(format!("subject attribute {}: {e}", attr.attr_type())))
}

fn add_name(info: &mut RequestInfo, name: &GeneralName<'_>) -> Result<(), CsrError> {
    match name {
        GeneralName::DNSName(d) => info.dns_names.push((*d).to_string()),
        GeneralName::IPAddress(b) => info.ip_addresses.push(ip_from_bytes(b)?),
        GeneralName::RFC822Name(e) => info.email_addresses.push((*e).to_string()),
        GeneralName::URI(u) => info.uris.push((*u).to_string()),
        // Other forms (otherName, directoryName, ...) are not carried: upstream's signer,
        // reading requests with Go's x509, does not see them either.
        _ => {}
    }
    Ok(())
}

fn ip_from_bytes(bytes: &[u8]) -> Result<IpAddr, CsrError> {
    if let Ok(v4) = <[u8; 4]>::try_from(bytes) {
        return Ok(IpAddr::from(v4));
    }
    if let Ok(v6) = <[u8; 16]>::try_from(bytes) {
        return Ok(IpAddr::from(v6));
    }
    Err(parse_err(format!("an IP address of {} bytes", bytes.len())))
}

impl Authority {
    /// Signs a request after checking its self-signature: the certificate has the
    /// request's subject, alternative names and public key, is not a CA, may be used for
    /// `usages` only (whatever the request itself asked) and lasts `lifetime`, backdated
    /// like every certificate this authority issues. Returns the certificate's PEM.
    pub fn sign_request(
        &self,
        csr_pem: &str,
        usages: &[Usage],
        lifetime: Duration,
    ) -> Result<String, CsrError> {
        let der = request_der(csr_pem)?;
        let csr = verified(&der)?;
        let info = request_info(&csr)?;
        let refuse = refused(&info.common_name);
        if usages.is_empty() {
            return Err(refuse("no usages asked for".into()));
        }
        check_lifetime(lifetime).map_err(&refuse)?;
        let request = &csr.certification_request_info;
        let public_key = SubjectPublicKeyInfo::from_der(request.subject_pki.raw)
            .map_err(|e| refuse(format!("public key: {e}")))?;
        let mut params = CertificateParams::default();
        params.distinguished_name = copy_subject(&request.subject).map_err(&refuse)?;
        params.subject_alt_names = alt_names(&info).map_err(|e| refuse(e.to_string()))?;
        apply_usages(&mut params, usages);
        params.is_ca = IsCa::ExplicitNoCa;
        params.use_authority_key_identifier_extension = true;
        params.serial_number = Some(random_serial());
        validity(&mut params, lifetime);
        let issuer = self.issuer().map_err(|e| CsrError::Authority {
            reason: e.to_string(),
        })?;
        let what = format!("certificate for {}", info.common_name);
        let cert = params
            .signed_by(&public_key, &issuer)
            .map_err(generate_err(&what))?;
        Ok(cert.pem())
    }
}

/// A lifetime `validity` can add to now without overflowing (it would panic).
fn check_lifetime(lifetime: Duration) -> Result<(), String> {
    if lifetime.is_zero() {
        return Err("a zero lifetime".into());
    }
    time::Duration::try_from(lifetime)
        .ok()
        .and_then(|d| OffsetDateTime::now_utc().checked_add(d))
        .map(|_| ())
        .ok_or_else(|| format!("a lifetime of {} s is too long", lifetime.as_secs()))
}

/// The request's subject, attribute by attribute, string types kept. rcgen holds one
/// value per attribute type, so a subject repeating one (two organizations, say) is
/// refused rather than signed with a value silently dropped.
fn copy_subject(subject: &X509Name<'_>) -> Result<DistinguishedName, String> {
    let mut dn = DistinguishedName::new();
    for rdn in subject.iter() {
        let mut attrs = rdn.iter();
        let (Some(attr), None) = (attrs.next(), attrs.next()) else {
            return Err("a subject with a multi-valued (or empty) name component".into());
        };
        let oid = attr.attr_type();
        let arcs: Vec<u64> = oid
            .iter()
            .ok_or_else(|| format!("subject attribute type {oid} out of range"))?
            .collect();
        let ty = DnType::from_oid(&arcs);
        if dn.get(&ty).is_some() {
            return Err(format!(
                "more than one subject attribute {oid} (at most one per type)"
            ));
        }
        dn.push(ty, dn_value(attr)?);
    }
    Ok(dn)
}

fn dn_value(attr: &AttributeTypeAndValue<'_>) -> Result<DnValue, String> {
    let oid = attr.attr_type();
    let text = attr
        .as_str()
        .map_err(|e| format!("subject attribute {oid}: {e}"))?;
    let bad = |e: rcgen::Error| format!("subject attribute {oid}: {e}");
    Ok(match attr.attr_value().header.tag() {
        Tag::PrintableString => {
            DnValue::PrintableString(PrintableString::try_from(text).map_err(bad)?)
        }
        Tag::Ia5String => DnValue::Ia5String(Ia5String::try_from(text).map_err(bad)?),
        // UTF8String, and NumericString (a subset of it).
        _ => DnValue::Utf8String(text.to_string()),
    })
}

fn alt_names(info: &RequestInfo) -> Result<Vec<SanType>, rcgen::Error> {
    let ia5 = |s: &String| Ia5String::try_from(s.as_str());
    let mut names = Vec::new();
    for dns in &info.dns_names {
        names.push(SanType::DnsName(ia5(dns)?));
    }
    names.extend(info.ip_addresses.iter().map(|ip| SanType::IpAddress(*ip)));
    for email in &info.email_addresses {
        names.push(SanType::Rfc822Name(ia5(email)?));
    }
    for uri in &info.uris {
        names.push(SanType::URI(ia5(uri)?));
    }
    Ok(names)
}

/// Key usages in the key usage extension, client and server auth in the extended one.
fn apply_usages(params: &mut CertificateParams, usages: &[Usage]) {
    for usage in usages {
        let key_usage = match usage {
            Usage::DigitalSignature => KeyUsagePurpose::DigitalSignature,
            Usage::KeyEncipherment => KeyUsagePurpose::KeyEncipherment,
            Usage::ClientAuth => {
                params.insert_extended_key_usage(ExtendedKeyUsagePurpose::ClientAuth);
                continue;
            }
            Usage::ServerAuth => {
                params.insert_extended_key_usage(ExtendedKeyUsagePurpose::ServerAuth);
                continue;
            }
        };
        if !params.key_usages.contains(&key_usage) {
            params.key_usages.push(key_usage);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::inspect::{now, CertInfo};
    use base64::Engine;
    use x509_parser::prelude::X509Certificate;

    const HOUR: Duration = Duration::from_secs(3600);

    fn node_subject() -> RequestSubject {
        RequestSubject {
            common_name: "system:node:node-1".into(),
            organizations: vec!["system:nodes".into()],
            dns_names: vec!["node-1".into(), "node-1.cluster.local".into()],
            ip_addresses: vec!["10.0.0.5".parse().unwrap(), "fd00::5".parse().unwrap()],
        }
    }

    fn der_of(pem: &str) -> Vec<u8> {
        x509_parser::pem::parse_x509_pem(pem.as_bytes())
            .unwrap()
            .1
            .contents
    }

    fn pem_of(der: &[u8]) -> String {
        let b64 = base64::engine::general_purpose::STANDARD.encode(der);
        format!("-----BEGIN CERTIFICATE REQUEST-----\n{b64}\n-----END CERTIFICATE REQUEST-----\n")
    }

    #[test]
    fn a_generated_request_reads_back() {
        let subject = node_subject();
        let (key_pem, csr_pem) = generate_request(&subject).unwrap();
        let key = KeyPair::from_pem(&key_pem).unwrap();
        assert_eq!(key.algorithm(), &PKCS_ECDSA_P256_SHA256);
        let info = parse_request(&csr_pem).unwrap();
        assert_eq!(
            info,
            RequestInfo {
                common_name: subject.common_name,
                organizations: subject.organizations,
                dns_names: subject.dns_names,
                ip_addresses: subject.ip_addresses,
                email_addresses: vec![],
                uris: vec![],
            }
        );
    }

    #[test]
    fn requests_with_two_organizations_are_not_made() {
        let mut subject = node_subject();
        subject.organizations.push("system:authenticated".into());
        let err = generate_request(&subject).unwrap_err();
        assert!(
            matches!(err, CsrError::TooManyOrganizations { count: 2, .. }),
            "{err}"
        );
    }

    #[test]
    fn a_tampered_request_is_rejected() {
        let (_, csr_pem) = generate_request(&node_subject()).unwrap();
        let der = der_of(&csr_pem);
        // Renaming the node inside the signed part: still well-formed, no longer signed.
        let at = der.windows(6).position(|w| w == b"node-1").unwrap();
        let mut renamed = der.clone();
        renamed[at + 5] = b'2';
        let err = parse_request(&pem_of(&renamed)).unwrap_err();
        assert!(matches!(err, CsrError::BadSignature { .. }), "{err}");
        // Any single flipped byte of the signed part is an error. Outside it, x509-parser
        // tolerates some misencodings (an OID's tag) that leave the request authentic;
        // those must merely not panic.
        let (_, csr) = X509CertificationRequest::from_der(&der).unwrap();
        let signed = csr.certification_request_info.raw;
        let start = signed.as_ptr() as usize - der.as_ptr() as usize;
        for i in 0..der.len() {
            let mut flipped = der.clone();
            flipped[i] ^= 0x01;
            let parsed = parse_request(&pem_of(&flipped));
            if (start..start + signed.len()).contains(&i) {
                assert!(parsed.is_err(), "byte {i}");
            }
        }
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        let ca = Authority::generate("ca", HOUR).unwrap();
        let garbage = [
            "",
            "not pem at all",
            "-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n",
            "-----BEGIN CERTIFICATE REQUEST-----\n!!!!\n-----END CERTIFICATE REQUEST-----\n",
            ca.cert_pem(),
        ];
        for pem in garbage {
            assert!(
                matches!(parse_request(pem), Err(CsrError::Parse { .. })),
                "{pem:?}"
            );
            assert!(ca.sign_request(pem, &[Usage::ClientAuth], HOUR).is_err());
        }
        let err = parse_request(ca.cert_pem()).unwrap_err().to_string();
        assert!(err.contains("not a CERTIFICATE REQUEST"), "{err}");
    }

    #[test]
    fn a_signed_request_chains_to_the_authority_with_its_names() {
        let ca = Authority::generate("cluster-ca", Duration::from_secs(86400)).unwrap();
        let (_, csr_pem) = generate_request(&node_subject()).unwrap();
        let usages = [
            Usage::DigitalSignature,
            Usage::KeyEncipherment,
            Usage::ClientAuth,
        ];
        let cert_pem = ca.sign_request(&csr_pem, &usages, HOUR).unwrap();

        let info = CertInfo::from_pem(&cert_pem).unwrap();
        assert_eq!(info.common_name, "system:node:node-1");
        assert_eq!(info.organizations, vec!["system:nodes".to_string()]);
        assert_eq!(info.issuer_common_name, "cluster-ca");
        assert_eq!(
            info.names,
            ["node-1", "node-1.cluster.local", "10.0.0.5", "fd00::5"]
        );
        assert!(!info.is_ca);
        // An hour from now, backdated a tenth of it, at most a minute.
        assert_eq!(info.not_after - info.not_before, 3600 + 60);
        assert!((3590..=3600).contains(&(info.not_after - now())));

        let ca_der = der_of(ca.cert_pem());
        let (_, ca_cert) = X509Certificate::from_der(&ca_der).unwrap();
        let cert_der = der_of(&cert_pem);
        let (_, cert) = X509Certificate::from_der(&cert_der).unwrap();
        cert.verify_signature(Some(ca_cert.public_key())).unwrap();
        let other = Authority::generate("other-ca", HOUR).unwrap();
        let other_der = der_of(other.cert_pem());
        let (_, other_cert) = X509Certificate::from_der(&other_der).unwrap();
        assert!(cert
            .verify_signature(Some(other_cert.public_key()))
            .is_err());

        let csr_der = der_of(&csr_pem);
        let (_, csr) = X509CertificationRequest::from_der(&csr_der).unwrap();
        assert_eq!(
            cert.public_key().raw,
            csr.certification_request_info.subject_pki.raw
        );
        let eku = cert.extended_key_usage().unwrap().unwrap().value;
        assert!(eku.client_auth && !eku.server_auth);
        let ku = cert.key_usage().unwrap().unwrap().value;
        assert!(ku.digital_signature() && ku.key_encipherment() && !ku.key_cert_sign());
        let bc = cert.basic_constraints().unwrap().unwrap().value;
        assert!(!bc.ca);
        assert!(cert.tbs_certificate.extensions().iter().any(|e| {
            matches!(
                e.parsed_extension(),
                ParsedExtension::AuthorityKeyIdentifier(_)
            )
        }));
    }

    #[test]
    fn serving_requests_keep_every_kind_of_name() {
        let ca = Authority::generate("ca", HOUR).unwrap();
        let mut params = CertificateParams::default();
        params.distinguished_name = DistinguishedName::new();
        params.distinguished_name.push(
            DnType::CommonName,
            DnValue::PrintableString(PrintableString::try_from("web").unwrap()),
        );
        params.subject_alt_names = vec![
            SanType::DnsName(Ia5String::try_from("web.example").unwrap()),
            SanType::Rfc822Name(Ia5String::try_from("ops@example.com").unwrap()),
            SanType::URI(Ia5String::try_from("spiffe://cluster/web").unwrap()),
        ];
        let key = KeyPair::generate().unwrap();
        let csr_pem = params.serialize_request(&key).unwrap().pem().unwrap();
        let cert_pem = ca
            .sign_request(&csr_pem, &[Usage::ServerAuth], Duration::from_secs(300))
            .unwrap();
        let cert_der = der_of(&cert_pem);
        let (_, cert) = X509Certificate::from_der(&cert_der).unwrap();
        let eku = cert.extended_key_usage().unwrap().unwrap().value;
        assert!(eku.server_auth && !eku.client_auth);
        // Only usages asked for: no key usage extension at all.
        assert!(cert.key_usage().unwrap().is_none());
        let names = &cert.subject_alternative_name().unwrap().unwrap().value;
        assert_eq!(
            names.general_names,
            [
                GeneralName::DNSName("web.example"),
                GeneralName::RFC822Name("ops@example.com"),
                GeneralName::URI("spiffe://cluster/web"),
            ]
        );
        let info = CertInfo::from_pem(&cert_pem).unwrap();
        assert_eq!(info.common_name, "web");
        // A short lifetime is backdated a tenth of it.
        assert_eq!(info.not_after - info.not_before, 330);
    }

    #[test]
    fn two_organizations_are_read_but_not_signed() {
        let ca = Authority::generate("ca", HOUR).unwrap();
        let mut params = CertificateParams::default();
        params.distinguished_name = DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, "u");
        params
            .distinguished_name
            .push(DnType::OrganizationName, "a");
        // The same attribute (O) under another rcgen key: the only way to make rcgen write two.
        params
            .distinguished_name
            .push(DnType::CustomDnType(vec![2, 5, 4, 10]), "b");
        let key = KeyPair::generate().unwrap();
        let csr_pem = params.serialize_request(&key).unwrap().pem().unwrap();
        assert_eq!(parse_request(&csr_pem).unwrap().organizations, ["a", "b"]);
        let err = ca
            .sign_request(&csr_pem, &[Usage::ClientAuth], HOUR)
            .unwrap_err();
        assert!(matches!(err, CsrError::Refused { .. }), "{err}");
    }

    #[test]
    fn signing_needs_usages_and_a_sane_lifetime() {
        let ca = Authority::generate("ca", HOUR).unwrap();
        let (_, csr_pem) = generate_request(&node_subject()).unwrap();
        let client = [Usage::ClientAuth];
        for (usages, lifetime) in [
            (&[][..], HOUR),
            (&client[..], Duration::ZERO),
            (&client[..], Duration::MAX),
            (&client[..], Duration::from_secs(20_000 * 365 * 86400)),
        ] {
            let err = ca.sign_request(&csr_pem, usages, lifetime).unwrap_err();
            assert!(matches!(err, CsrError::Refused { .. }), "{err}");
        }
    }

    #[test]
    fn kubernetes_usage_names() {
        assert_eq!(
            usage_from_k8s("digital signature"),
            Some(Usage::DigitalSignature)
        );
        assert_eq!(
            usage_from_k8s("key encipherment"),
            Some(Usage::KeyEncipherment)
        );
        assert_eq!(usage_from_k8s("client auth"), Some(Usage::ClientAuth));
        assert_eq!(usage_from_k8s("server auth"), Some(Usage::ServerAuth));
        assert_eq!(usage_from_k8s("code signing"), None);
        assert_eq!(usage_from_k8s("Client Auth"), None);
    }
}
