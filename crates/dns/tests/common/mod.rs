//! Helpers of the server tests: a cluster, a server on loopback, a raw client, and a
//! tiny upstream resolver standing in for the internet.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use cairn_dns::{ClusterZone, DnsServer, ServerConfig, ZoneConfig};
use hickory_proto::op::{Edns, Message, OpCode, Query, ResponseCode};
use hickory_proto::rr::rdata::{A, SOA, TXT};
use hickory_proto::rr::{Name, RData, Record, RecordType};
use k8s_openapi::api::core::v1::{Namespace, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};

pub const WAIT: Duration = Duration::from_secs(5);

fn svc(v: serde_json::Value) -> Service {
    serde_json::from_value(v).unwrap()
}

pub fn slice(
    ns: &str,
    name: &str,
    service: &str,
    ports: serde_json::Value,
    eps: serde_json::Value,
) -> EndpointSlice {
    serde_json::from_value(json!({"metadata": {"name": name, "namespace": ns,
        "labels": {"kubernetes.io/service-name": service}},
        "addressType": "IPv4", "ports": ports, "endpoints": eps}))
    .unwrap()
}

pub fn services() -> Vec<Service> {
    vec![
        svc(json!({"metadata": {"name": "web", "namespace": "default"},
            "spec": {"clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"],
                     "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]}})),
        svc(json!({"metadata": {"name": "db", "namespace": "apps"},
            "spec": {"clusterIP": "None", "clusterIPs": ["None"]}})),
        svc(
            json!({"metadata": {"name": "search", "namespace": "default"},
            "spec": {"type": "ExternalName", "externalName": "www.example.com"}}),
        ),
        svc(json!({"metadata": {"name": "many", "namespace": "apps"},
            "spec": {"clusterIP": "None", "clusterIPs": ["None"]}})),
    ]
}

pub fn slices() -> Vec<EndpointSlice> {
    let many: Vec<serde_json::Value> = (1..=100)
        .map(|i| json!({"addresses": [format!("10.244.9.{i}")]}))
        .collect();
    vec![
        slice(
            "default",
            "web-1",
            "web",
            json!([{"name": "http", "port": 8080}]),
            json!([{"addresses": ["10.244.1.5"]}]),
        ),
        slice(
            "apps",
            "db-1",
            "db",
            json!([{"name": "pg", "port": 5432, "protocol": "TCP"}]),
            json!([{"addresses": ["10.244.1.10"], "hostname": "db-0"},
                   {"addresses": ["10.244.2.11"], "hostname": "db-1"}]),
        ),
        slice("apps", "many-1", "many", json!([]), json!(many)),
    ]
}

pub fn namespaces() -> Vec<Namespace> {
    ["default", "apps", "kube-system"]
        .iter()
        .map(|n| serde_json::from_value(json!({"metadata": {"name": n}})).unwrap())
        .collect()
}

pub fn cluster_zone() -> ClusterZone {
    ClusterZone::from_objects(
        &ZoneConfig::default(),
        &services(),
        &slices(),
        &namespaces(),
        7,
    )
    .unwrap()
}

pub async fn start(zone: ClusterZone, upstreams: Vec<SocketAddr>) -> DnsServer {
    let config = ServerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        upstreams,
        upstream_timeout: Duration::from_millis(500),
        ..ServerConfig::default()
    };
    DnsServer::bind(config, zone).await.unwrap()
}

pub fn query(name: &str, qtype: RecordType, edns: bool) -> Message {
    let mut m = Message::query();
    m.metadata.recursion_desired = true;
    m.add_query(Query::query(Name::from_ascii(name).unwrap(), qtype));
    if edns {
        let mut e = Edns::new();
        e.set_max_payload(1232);
        m.set_edns(e);
    }
    m
}

pub async fn udp_raw(addr: SocketAddr, bytes: &[u8]) -> Option<Vec<u8>> {
    let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    sock.send_to(bytes, addr).await.unwrap();
    let mut buf = vec![0u8; 65535];
    let n = tokio::time::timeout(Duration::from_millis(300), sock.recv(&mut buf))
        .await
        .ok()?
        .unwrap();
    Some(buf[..n].to_vec())
}

pub async fn udp(addr: SocketAddr, m: &Message) -> Message {
    let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    sock.send_to(&m.to_vec().unwrap(), addr).await.unwrap();
    let mut buf = vec![0u8; 65535];
    let n = tokio::time::timeout(WAIT, sock.recv(&mut buf))
        .await
        .expect("no UDP answer")
        .unwrap();
    let r = Message::from_vec(&buf[..n]).unwrap();
    assert_eq!(r.metadata.id, m.metadata.id);
    r
}

pub async fn tcp(addr: SocketAddr, m: &Message) -> Message {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let bytes = m.to_vec().unwrap();
    s.write_all(&(bytes.len() as u16).to_be_bytes())
        .await
        .unwrap();
    s.write_all(&bytes).await.unwrap();
    let len = tokio::time::timeout(WAIT, s.read_u16())
        .await
        .expect("no TCP answer")
        .unwrap();
    let mut buf = vec![0u8; usize::from(len)];
    s.read_exact(&mut buf).await.unwrap();
    let r = Message::from_vec(&buf).unwrap();
    assert_eq!(r.metadata.id, m.metadata.id);
    r
}

/// `owner type data` of records.
pub fn show(records: &[Record]) -> Vec<String> {
    records
        .iter()
        .map(|r| format!("{} {} {}", r.name.to_lowercase(), r.record_type(), r.data))
        .collect()
}

/// A resolver on loopback answering a few names of `example.com`, counting queries.
pub struct Upstream {
    pub addr: SocketAddr,
    pub hits: Arc<AtomicUsize>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Upstream {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl Upstream {
    pub fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

fn soa() -> Record {
    let origin = Name::from_ascii("example.com.").unwrap();
    let soa = SOA::new(
        Name::from_ascii("ns.example.com.").unwrap(),
        Name::from_ascii("admin.example.com.").unwrap(),
        1,
        3600,
        600,
        86400,
        60,
    );
    Record::from_rdata(origin, 600, RData::SOA(soa))
}

/// The upstream's answers: `www` A (TTL 300), `txt` TXT, `big` truncated over UDP and
/// 40 addresses over TCP, NXDOMAIN for the rest.
fn answer(q: &Message, tcp: bool) -> Message {
    let mut r = Message::response(q.metadata.id, OpCode::Query);
    r.metadata.recursion_desired = q.metadata.recursion_desired;
    r.metadata.recursion_available = true;
    let query = q.queries[0].clone();
    let name = query.name().to_lowercase().to_ascii();
    r.add_query(query.clone());
    let owner = query.name().clone();
    match (name.as_str(), query.query_type()) {
        ("www.example.com.", RecordType::A) => {
            r.add_answer(Record::from_rdata(
                owner,
                300,
                RData::A(A::new(93, 184, 216, 34)),
            ));
        }
        ("txt.example.com.", RecordType::TXT) => {
            r.add_answer(Record::from_rdata(
                owner,
                60,
                RData::TXT(TXT::new(vec!["hello".into()])),
            ));
        }
        ("big.example.com.", RecordType::A) if !tcp => r.metadata.truncation = true,
        ("big.example.com.", RecordType::A) => {
            for i in 0..40 {
                r.add_answer(Record::from_rdata(
                    owner.clone(),
                    30,
                    RData::A(A::new(192, 0, 2, i)),
                ));
            }
        }
        ("www.example.com.", _) => {
            r.add_authority(soa());
        }
        _ => {
            r.metadata.response_code = ResponseCode::NXDomain;
            r.add_authority(soa());
        }
    }
    r
}

pub async fn upstream() -> Upstream {
    let (udp, tcp) = loop {
        let udp = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        if let Ok(tcp) = TcpListener::bind(udp.local_addr().unwrap()).await {
            break (udp, tcp);
        }
    };
    let addr = udp.local_addr().unwrap();
    let hits = Arc::new(AtomicUsize::new(0));
    let udp_hits = hits.clone();
    let udp_task = tokio::spawn(async move {
        let mut buf = vec![0u8; 4096];
        loop {
            let (n, peer) = udp.recv_from(&mut buf).await.unwrap();
            udp_hits.fetch_add(1, Ordering::SeqCst);
            let q = Message::from_vec(&buf[..n]).unwrap();
            let r = answer(&q, false).to_vec().unwrap();
            udp.send_to(&r, peer).await.unwrap();
        }
    });
    let tcp_hits = hits.clone();
    let tcp_task = tokio::spawn(async move {
        loop {
            let (mut s, _) = tcp.accept().await.unwrap();
            tcp_hits.fetch_add(1, Ordering::SeqCst);
            let len = s.read_u16().await.unwrap();
            let mut buf = vec![0u8; usize::from(len)];
            s.read_exact(&mut buf).await.unwrap();
            let r = answer(&Message::from_vec(&buf).unwrap(), true)
                .to_vec()
                .unwrap();
            s.write_all(&(r.len() as u16).to_be_bytes()).await.unwrap();
            s.write_all(&r).await.unwrap();
        }
    });
    Upstream {
        addr,
        hits,
        tasks: vec![udp_task, tcp_task],
    }
}
