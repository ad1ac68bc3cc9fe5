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
//! write   = op: u8 (0 delete, 1 put) | klen: u32 | key | (vlen: u32 | value, puts only)
//! base    = 2 | n: u32 | (lsn: u64 | commit_ts: u64 | write) * n          (checkpoints)
//! meta    = 3 | stable: u64 | first_seq: u64 | next_lsn: u64               (checkpoints)
//! end     = 4 | frames: u64                                                (checkpoints)
//! segment = 5 | seq: u64 | first_lsn: u64                                  (segments)
//! roll    = 6 | next_seq: u64 | next_lsn: u64                              (segments)
//! synced  = 7 | through: u64                                               (segments)
//! ```
//!
//! `flags` bit 0: the transaction was prepared. A timestamp of 0 is "none"
//! (an untimestamped commit).
//!
//! A segment (format version 2, magic `SNAPLOG2`) is its file header, one
//! `segment` record (its number again, under a checksum, and the lsn its
//! first commit gets), its `commit` records, and, once the next segment
//! exists, a last `roll` record naming that segment and the lsn it starts
//! at. These anchors let recovery tell a lost file or a lost tail from the
//! end of the log (`log/segment.rs`, "Roll-over"). A `synced` record,
//! written at the end of a batch that follows a sync, says that every byte
//! of its segment below `through` was synced before it was written
//! (`SEGMENT_HEADER <= through <=` its own offset): damage below it is no
//! lost write-back. A version-1 segment (`SNAPLOG1`: no `segment` or `roll`
//! records) is refused with
//! [`Error::UnsupportedFormat`](crate::Error::UnsupportedFormat).
//! Checkpoints are unchanged (`SNAPCKP1`).

use std::ops::Range;

/// Bytes in a file header.
pub(crate) const FILE_HEADER: usize = 16;
/// Bytes in a frame header.
pub(crate) const FRAME_HEADER: usize = 12;
/// The largest payload a frame may declare; a header naming more is corrupt.
pub(crate) const MAX_PAYLOAD: usize = 1 << 30;

/// A commit log segment's magic bytes: format version 2.
pub(crate) const SEGMENT_MAGIC: &[u8; 8] = b"SNAPLOG2";
/// The segment format version [`SEGMENT_MAGIC`] names.
pub(crate) const SEGMENT_VERSION: u32 = 2;
/// The magic bytes of segment format version 1, refused by name.
pub(crate) const SEGMENT_MAGIC_V1: &[u8; 8] = b"SNAPLOG1";
/// A checkpoint file's magic bytes.
pub(crate) const CHECKPOINT_MAGIC: &[u8; 8] = b"SNAPCKP1";

pub(crate) const KIND_COMMIT: u8 = 1;
pub(crate) const KIND_BASE: u8 = 2;
pub(crate) const KIND_META: u8 = 3;
pub(crate) const KIND_END: u8 = 4;
pub(crate) const KIND_SEGMENT: u8 = 5;
pub(crate) const KIND_ROLL: u8 = 6;
pub(crate) const KIND_SYNCED: u8 = 7;

/// Bytes in a `segment` or `roll` payload: the kind and two `u64`s.
pub(crate) const ANCHOR_PAYLOAD: usize = 17;

/// Commit flag: the transaction was prepared (two-phase commit).
pub(crate) const FLAG_PREPARED: u8 = 1;

/// Offset of the lsn inside a commit payload (patched in under the log's
/// append lock, once the lsn is known).
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

/// One write of a commit: a put (`Some` value) or a delete.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Write {
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

/// Appends one write to a payload.
pub(crate) fn push_write(out: &mut Vec<u8>, key: &[u8], value: Option<&[u8]>) {
    out.push(u8::from(value.is_some()));
    out.extend_from_slice(&(key.len() as u32).to_le_bytes());
    out.extend_from_slice(key);
    if let Some(v) = value {
        out.extend_from_slice(&(v.len() as u32).to_le_bytes());
        out.extend_from_slice(v);
    }
}

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

    pub(crate) fn write(&mut self) -> Option<Write> {
        let op = self.u8()?;
        let key = self.bytes()?.to_vec();
        let value = match op {
            0 => None,
            1 => Some(self.bytes()?.to_vec()),
            _ => return None,
        };
        Some(Write { key, value })
    }

    pub(crate) fn done(&self) -> bool {
        self.at == self.buf.len()
    }
}

/// Decodes a commit payload; `None` if it is not one or is malformed
/// (which a checked frame should never be: the caller reports corruption).
pub(crate) fn decode_commit(payload: &[u8]) -> Option<Commit> {
    let mut r = Reader::new(payload);
    if r.u8()? != KIND_COMMIT {
        return None;
    }
    let lsn = r.u64()?;
    let commit_ts = r.u64()?;
    let durable_ts = r.u64()?;
    let flags = r.u8()?;
    let n = r.u32()?;
    let mut writes = Vec::with_capacity((n as usize).min(payload.len()));
    for _ in 0..n {
        writes.push(r.write()?);
    }
    r.done().then_some(Commit {
        lsn,
        commit_ts,
        durable_ts,
        prepared: flags & FLAG_PREPARED != 0,
        writes,
    })
}

/// Encodes a commit record's payload (checkpoints carry records whole).
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
        push_write(out, &w.key, w.value.as_deref());
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

    #[test]
    fn commit_payload_round_trips() {
        let c = Commit {
            lsn: 7,
            commit_ts: 20,
            durable_ts: 25,
            prepared: true,
            writes: vec![
                Write {
                    key: b"a".to_vec(),
                    value: Some(b"1".to_vec()),
                },
                Write {
                    key: b"b".to_vec(),
                    value: None,
                },
            ],
        };
        let mut p = Vec::new();
        encode_commit(&c, &mut p);
        assert_eq!(decode_commit(&p), Some(c));
        assert_eq!(decode_commit(&p[..p.len() - 1]), None);
    }
}
