//! [`TcpNode`]: one node served over TCP, and how it answers each
//! connection's requests (openraft's RPCs, and a client's writes, reads and
//! status).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::ops::Bound;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use openraft::BasicNode;
use tokio::net::TcpListener;

use super::config::{bad_config, NodeConfig};
use super::message::{
    ClientError, ClientRequest, ClientResponse, Op, Request, Response, TableInfo, TableKeys,
    TableOps,
};
use super::network::TcpNetworkFactory;
use super::transport::{decode, encode, framed, Conn};
use crate::replication::config::BATCH_FRAME_SLACK;
use crate::replication::entry::NodeId;
use crate::replication::error::{raft_err, ReplicaError};
use crate::replication::reader::Reader;
use crate::replication::replica::Replica;
use crate::replication::writes::{WriteTable, WriteTxn};
use crate::{Error, Session, Table, TableOptions, Timestamp, Txn};

/// One node served over TCP, with its own runtime. Dropping it stops it.
pub struct TcpNode {
    replica: Arc<Replica>,
    addr: SocketAddr,
    rt: Option<tokio::runtime::Runtime>,
}

impl TcpNode {
    /// Starts the node: its replica on `cfg.data_dir` ([`Replica::open`]:
    /// a restart recovers from it), its listener on `cfg.addr`, and (if
    /// `cfg.init` and the directory held nothing) the cluster's
    /// initialization with every peer as a voter.
    ///
    /// # Errors
    /// [`ReplicaError::BadConfig`] if a setting is out of range or the
    /// address cannot be bound (with the OS error); [`ReplicaError::Raft`]
    /// if openraft refuses to start; [`Replica::open`]'s errors for the
    /// directory.
    pub fn start(mut cfg: NodeConfig) -> Result<TcpNode, ReplicaError> {
        cfg.tcp.validate()?;
        // Every entry must fit one frame (`ReplicaConfig::max_batch_bytes`).
        cfg.replica.max_batch_bytes = cfg
            .replica
            .max_batch_bytes
            .min(cfg.tcp.max_frame_bytes - BATCH_FRAME_SLACK);
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name(format!("n{}-raft", cfg.id))
            .enable_all()
            .build()
            .map_err(|e| bad_config(format!("a runtime: {e}")))?;
        let listener = rt
            .block_on(TcpListener::bind(cfg.addr))
            .map_err(|e| bad_config(format!("addr {}: cannot listen: {e}", cfg.addr)))?;
        let addr = listener
            .local_addr()
            .map_err(|e| bad_config(format!("addr {}: {e}", cfg.addr)))?;
        let net = TcpNetworkFactory::new(cfg.tcp.clone())?;
        let replica = Arc::new(Replica::open(
            cfg.id,
            cfg.replica.clone(),
            &cfg.data_dir,
            net,
            rt.handle().clone(),
        )?);
        // With the directory's lock held (`Replica::open`) and before this
        // node answers anyone.
        claim_dir(&cfg.data_dir, &cfg.tcp.cluster)?;
        let cluster: Arc<str> = cfg.tcp.cluster.as_str().into();
        rt.spawn(serve(
            listener,
            replica.clone(),
            cfg.tcp.max_frame_bytes,
            cluster,
        ));
        if cfg.init && replica.recovery().is_some_and(|r| r.fresh) {
            let mut members: BTreeMap<NodeId, BasicNode> = cfg
                .peers
                .iter()
                .map(|(&id, a)| (id, BasicNode::new(a.to_string())))
                .collect();
            members.insert(cfg.id, BasicNode::new(addr.to_string()));
            rt.block_on(replica.raft().initialize(members))
                .map_err(raft_err)?;
        }
        Ok(TcpNode {
            replica,
            addr,
            rt: Some(rt),
        })
    }

    /// The replica.
    pub fn replica(&self) -> &Replica {
        &self.replica
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for TcpNode {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            let raft = self.replica.raft().clone();
            let _ = rt.block_on(async {
                tokio::time::timeout(Duration::from_secs(5), raft.shutdown()).await
            });
            rt.shutdown_timeout(Duration::from_secs(5));
        }
    }
}

/// The file in a node's data directory that names its cluster.
const CLUSTER_FILE: &str = "cluster";

/// Records `cluster` as the cluster of the node in `dir`, or checks that
/// the directory is that cluster's: a directory that already names
/// another is refused, so a node never joins a second cluster with the
/// log and vote of a first. A directory without the file (new, or made by
/// a build before the file existed) takes the name: written to a
/// temporary file, synced, renamed, and the directory synced.
///
/// # Errors
/// [`ReplicaError::BadConfig`] naming both clusters, or the file and the
/// OS error.
fn claim_dir(dir: &std::path::Path, cluster: &str) -> Result<(), ReplicaError> {
    use crate::durability::{Fs, StdFs};
    let fs = StdFs;
    let path = dir.join(CLUSTER_FILE);
    let io = |what: &str, p: &std::path::Path, e: std::io::Error| {
        bad_config(format!("{what} {}: {e}", p.display()))
    };
    match fs.read(&path) {
        Ok(b) => {
            let recorded = String::from_utf8_lossy(&b);
            let recorded = recorded.trim_end_matches('\n');
            if recorded == cluster {
                Ok(())
            } else {
                Err(bad_config(format!(
                    "data_dir {} belongs to cluster `{}`, not `{cluster}`",
                    dir.display(),
                    recorded.escape_debug()
                )))
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let tmp = dir.join(format!("{CLUSTER_FILE}.tmp"));
            let mut f = fs.create(&tmp).map_err(|e| io("create", &tmp, e))?;
            f.append(format!("{cluster}\n").as_bytes())
                .and_then(|()| f.sync())
                .map_err(|e| io("write", &tmp, e))?;
            drop(f);
            fs.rename(&tmp, &path).map_err(|e| io("rename", &tmp, e))?;
            fs.sync_dir(dir).map_err(|e| io("sync", dir, e))
        }
        Err(e) => Err(io("read", &path, e)),
    }
}

async fn serve(listener: TcpListener, replica: Arc<Replica>, max: usize, cluster: Arc<str>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            // Out of descriptors or similar: try again shortly.
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        tokio::spawn(connection(
            framed(stream, max),
            replica.clone(),
            max,
            cluster.clone(),
        ));
    }
}

/// Answers one connection's requests in turn until it closes or breaks (an
/// oversized frame closes it after a `Refused` answer naming the bound). A
/// frame of another cluster is answered `Refused`, in a frame naming this
/// node's cluster, so the sender reports the mismatch too.
async fn connection(mut conn: Conn, replica: Arc<Replica>, max: usize, cluster: Arc<str>) {
    while let Some(frame) = conn.next().await {
        let resp = match frame {
            // The codec's only data error: a frame above the bound.
            Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                let msg = format!("frame refused (bound {max} bytes): {e}");
                if let Ok(b) = encode(&Response::Refused(msg), &cluster, max) {
                    let _ = conn.send(&b[..]).await;
                }
                return;
            }
            Err(_) => return,
            Ok(frame) => match decode::<Request>(&frame, &cluster) {
                Err(e) => Response::Refused(e.to_string()),
                Ok(req) => answer(&replica, req, max).await,
            },
        };
        let body = match encode(&resp, &cluster, max) {
            Ok(b) => b,
            Err(e) => match encode(&Response::Refused(e.to_string()), &cluster, max) {
                Ok(b) => b,
                Err(_) => return,
            },
        };
        if conn.send(&body[..]).await.is_err() {
            return;
        }
    }
}

async fn answer(replica: &Arc<Replica>, req: Request, max: usize) -> Response {
    let raft = replica.raft();
    match req {
        Request::Append(r) => Response::Append(raft.append_entries(r).await),
        Request::Vote(r) => Response::Vote(raft.vote(r).await),
        Request::Snapshot(r) => Response::Snapshot(raft.install_snapshot(r).await),
        Request::Client(c) => {
            let replica = replica.clone();
            // Writes wait for replication and reads may wait for the
            // watermark: off the runtime's workers.
            match tokio::task::spawn_blocking(move || client(&replica, c, max)).await {
                Ok(r) => Response::Client(r),
                Err(e) => {
                    Response::Client(ClientResponse::Failed(ClientError::Other(e.to_string())))
                }
            }
        }
    }
}

/// The wire form of `e`: the engine's table and bound errors keep their
/// kind and fields.
fn client_error(e: ReplicaError) -> ClientError {
    let size = |v: usize| v as u64;
    match e {
        ReplicaError::NotLeader { leader, .. } => ClientError::NotLeader { leader },
        ReplicaError::Fenced { .. } => ClientError::Fenced,
        ReplicaError::Engine(e) => match e {
            Error::WriteConflict { .. } => ClientError::Conflict,
            Error::InvalidTableName { name, problem } => {
                ClientError::InvalidTableName { name, problem }
            }
            Error::TableExists { name } => ClientError::TableExists { name },
            Error::TableNotFound { name } => ClientError::TableNotFound { name },
            Error::TableDropped { name } => ClientError::TableDropped { name },
            Error::TableOptionOutOfRange { field, value, max } => {
                ClientError::TableOptionOutOfRange {
                    field: field.to_string(),
                    value: size(value),
                    max: size(max),
                }
            }
            Error::TableIdsExhausted => ClientError::TableIdsExhausted,
            Error::KeyTooLarge { len, max } => ClientError::KeyTooLarge {
                len: size(len),
                max: size(max),
            },
            Error::ValueTooLarge { len, max } => ClientError::ValueTooLarge {
                len: size(len),
                max: size(max),
            },
            e => ClientError::Other(ReplicaError::Engine(e).to_string()),
        },
        e => ClientError::Other(e.to_string()),
    }
}

/// Carries out a client's request on `replica` (blocking: a write waits
/// for replication, a read may wait for the watermark); `max` is the frame
/// bound, which a scan's page stays under.
fn client(replica: &Replica, req: ClientRequest, max: usize) -> ClientResponse {
    let r = match req {
        ClientRequest::Status => Ok(status(replica)),
        ClientRequest::Write { ops } => write(replica, &[TableOps { table: None, ops }]),
        ClientRequest::WriteTables { writes } => write(replica, &writes),
        ClientRequest::Read {
            keys,
            at_least,
            wait_ms,
        } => read(
            replica,
            &[TableKeys { table: None, keys }],
            at_least,
            wait_ms,
        )
        .map(|(ts, mut values)| ClientResponse::Read {
            ts,
            values: values.pop().unwrap_or_default(),
        }),
        ClientRequest::ReadTables {
            reads,
            at_least,
            wait_ms,
        } => read(replica, &reads, at_least, wait_ms)
            .map(|(ts, values)| ClientResponse::ReadTables { ts, values }),
        ClientRequest::Scan {
            table,
            start,
            end,
            limit,
            at_least,
            wait_ms,
        } => scan(
            replica,
            table.as_deref(),
            (start, end),
            limit,
            (at_least, wait_ms),
            max,
        ),
        ClientRequest::CreateTable {
            name,
            max_key_len,
            max_value_len,
        } => {
            // Past `usize` on this node is past every bound: out of range.
            let size = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
            let options = TableOptions {
                max_key_len: max_key_len.map(size),
                max_value_len: max_value_len.map(size),
            };
            replica
                .create_table(&name, options)
                .map(|t| ClientResponse::TableCreated(info(&t)))
        }
        ClientRequest::DropTable { name } => {
            replica.drop_table(&name).map(|()| ClientResponse::Dropped)
        }
        ClientRequest::ListTables => list_tables(replica),
    };
    r.unwrap_or_else(|e| ClientResponse::Failed(client_error(e)))
}

fn info(t: &Table) -> TableInfo {
    TableInfo {
        name: t.name().to_string(),
        id: t.id().get(),
        max_key_len: t.max_key_len() as u64,
        max_value_len: t.max_value_len() as u64,
    }
}

/// The live named tables, skipping one dropped between the listing and
/// its open.
fn list_tables(replica: &Replica) -> Result<ClientResponse, ReplicaError> {
    let mut tables = Vec::new();
    for name in replica.table_names() {
        match replica.open_table(&name) {
            Ok(t) => tables.push(info(&t)),
            Err(ReplicaError::Engine(Error::TableNotFound { .. })) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(ClientResponse::Tables(tables))
}

fn status(replica: &Replica) -> ClientResponse {
    ClientResponse::Status {
        id: replica.id(),
        leader: replica.current_leader(),
        leader_ready: replica.is_leader_ready(),
        watermark: replica.watermark().map_or(0, Timestamp::get),
        fenced: replica.is_fenced(),
        recovered_entries: replica.recovery().map_or(0, |r| r.entries),
        restored_snapshot: replica
            .recovery()
            .is_some_and(|r| r.snapshot_index.is_some()),
        snapshots_installed: replica.stats().snapshots_installed,
    }
}

/// What a client write does to one table: the default table's
/// [`WriteTxn`] or a named table's [`WriteTable`].
trait Target {
    fn get_i64(&mut self, key: &[u8]) -> crate::Result<Option<i64>>;
    fn put(&mut self, key: &[u8], value: &[u8]) -> crate::Result<()>;
    fn delete(&mut self, key: &[u8]) -> crate::Result<()>;
}

/// The signed 8-byte little-endian integer `v` holds, if it is one.
fn as_i64(v: Option<&[u8]>) -> Option<i64> {
    v.and_then(|v| v.try_into().ok()).map(i64::from_le_bytes)
}

impl Target for WriteTxn<'_, '_, '_> {
    fn get_i64(&mut self, key: &[u8]) -> crate::Result<Option<i64>> {
        self.get_with(key, as_i64)
    }
    fn put(&mut self, key: &[u8], value: &[u8]) -> crate::Result<()> {
        WriteTxn::put(self, key, value)
    }
    fn delete(&mut self, key: &[u8]) -> crate::Result<()> {
        WriteTxn::delete(self, key)
    }
}

impl Target for WriteTable<'_, '_, '_> {
    fn get_i64(&mut self, key: &[u8]) -> crate::Result<Option<i64>> {
        self.get_with(key, as_i64)
    }
    fn put(&mut self, key: &[u8], value: &[u8]) -> crate::Result<()> {
        WriteTable::put(self, key, value)
    }
    fn delete(&mut self, key: &[u8]) -> crate::Result<()> {
        WriteTable::delete(self, key)
    }
}

/// Runs `ops` on `t`, in order.
fn apply(t: &mut impl Target, ops: &[Op]) -> crate::Result<()> {
    for op in ops {
        match op {
            Op::Put { key, value } => t.put(key, value)?,
            Op::Delete { key } => t.delete(key)?,
            Op::Add { key, delta } => {
                let next = t.get_i64(key)?.unwrap_or(0).wrapping_add(*delta);
                t.put(key, &next.to_le_bytes())?;
            }
        }
    }
    Ok(())
}

/// Runs every group of `writes`, in order, in one replicated write on the
/// leader.
fn write(replica: &Replica, writes: &[TableOps]) -> Result<ClientResponse, ReplicaError> {
    let ((), ts) = replica.write(|t| {
        for w in writes {
            match &w.table {
                None => apply(t, &w.ops)?,
                Some(name) => {
                    let table = t.open_table(name)?;
                    apply(&mut t.table(&table)?, &w.ops)?;
                }
            }
        }
        Ok(())
    })?;
    Ok(ClientResponse::Written { ts: ts.get() })
}

/// A read-only transaction at the node's watermark once it reaches
/// `at_least` (waiting at most `wait_ms`), on `reader`'s engine.
fn begin<'s, 'e>(
    reader: &Reader,
    session: &'s mut Session<'e>,
    at_least: u64,
    wait_ms: u64,
) -> Result<Txn<'s, 'e>, ReplicaError> {
    reader.begin(
        session,
        Timestamp::new(at_least),
        Duration::from_millis(wait_ms),
    )
}

/// The values read of one group of keys, in its order.
type Values = Vec<Option<Vec<u8>>>;

/// Reads each group of `reads` in its table, all at one watermark once it
/// reaches `at_least` (waiting at most `wait_ms`): the read timestamp and
/// the values, group by group.
fn read(
    replica: &Replica,
    reads: &[TableKeys],
    at_least: u64,
    wait_ms: u64,
) -> Result<(u64, Vec<Values>), ReplicaError> {
    let reader = replica.reader();
    let tables = reads
        .iter()
        .map(|r| r.table.as_deref().map(|n| reader.table(n)).transpose())
        .collect::<Result<Vec<_>, _>>()?;
    let mut session = reader.engine().session()?;
    let mut txn = begin(&reader, &mut session, at_least, wait_ms)?;
    let mut values = Vec::with_capacity(reads.len());
    for (r, table) in reads.iter().zip(&tables) {
        values.push(match table {
            None => txn.get_many(&r.keys)?,
            Some(t) => txn.table(t)?.get_many(&r.keys)?,
        });
    }
    Ok((txn.read_timestamp().get(), values))
}

/// The bytes a scanned pair adds to the answer, bounded above: each
/// length's varint (at most 5 bytes for a frame-sized length) and the
/// bytes.
fn pair_bytes(k: &[u8], v: &[u8]) -> usize {
    k.len() + v.len() + 10
}

/// Room in a frame for a scan answer's fixed part: the tag and version,
/// the variant indexes, the timestamp, the pair count and the next key's
/// option tag and length (each varint at most 10 bytes).
const SCAN_ANSWER_SLACK: usize = 64;

/// Reads up to `limit` pairs of `table` (`None`: the default table) from
/// `start` to `end` at the node's watermark (`wait`: at least, and for how
/// long), and no more than fit a frame of `max` bytes.
fn scan(
    replica: &Replica,
    table: Option<&str>,
    (start, end): (Vec<u8>, Option<Vec<u8>>),
    limit: u32,
    (at_least, wait_ms): (u64, u64),
    max: usize,
) -> Result<ClientResponse, ReplicaError> {
    let reader = replica.reader();
    let table = table.map(|n| reader.table(n)).transpose()?;
    let mut session = reader.engine().session()?;
    let mut txn = begin(&reader, &mut session, at_least, wait_ms)?;
    let range = (
        Bound::Included(start),
        end.map_or(Bound::Unbounded, Bound::Excluded),
    );
    let max_key = table
        .as_ref()
        .map_or(replica.shared.config.engine.max_key_len, Table::max_key_len);
    let mut pairs = Vec::new();
    let mut next = None;
    // Room for the pairs, keeping room for the longest key as `next`.
    let mut room = max.saturating_sub(SCAN_ANSWER_SLACK + pair_bytes(&[], &[]) + max_key);
    let mut visit = |k: &[u8], v: &[u8]| {
        let need = pair_bytes(k, v);
        // The first pair goes in regardless, so that paging moves on (a
        // pair above the frame bound is then refused as `FrameTooLarge`).
        if pairs.len() as u64 >= u64::from(limit) || (need > room && !pairs.is_empty()) {
            next = Some(k.to_vec());
            return false;
        }
        room = room.saturating_sub(need);
        pairs.push((k.to_vec(), v.to_vec()));
        true
    };
    match &table {
        None => txn.scan(range, &mut visit)?,
        Some(t) => txn.table(t)?.scan(range, &mut visit)?,
    }
    Ok(ClientResponse::Scanned {
        ts: txn.read_timestamp().get(),
        pairs,
        next,
    })
}

#[cfg(test)]
mod tests {
    use super::super::transport::{decode, encode};
    use super::*;
    use crate::TableNameProblem;

    /// Every engine error about tables and bounds reaches a client as the
    /// error of the same kind, with its fields, through the encoding too;
    /// any other engine error as text.
    #[test]
    fn the_engines_table_errors_keep_their_kind_on_the_wire() {
        let name = || "t".to_string();
        let bad = |problem| {
            (
                Error::InvalidTableName {
                    name: name(),
                    problem,
                },
                ClientError::InvalidTableName {
                    name: name(),
                    problem,
                },
            )
        };
        let cases = [
            bad(TableNameProblem::Empty),
            bad(TableNameProblem::Nul { at: 3 }),
            bad(TableNameProblem::TooLong { len: 300, max: 255 }),
            (
                Error::TableExists { name: name() },
                ClientError::TableExists { name: name() },
            ),
            (
                Error::TableNotFound { name: name() },
                ClientError::TableNotFound { name: name() },
            ),
            (
                Error::TableDropped { name: name() },
                ClientError::TableDropped { name: name() },
            ),
            (
                Error::TableOptionOutOfRange {
                    field: "max_value_len",
                    value: 9,
                    max: 8,
                },
                ClientError::TableOptionOutOfRange {
                    field: "max_value_len".into(),
                    value: 9,
                    max: 8,
                },
            ),
            (Error::TableIdsExhausted, ClientError::TableIdsExhausted),
            (
                Error::KeyTooLarge { len: 9, max: 8 },
                ClientError::KeyTooLarge { len: 9, max: 8 },
            ),
            (
                Error::ValueTooLarge { len: 17, max: 16 },
                ClientError::ValueTooLarge { len: 17, max: 16 },
            ),
        ];
        for (e, want) in cases {
            let got = client_error(ReplicaError::Engine(e));
            assert_eq!(got, want);
            let frame =
                encode(&Response::Client(ClientResponse::Failed(got)), "c", 1 << 20).unwrap();
            match decode::<Response>(&frame, "c") {
                Ok(Response::Client(ClientResponse::Failed(back))) => assert_eq!(back, want),
                _ => panic!("{want:?} does not come back"),
            }
        }
        let other = client_error(ReplicaError::Engine(Error::ReadOnlyTransaction));
        assert!(
            matches!(&other, ClientError::Other(s) if s.contains("read-only")),
            "{other:?}"
        );
    }
}
