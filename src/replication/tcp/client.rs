//! [`TcpClient`]: a blocking client of one node.

use std::net::SocketAddr;

use super::config::{bad_config, TcpConfig};
use super::message::{ClientRequest, ClientResponse, Request, Response};
use super::transport::{Link, TransportError};
use crate::replication::error::ReplicaError;

/// A client of one node over TCP (blocking; it runs its own small runtime).
pub struct TcpClient {
    link: Link,
    rt: tokio::runtime::Runtime,
}

impl TcpClient {
    /// A client of the node at `addr` (connects at the first request).
    ///
    /// # Errors
    /// [`ReplicaError::BadConfig`] if a bound of `cfg` is out of range or
    /// no runtime can be made.
    pub fn new(addr: SocketAddr, cfg: TcpConfig) -> Result<TcpClient, ReplicaError> {
        cfg.validate()?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| bad_config(format!("a runtime: {e}")))?;
        Ok(TcpClient {
            link: Link::new(addr.to_string(), cfg),
            rt,
        })
    }

    /// Sends `req` and waits (within the rpc timeout) for the answer.
    ///
    /// # Errors
    /// [`TransportError`] when the node is unreachable, does not answer in
    /// time, or the message is above the frame bound.
    pub fn call(&mut self, req: ClientRequest) -> Result<ClientResponse, TransportError> {
        let link = &mut self.link;
        match self.rt.block_on(link.call(&Request::Client(req)))? {
            Response::Client(r) => Ok(r),
            Response::Refused(what) => Err(TransportError::BadMessage { what }),
            _ => Err(TransportError::BadMessage {
                what: "a raft answer to a client request".to_string(),
            }),
        }
    }
}
