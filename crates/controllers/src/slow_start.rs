//! Creating many objects the way upstream's controllers do (`slowStartBatch`): batches of
//! 1, 2, 4, ... run concurrently, stopping after the first batch with an error, so a
//! quota or admission failure costs one request, not thousands.

use std::future::Future;

use futures::future::join_all;

/// Runs `start(i)` for `i` in `0..n` in doubling batches; the first error, if any.
pub async fn in_batches<Fut, E>(n: usize, mut start: impl FnMut(usize) -> Fut) -> Result<(), E>
where
    Fut: Future<Output = Result<(), E>>,
{
    let mut done = 0;
    let mut batch = 1;
    while done < n {
        let size = batch.min(n - done);
        let results = join_all((done..done + size).map(&mut start)).await;
        if let Some(e) = results.into_iter().find_map(Result::err) {
            return Err(e);
        }
        done += size;
        batch *= 2;
    }
    Ok(())
}

/// The create was refused because the namespace is being deleted: nothing to report.
pub fn namespace_terminating(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 403 && s.message.contains("is being terminated"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test]
    async fn stops_after_the_failing_batch() {
        let calls = AtomicUsize::new(0);
        let r: Result<(), usize> = in_batches(100, |i| {
            calls.fetch_add(1, Ordering::SeqCst);
            async move {
                if i == 4 {
                    Err(i)
                } else {
                    Ok(())
                }
            }
        })
        .await;
        assert_eq!(r, Err(4));
        // Batches 1 + 2 + 4: the batch holding index 4 ran whole, nothing after it.
        assert_eq!(calls.load(Ordering::SeqCst), 7);
        let ok: Result<(), ()> = in_batches(10, |_| async { Ok(()) }).await;
        assert!(ok.is_ok());
    }
}
