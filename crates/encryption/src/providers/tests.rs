#![allow(clippy::unwrap_used)]

use super::*;

fn keyed(kind: &'static str, name: &str, cipher: Box<dyn Cipher>) -> Provider {
    Provider::Keys {
        kind,
        keys: vec![NamedKey {
            name: name.into(),
            cipher,
        }],
    }
}

fn each_provider() -> Vec<Provider> {
    vec![
        keyed("aesgcm", "k", Box::new(AesGcm::new(&[1; 16]).unwrap())),
        keyed("aesgcm", "k", Box::new(AesGcm::new(&[1; 24]).unwrap())),
        keyed("aesgcm", "k", Box::new(AesGcm::new(&[1; 32]).unwrap())),
        keyed("aescbc", "k", Box::new(AesCbc::new(&[2; 32]).unwrap())),
        keyed("aescbc", "k", Box::new(AesCbc::new(&[2; 16]).unwrap())),
        keyed(
            "secretbox",
            "k",
            Box::new(Secretbox::new(&[3; 32]).unwrap()),
        ),
    ]
}

#[test]
fn every_provider_round_trips_with_upstreams_prefix() {
    for p in each_provider() {
        let Provider::Keys { kind, .. } = &p else {
            unreachable!()
        };
        let kind = *kind;
        let t = Transformer::new(vec![p]);
        for plaintext in [&b""[..], b"x", b"sixteen bytes!!!", &[7u8; 1000]] {
            let stored = t.write("/registry/core/secrets/ns/s", plaintext).unwrap();
            let prefix = format!("k8s:enc:{kind}:v1:k:");
            assert!(stored.starts_with(prefix.as_bytes()), "{kind}");
            // Short plaintexts may turn up in random bytes by chance: only the long ones.
            if plaintext.len() >= 16 {
                assert!(
                    !stored.windows(plaintext.len()).any(|w| w == plaintext),
                    "{kind}"
                );
            }
            let read = t.read("/registry/core/secrets/ns/s", &stored).unwrap();
            assert_eq!(read, plaintext, "{kind}");
            // Two writes of the same value differ (fresh nonce or IV).
            assert_ne!(
                stored,
                t.write("/registry/core/secrets/ns/s", plaintext).unwrap()
            );
        }
    }
}

#[test]
fn aesgcm_binds_the_storage_key_and_tampering_fails() {
    let t = Transformer::new(vec![keyed(
        "aesgcm",
        "k",
        Box::new(AesGcm::new(&[1; 32]).unwrap()),
    )]);
    let stored = t.write("/registry/core/secrets/ns/a", b"value").unwrap();
    let moved = t.read("/registry/core/secrets/ns/b", &stored).unwrap_err();
    assert!(matches!(moved, TransformError::Cipher { .. }), "{moved}");
    let sb = Transformer::new(vec![keyed(
        "secretbox",
        "k",
        Box::new(Secretbox::new(&[3; 32]).unwrap()),
    )]);
    let mut boxed = sb.write("/k", b"value").unwrap();
    let last = boxed.len() - 1;
    boxed[last] ^= 1;
    assert!(sb.read("/k", &boxed).is_err());
    assert!(AesGcm::new(&[0; 20]).is_err());
    assert!(Secretbox::new(&[0; 16]).is_err());
    assert!(AesCbc::new(&[0; 31]).is_err());
}

#[test]
fn rotation_reads_old_keys_and_identity_reads_plain_data() {
    let old = Transformer::new(vec![keyed(
        "secretbox",
        "key1",
        Box::new(Secretbox::new(&[1; 32]).unwrap()),
    )]);
    let stored_old = old.write("/k", b"old").unwrap();
    let rotated = Transformer::new(vec![
        Provider::Keys {
            kind: "secretbox",
            keys: vec![
                NamedKey {
                    name: "key2".into(),
                    cipher: Box::new(Secretbox::new(&[2; 32]).unwrap()),
                },
                NamedKey {
                    name: "key1".into(),
                    cipher: Box::new(Secretbox::new(&[1; 32]).unwrap()),
                },
            ],
        },
        Provider::Identity,
    ]);
    assert_eq!(rotated.read("/k", &stored_old).unwrap(), b"old");
    let stored_new = rotated.write("/k", b"new").unwrap();
    assert!(stored_new.starts_with(b"k8s:enc:secretbox:v1:key2:"));
    assert_eq!(
        rotated.read("/k", b"{\"plain\":1}").unwrap(),
        b"{\"plain\":1}"
    );
    // Without the old key, or without identity: upstream's errors.
    assert_eq!(
        old.read("/k", b"plain").unwrap_err(),
        TransformError::NoMatchingKey
    );
    let identity_first = Transformer::new(vec![Provider::Identity]);
    assert_eq!(
        identity_first.read("/k", &stored_new).unwrap_err(),
        TransformError::IdentityReadEncrypted
    );
    assert_eq!(identity_first.write("/k", b"x").unwrap(), b"x");
}
