//! The HTTP listener with a bound on open connections ([`HTTP_CONNECTIONS_MAX`]): each open
//! connection costs the node its buffers and a task whether or not it has a request in flight.
//! Past the bound a connection is still accepted, but marked [`Overflow`]: its first request is
//! answered 503 with `Retry-After` and the connection closed (`admission`), so an overloaded
//! node tells clients to come back instead of leaving them in the kernel's backlog to time out.

use proto::limits::HTTP_CONNECTIONS_MAX;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// A TCP listener that holds at most [`HTTP_CONNECTIONS_MAX`] connections open.
pub struct Bounded {
    inner: TcpListener,
    slots: Arc<Semaphore>,
}

impl Bounded {
    pub fn new(inner: TcpListener) -> Self {
        Self::with_max(inner, HTTP_CONNECTIONS_MAX)
    }

    pub fn with_max(inner: TcpListener, max: usize) -> Self {
        Self {
            inner,
            slots: Arc::new(Semaphore::new(max)),
        }
    }
}

impl axum::serve::Listener for Bounded {
    type Io = Counted;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Counted, SocketAddr) {
        let (stream, addr) = axum::serve::Listener::accept(&mut self.inner).await;
        let slot = self.slots.clone().try_acquire_owned().ok();
        (Counted { stream, slot }, addr)
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }
}

/// An accepted connection; closing it frees its slot. `None`: accepted past the bound.
pub struct Counted {
    stream: TcpStream,
    slot: Option<OwnedSemaphorePermit>,
}

impl Counted {
    /// Whether this connection was accepted past the bound.
    pub fn overflow(&self) -> Overflow {
        Overflow(self.slot.is_none())
    }
}

/// Whether a request came on a connection accepted past [`HTTP_CONNECTIONS_MAX`] (a request
/// extension, as axum's `ConnectInfo`; see `super::server`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Overflow(pub bool);

impl AsyncRead for Counted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Counted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::serve::Listener;

    #[tokio::test]
    async fn a_connection_past_the_bound_is_accepted_as_overflow_until_one_closes() {
        let tcp = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = tcp.local_addr().expect("addr");
        let mut listener = Bounded::with_max(tcp, 1);
        let _clients = [
            TcpStream::connect(addr).await.expect("connect"),
            TcpStream::connect(addr).await.expect("connect"),
        ];
        let (first, _) = listener.accept().await;
        let (second, _) = listener.accept().await;
        assert!(first.slot.is_some());
        assert!(second.slot.is_none(), "accepted past the bound");
        drop(first);
        let _third_client = TcpStream::connect(addr).await.expect("connect");
        let (third, _) = listener.accept().await;
        assert!(third.slot.is_some(), "the slot the first gave back");
    }
}
