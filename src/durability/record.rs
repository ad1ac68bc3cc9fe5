//! The on-disk record format shared by the commit log's segments and the
//! checkpoint files: framing (length and checksums), and the payloads.
//!
//! A file is a 16-byte header (8 magic bytes, then a little-endian `u64`:
//! the segment's sequence number, or 0 in a checkpoint) followed by frames:
//!
//! ```text
//! frame   = len: u32 | payload_crc: u32 | header_crc: u32 | payload (len bytes)
//! ```
//!
//! all little-endian; `payload_crc` is crc32c of the payload and
//! `header_crc` crc32c of the frame's first 8 bytes, so a damaged length is
//! told apart from a torn tail: a frame whose header checks and whose
//! payload runs past the end of the file is torn (a crash in the middle of
//! its write), while a header or payload that fails its checksum inside the
//! file is corruption. A zero-filled rest of the file (a file system that
//! extended the file before the data reached it) counts as torn.
//!
//! Payloads start with a kind byte:
//!
//! ```text
//! commit  = 1 | lsn: u64 | commit_ts: u64 | durable_ts: u64 | flags: u8 | n: u32 | write * n
//! write   = op: u8 | (id: u32, ops 2 and 3) | klen: u32 | key | (vlen: u32 | value, puts)
//!           op 0 delete, 1 put (the default table); 2 delete, 3 put (table `id`, not 0)
//! base    = 2 | n: u32 | (lsn: u64 | commit_ts: u64 | write) * n          (checkpoints)
//! meta    = 3 | stable: u64 | first_seq: u64 | next_lsn: u64               (checkpoints)
//! end     = 4 | frames: u64                                                (checkpoints)
//! segment = 5 | seq: u64 | first_lsn: u64                                  (segments)
//! roll    = 6 | next_seq: u64 | next_lsn: u64                              (segments)
//! synced  = 7 | through: u64                                               (segments)
//! catalog = 8 | next_id: u64 | n: u32 | table * n                          (checkpoints)
//! create  = 9 | lsn: u64 | table                                           (segments)
//! drop    = 10 | lsn: u64 | id: u32                                        (segments)
//! table   = id: u32 | max_key: u32 | max_value: u32 | name_len: u16 | name (UTF-8)
//! ```
//!
//! `flags` bit 0: the transaction was prepared. A timestamp of 0 is "none"
//! (an untimestamped commit). A `table` has an id other than 0 and a name
//! of 1 to 255 bytes; `next_id` is one above the highest table id ever
//! created (`catalog.rs`).
//!
//! `create` and `drop` take an lsn from the log's counter, as commits do:
//! lsn order is log order across every record, the gap check (D4) covers
//! them, and their callers wait for them as for a commit. They carry no
//! timestamp: no stable covers or leaves them, rollback to stable keeps
//! them, and a checkpoint folds every one below its cut into its catalog.
//!
//! A segment (format version 3, magic `SNAPLOG3`) is its file header, one
//! `segment` record (its number again, under a checksum, and the lsn its
//! first record gets), its `commit`, `create` and `drop` records, and, once
//! the next segment exists, a last `roll` record naming that segment and
//! the lsn it starts at. These anchors let recovery tell a lost file or a
//! lost tail from the end of the log (`log/segment.rs`, "Roll-over"). A
//! `synced` record, written at the end of a batch that follows a sync, says
//! that every byte of its segment below `through` was synced before it was
//! written (`SEGMENT_HEADER <= through <=` its own offset): damage below it
//! is no lost write-back.
//!
//! A checkpoint (version 2, magic `SNAPCKP2`) is `meta`, one or more
//! `catalog` records (the same `next_id` in each), the `base` records, the
//! carried `commit` records and `end` (the number of frames before it).
//!
//! Older files: a version-2 segment (`SNAPLOG2`) and a version-1 checkpoint
//! (`SNAPCKP1`: no `catalog` record) are read, their keys in the default
//! table (a table op or a table record in one is corruption); the log goes
//! on in version-3 segments after them. A version-1 segment (`SNAPLOG1`: no
//! `segment` or `roll` records) and any version above this build's are
//! refused with [`Error::UnsupportedFormat`](crate::Error::UnsupportedFormat).

use super::catalog::TableDef;
use std::ops::Range;

/// Bytes in a file header.
pub(crate) const FILE_HEADER: usize = 16;
/// Bytes in a frame header.
pub(crate) const FRAME_HEADER: usize = 12;
/// The largest payload a frame may declare; a header naming more is corrupt.
pub(crate) const MAX_PAYLOAD: usize = 1 << 30;

/// A commit log segment's magic bytes: format version 3.
pub(crate) const SEGMENT_MAGIC: &[u8; 8] = b"SNAPLOG3";
/// The segment format version [`SEGMENT_MAGIC`] names.
pub(crate) const SEGMENT_VERSION: u32 = 3;
/// The magic bytes of segment format version 2 (read: no tables).
pub(crate) const SEGMENT_MAGIC_V2: &[u8; 8] = b"SNAPLOG2";
/// The magic bytes' first seven: those of a segment of any version.
pub(crate) const SEGMENT_MAGIC_STEM: &[u8; 7] = b"SNAPLOG";
/// A checkpoint file's magic bytes: format version 2.
pub(crate) const CHECKPOINT_MAGIC: &[u8; 8] = b"SNAPCKP2";
/// The checkpoint format version [`CHECKPOINT_MAGIC`] names.
pub(crate) const CHECKPOINT_VERSION: u32 = 2;
/// The magic bytes of checkpoint format version 1 (read: no tables).
pub(crate) const CHECKPOINT_MAGIC_V1: &[u8; 8] = b"SNAPCKP1";
/// The magic bytes' first seven: those of a checkpoint of any version.
pub(crate) const CHECKPOINT_MAGIC_STEM: &[u8; 7] = b"SNAPCKP";

pub(crate) const KIND_COMMIT: u8 = 1;
pub(crate) const KIND_BASE: u8 = 2;
pub(crate) const KIND_META: u8 = 3;
pub(crate) const KIND_END: u8 = 4;
pub(crate) const KIND_SEGMENT: u8 = 5;
pub(crate) const KIND_ROLL: u8 = 6;
pub(crate) const KIND_SYNCED: u8 = 7;
pub(crate) const KIND_CATALOG: u8 = 8;
pub(crate) const KIND_CREATE: u8 = 9;
pub(crate) const KIND_DROP: u8 = 10;

/// Bytes in a `segment` or `roll` payload: the kind and two `u64`s.
pub(crate) const ANCHOR_PAYLOAD: usize = 17;

/// Commit flag: the transaction was prepared (two-phase commit).
pub(crate) const FLAG_PREPARED: u8 = 1;

/// Offset of the lsn inside a commit, `create` or `drop` payload (patched
/// in under the log's append lock, once the lsn is known).
pub(crate) const LSN_AT: usize = 1;

/// A numbered file's name: `prefix`, `seq` in 16 hex digits, `suffix`
/// (`log-….seg`, `ckpt-….ckpt`, a replica's `raft-….log`).
pub(crate) fn numbered_name(prefix: &str, seq: u64, suffix: &str) -> String {
    format!("{prefix}{seq:016x}{suffix}")
}

/// The number in a name made by [`numbered_name`] with `prefix` and
/// `suffix`.
pub(crate) fn parse_numbered(name: &str, prefix: &str, suffix: &str) -> Option<u64> {
    let hex = name.strip_prefix(prefix)?.strip_suffix(suffix)?;
    (hex.len() == 16).then(|| u64::from_str_radix(hex, 16).ok())?
}

/// The error for a damaged record at `offset` of `file` (0: the file
/// itself).
pub(crate) fn corrupt(file: &std::path::Path, offset: u64, reason: &'static str) -> crate::Error {
    crate::Error::Corrupt {
        file: file.to_path_buf(),
        offset,
        reason,
    }
}

/// The version a file's first 8 bytes name if they are `stem` and one
/// ASCII digit (`None`: not a file of that kind).
pub(crate) fn magic_version(head: &[u8], stem: &[u8; 7]) -> Option<u32> {
    match head {
        [s @ .., d] if s == stem && d.is_ascii_digit() => Some(u32::from(d - b'0')),
        _ => None,
    }
}

/// The file header for `magic` and `seq`.
pub(crate) fn file_header(magic: &[u8; 8], seq: u64) -> [u8; FILE_HEADER] {
    let mut h = [0u8; FILE_HEADER];
    h[..8].copy_from_slice(magic);
    h[8..].copy_from_slice(&seq.to_le_bytes());
    h
}

/// A `segment` (`KIND_SEGMENT`) or `roll` (`KIND_ROLL`) payload: the kind
/// and two numbers.
pub(crate) fn anchor(kind: u8, a: u64, b: u64) -> [u8; ANCHOR_PAYLOAD] {
    let mut p = [0u8; ANCHOR_PAYLOAD];
    p[0] = kind;
    p[1..9].copy_from_slice(&a.to_le_bytes());
    p[9..].copy_from_slice(&b.to_le_bytes());
    p
}

/// The two numbers of a `kind` anchor payload; `None` if `payload` is not
/// one.
pub(crate) fn decode_anchor(kind: u8, payload: &[u8]) -> Option<(u64, u64)> {
    let mut r = Reader::new(payload);
    if r.u8()? != kind {
        return None;
    }
    let a = r.u64()?;
    let b = r.u64()?;
    r.done().then_some((a, b))
}

/// Appends a framed `synced` record saying every byte of the segment below
/// `through` is synced.
pub(crate) fn frame_synced(out: &mut Vec<u8>, through: u64) {
    let mut p = [0u8; 9];
    p[0] = KIND_SYNCED;
    p[1..].copy_from_slice(&through.to_le_bytes());
    frame_into(out, &p);
}

/// The offset a `synced` payload names; `None` if `payload` is not one.
pub(crate) fn decode_synced(payload: &[u8]) -> Option<u64> {
    let mut r = Reader::new(payload);
    if r.u8()? != KIND_SYNCED {
        return None;
    }
    let through = r.u64()?;
    r.done().then_some(through)
}

/// Appends one frame holding `payload` to `out`.
pub(crate) fn frame_into(out: &mut Vec<u8>, payload: &[u8]) {
    let len = u32::try_from(payload.len()).expect("payloads are bounded by MAX_PAYLOAD");
    let mut h = [0u8; FRAME_HEADER];
    h[..4].copy_from_slice(&len.to_le_bytes());
    h[4..8].copy_from_slice(&crc32c::crc32c(payload).to_le_bytes());
    let hc = crc32c::crc32c(&h[..8]);
    h[8..].copy_from_slice(&hc.to_le_bytes());
    out.extend_from_slice(&h);
    out.extend_from_slice(payload);
}

/// How a scan of a file's frames ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum End {
    /// Every byte belonged to a complete, checked frame.
    Clean,
    /// The file ends inside the frame at `offset` (or is zero from there
    /// on): a torn final write.
    Torn { offset: u64 },
    /// The frame at `offset` fails its checksum (or declares an impossible
    /// length) with bytes that are not all zero after it.
    Corrupt { offset: u64, reason: &'static str },
}

/// The frames of `buf` from `start`: each payload's byte range, in order,
/// up to the first torn or corrupt frame.
pub(crate) fn scan(buf: &[u8], start: usize) -> (Vec<(u64, Range<usize>)>, End) {
    let mut out = Vec::new();
    let mut at = start;
    loop {
        if at == buf.len() {
            return (out, End::Clean);
        }
        let offset = at as u64;
        let rest = &buf[at..];
        if rest.iter().all(|&b| b == 0) {
            return (out, End::Torn { offset });
        }
        if rest.len() < FRAME_HEADER {
            return (out, End::Torn { offset });
        }
        let hc = u32::from_le_bytes(rest[8..12].try_into().expect("4 bytes"));
        if crc32c::crc32c(&rest[..8]) != hc {
            return (
                out,
                End::Corrupt {
                    offset,
                    reason: "frame header checksum mismatch",
                },
            );
        }
        let len = u32::from_le_bytes(rest[..4].try_into().expect("4 bytes")) as usize;
        if len > MAX_PAYLOAD {
            return (
                out,
                End::Corrupt {
                    offset,
                    reason: "frame length over the bound",
                },
            );
        }
        if rest.len() - FRAME_HEADER < len {
            return (out, End::Torn { offset });
        }
        let payload = &rest[FRAME_HEADER..FRAME_HEADER + len];
        let pc = u32::from_le_bytes(rest[4..8].try_into().expect("4 bytes"));
        if crc32c::crc32c(payload) != pc {
            return (
                out,
                End::Corrupt {
                    offset,
                    reason: "payload checksum mismatch",
                },
            );
        }
        out.push((offset, at + FRAME_HEADER..at + FRAME_HEADER + len));
        at += FRAME_HEADER + len;
    }
}

/// One write of a commit: a put (`Some` value) or a delete, in `table`
/// (0: the default table).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Write {
    pub(crate) table: u32,
    pub(crate) key: Vec<u8>,
    pub(crate) value: Option<Vec<u8>>,
}

/// A decoded commit record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Commit {
    pub(crate) lsn: u64,
    pub(crate) commit_ts: u64,
    pub(crate) durable_ts: u64,
    pub(crate) prepared: bool,
    pub(crate) writes: Vec<Write>,
}

impl Commit {
    /// Covered at `stable`: untimestamped, or durable at or below it. (A
    /// checkpoint taken with no stable set covers everything;
    /// `State::fold` says so itself.)
    pub(crate) fn covered_by(&self, stable: u64) -> bool {
        self.durable_ts == 0 || self.durable_ts <= stable
    }
}

/// A decoded log record: a commit, or a table's `create` or `drop`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Record {
    Commit(Commit),
    CreateTable {
        lsn: u64,
        def: TableDef,
    },
    /// `id` is never 0.
    DropTable {
        lsn: u64,
        id: u32,
    },
}

impl Record {
    pub(crate) fn lsn(&self) -> u64 {
        match self {
            Record::Commit(c) => c.lsn,
            Record::CreateTable { lsn, .. } | Record::DropTable { lsn, .. } => *lsn,
        }
    }

    /// Covered at `stable` ([`Commit::covered_by`]); a `create` or `drop`
    /// has no timestamp and is covered at every stable.
    pub(crate) fn covered_by(&self, stable: u64) -> bool {
        match self {
            Record::Commit(c) => c.covered_by(stable),
            Record::CreateTable { .. } | Record::DropTable { .. } => true,
        }
    }
}

/// Starts a commit payload in `out` (cleared): the lsn is a placeholder
/// (0) patched at [`LSN_AT`] when the log assigns one.
pub(crate) fn begin_commit(
    out: &mut Vec<u8>,
    commit_ts: u64,
    durable_ts: u64,
    prepared: bool,
    n: u32,
) {
    out.clear();
    out.push(KIND_COMMIT);
    out.extend_from_slice(&0u64.to_le_bytes());
    out.extend_from_slice(&commit_ts.to_le_bytes());
    out.extend_from_slice(&durable_ts.to_le_bytes());
    out.push(if prepared { FLAG_PREPARED } else { 0 });
    out.extend_from_slice(&n.to_le_bytes());
}

/// Appends one write to a payload: ops 0 and 1 for the default table, 2
/// and 3 with the id for another.
pub(crate) fn push_write(out: &mut Vec<u8>, table: u32, key: &[u8], value: Option<&[u8]>) {
    let op = u8::from(value.is_some());
    if table == 0 {
        out.push(op);
    } else {
        out.push(op + 2);
        out.extend_from_slice(&table.to_le_bytes());
    }
    out.extend_from_slice(&(key.len() as u32).to_le_bytes());
    out.extend_from_slice(key);
    if let Some(v) = value {
        out.extend_from_slice(&(v.len() as u32).to_le_bytes());
        out.extend_from_slice(v);
    }
}

/// Appends a `table` (a definition) to a payload.
pub(crate) fn push_table(out: &mut Vec<u8>, def: &TableDef) {
    out.extend_from_slice(&def.id().to_le_bytes());
    out.extend_from_slice(&def.max_key_len().to_le_bytes());
    out.extend_from_slice(&def.max_value_len().to_le_bytes());
    let name = def.name().as_bytes();
    // A `TableDef` holds at most MAX_TABLE_NAME (255) bytes of name.
    out.extend_from_slice(&(name.len() as u16).to_le_bytes());
    out.extend_from_slice(name);
}

/// A `create` payload for `def` in `out` (cleared), its lsn a placeholder
/// patched at [`LSN_AT`].
pub(crate) fn begin_create(out: &mut Vec<u8>, def: &TableDef) {
    out.clear();
    out.push(KIND_CREATE);
    out.extend_from_slice(&0u64.to_le_bytes());
    push_table(out, def);
}

/// A `drop` payload for table `id` in `out` (cleared), its lsn a
/// placeholder patched at [`LSN_AT`].
pub(crate) fn begin_drop(out: &mut Vec<u8>, id: u32) {
    out.clear();
    out.push(KIND_DROP);
    out.extend_from_slice(&0u64.to_le_bytes());
    out.extend_from_slice(&id.to_le_bytes());
}

/// Why a payload does not decode: it ends early.
pub(crate) const TRUNCATED: &str = "malformed log record";

/// A little-endian reader over a payload; every read is bounds-checked.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Reader { buf, at: 0 }
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.at.checked_add(n)?;
        let s = self.buf.get(self.at..end)?;
        self.at = end;
        Some(s)
    }

    pub(crate) fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    pub(crate) fn u16(&mut self) -> Option<u16> {
        self.take(2)
            .map(|b| u16::from_le_bytes(b.try_into().expect("2 bytes")))
    }

    pub(crate) fn u32(&mut self) -> Option<u32> {
        self.take(4)
            .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
    }

    pub(crate) fn u64(&mut self) -> Option<u64> {
        self.take(8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
    }

    pub(crate) fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = self.u32()? as usize;
        self.take(n)
    }

    /// One write; `tables`: the file's format has table ops (2 and 3).
    ///
    /// # Errors
    /// What is wrong: it ends early, or an unknown op, a table op in a
    /// format without tables, or a table op naming table 0.
    pub(crate) fn write(&mut self, tables: bool) -> Result<Write, &'static str> {
        let op = self.u8().ok_or(TRUNCATED)?;
        let table = match op {
            0 | 1 => 0,
            2 | 3 if !tables => return Err("table write in a file of a format without tables"),
            2 | 3 => match self.u32().ok_or(TRUNCATED)? {
                0 => return Err("table write naming the default table"),
                id => id,
            },
            _ => return Err("unknown write op"),
        };
        let key = self.bytes().ok_or(TRUNCATED)?.to_vec();
        let value = match op {
            1 | 3 => Some(self.bytes().ok_or(TRUNCATED)?.to_vec()),
            _ => None,
        };
        Ok(Write { table, key, value })
    }

    /// One `table` (a definition).
    ///
    /// # Errors
    /// What is wrong: it ends early, or its id is 0, or its name is empty,
    /// over 255 bytes or not UTF-8.
    pub(crate) fn table(&mut self) -> Result<TableDef, &'static str> {
        let id = self.u32().ok_or(TRUNCATED)?;
        let max_key = self.u32().ok_or(TRUNCATED)?;
        let max_value = self.u32().ok_or(TRUNCATED)?;
        let len = self.u16().ok_or(TRUNCATED)?;
        let name = self.take(usize::from(len)).ok_or(TRUNCATED)?;
        let name = std::str::from_utf8(name).map_err(|_| "table name is not UTF-8")?;
        TableDef::new(id, name.to_owned(), max_key, max_value)
    }

    pub(crate) fn done(&self) -> bool {
        self.at == self.buf.len()
    }
}

/// Decodes a log record's payload (`commit`, `create` or `drop`);
/// `tables`: the file's format has tables (a table op or record in one
/// without is damage).
///
/// # Errors
/// What is wrong with it (which a checked frame should never be: the
/// caller reports corruption).
pub(crate) fn decode_record(payload: &[u8], tables: bool) -> Result<Record, &'static str> {
    let mut r = Reader::new(payload);
    let kind = r.u8().ok_or(TRUNCATED)?;
    let lsn = r.u64().ok_or(TRUNCATED)?;
    let rec = match kind {
        KIND_COMMIT => {
            let commit_ts = r.u64().ok_or(TRUNCATED)?;
            let durable_ts = r.u64().ok_or(TRUNCATED)?;
            let flags = r.u8().ok_or(TRUNCATED)?;
            let n = r.u32().ok_or(TRUNCATED)?;
            let mut writes = Vec::with_capacity((n as usize).min(payload.len()));
            for _ in 0..n {
                writes.push(r.write(tables)?);
            }
            Record::Commit(Commit {
                lsn,
                commit_ts,
                durable_ts,
                prepared: flags & FLAG_PREPARED != 0,
                writes,
            })
        }
        KIND_CREATE | KIND_DROP if !tables => {
            return Err("table record in a file of a format without tables")
        }
        KIND_CREATE => Record::CreateTable {
            lsn,
            def: r.table()?,
        },
        KIND_DROP => match r.u32().ok_or(TRUNCATED)? {
            0 => return Err("table id 0 (the default table) in a table record"),
            id => Record::DropTable { lsn, id },
        },
        _ => return Err("unknown record kind"),
    };
    if r.done() {
        Ok(rec)
    } else {
        Err(TRUNCATED)
    }
}

/// Encodes a log record's payload.
#[cfg(all(test, not(loom)))]
pub(crate) fn encode_record(rec: &Record, out: &mut Vec<u8>) {
    match rec {
        Record::Commit(c) => encode_commit(c, out),
        Record::CreateTable { def, .. } => begin_create(out, def),
        Record::DropTable { id, .. } => begin_drop(out, *id),
    }
    out[LSN_AT..LSN_AT + 8].copy_from_slice(&rec.lsn().to_le_bytes());
}

/// Encodes a commit record's payload (checkpoints carry commits whole).
pub(crate) fn encode_commit(c: &Commit, out: &mut Vec<u8>) {
    begin_commit(
        out,
        c.commit_ts,
        c.durable_ts,
        c.prepared,
        c.writes.len() as u32,
    );
    out[LSN_AT..LSN_AT + 8].copy_from_slice(&c.lsn.to_le_bytes());
    for w in &c.writes {
        push_write(out, w.table, &w.key, w.value.as_deref());
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn two_frames() -> Vec<u8> {
        let mut f = Vec::new();
        frame_into(&mut f, b"hello");
        frame_into(&mut f, b"world!");
        f
    }

    #[test]
    fn frames_scan_back_in_order() {
        let f = two_frames();
        let (frames, end) = scan(&f, 0);
        assert_eq!(end, End::Clean);
        assert_eq!(frames.len(), 2);
        assert_eq!(&f[frames[0].1.clone()], b"hello");
        assert_eq!(&f[frames[1].1.clone()], b"world!");
    }

    #[test]
    fn every_cut_is_torn_at_the_last_whole_frame() {
        let f = two_frames();
        let first_end = FRAME_HEADER + 5;
        for cut in 0..f.len() {
            let (frames, end) = scan(&f[..cut], 0);
            let whole = usize::from(cut >= first_end);
            assert_eq!(frames.len(), whole, "cut at {cut}");
            let torn_at = if whole == 1 { first_end } else { 0 } as u64;
            if cut == 0 || cut == first_end {
                assert_eq!(end, End::Clean, "cut at {cut}");
            } else {
                assert_eq!(end, End::Torn { offset: torn_at }, "cut at {cut}");
            }
        }
    }

    #[test]
    fn every_flipped_bit_is_corrupt_never_a_frame() {
        let f = two_frames();
        for byte in 0..f.len() {
            for bit in 0..8 {
                let mut g = f.clone();
                g[byte] ^= 1 << bit;
                let (frames, end) = scan(&g, 0);
                let in_first = byte < FRAME_HEADER + 5;
                assert_eq!(
                    frames.len(),
                    usize::from(!in_first),
                    "byte {byte} bit {bit}"
                );
                match end {
                    End::Corrupt { offset, .. } => {
                        assert_eq!(
                            offset,
                            if in_first {
                                0
                            } else {
                                (FRAME_HEADER + 5) as u64
                            }
                        )
                    }
                    // A flip in the second frame's length can push its end
                    // past the file, but then its header checksum fails.
                    other => panic!("byte {byte} bit {bit}: {other:?}"),
                }
            }
        }
    }

    #[test]
    fn anchors_round_trip_and_refuse_other_kinds_and_lengths() {
        let p = anchor(KIND_ROLL, 7, 1 << 40);
        assert_eq!(decode_anchor(KIND_ROLL, &p), Some((7, 1 << 40)));
        assert_eq!(decode_anchor(KIND_SEGMENT, &p), None);
        assert_eq!(decode_anchor(KIND_ROLL, &p[..p.len() - 1]), None);
        let mut long = p.to_vec();
        long.push(0);
        assert_eq!(decode_anchor(KIND_ROLL, &long), None);
        let mut s = Vec::new();
        frame_synced(&mut s, 4096);
        let (frames, end) = scan(&s, 0);
        assert_eq!(end, End::Clean);
        let payload = &s[frames[0].1.clone()];
        assert_eq!(decode_synced(payload), Some(4096));
        assert_eq!(decode_synced(&payload[..8]), None);
        assert_eq!(decode_anchor(KIND_ROLL, payload), None);
    }

    fn w(table: u32, key: &str, value: Option<&str>) -> Write {
        Write {
            table,
            key: key.into(),
            value: value.map(Into::into),
        }
    }

    fn round_trip(rec: &Record) -> Vec<u8> {
        let mut p = Vec::new();
        encode_record(rec, &mut p);
        assert_eq!(decode_record(&p, true).as_ref(), Ok(rec));
        // Every cut is an error, never a panic or another record.
        for cut in 0..p.len() {
            assert!(decode_record(&p[..cut], true).is_err(), "cut {cut}");
        }
        let mut long = p.clone();
        long.push(0);
        assert!(decode_record(&long, true).is_err());
        p
    }

    #[test]
    fn every_record_kind_round_trips() {
        let c = Record::Commit(Commit {
            lsn: 7,
            commit_ts: 20,
            durable_ts: 25,
            prepared: true,
            writes: vec![
                w(0, "a", Some("1")),
                w(0, "b", None),
                w(4, "a", Some("2")),
                w(u32::MAX, "c", None),
            ],
        });
        let p = round_trip(&c);
        // A table op is refused in a format without tables.
        assert!(decode_record(&p, false).is_err());
        let plain = Record::Commit(Commit {
            lsn: 8,
            commit_ts: 0,
            durable_ts: 0,
            prepared: false,
            writes: vec![w(0, "a", Some("1")), w(0, "b", None)],
        });
        let p = round_trip(&plain);
        assert_eq!(decode_record(&p, false), Ok(plain));
        let def = TableDef::new(9, "naïve".into(), 16, 1 << 20).unwrap();
        let create = Record::CreateTable { lsn: 9, def };
        let p = round_trip(&create);
        assert!(decode_record(&p, false).is_err());
        let long = TableDef::new(3, "n".repeat(255), 0, 0).unwrap();
        round_trip(&Record::CreateTable { lsn: 10, def: long });
        let drop = Record::DropTable { lsn: 11, id: 9 };
        let p = round_trip(&drop);
        assert!(decode_record(&p, false).is_err());
    }

    #[test]
    fn damaged_table_records_are_errors_that_say_what_is_wrong() {
        let def = TableDef::new(9, "users".into(), 16, 64).unwrap();
        let mut create = Vec::new();
        encode_record(&Record::CreateTable { lsn: 1, def }, &mut create);
        let name_at = create.len() - 5;
        let mut bad = create.clone();
        bad[name_at] = 0xFF;
        assert_eq!(decode_record(&bad, true), Err("table name is not UTF-8"));
        // A name of 256 bytes.
        let mut long = create[..name_at - 2].to_vec();
        long.extend_from_slice(&256u16.to_le_bytes());
        long.extend_from_slice(&[b'n'; 256]);
        assert_eq!(
            decode_record(&long, true),
            Err("table name empty or over 255 bytes")
        );
        let mut empty = create[..name_at - 2].to_vec();
        empty.extend_from_slice(&0u16.to_le_bytes());
        assert!(decode_record(&empty, true).is_err());
        let mut zero = create.clone();
        zero[9..13].fill(0);
        assert!(decode_record(&zero, true).is_err());
        let mut drop = Vec::new();
        encode_record(&Record::DropTable { lsn: 2, id: 1 }, &mut drop);
        drop[9..13].fill(0);
        assert!(decode_record(&drop, true).is_err());
        // An unknown op, a table op naming table 0, a truncated id.
        let mut commit = Vec::new();
        begin_commit(&mut commit, 0, 0, false, 1);
        let op_at = commit.len();
        push_write(&mut commit, 5, b"k", Some(b"v"));
        let mut op = commit.clone();
        op[op_at] = 4;
        assert_eq!(decode_record(&op, true), Err("unknown write op"));
        let mut t0 = commit.clone();
        t0[op_at + 1..op_at + 5].fill(0);
        assert_eq!(
            decode_record(&t0, true),
            Err("table write naming the default table")
        );
        assert_eq!(decode_record(&commit[..op_at + 3], true), Err(TRUNCATED));
        assert_eq!(decode_record(&[11; 9], true), Err("unknown record kind"));
    }

    #[test]
    fn magic_versions_are_read_from_the_stem_and_digit() {
        assert_eq!(magic_version(SEGMENT_MAGIC, SEGMENT_MAGIC_STEM), Some(3));
        assert_eq!(magic_version(b"SNAPLOG9", SEGMENT_MAGIC_STEM), Some(9));
        assert_eq!(magic_version(b"SNAPLOGx", SEGMENT_MAGIC_STEM), None);
        assert_eq!(magic_version(CHECKPOINT_MAGIC, SEGMENT_MAGIC_STEM), None);
        assert_eq!(magic_version(b"SNAPCKP1", CHECKPOINT_MAGIC_STEM), Some(1));
    }
}
