//! One request/answer connection over TCP: frames of tokio-util's
//! [`LengthDelimitedCodec`] holding a version tag and a message in the
//! replication encoding (`codec.rs`), bounded on both ends, and
//! [`TransportError`], what goes wrong on one.

use std::fmt;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde::{Deserialize, Serialize};
use tokio::net::TcpStream;
use tokio_util::codec::{Framed, LengthDelimitedCodec};

use super::config::TcpConfig;
use super::message::{Request, Response};
use crate::replication::codec;
use crate::replication::error::ReplicaError;

/// The wire version this build speaks: 5, every frame naming its sender's
/// cluster ([`TcpConfig::cluster`]) before its message; entries whose
/// writes carry their table id, table creates and drops, and client
/// requests that name tables (with the engine's table and bound errors
/// typed in [`ClientError`](super::ClientError)). Version 1 sent bincode
/// 1.3 messages; version 2, postcard entries without tables; version 3,
/// those entries but client requests of the default table only; version
/// 4, version 5's messages without the cluster's name.
pub const WIRE_VERSION: u8 = 5;

/// The first byte of every frame's body; the wire version follows it. A
/// version-1 frame (a bincode 1.3 message, untagged) opens with its
/// message's variant index, 0 to 4, never this.
const WIRE_TAG: u8 = b'R';

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
    /// A frame from a node or client of another cluster: an address that
    /// names a node of another cluster (a stale config, a port reused), or
    /// a client configured for another one. Nothing in the frame was acted
    /// on.
    ForeignCluster {
        /// This end's cluster ([`TcpConfig::cluster`]).
        ours: String,
        /// The cluster the frame names.
        theirs: String,
    },
    /// A frame of a wire version this build does not speak: the peer runs
    /// another version of the engine.
    UnsupportedVersion {
        /// The frame's version: the byte after its tag, or 1 for a frame
        /// without the tag (version 1 sent bincode 1.3 messages untagged).
        version: u8,
        /// The one version this build speaks ([`WIRE_VERSION`]).
        supported: u8,
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
            TransportError::ForeignCluster { ours, theirs } => write!(
                f,
                "a frame of cluster `{theirs}`; this end belongs to cluster `{ours}`"
            ),
            TransportError::UnsupportedVersion { version, supported } => write!(
                f,
                "a frame of wire version {version} (1: bincode 1.3, 2: entries without \
                 tables, 3: client requests without tables, 4: frames without the \
                 cluster's name); this build speaks only version {supported}"
            ),
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

/// Encodes `msg` as one frame's body of at most `bound` bytes: the tag,
/// the wire version, the sender's `cluster`, then the message.
pub(super) fn encode<T: Serialize>(
    msg: &T,
    cluster: &str,
    bound: usize,
) -> Result<Vec<u8>, TransportError> {
    let b = codec::encode_after(vec![WIRE_TAG, WIRE_VERSION], &(cluster, msg)).map_err(|e| {
        TransportError::BadMessage {
            what: e.to_string(),
        }
    })?;
    if b.len() > bound {
        return Err(TransportError::FrameTooLarge {
            size: b.len(),
            bound,
        });
    }
    Ok(b)
}

/// Decodes one frame's body (its length already checked against the
/// bound by the codec) sent to a member of `cluster`. The cluster's name
/// is checked before the message is decoded.
///
/// # Errors
/// [`TransportError::UnsupportedVersion`] for a frame of another wire
/// version, [`TransportError::ForeignCluster`] for one of another cluster,
/// [`TransportError::BadMessage`] for one that does not decode.
pub(super) fn decode<T: for<'de> Deserialize<'de>>(
    b: &[u8],
    cluster: &str,
) -> Result<T, TransportError> {
    let bad = |what| TransportError::BadMessage { what };
    match b {
        [WIRE_TAG, WIRE_VERSION, rest @ ..] => {
            let (theirs, msg) = codec::take::<String>(rest).map_err(bad)?;
            if theirs != cluster {
                return Err(TransportError::ForeignCluster {
                    ours: cluster.to_string(),
                    theirs,
                });
            }
            codec::decode(msg).map_err(bad)
        }
        [WIRE_TAG, version, ..] => Err(TransportError::UnsupportedVersion {
            version: *version,
            supported: WIRE_VERSION,
        }),
        _ => Err(TransportError::UnsupportedVersion {
            version: 1,
            supported: WIRE_VERSION,
        }),
    }
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
        let body = encode(req, &self.cfg.cluster, self.cfg.max_frame_bytes)?;
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
            Some(Ok(frame)) => decode(&frame, &self.cfg.cluster),
            Some(Err(e)) => Err(io_err(&self.addr, e)),
            None => Err(io_err(&self.addr, "connection closed")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replication::tcp::message::{ClientRequest, Op};

    #[test]
    fn a_frame_carries_its_wire_version_and_another_version_is_refused_by_it() {
        let req = Request::Client(ClientRequest::Write {
            ops: vec![Op::Put {
                key: b"k".to_vec(),
                value: vec![9; 300],
            }],
        });
        let body = encode(&req, "east", 1 << 20).unwrap();
        assert_eq!(body[..2], [b'R', WIRE_VERSION]);
        match decode::<Request>(&body, "east") {
            Ok(Request::Client(ClientRequest::Write { ops })) => assert_eq!(
                ops,
                [Op::Put {
                    key: b"k".to_vec(),
                    value: vec![9; 300]
                }]
            ),
            _ => panic!("the request round-trips"),
        }
        // A version-1 frame, laid out by hand as bincode 1.3 wrote it:
        // `Request::Client` (u32 variant 3), `ClientRequest::Status` (0).
        let v1 = [3, 0, 0, 0, 0, 0, 0, 0];
        let refused = TransportError::UnsupportedVersion {
            version: 1,
            supported: WIRE_VERSION,
        };
        assert_eq!(decode::<Request>(&v1, "east").err(), Some(refused.clone()));
        assert!(refused.to_string().contains("wire version 1"), "{refused}");
        assert_eq!(decode::<Request>(&[], "east").err(), Some(refused));
        // Earlier and later versions' frames.
        for version in [2, 3, 4, 6] {
            let mut other = body.clone();
            other[1] = version;
            assert_eq!(
                decode::<Request>(&other, "east").err(),
                Some(TransportError::UnsupportedVersion {
                    version,
                    supported: WIRE_VERSION
                })
            );
        }
        // Damage inside a frame of this version: a bad message.
        for bad in [&body[..body.len() - 1], &[&body[..], &[0]].concat()[..]] {
            assert!(
                matches!(
                    decode::<Request>(bad, "east"),
                    Err(TransportError::BadMessage { .. })
                ),
                "{} bytes",
                bad.len()
            );
        }
        assert_eq!(
            encode(&req, "east", 100).err(),
            Some(TransportError::FrameTooLarge {
                size: body.len(),
                bound: 100
            })
        );
    }

    #[test]
    fn a_frame_of_another_cluster_is_refused_before_its_message_is_read() {
        let req = Request::Client(ClientRequest::Status);
        let body = encode(&req, "east", 1 << 20).unwrap();
        let foreign = TransportError::ForeignCluster {
            ours: "west".to_string(),
            theirs: "east".to_string(),
        };
        assert_eq!(
            decode::<Request>(&body, "west").err(),
            Some(foreign.clone())
        );
        assert!(
            foreign.to_string().contains("cluster `east`")
                && foreign.to_string().contains("cluster `west`"),
            "{foreign}"
        );
        // A name that is a prefix of ours is another cluster too.
        assert!(matches!(
            decode::<Request>(&body, "eas"),
            Err(TransportError::ForeignCluster { .. })
        ));
        // The name is checked first: a foreign frame whose message would
        // not decode here is still reported as foreign.
        let mut damaged = body.clone();
        damaged.truncate(body.len() - 1);
        damaged.push(0xff);
        assert!(matches!(
            decode::<Request>(&damaged, "west"),
            Err(TransportError::ForeignCluster { .. })
        ));
    }
}
