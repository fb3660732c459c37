//! All four functions on a realistic schema: cert-manager's `Certificate` (v1), trimmed
//! descriptions, about sixty fields.

use serde_json::{json, Value};

use super::super::{apply_defaults, check_structural, prune, validate};
use super::lines;

const CERTIFICATE: &str = r#"{
  "type": "object",
  "description": "A Certificate resource should be created to ensure an up to date and signed X.509 certificate is stored in the Kubernetes Secret resource named in spec.secretName.",
  "properties": {
    "apiVersion": {"type": "string"},
    "kind": {"type": "string"},
    "metadata": {"type": "object"},
    "spec": {
      "type": "object",
      "required": ["issuerRef", "secretName"],
      "properties": {
        "additionalOutputFormats": {
          "type": "array",
          "items": {
            "type": "object",
            "required": ["type"],
            "properties": {"type": {"type": "string", "enum": ["DER", "CombinedPEM"]}}
          }
        },
        "commonName": {"type": "string", "maxLength": 64},
        "dnsNames": {"type": "array", "items": {"type": "string"}},
        "duration": {"type": "string"},
        "emailAddresses": {"type": "array", "items": {"type": "string", "format": "email"}},
        "encodeUsagesInRequest": {"type": "boolean"},
        "ipAddresses": {"type": "array", "items": {"type": "string"}},
        "isCA": {"type": "boolean"},
        "issuerRef": {
          "type": "object",
          "required": ["name"],
          "properties": {
            "group": {"type": "string"},
            "kind": {"type": "string", "default": "Issuer"},
            "name": {"type": "string", "minLength": 1}
          }
        },
        "keystores": {
          "type": "object",
          "properties": {
            "jks": {
              "type": "object",
              "required": ["create", "passwordSecretRef"],
              "properties": {
                "alias": {"type": "string"},
                "create": {"type": "boolean"},
                "passwordSecretRef": {
                  "type": "object",
                  "required": ["name"],
                  "properties": {"key": {"type": "string"}, "name": {"type": "string"}}
                }
              }
            },
            "pkcs12": {
              "type": "object",
              "required": ["create"],
              "properties": {
                "create": {"type": "boolean"},
                "profile": {"type": "string", "enum": ["LegacyRC2", "LegacyDES", "Modern2023"]},
                "passwordSecretRef": {
                  "type": "object",
                  "required": ["name"],
                  "properties": {"key": {"type": "string"}, "name": {"type": "string"}}
                }
              }
            }
          }
        },
        "literalSubject": {"type": "string"},
        "nameConstraints": {
          "type": "object",
          "properties": {
            "critical": {"type": "boolean"},
            "excluded": {
              "type": "object",
              "properties": {
                "dnsDomains": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
                "ipRanges": {"type": "array", "items": {"type": "string", "format": "cidr"}}
              }
            },
            "permitted": {
              "type": "object",
              "properties": {
                "dnsDomains": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
                "emailAddresses": {"type": "array", "items": {"type": "string"}}
              }
            }
          }
        },
        "otherNames": {
          "type": "array",
          "items": {
            "type": "object",
            "properties": {"oid": {"type": "string", "pattern": "^([0-9]+\\.)*[0-9]+$"}, "utf8Value": {"type": "string"}}
          }
        },
        "privateKey": {
          "type": "object",
          "properties": {
            "algorithm": {"type": "string", "enum": ["RSA", "ECDSA", "Ed25519"]},
            "encoding": {"type": "string", "enum": ["PKCS1", "PKCS8"], "default": "PKCS1"},
            "rotationPolicy": {"type": "string", "enum": ["Never", "Always"]},
            "size": {"type": "integer", "minimum": 0, "maximum": 8192}
          }
        },
        "renewBefore": {"type": "string"},
        "renewBeforePercentage": {"type": "integer", "format": "int32", "minimum": 1, "maximum": 99},
        "revisionHistoryLimit": {"type": "integer", "format": "int32", "minimum": 1},
        "secretName": {"type": "string", "minLength": 1},
        "secretTemplate": {
          "type": "object",
          "properties": {
            "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}, "maxProperties": 8}
          }
        },
        "subject": {
          "type": "object",
          "properties": {
            "countries": {"type": "array", "items": {"type": "string", "minLength": 2, "maxLength": 2}},
            "localities": {"type": "array", "items": {"type": "string"}},
            "organizationalUnits": {"type": "array", "items": {"type": "string"}},
            "organizations": {"type": "array", "items": {"type": "string"}, "maxItems": 4},
            "postalCodes": {"type": "array", "items": {"type": "string"}},
            "provinces": {"type": "array", "items": {"type": "string"}},
            "serialNumber": {"type": "string"},
            "streetAddresses": {"type": "array", "items": {"type": "string"}}
          }
        },
        "uris": {"type": "array", "items": {"type": "string", "format": "uri"}},
        "usages": {
          "type": "array",
          "items": {
            "type": "string",
            "enum": ["signing", "digital signature", "content commitment", "key encipherment",
                     "key agreement", "data encipherment", "cert sign", "crl sign",
                     "encipher only", "decipher only", "any", "server auth", "client auth",
                     "code signing", "email protection", "s/mime", "ipsec end system",
                     "ipsec tunnel", "ipsec user", "timestamping", "ocsp signing",
                     "microsoft sgc", "netscape sgc"]
          }
        }
      }
    },
    "status": {
      "type": "object",
      "properties": {
        "conditions": {
          "type": "array",
          "x-kubernetes-list-map-keys": ["type"],
          "x-kubernetes-list-type": "map",
          "items": {
            "type": "object",
            "required": ["status", "type"],
            "properties": {
              "lastTransitionTime": {"type": "string", "format": "date-time"},
              "message": {"type": "string"},
              "observedGeneration": {"type": "integer", "format": "int64"},
              "reason": {"type": "string"},
              "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
              "type": {"type": "string"}
            }
          }
        },
        "failedIssuanceAttempts": {"type": "integer"},
        "lastFailureTime": {"type": "string", "format": "date-time"},
        "nextPrivateKeySecretName": {"type": "string"},
        "notAfter": {"type": "string", "format": "date-time"},
        "notBefore": {"type": "string", "format": "date-time"},
        "renewalTime": {"type": "string", "format": "date-time"},
        "revision": {"type": "integer"}
      }
    }
  }
}"#;

fn schema() -> Value {
    serde_json::from_str(CERTIFICATE).unwrap()
}

fn good() -> Value {
    json!({
        "apiVersion": "cert-manager.io/v1",
        "kind": "Certificate",
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
        "spec": {
            "secretName": "web-tls",
            "commonName": "web.example.com",
            "dnsNames": ["web.example.com", "www.example.com"],
            "duration": "2160h",
            "emailAddresses": ["ops@example.com"],
            "issuerRef": {"name": "letsencrypt", "kind": "ClusterIssuer", "group": "cert-manager.io"},
            "privateKey": {"algorithm": "ECDSA", "size": 256, "rotationPolicy": "Always"},
            "usages": ["server auth", "digital signature"],
            "renewBeforePercentage": 30,
            "subject": {"organizations": ["Example"], "countries": ["NL"]},
            "uris": ["spiffe://example.com/web"],
            "nameConstraints": {"permitted": {"dnsDomains": ["example.com"]},
                                "excluded": {"ipRanges": ["10.0.0.0/8"]}},
            "keystores": {"pkcs12": {"create": true, "profile": "Modern2023",
                          "passwordSecretRef": {"name": "pw", "key": "password"}}},
            "secretTemplate": {"labels": {"team": "web"}},
            "otherNames": [{"oid": "1.3.6.1.4.1.311.20.2.3", "utf8Value": "web@example.com"}],
        },
        "status": {
            "conditions": [{"type": "Ready", "status": "True", "reason": "Ready",
                            "lastTransitionTime": "2024-05-01T10:00:00Z", "observedGeneration": 1}],
            "notAfter": "2024-07-30T10:00:00Z",
            "revision": 1,
        },
    })
}

#[test]
fn the_schema_is_structural() {
    assert_eq!(
        lines(&check_structural(
            &schema(),
            "spec.versions[0].schema.openAPIV3Schema"
        )),
        Vec::<String>::new()
    );
}

#[test]
fn a_good_certificate_passes_the_whole_pipeline() {
    let schema = schema();
    let mut obj = good();
    assert!(prune(&schema, &mut obj).is_empty());
    apply_defaults(&schema, &mut obj);
    assert_eq!(obj["spec"]["privateKey"]["encoding"], "PKCS1");
    assert_eq!(obj["spec"]["issuerRef"]["kind"], "ClusterIssuer");
    assert_eq!(lines(&validate(&schema, &obj)), Vec::<String>::new());
}

#[test]
fn unknown_fields_are_pruned_and_defaults_filled() {
    let schema = schema();
    let mut obj = json!({
        "apiVersion": "cert-manager.io/v1",
        "kind": "Certificate",
        "metadata": {"name": "x", "annotations": {"a": "b"}},
        "spec": {"secretName": "s", "issuerRef": {"name": "i", "typo": 1}, "dnsName": ["x"],
                 "privateKey": {"sise": 2048}},
        "status": {"conditions": [{"type": "Ready", "status": "True", "extra": {}}]},
        "extra": true,
    });
    assert_eq!(
        prune(&schema, &mut obj),
        vec![
            ".extra",
            ".spec.dnsName",
            ".spec.issuerRef.typo",
            ".spec.privateKey.sise",
            ".status.conditions[0].extra",
        ]
    );
    apply_defaults(&schema, &mut obj);
    assert_eq!(
        obj["spec"],
        json!({"secretName": "s", "issuerRef": {"name": "i", "kind": "Issuer"},
               "privateKey": {"encoding": "PKCS1"}})
    );
    assert_eq!(
        obj["metadata"],
        json!({"name": "x", "annotations": {"a": "b"}})
    );
    assert!(validate(&schema, &obj).is_empty());
}

#[test]
fn a_bad_certificate_gets_upstreams_errors() {
    let schema = schema();
    let mut obj = good();
    let spec = &mut obj["spec"];
    spec["secretName"] = json!("");
    spec["issuerRef"] = json!({"kind": "Issuer"});
    spec["commonName"] = json!("x".repeat(65));
    spec["emailAddresses"] = json!(["not-an-email"]);
    spec["privateKey"] = json!({"algorithm": "DSA", "size": 9000});
    spec["usages"] = json!(["server auth", "bogus"]);
    spec["renewBeforePercentage"] = json!(100);
    spec["subject"] = json!({"countries": ["NLD"], "organizations": ["a", "b", "c", "d", "e"]});
    spec["otherNames"] = json!([{"oid": "1..2"}]);
    spec["keystores"] = json!({"jks": {"create": "yes"}});
    spec["secretTemplate"] = json!({"labels": {"a": "1", "b": "2", "c": "3", "d": "4", "e": "5",
                                                "f": "6", "g": "7", "h": "8", "i": 9}});
    spec["nameConstraints"] = json!({"permitted": {"dnsDomains": ["a.com", "a.com"]},
                                     "excluded": {"ipRanges": ["10.0.0.0/40"]}});
    obj["status"]["conditions"] = json!([
        {"type": "Ready", "status": "Maybe", "lastTransitionTime": "yesterday"},
        {"type": "Ready", "status": "True"},
    ]);
    assert_eq!(
        lines(&validate(&schema, &obj)),
        vec![
            "spec.commonName: Too long: may not be more than 64 bytes",
            r#"spec.emailAddresses[0]: Invalid value: "not-an-email": spec.emailAddresses[0] in body must be of type email: "not-an-email""#,
            "spec.issuerRef.name: Required value",
            r#"spec.keystores.jks.create: Invalid value: "string": spec.keystores.jks.create in body must be of type boolean: "string""#,
            "spec.keystores.jks.passwordSecretRef: Required value",
            r#"spec.nameConstraints.excluded.ipRanges[0]: Invalid value: "10.0.0.0/40": spec.nameConstraints.excluded.ipRanges[0] in body must be of type cidr: "10.0.0.0/40""#,
            r#"spec.otherNames[0].oid: Invalid value: "1..2": spec.otherNames[0].oid in body should match '^([0-9]+\.)*[0-9]+$'"#,
            r#"spec.privateKey.algorithm: Unsupported value: "DSA": supported values: "RSA", "ECDSA", "Ed25519""#,
            "spec.privateKey.size: Invalid value: 9000: spec.privateKey.size in body should be less than or equal to 8192",
            "spec.renewBeforePercentage: Invalid value: 100: spec.renewBeforePercentage in body should be less than or equal to 99",
            r#"spec.secretName: Invalid value: "": spec.secretName in body should be at least 1 chars long"#,
            "spec.secretTemplate.labels: Too many: 9: must have at most 8 items",
            r#"spec.secretTemplate.labels.i: Invalid value: "integer": spec.secretTemplate.labels.i in body must be of type string: "integer""#,
            "spec.subject.countries[0]: Too long: may not be more than 2 bytes",
            "spec.subject.organizations: Too many: 5: must have at most 4 items",
            r#"spec.usages[1]: Unsupported value: "bogus": supported values: "signing", "digital signature", "content commitment", "key encipherment", "key agreement", "data encipherment", "cert sign", "crl sign", "encipher only", "decipher only", "any", "server auth", "client auth", "code signing", "email protection", "s/mime", "ipsec end system", "ipsec tunnel", "ipsec user", "timestamping", "ocsp signing", "microsoft sgc", "netscape sgc""#,
            r#"status.conditions[0].lastTransitionTime: Invalid value: "yesterday": status.conditions[0].lastTransitionTime in body must be of type date-time: "yesterday""#,
            r#"status.conditions[0].status: Unsupported value: "Maybe": supported values: "True", "False", "Unknown""#,
            r#"spec.nameConstraints.permitted.dnsDomains[1]: Duplicate value: "a.com""#,
            r#"status.conditions[1]: Duplicate value: map[string]interface {}{"type":"Ready"}"#,
        ]
    );
}
