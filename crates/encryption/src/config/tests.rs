#![allow(clippy::unwrap_used)]

use super::*;

const KEY32: &str = "c2VjcmV0IGlzIHNlY3VyZSwgSSB0aGluayBzbywgMzI="; // 32 bytes

fn doc(resources: &str, providers: &str) -> String {
    format!(
        "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: {resources}\n  providers:\n{providers}"
    )
}

#[test]
fn resources_pick_the_first_rule_that_names_them() {
    let text = format!(
        "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: [secrets, deployments.apps]\n  providers:\n  - aesgcm:\n      keys: [{{name: a, secret: {KEY32}}}]\n- resources: ['*.']\n  providers:\n  - aescbc:\n      keys: [{{name: b, secret: {KEY32}}}]\n- resources: ['*.*']\n  providers:\n  - identity: {{}}\n"
    );
    let c = EncryptionConfig::parse(&text, "f").unwrap();
    let first = |key: &str| {
        c.transformer_for(key)
            .map(|t| String::from_utf8_lossy(&t.write(key, b"x").unwrap()).to_string())
    };
    assert!(first("/registry/core/secrets/ns/s")
        .unwrap()
        .starts_with("k8s:enc:aesgcm:v1:a:"));
    assert!(first("/registry/apps/deployments/ns/d")
        .unwrap()
        .starts_with("k8s:enc:aesgcm:v1:a:"));
    assert!(first("/registry/core/configmaps/ns/c")
        .unwrap()
        .starts_with("k8s:enc:aescbc:v1:b:"));
    assert_eq!(first("/registry/batch/jobs/ns/j").unwrap(), "x");
    assert!(first("/other/key").is_none());
}

#[test]
fn bad_documents_get_clear_errors() {
    let cases = [
        ("kind: Nope\napiVersion: v1\n".to_string(), "expected kind EncryptionConfiguration"),
        (doc("[secrets]", "  - kms: {name: x}\n"), "kms providers are not supported"),
        (doc("[secrets]", "  - aesgcm: {keys: [{name: a, secret: '!!'}]}\n"), "secret is not base64"),
        (doc("[secrets]", "  - aesgcm: {keys: [{name: a, secret: YWJj}]}\n"), "key must be 16, 24 or 32 bytes, not 3"),
        (doc("[secrets]", "  - secretbox: {keys: []}\n"), "at least one key is required"),
        (doc("[secrets]", &format!("  - secretbox: {{keys: [{{name: a, secret: {KEY32}}}, {{name: a, secret: {KEY32}}}]}}\n")), "appears twice"),
        (doc("[secrets]", "  - identity: {}\n    aescbc: {keys: []}\n"), "exactly one provider"),
        (doc("[]", "  - identity: {}\n"), "must not be empty"),
    ];
    for (text, want) in cases {
        let err = EncryptionConfig::parse(&text, "/etc/enc.yaml")
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains(want), "{err} (wanted {want})");
        assert!(
            err.starts_with("encryption configuration /etc/enc.yaml: "),
            "{err}"
        );
    }
}

#[test]
fn the_default_encrypts_secrets_with_a_fresh_secretbox_key() {
    let a = EncryptionConfig::default_document();
    assert_ne!(a, EncryptionConfig::default_document());
    let c = EncryptionConfig::parse(&a, "default").unwrap();
    let t = c.transformer_for("/registry/core/secrets/ns/s").unwrap();
    let stored = t.write("/registry/core/secrets/ns/s", b"v").unwrap();
    assert!(stored.starts_with(b"k8s:enc:secretbox:v1:key1:"));
    assert_eq!(
        t.read("/registry/core/secrets/ns/s", b"plain").unwrap(),
        b"plain"
    );
    assert!(c
        .transformer_for("/registry/core/configmaps/ns/c")
        .is_none());
}

#[test]
fn identity_may_be_written_without_braces() {
    let text = doc("[secrets]", "  - identity:\n");
    let c = EncryptionConfig::parse(&text, "f").unwrap();
    let t = c.transformer_for("/registry/core/secrets/ns/s").unwrap();
    assert_eq!(t.write("/registry/core/secrets/ns/s", b"x").unwrap(), b"x");
}
