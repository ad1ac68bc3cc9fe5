//! One request/answer connection over TCP: frames of tokio-util's
//! [`LengthDelimitedCodec`] holding bincode messages, bounded on both
//! ends, and [`TransportError`], what goes wrong on one.

use std::fmt;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde::{Deserialize, Serialize};
use tokio::net::TcpStream;
use tokio_util::codec::{Framed, LengthDelimitedCodec};

use super::config::TcpConfig;
use super::message::{Request, Response};
use crate::replication::error::ReplicaError;

/// What went wrong on a connection.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TransportError {
    /// A message's frame is larger than the bound.
    FrameTooLarge {
        /// The frame's size in bytes.
        size: usize,
        /// The bound ([`TcpConfig::max_frame_bytes`]).
        bound: usize,
    },
    /// The peer could not be reached or the connection broke.
    Unreachable {
        /// The peer's address.
        addr: String,
        /// What happened.
        what: String,
    },
    /// No answer within the bound.
    Timeout {
        /// The peer's address.
        addr: String,
        /// The bound.
        waited: Duration,
    },
    /// A frame did not decode as a message.
    BadMessage {
        /// What was wrong.
        what: String,
    },
}

impl fmt::Display for TransportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TransportError::FrameTooLarge { size, bound } => {
                write!(
                    f,
                    "a frame of {size} bytes exceeds the bound of {bound} bytes"
                )
            }
            TransportError::Unreachable { addr, what } => {
                write!(f, "peer {addr} is unreachable: {what}")
            }
            TransportError::Timeout { addr, waited } => {
                write!(f, "peer {addr} did not answer within {waited:?}")
            }
            TransportError::BadMessage { what } => write!(f, "bad message: {what}"),
        }
    }
}

impl std::error::Error for TransportError {}

impl From<TransportError> for ReplicaError {
    fn from(e: TransportError) -> Self {
        ReplicaError::Raft {
            message: e.to_string(),
        }
    }
}

/// A framed connection.
pub(super) type Conn = Framed<Stream, LengthDelimitedCodec>;

/// A TCP stream written with `send` (which Rust passes `MSG_NOSIGNAL`), not
/// `writev`: writing to a connection the peer closed is then an `EPIPE`
/// error, never a SIGPIPE for a process that set the signal's default
/// action.
pub(crate) struct Stream(TcpStream);

impl tokio::io::AsyncRead for Stream {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for Stream {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

/// Frames `s`, with frames of at most `max` bytes.
pub(super) fn framed(s: TcpStream, max: usize) -> Conn {
    let _ = s.set_nodelay(true);
    Framed::new(Stream(s), codec(max))
}

fn codec(max: usize) -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder()
        .max_frame_length(max)
        .new_codec()
}

/// Encodes `msg` as one frame's body of at most `bound` bytes.
pub(super) fn encode<T: Serialize>(msg: &T, bound: usize) -> Result<Vec<u8>, TransportError> {
    let b = bincode::serialize(msg).map_err(|e| TransportError::BadMessage {
        what: e.to_string(),
    })?;
    if b.len() > bound {
        return Err(TransportError::FrameTooLarge {
            size: b.len(),
            bound,
        });
    }
    Ok(b)
}

/// Decodes one frame's body (at most `bound` bytes of input).
pub(super) fn decode<T: for<'de> Deserialize<'de>>(
    b: &[u8],
    bound: usize,
) -> Result<T, TransportError> {
    use bincode::Options;
    bincode::DefaultOptions::new()
        .with_fixint_encoding()
        .allow_trailing_bytes()
        .with_limit(bound as u64)
        .deserialize(b)
        .map_err(|e| TransportError::BadMessage {
            what: e.to_string(),
        })
}

fn io_err(addr: &str, e: impl fmt::Display) -> TransportError {
    let what = e.to_string();
    if what.contains("frame size too big") {
        return TransportError::BadMessage { what };
    }
    TransportError::Unreachable {
        addr: addr.to_string(),
        what,
    }
}

/// One request/answer connection to `addr`, reconnecting after errors.
pub(super) struct Link {
    addr: String,
    cfg: TcpConfig,
    conn: Option<Conn>,
}

impl Link {
    /// A link to `addr` (it connects at the first call).
    pub(super) fn new(addr: String, cfg: TcpConfig) -> Link {
        Link {
            addr,
            cfg,
            conn: None,
        }
    }

    /// Sends `req` and waits (within the rpc timeout) for the answer.
    pub(super) async fn call(&mut self, req: &Request) -> Result<Response, TransportError> {
        let body = encode(req, self.cfg.max_frame_bytes)?;
        let res = tokio::time::timeout(self.cfg.rpc_timeout, self.exchange(body)).await;
        match res {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(e)) => {
                self.conn = None;
                Err(e)
            }
            Err(_) => {
                self.conn = None;
                Err(TransportError::Timeout {
                    addr: self.addr.clone(),
                    waited: self.cfg.rpc_timeout,
                })
            }
        }
    }

    async fn exchange(&mut self, body: Vec<u8>) -> Result<Response, TransportError> {
        if self.conn.is_none() {
            let s = tokio::time::timeout(self.cfg.connect_timeout, TcpStream::connect(&self.addr))
                .await
                .map_err(|_| io_err(&self.addr, "connect timed out"))?
                .map_err(|e| io_err(&self.addr, e))?;
            self.conn = Some(framed(s, self.cfg.max_frame_bytes));
        }
        let conn = self.conn.as_mut().expect("connected above");
        conn.send(&body[..])
            .await
            .map_err(|e| io_err(&self.addr, e))?;
        match conn.next().await {
            Some(Ok(frame)) => decode(&frame, self.cfg.max_frame_bytes),
            Some(Err(e)) => Err(io_err(&self.addr, e)),
            None => Err(io_err(&self.addr, "connection closed")),
        }
    }
}
