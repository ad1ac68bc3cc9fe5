//! The node's snapshot file: `snapshot`, magic `SNAPRSS3`, a metadata
//! record, the data in records of at most 16 MiB, and an end record with
//! their count and length; written whole as `snapshot.tmp`, synced and
//! renamed over it.

use std::path::Path;

use openraft::{BasicNode, SnapshotMeta};

use super::format::{payload, refuse_old};
use crate::durability::record::{self, corrupt, End, FILE_HEADER};
use crate::durability::{io_error, Fs};
use crate::replication::codec;
use crate::replication::entry::NodeId;
use crate::Error;

/// The snapshot file's magic bytes: format version 3, its metadata and end
/// record in the replication encoding (`codec.rs`), its data the state
/// machine's snapshot with tables (`replication/snapshot.rs`).
const SNAPSHOT_MAGIC: &[u8; 8] = b"SNAPRSS3";
/// The magic bytes of older snapshots, with their versions, refused by
/// name: 1 (bincode 1.3), 2 (postcard, no tables).
const SNAPSHOT_MAGICS_OLD: &[(&[u8; 8], u32)] = &[(b"SNAPRSS1", 1), (b"SNAPRSS2", 2)];
/// The snapshot file.
pub(super) const SNAPSHOT: &str = "snapshot";
/// The snapshot file while it is written.
const SNAPSHOT_TMP: &str = "snapshot.tmp";
/// The most snapshot bytes in one frame.
const SNAPSHOT_CHUNK: usize = 16 << 20;

/// A snapshot's metadata, as openraft gives it.
pub(super) type Meta = SnapshotMeta<NodeId, BasicNode>;

/// The metadata record.
const SNAP_META: u8 = 1;
/// A record of data.
const SNAP_DATA: u8 = 2;
/// The end record: the data records' count and length.
const SNAP_END: u8 = 3;

/// Writes `meta` and `data` as the snapshot in `dir`: to `snapshot.tmp`,
/// synced, then renamed over `snapshot` and the directory synced, so a
/// crash leaves the old snapshot or the new one, whole.
pub(super) fn save(fs: &dyn Fs, dir: &Path, meta: &Meta, data: &[u8]) -> Result<(), Error> {
    let tmp = dir.join(SNAPSHOT_TMP);
    let path = dir.join(SNAPSHOT);
    let mut buf = record::file_header(SNAPSHOT_MAGIC, 0).to_vec();
    record::frame_into(&mut buf, &payload(SNAP_META, meta));
    let mut chunks = 0u64;
    for c in data.chunks(SNAPSHOT_CHUNK) {
        let mut p = Vec::with_capacity(c.len() + 1);
        p.push(SNAP_DATA);
        p.extend_from_slice(c);
        record::frame_into(&mut buf, &p);
        chunks += 1;
    }
    record::frame_into(&mut buf, &payload(SNAP_END, &(chunks, data.len() as u64)));
    let mut f = fs.create(&tmp).map_err(|e| io_error("create", &tmp, &e))?;
    f.append(&buf).map_err(|e| io_error("write", &tmp, &e))?;
    f.sync().map_err(|e| io_error("sync", &tmp, &e))?;
    drop(f);
    fs.rename(&tmp, &path)
        .map_err(|e| io_error("rename", &tmp, &e))?;
    fs.sync_dir(dir).map_err(|e| io_error("sync", dir, &e))
}

/// The snapshot in `dir`, if there is one.
///
/// # Errors
/// [`Error::Corrupt`] if the file is damaged (it is only ever renamed
/// into place whole, so any damage is corruption);
/// [`Error::UnsupportedFormat`] for a version-1 snapshot.
pub(super) fn load(fs: &dyn Fs, dir: &Path) -> Result<Option<(Meta, Vec<u8>)>, Error> {
    let path = dir.join(SNAPSHOT);
    let buf = match fs.read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_error("read", &path, &e)),
    };
    refuse_old(&path, &buf, SNAPSHOT_MAGICS_OLD)?;
    if buf.len() < FILE_HEADER || buf[..FILE_HEADER] != record::file_header(SNAPSHOT_MAGIC, 0) {
        return Err(corrupt(&path, 0, "not a replica snapshot (bad header)"));
    }
    let (frames, end) = record::scan(&buf, FILE_HEADER);
    match end {
        End::Clean => {}
        End::Torn { offset } => {
            return Err(corrupt(&path, offset, "the snapshot ends inside a record"))
        }
        End::Corrupt { offset, reason } => return Err(corrupt(&path, offset, reason)),
    }
    let bad = |offset| corrupt(&path, offset, "a snapshot record that does not decode");
    let mut frames = frames.into_iter();
    let (o, r) = frames.next().ok_or_else(|| bad(FILE_HEADER as u64))?;
    let meta = match buf[r.clone()].split_first() {
        Some((&SNAP_META, b)) => codec::decode(b).map_err(|_| bad(o))?,
        _ => return Err(bad(o)),
    };
    let mut data = Vec::new();
    let mut chunks = 0u64;
    for (o, r) in frames {
        match buf[r].split_first() {
            Some((&SNAP_DATA, b)) => {
                data.extend_from_slice(b);
                chunks += 1;
            }
            Some((&SNAP_END, b)) => {
                let (n, len): (u64, u64) = codec::decode(b).map_err(|_| bad(o))?;
                if n != chunks || len != data.len() as u64 {
                    return Err(corrupt(
                        &path,
                        o,
                        "the snapshot's end record does not match its data",
                    ));
                }
                return Ok(Some((meta, data)));
            }
            _ => return Err(bad(o)),
        }
    }
    Err(corrupt(
        &path,
        buf.len() as u64,
        "the snapshot has no end record",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::durability::StdFs;

    /// A snapshot of format version 1 as that version wrote it: magic
    /// `SNAPRSS1`, its metadata in bincode 1.3's default layout (u64
    /// lengths, a tag byte for an `Option`), laid out by hand for a one-node
    /// membership, no data, and the end record.
    fn v1_snapshot() -> Vec<u8> {
        let u64s = |p: &mut Vec<u8>, v: &[u64]| v.iter().for_each(|x| p.extend(x.to_le_bytes()));
        let mut meta = vec![SNAP_META];
        meta.push(1); // last_log_id: Some
        u64s(&mut meta, &[3, 1, 9]); // term, node_id, index
        meta.push(1); // last_membership.log_id: Some
        u64s(&mut meta, &[1, 1, 1]);
        u64s(&mut meta, &[1, 1, 1]); // configs: [{1}]
        u64s(&mut meta, &[1, 1]); // nodes: {1: ..}
        let addr = b"127.0.0.1:7001";
        u64s(&mut meta, &[addr.len() as u64]);
        meta.extend_from_slice(addr);
        let id = b"3-9-1";
        u64s(&mut meta, &[id.len() as u64]);
        meta.extend_from_slice(id);
        let mut end = vec![SNAP_END];
        u64s(&mut end, &[0, 0]);
        let mut buf = record::file_header(b"SNAPRSS1", 0).to_vec();
        record::frame_into(&mut buf, &meta);
        record::frame_into(&mut buf, &end);
        buf
    }

    #[test]
    fn a_snapshot_of_format_version_1_or_2_is_refused_by_name() {
        let dir = std::env::temp_dir().join(format!("raft-snap-v1-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(SNAPSHOT);
        std::fs::write(&path, v1_snapshot()).unwrap();
        match load(&StdFs, &dir) {
            Err(Error::UnsupportedFormat {
                file,
                version,
                supported,
            }) => assert_eq!(
                (file, version, supported),
                (path.clone(), 1, super::super::format::FORMAT_VERSION)
            ),
            Err(e) => panic!("expected UnsupportedFormat, got {e}"),
            Ok(_) => panic!("a version-1 snapshot loaded"),
        }
        assert_eq!(
            std::fs::read(&path).unwrap(),
            v1_snapshot(),
            "left as it was"
        );
        // Version 2 (postcard, no tables): its header alone names it.
        let mut v2 = record::file_header(b"SNAPRSS2", 0).to_vec();
        v2.extend_from_slice(&v1_snapshot()[FILE_HEADER..]);
        std::fs::write(&path, &v2).unwrap();
        match load(&StdFs, &dir) {
            Err(Error::UnsupportedFormat { version, .. }) => assert_eq!(version, 2),
            Err(e) => panic!("expected UnsupportedFormat, got {e}"),
            Ok(_) => panic!("a version-2 snapshot loaded"),
        }
        assert_eq!(std::fs::read(&path).unwrap(), v2, "left as it was");
        let _ = std::fs::remove_dir_all(dir);
    }
}
