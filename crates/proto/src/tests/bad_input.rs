//! Bodies that must be refused with a clear error, never a panic.

use super::*;

#[test]
fn body_without_magic() {
    assert!(matches!(
        decode_object(br#"{"kind":"Namespace"}"#),
        Err(ProtoError::MissingMagic)
    ));
    assert!(matches!(decode_object(b""), Err(ProtoError::MissingMagic)));
    assert!(matches!(
        decode_object(b"k8s"),
        Err(ProtoError::MissingMagic)
    ));
    // the raw object message without its envelope
    let raw = create_deployment().encode_to_vec();
    assert!(matches!(decode_object(&raw), Err(ProtoError::MissingMagic)));
}

#[test]
fn truncated_and_garbage_bodies_never_panic() {
    let body = envelope("apps/v1", "Deployment", &create_deployment());
    let mut errors = 0;
    for len in 0..body.len() {
        if decode_object(&body[..len]).is_err() {
            errors += 1;
        }
    }
    // Cutting at a field boundary of the envelope may leave a valid (smaller) message; all
    // other cuts must be refused.
    assert!(errors > body.len() - 10, "{errors} of {}", body.len());

    // every single-byte corruption
    for i in MAGIC.len()..body.len() {
        for b in [0x00, 0xff, 0x80, 0x0a, 0x12] {
            let mut bad = body.clone();
            bad[i] = b;
            let _ = decode_object(&bad);
        }
    }

    // pseudo-random garbage after the magic
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    for len in [1usize, 2, 3, 7, 16, 64, 300, 4096] {
        for _ in 0..200 {
            let mut bad = MAGIC.to_vec();
            for _ in 0..len {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                bad.push(state.to_le_bytes()[0]);
            }
            let _ = decode_object(&bad);
        }
    }

    // garbage inside a well-formed envelope, for every supported kind
    for (api_version, kind) in SUPPORTED_KINDS {
        let api_version = if *api_version == "*" {
            "v1"
        } else {
            api_version
        };
        for len in [1usize, 5, 33, 200] {
            for _ in 0..50 {
                let mut raw = Vec::new();
                for _ in 0..len {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    raw.push(state.to_le_bytes()[1]);
                }
                let _ = decode_object(&envelope_raw(api_version, kind, raw));
            }
        }
    }

    let truncated = envelope_raw("v1", "Namespace", vec![0x0a, 0x05, 0x0a]);
    let err = decode_object(&truncated).unwrap_err();
    assert!(
        matches!(
            err,
            ProtoError::Decode {
                message: "Namespace",
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn deeply_nested_input_is_refused() {
    // 10 000 nested length-delimited field-1 messages: prost's recursion limit stops it.
    let mut raw = Vec::new();
    for _ in 0..10_000 {
        let mut outer = vec![0x0a];
        let mut len = raw.len();
        loop {
            let byte = (len & 0x7f) as u8;
            len >>= 7;
            if len == 0 {
                outer.push(byte);
                break;
            }
            outer.push(byte | 0x80);
        }
        outer.extend_from_slice(&raw);
        raw = outer;
    }
    assert!(decode_object(&envelope_raw("v1", "Pod", raw)).is_err());
}

#[test]
fn unsupported_kind() {
    let err = decode_object(&envelope(
        "apps/v1",
        "ControllerRevision",
        &create_deployment(),
    ))
    .unwrap_err();
    assert!(
        matches!(&err, ProtoError::UnsupportedKind { api_version, kind } if api_version == "apps/v1" && kind == "ControllerRevision"),
        "{err}"
    );
    assert!(err.to_string().contains("send the object as JSON"));
    // right kind, wrong group
    let err = decode_object(&envelope("v1", "Deployment", &create_deployment())).unwrap_err();
    assert!(matches!(err, ProtoError::UnsupportedKind { .. }), "{err}");
}

#[test]
fn invalid_envelopes() {
    let mut unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: s("v1"),
            kind: s("Namespace"),
        }),
        raw: Some(Vec::new()),
        content_encoding: s("gzip"),
        content_type: s(""),
    };
    let body = |u: &Unknown| [MAGIC.to_vec(), u.encode_to_vec()].concat();
    assert!(matches!(
        decode_object(&body(&unknown)),
        Err(ProtoError::UnsupportedEncoding {
            field: "contentEncoding",
            ..
        })
    ));
    unknown.content_encoding = None;
    unknown.content_type = s("application/json");
    assert!(matches!(
        decode_object(&body(&unknown)),
        Err(ProtoError::UnsupportedEncoding {
            field: "contentType",
            ..
        })
    ));
    unknown.content_type = s("application/vnd.kubernetes.protobuf");
    assert_eq!(
        decode_object(&body(&unknown)).unwrap(),
        json!({"kind": "Namespace", "apiVersion": "v1"})
    );
    unknown.type_meta = None;
    assert!(matches!(
        decode_object(&body(&unknown)),
        Err(ProtoError::InvalidEnvelope(_))
    ));
    unknown.type_meta = Some(TypeMeta {
        api_version: s("v1"),
        kind: s(""),
    });
    assert!(matches!(
        decode_object(&body(&unknown)),
        Err(ProtoError::InvalidEnvelope(_))
    ));
    assert!(matches!(
        decode_object(b"k8s\0\xff\xff"),
        Err(ProtoError::Decode {
            message: "runtime.Unknown",
            ..
        })
    ));
}

/// Appends a protobuf field (tag, length-delimited value) to an encoded message.
fn with_unknown_field(mut encoded: Vec<u8>, tag: u32, value: &[u8]) -> Vec<u8> {
    prost::encoding::encode_key(
        tag,
        prost::encoding::WireType::LengthDelimited,
        &mut encoded,
    );
    prost::encoding::encode_varint(value.len() as u64, &mut encoded);
    encoded.extend_from_slice(value);
    encoded
}

#[test]
fn unconverted_field_is_refused_with_its_path() {
    // A client newer than the crate sets field 999 of the second container.
    let labels = [("app", "web")];
    let mut nginx = container("nginx", "nginx");
    nginx.ports = vec![container_port(80)];
    let mut pod_spec_bytes = pod_spec(vec![nginx]).encode_to_vec();
    let sidecar = with_unknown_field(container("sidecar", "envoy").encode_to_vec(), 999, b"new");
    prost::encoding::bytes::encode(2, &sidecar, &mut pod_spec_bytes);
    let mut template = core::PodTemplateSpec {
        metadata: Some(meta("", &labels)),
        spec: None,
    }
    .encode_to_vec();
    prost::encoding::bytes::encode(2, &pod_spec_bytes, &mut template);
    let mut spec = apps::DeploymentSpec {
        template: None,
        ..create_deployment().spec.unwrap()
    }
    .encode_to_vec();
    prost::encoding::bytes::encode(3, &template, &mut spec);
    let mut raw = apps::Deployment {
        metadata: Some(meta("web", &labels)),
        spec: None,
        status: None,
    }
    .encode_to_vec();
    prost::encoding::bytes::encode(2, &spec, &mut raw);

    // sanity: prost alone accepts the body and drops the field
    let decoded = apps::Deployment::decode(raw.as_slice()).unwrap();
    let containers = &decoded
        .spec
        .unwrap()
        .template
        .unwrap()
        .spec
        .unwrap()
        .containers;
    assert_eq!(containers.len(), 2);

    let err = decode_object(&envelope_raw("apps/v1", "Deployment", raw)).unwrap_err();
    match &err {
        ProtoError::UnsupportedField { path } => {
            assert_eq!(
                path,
                "spec.template.spec.containers[1].(protobuf field 999)"
            );
        }
        other => panic!("unexpected {other}"),
    }
    assert_eq!(
        err.to_string(),
        "field spec.template.spec.containers[1].(protobuf field 999) of the protobuf object \
         cannot be converted to JSON, send the object as JSON instead"
    );
}

#[test]
fn unknown_fields_at_top_level_inline_and_in_maps() {
    // top level
    let raw = with_unknown_field(core::Namespace::default().encode_to_vec(), 77, b"x");
    let err = decode_object(&envelope_raw("v1", "Namespace", raw)).unwrap_err();
    assert!(
        matches!(&err, ProtoError::UnsupportedField { path } if path == "(protobuf field 77)"),
        "{err}"
    );

    // an unknown field holding the zero value is tolerated (Go always sends value fields)
    let mut raw = core::Namespace {
        metadata: Some(meta("ns", &[])),
        ..Default::default()
    }
    .encode_to_vec();
    prost::encoding::encode_key(78, prost::encoding::WireType::Varint, &mut raw);
    prost::encoding::encode_varint(0, &mut raw);
    let raw = with_unknown_field(raw, 79, b"");
    assert_eq!(
        decode_object(&envelope_raw("v1", "Namespace", raw)).unwrap(),
        json!({"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": "ns"}})
    );

    // inside an inlined message (Volume.volumeSource.emptyDir): the JSON path has no
    // volumeSource segment
    let empty_dir = with_unknown_field(Vec::new(), 50, b"y");
    let mut volume_source = Vec::new();
    prost::encoding::bytes::encode(2, &empty_dir, &mut volume_source);
    let mut volume = core::Volume {
        name: s("v"),
        volume_source: None,
    }
    .encode_to_vec();
    prost::encoding::bytes::encode(2, &volume_source, &mut volume);
    let mut pod_spec = Vec::new();
    prost::encoding::bytes::encode(1, &volume, &mut pod_spec);
    let mut pod = Vec::new();
    prost::encoding::bytes::encode(2, &pod_spec, &mut pod);
    let err = decode_object(&envelope_raw("v1", "Pod", pod)).unwrap_err();
    assert!(
        matches!(&err, ProtoError::UnsupportedField { path } if path == "spec.volumes[0].emptyDir.(protobuf field 50)"),
        "{err}"
    );

    // inside a map value (ResourceList entry)
    let qty = with_unknown_field(quantity("1").encode_to_vec(), 9, b"z");
    let mut entry = Vec::new();
    prost::encoding::string::encode(1, &"cpu".to_owned(), &mut entry);
    prost::encoding::bytes::encode(2, &qty, &mut entry);
    let mut status = Vec::new();
    prost::encoding::bytes::encode(1, &entry, &mut status);
    let mut node = Vec::new();
    prost::encoding::bytes::encode(3, &status, &mut node);
    let err = decode_object(&envelope_raw("v1", "Node", node)).unwrap_err();
    assert!(
        matches!(&err, ProtoError::UnsupportedField { path } if path == "status.capacity[cpu].(protobuf field 9)"),
        "{err}"
    );
}

#[test]
fn invalid_values_are_reported_with_their_path() {
    let mut d = create_deployment();
    d.spec.as_mut().unwrap().strategy = Some(apps::DeploymentStrategy {
        r#type: s("RollingUpdate"),
        rolling_update: Some(apps::RollingUpdateDeployment {
            max_unavailable: Some(IntOrString {
                r#type: Some(5),
                int_val: None,
                str_val: None,
            }),
            max_surge: None,
        }),
    });
    let err = decode_object(&envelope("apps/v1", "Deployment", &d)).unwrap_err();
    match err {
        ProtoError::InvalidField { path, reason } => {
            assert_eq!(path, "spec.strategy.rollingUpdate.maxUnavailable");
            assert!(reason.contains("unknown type 5"), "{reason}");
        }
        other => panic!("unexpected {other}"),
    }

    let mut pod = core::Pod {
        metadata: Some(meta("p", &[])),
        spec: Some(pod_spec(vec![container("c", "i")])),
        status: None,
    };
    pod.spec.as_mut().unwrap().containers[0].resources = Some(core::ResourceRequirements {
        limits: [("memory".to_owned(), Quantity { string: s("") })]
            .into_iter()
            .collect(),
        ..Default::default()
    });
    let err = decode_object(&envelope("v1", "Pod", &pod)).unwrap_err();
    assert!(
        matches!(&err, ProtoError::InvalidField { path, .. } if path == "spec.containers[0].resources.limits[memory]"),
        "{err}"
    );

    let mut cm = core::ConfigMap {
        metadata: Some(meta("c", &[])),
        ..Default::default()
    };
    cm.metadata.as_mut().unwrap().creation_timestamp = Some(meta::Time {
        seconds: Some(-70_000_000_000),
        nanos: None,
    });
    let err = decode_object(&envelope("v1", "ConfigMap", &cm)).unwrap_err();
    assert!(
        matches!(&err, ProtoError::InvalidField { path, .. } if path == "metadata.creationTimestamp"),
        "{err}"
    );
}

#[test]
fn invalid_utf8_is_a_decode_error() {
    let mut raw = Vec::new();
    let mut md = Vec::new();
    prost::encoding::bytes::encode(1, &vec![0xffu8, 0xfe], &mut md);
    prost::encoding::bytes::encode(1, &md, &mut raw);
    let err = decode_object(&envelope_raw("v1", "ConfigMap", raw)).unwrap_err();
    assert!(
        matches!(
            err,
            ProtoError::Decode {
                message: "ConfigMap",
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn content_type_helper_and_kind_list() {
    assert!(is_protobuf("application/vnd.kubernetes.protobuf"));
    assert!(is_protobuf(
        "Application/VND.Kubernetes.Protobuf; charset=utf-8"
    ));
    assert!(is_protobuf(
        "application/vnd.kubernetes.protobuf;stream=watch"
    ));
    assert!(!is_protobuf("application/json"));
    assert!(SUPPORTED_KINDS.contains(&("apps/v1", "Deployment")));
    assert!(SUPPORTED_KINDS.contains(&("*", "DeleteOptions")));
    assert!(SUPPORTED_KINDS.contains(&("batch/v1", "CronJob")));
    assert!(SUPPORTED_KINDS.contains(&("v1", "ReplicationController")));
    assert!(SUPPORTED_KINDS.contains(&("autoscaling/v1", "HorizontalPodAutoscaler")));
    assert!(SUPPORTED_KINDS.contains(&("certificates.k8s.io/v1", "CertificateSigningRequest")));
    assert!(SUPPORTED_KINDS.contains(&("authorization.k8s.io/v1", "SelfSubjectAccessReview")));
    assert_eq!(SUPPORTED_KINDS.len(), 39);
}
