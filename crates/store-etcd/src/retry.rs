//! Requests that never left: etcd-client balances over the endpoints but retries
//! nothing, so a request that met a just-killed member's refused connection failed though
//! etcd never saw it. Such a request is safe to send again, mutation or not (clientv3
//! retries exactly these), and the channel sends it to another endpoint. A request that
//! was sent and failed (a timeout without quorum, say) is never retried: it may have been
//! applied.

use std::future::Future;
use std::time::Duration;

use cairn_store::StoreError;

use crate::backend_error;

/// Sends again at most this many times, after 20, 40, 60 ms.
const RETRIES: u32 = 3;

pub(crate) async fn unsent_retried<T, F, Fut>(what: &str, mut call: F) -> Result<T, StoreError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, etcd_client::Error>>,
{
    let mut tries = 0;
    loop {
        match call().await {
            Err(e) if never_sent(&e) && tries < RETRIES => {
                tries += 1;
                tracing::debug!(what, error = %e, tries, "etcd request not sent; sending again");
                tokio::time::sleep(Duration::from_millis(20 * u64::from(tries))).await;
            }
            other => return other.map_err(|e| backend_error(what, e)),
        }
    }
}

/// Whether the request failed before reaching etcd: the connection to the endpoint was
/// refused or never made.
fn never_sent(error: &etcd_client::Error) -> bool {
    match error {
        etcd_client::Error::GRpcStatus(status) => {
            status.code() == tonic::Code::Unavailable && status.message().contains("connect error")
        }
        etcd_client::Error::TransportError(_) => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::{never_sent, unsent_retried};

    fn status(code: tonic::Code, message: &str) -> etcd_client::Error {
        etcd_client::Error::GRpcStatus(tonic::Status::new(code, message))
    }

    #[test]
    fn only_requests_that_never_left_count_as_unsent() {
        assert!(never_sent(&status(
            tonic::Code::Unavailable,
            "tcp connect error"
        )));
        assert!(!never_sent(&status(
            tonic::Code::Unavailable,
            "etcdserver: request timed out"
        )));
        assert!(!never_sent(&status(
            tonic::Code::FailedPrecondition,
            "connect error"
        )));
    }

    #[tokio::test]
    async fn unsent_requests_go_again_a_bounded_number_of_times() {
        let mut calls = 0;
        let result: Result<u8, _> = unsent_retried("put /k", || {
            calls += 1;
            let n = calls;
            async move {
                match n {
                    1 | 2 => Err(status(tonic::Code::Unavailable, "tcp connect error")),
                    _ => Ok(7),
                }
            }
        })
        .await;
        assert_eq!((result.unwrap(), calls), (7, 3));

        let mut calls = 0;
        let result: Result<u8, _> = unsent_retried("put /k", || {
            calls += 1;
            async { Err(status(tonic::Code::Unavailable, "tcp connect error")) }
        })
        .await;
        assert!(result.unwrap_err().to_string().contains("put /k"));
        assert_eq!(calls, 4);

        let mut calls = 0;
        let result: Result<u8, _> = unsent_retried("put /k", || {
            calls += 1;
            async {
                Err(status(
                    tonic::Code::Unavailable,
                    "etcdserver: request timed out",
                ))
            }
        })
        .await;
        assert!(result.is_err());
        assert_eq!(
            calls, 1,
            "a request etcd may have applied is not sent again"
        );
    }
}
