//! A NetworkPolicy read once into typed matchers: its pod selector, and per direction
//! either nothing (the policy does not isolate that way) or its rules, with upstream's
//! defaults applied (`policyTypes`, an empty `from`/`to` or `ports` list meaning all).

use std::net::IpAddr;

use cairn_semantics::selector::{Labels, Selector, SelectorError};
use ipnetwork::IpNetwork;
use k8s_openapi::api::networking::v1::{
    IPBlock, NetworkPolicy, NetworkPolicyPeer, NetworkPolicyPort, NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::model::Protocol;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("NetworkPolicy {policy}: {reason}")]
pub struct CompileError {
    pub policy: PolicyKey,
    pub reason: String,
}

/// A policy by namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PolicyKey {
    pub namespace: String,
    pub name: String,
}

impl std::fmt::Display for PolicyKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompiledPolicy {
    pub key: PolicyKey,
    /// Which pods of the policy's namespace it applies to.
    pub pod_selector: Selector,
    /// `None`: the policy does not isolate its pods for ingress; `Some(rules)`: it does,
    /// and allows what any rule allows (nothing when there is none).
    pub ingress: Option<Vec<Rule>>,
    pub egress: Option<Vec<Rule>>,
}

/// One ingress or egress rule: traffic from (to) any of `peers` on any of `ports`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// `None`: every address.
    pub peers: Option<Vec<Peer>>,
    /// `None`: every port of every protocol.
    pub ports: Option<Vec<PortSpec>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Peer {
    Pods {
        namespaces: NamespaceMatch,
        pods: Selector,
    },
    Block(Block),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NamespaceMatch {
    /// The policy's own namespace (a peer with only a pod selector).
    Own(String),
    Selected(Selector),
}

impl NamespaceMatch {
    pub fn matches(&self, name: &str, labels: &Labels) -> bool {
        match self {
            NamespaceMatch::Own(own) => own == name,
            NamespaceMatch::Selected(selector) => selector.matches(labels),
        }
    }
}

/// `ipBlock`: `cidr` less every `except`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    pub cidr: IpNetwork,
    pub except: Vec<IpNetwork>,
}

impl Block {
    pub fn contains(&self, ip: IpAddr) -> bool {
        self.cidr.contains(ip) && !self.except.iter().any(|e| e.contains(ip))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortSpec {
    pub protocol: Protocol,
    pub port: PortNumber,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortNumber {
    /// No `port`: every port of the protocol.
    All,
    /// `port`, or `port`..=`endPort`.
    Range(u16, u16),
    /// A container port's name, resolved on the pod that serves it.
    Named(String),
}

impl CompiledPolicy {
    /// Reads `policy`; an error names the policy and the field (the API server refuses
    /// such policies with a 422, so this guards only against what slipped past).
    pub fn compile(policy: &NetworkPolicy) -> Result<CompiledPolicy, CompileError> {
        let key = PolicyKey {
            namespace: policy.metadata.namespace.clone().unwrap_or_default(),
            name: policy.metadata.name.clone().unwrap_or_default(),
        };
        let fail = |reason: String| CompileError {
            policy: key.clone(),
            reason,
        };
        let spec = policy.spec.clone().unwrap_or_default();
        let pod_selector =
            selector(spec.pod_selector.as_ref(), "spec.podSelector").map_err(fail)?;
        let (isolates_ingress, isolates_egress) = policy_types(&spec).map_err(fail)?;
        let ns = key.namespace.as_str();
        let from = spec.ingress.iter().flatten();
        let from = from.map(|r| (r.from.as_deref(), r.ports.as_deref()));
        let ingress = rules(ns, isolates_ingress, "ingress", from).map_err(fail)?;
        let to = spec.egress.iter().flatten();
        let to = to.map(|r| (r.to.as_deref(), r.ports.as_deref()));
        let egress = rules(ns, isolates_egress, "egress", to).map_err(fail)?;
        Ok(CompiledPolicy {
            key,
            pod_selector,
            ingress,
            egress,
        })
    }

    /// Whether the policy applies to a pod of `namespace` with `labels`.
    pub fn selects(&self, namespace: &str, labels: &Labels) -> bool {
        self.key.namespace == namespace && self.pod_selector.matches(labels)
    }
}

/// Upstream's defaulting: `policyTypes` when given; else Ingress always, and Egress when
/// the policy has egress rules.
fn policy_types(spec: &NetworkPolicySpec) -> Result<(bool, bool), String> {
    match spec.policy_types.as_deref() {
        Some(types) if !types.is_empty() => {
            let (mut ingress, mut egress) = (false, false);
            for t in types {
                match t.as_str() {
                    "Ingress" => ingress = true,
                    "Egress" => egress = true,
                    other => return Err(format!("spec.policyTypes: unsupported value {other:?}: supported values: \"Ingress\", \"Egress\"")),
                }
            }
            Ok((ingress, egress))
        }
        _ => Ok((true, spec.egress.as_ref().is_some_and(|e| !e.is_empty()))),
    }
}

fn selector(s: Option<&LabelSelector>, field: &str) -> Result<Selector, String> {
    match s {
        None => Ok(Selector::everything()),
        Some(s) => {
            Selector::from_label_selector(s).map_err(|e: SelectorError| format!("{field}: {e}"))
        }
    }
}

/// A direction's rules as `(peers, ports)` pairs: `None` when the policy does not isolate
/// that direction.
fn rules<'a>(
    namespace: &str,
    isolates: bool,
    direction: &str,
    listed: impl Iterator<
        Item = (
            Option<&'a [NetworkPolicyPeer]>,
            Option<&'a [NetworkPolicyPort]>,
        ),
    >,
) -> Result<Option<Vec<Rule>>, String> {
    if !isolates {
        return Ok(None);
    }
    let compiled = listed
        .enumerate()
        .map(|(i, (peers, ports))| rule(namespace, peers, ports, direction, i));
    compiled.collect::<Result<_, _>>().map(Some)
}

fn rule(
    namespace: &str,
    peers: Option<&[NetworkPolicyPeer]>,
    ports: Option<&[NetworkPolicyPort]>,
    direction: &str,
    index: usize,
) -> Result<Rule, String> {
    let at = |what: &str, i: usize| format!("spec.{direction}[{index}].{what}[{i}]");
    let peer_field = if direction == "ingress" { "from" } else { "to" };
    let peers = match peers {
        None | Some([]) => None,
        Some(list) => Some(
            list.iter()
                .enumerate()
                .map(|(i, p)| peer(namespace, p, &at(peer_field, i)))
                .collect::<Result<_, _>>()?,
        ),
    };
    let ports = match ports {
        None | Some([]) => None,
        Some(list) => Some(
            list.iter()
                .enumerate()
                .map(|(i, p)| port(p, &at("ports", i)))
                .collect::<Result<_, _>>()?,
        ),
    };
    Ok(Rule { peers, ports })
}

fn peer(namespace: &str, p: &NetworkPolicyPeer, field: &str) -> Result<Peer, String> {
    if let Some(block) = &p.ip_block {
        if p.pod_selector.is_some() || p.namespace_selector.is_some() {
            return Err(format!("{field}: may not specify more than 1 peer type"));
        }
        return ip_block(block, field).map(Peer::Block);
    }
    let pods = selector(p.pod_selector.as_ref(), &format!("{field}.podSelector"))?;
    let namespaces = match &p.namespace_selector {
        Some(s) => {
            NamespaceMatch::Selected(selector(Some(s), &format!("{field}.namespaceSelector"))?)
        }
        None if p.pod_selector.is_some() => NamespaceMatch::Own(namespace.to_string()),
        None => return Err(format!("{field}: must specify a peer")),
    };
    Ok(Peer::Pods { namespaces, pods })
}

fn ip_block(block: &IPBlock, field: &str) -> Result<Block, String> {
    let cidr = |s: &str, f: &str| {
        s.parse::<IpNetwork>()
            .map_err(|e| format!("{field}.ipBlock.{f}: Invalid value: {s:?}: {e}"))
    };
    Ok(Block {
        cidr: cidr(&block.cidr, "cidr")?,
        except: block
            .except
            .iter()
            .flatten()
            .map(|e| cidr(e, "except"))
            .collect::<Result<_, _>>()?,
    })
}

fn port(p: &NetworkPolicyPort, field: &str) -> Result<PortSpec, String> {
    let protocol = match p.protocol.as_deref() {
        None => Protocol::Tcp,
        Some(s) => Protocol::from_api(s).ok_or_else(|| {
            format!("{field}.protocol: Unsupported value: {s:?}: supported values: \"SCTP\", \"TCP\", \"UDP\"")
        })?,
    };
    let number = |n: i32, f: &str| {
        u16::try_from(n).ok().filter(|n| *n > 0).ok_or_else(|| {
            format!("{field}.{f}: Invalid value: {n}: must be between 1 and 65535, inclusive")
        })
    };
    let port = match (&p.port, p.end_port) {
        (None, None) => PortNumber::All,
        (None, Some(_)) => {
            return Err(format!(
                "{field}.endPort: may not be specified when `port` is not specified"
            ))
        }
        (Some(IntOrString::Int(n)), end) => {
            let first = number(*n, "port")?;
            let last = match end {
                None => first,
                Some(e) => number(e, "endPort")?,
            };
            if last < first {
                return Err(format!("{field}.endPort: Invalid value: {last}: must be greater than or equal to `port`"));
            }
            PortNumber::Range(first, last)
        }
        (Some(IntOrString::String(_)), Some(_)) => {
            return Err(format!(
                "{field}.endPort: may not be specified when `port` is non-numeric"
            ))
        }
        (Some(IntOrString::String(name)), None) => PortNumber::Named(name.clone()),
    };
    Ok(PortSpec { protocol, port })
}
