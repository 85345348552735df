//! `Handler`: what serves one [`super::Service`] on the receiving node. A handler gets the
//! authenticated peer id (checked against the peer's certificate at connect) and the request
//! payload, and returns the response payload or an error message that travels back to the
//! caller as [`crate::Error::Remote`]. Closures `Fn(NodeId, Vec<u8>) -> impl Future` are handlers.
//!
//! Not here: framing, limits or timeouts (the transport applies those around the call).

use proto::NodeId;
use std::future::Future;
use std::pin::Pin;

/// The future a handler returns: the response payload, or an error message for the caller.
pub type HandlerFuture = Pin<Box<dyn Future<Output = Result<Vec<u8>, String>> + Send + 'static>>;

/// Serves requests of one service.
pub trait Handler: Send + Sync + 'static {
    /// Answers one request from `peer`.
    fn handle(&self, peer: NodeId, payload: Vec<u8>) -> HandlerFuture;
}

impl<F, Fut> Handler for F
where
    F: Fn(NodeId, Vec<u8>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Vec<u8>, String>> + Send + 'static,
{
    fn handle(&self, peer: NodeId, payload: Vec<u8>) -> HandlerFuture {
        Box::pin(self(peer, payload))
    }
}
