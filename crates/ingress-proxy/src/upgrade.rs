//! An upgraded connection (WebSocket) after the backend's `101`: bytes copied both ways
//! until either side closes.

use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use tracing::debug;

pub async fn tunnel(client_side: OnUpgrade, backend_side: OnUpgrade) {
    let (client, backend) = match tokio::try_join!(client_side, backend_side) {
        Ok(both) => both,
        Err(e) => return debug!(error = %e, "an upgrade did not complete"),
    };
    let (mut client, mut backend) = (TokioIo::new(client), TokioIo::new(backend));
    if let Err(e) = tokio::io::copy_bidirectional(&mut client, &mut backend).await {
        debug!(error = %e, "an upgraded connection ended");
    }
}
