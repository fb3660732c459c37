//! Bodies built the way client-go builds them: Go marshals every non-pointer field, so the
//! messages below carry `Some("")`, `Some(0)`, `Some(false)` and empty sub-messages wherever
//! kubectl leaves a value field unset.

use std::collections::BTreeMap;

use k8s_pb::api::apps::v1 as apps;
use k8s_pb::api::core::v1 as core;
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use prost::Message;
use serde_json::{json, Value};

use crate::{decode_object, is_protobuf, ProtoError, MAGIC, SUPPORTED_KINDS};

fn s(v: &str) -> Option<String> {
    Some(v.to_owned())
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// The envelope exactly as client-go's protobuf serializer writes it.
fn envelope_raw(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: s(api_version),
            kind: s(kind),
        }),
        raw: Some(raw),
        content_encoding: s(""),
        content_type: s(""),
    };
    let mut body = MAGIC.to_vec();
    unknown.encode(&mut body).unwrap();
    body
}

fn envelope(api_version: &str, kind: &str, msg: &impl Message) -> Vec<u8> {
    envelope_raw(api_version, kind, msg.encode_to_vec())
}

fn decode(api_version: &str, kind: &str, msg: &impl Message) -> Value {
    decode_object(&envelope(api_version, kind, msg)).unwrap()
}

/// ObjectMeta as Go marshals a value with only name and labels set.
fn meta(name: &str, labels: &[(&str, &str)]) -> meta::ObjectMeta {
    meta::ObjectMeta {
        name: s(name),
        generate_name: s(""),
        namespace: s(""),
        self_link: s(""),
        uid: s(""),
        resource_version: s(""),
        generation: Some(0),
        creation_timestamp: Some(meta::Time::default()),
        labels: map(labels),
        ..Default::default()
    }
}

/// Container as Go marshals one with only the given fields set.
fn container(name: &str, image: &str) -> core::Container {
    core::Container {
        name: s(name),
        image: s(image),
        working_dir: s(""),
        resources: Some(core::ResourceRequirements::default()),
        termination_message_path: s(""),
        termination_message_policy: s(""),
        image_pull_policy: s(""),
        stdin: Some(false),
        stdin_once: Some(false),
        tty: Some(false),
        ..Default::default()
    }
}

fn container_port(port: i32) -> core::ContainerPort {
    core::ContainerPort {
        name: s(""),
        host_port: Some(0),
        container_port: Some(port),
        protocol: s(""),
        host_ip: s(""),
    }
}

fn pod_spec(containers: Vec<core::Container>) -> core::PodSpec {
    core::PodSpec {
        containers,
        restart_policy: s(""),
        dns_policy: s(""),
        service_account_name: s(""),
        service_account: s(""),
        node_name: s(""),
        host_network: Some(false),
        host_pid: Some(false),
        host_ipc: Some(false),
        hostname: s(""),
        subdomain: s(""),
        scheduler_name: s(""),
        priority_class_name: s(""),
        ..Default::default()
    }
}

fn int_port(port: i32) -> IntOrString {
    IntOrString {
        r#type: Some(0),
        int_val: Some(port),
        str_val: s(""),
    }
}

fn service_port(name: &str, port: i32, target: i32, node_port: i32) -> core::ServicePort {
    core::ServicePort {
        name: s(name),
        protocol: s("TCP"),
        port: Some(port),
        target_port: Some(int_port(target)),
        node_port: Some(node_port),
        app_protocol: None,
    }
}

fn service_spec(kind: &str, ports: Vec<core::ServicePort>, name: &str) -> core::ServiceSpec {
    core::ServiceSpec {
        ports,
        selector: map(&[("app", name)]),
        cluster_ip: s(""),
        r#type: s(kind),
        session_affinity: s(""),
        load_balancer_ip: s(""),
        external_name: s(""),
        external_traffic_policy: s(""),
        health_check_node_port: Some(0),
        publish_not_ready_addresses: Some(false),
        ..Default::default()
    }
}

fn service_status() -> core::ServiceStatus {
    core::ServiceStatus {
        load_balancer: Some(core::LoadBalancerStatus::default()),
        conditions: vec![],
    }
}

/// `kubectl create deployment web --image=nginx --replicas=2 --port=80`
fn create_deployment() -> apps::Deployment {
    let labels = [("app", "web")];
    let mut nginx = container("nginx", "nginx");
    nginx.ports = vec![container_port(80)];
    apps::Deployment {
        metadata: Some(meta("web", &labels)),
        spec: Some(apps::DeploymentSpec {
            replicas: Some(2),
            selector: Some(meta::LabelSelector {
                match_labels: map(&labels),
                match_expressions: vec![],
            }),
            template: Some(core::PodTemplateSpec {
                metadata: Some(meta("", &labels)),
                spec: Some(pod_spec(vec![nginx])),
            }),
            strategy: Some(apps::DeploymentStrategy {
                r#type: s(""),
                rolling_update: None,
            }),
            min_ready_seconds: Some(0),
            revision_history_limit: None,
            paused: Some(false),
            progress_deadline_seconds: None,
        }),
        status: Some(apps::DeploymentStatus {
            observed_generation: Some(0),
            replicas: Some(0),
            updated_replicas: Some(0),
            ready_replicas: Some(0),
            available_replicas: Some(0),
            unavailable_replicas: Some(0),
            terminating_replicas: None,
            conditions: vec![],
            collision_count: None,
        }),
    }
}

fn quantity(v: &str) -> Quantity {
    Quantity { string: s(v) }
}

mod bad_input;
mod kubectl_create;
mod other_kinds;
mod workloads;
