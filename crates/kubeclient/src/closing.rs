//! Connections that end when the client certificate changes, as the kubelet closes
//! all of its API connections on rotation: a pooled connection keeps the certificate
//! of its handshake, which the server refuses once that certificate expires. Each
//! connection ends (EOF) when the token it was made under is cancelled; requests then
//! open new connections with the new certificate and watches restart.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use arc_swap::ArcSwap;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::client::legacy::connect::{Connected, Connection};
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

/// The current generation of connections.
#[derive(Debug, Default)]
pub struct Generation(ArcSwap<CancellationToken>);

impl Generation {
    /// Ends every connection made so far.
    pub fn close_all(&self) {
        self.0.swap(Arc::new(CancellationToken::new())).cancel();
    }

    fn closed(&self) -> WaitForCancellationFutureOwned {
        CancellationToken::clone(&self.0.load()).cancelled_owned()
    }
}

/// A connector whose connections end with their generation.
#[derive(Clone)]
pub struct ClosingConnector<C> {
    pub inner: C,
    pub generation: Arc<Generation>,
}

type Connecting<S, E> = Pin<Box<dyn Future<Output = Result<Closing<S>, E>> + Send>>;

impl<C> tower::Service<http::Uri> for ClosingConnector<C>
where
    C: tower::Service<http::Uri> + Send,
    C::Future: Send + 'static,
    C::Response: 'static,
{
    type Response = Closing<C::Response>;
    type Error = C::Error;
    type Future = Connecting<C::Response, C::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        let closed = Box::pin(self.generation.closed());
        let connecting = self.inner.call(uri);
        Box::pin(async move {
            let inner = connecting.await?;
            Ok(Closing {
                inner,
                closed,
                ended: false,
            })
        })
    }
}

/// One connection, ended when `closed` completes.
pub struct Closing<S> {
    inner: S,
    closed: Pin<Box<WaitForCancellationFutureOwned>>,
    ended: bool,
}

impl<S> Closing<S> {
    fn ended(&mut self, cx: &mut Context<'_>) -> bool {
        if !self.ended && self.closed.as_mut().poll(cx).is_ready() {
            self.ended = true;
        }
        self.ended
    }
}

impl<S: Read + Unpin> Read for Closing<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.ended(cx) {
            // End of stream: the client drops the connection.
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl<S: Write + Unpin> Write for Closing<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.ended(cx) {
            return Poll::Ready(Err(io::ErrorKind::ConnectionAborted.into()));
        }
        Pin::new(&mut this.inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

impl<S: Connection> Connection for Closing<S> {
    fn connected(&self) -> Connected {
        self.inner.connected()
    }
}
