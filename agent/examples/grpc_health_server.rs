//! A gRPC health server for the agent's end-to-end probe test: serves
//! `grpc.health.v1.Health` on `0.0.0.0:PORT`, answering `SERVING` for the first `SECS`
//! seconds and `NOT_SERVING` after, so a liveness probe first passes, then fails.
//!
//! Usage: `grpc_health_server PORT SECS`

use std::time::Duration;

use tonic_health::pb::health_server::HealthServer;
use tonic_health::ServingStatus;

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let port: u16 = args.next().unwrap_or_else(|| "8080".into()).parse()?;
    let secs: u64 = args.next().unwrap_or_else(|| "10".into()).parse()?;
    let (reporter, service) = tonic_health::server::health_reporter();
    reporter
        .set_service_status("", ServingStatus::Serving)
        .await;
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(secs)).await;
        reporter
            .set_service_status("", ServingStatus::NotServing)
            .await;
    });
    let addr = std::net::SocketAddr::from(([0, 0, 0, 0], port));
    tonic::transport::Server::builder()
        .add_service::<HealthServer<_>>(service)
        .serve(addr)
        .await?;
    Ok(())
}
