//! The encoding of what replication stores and sends: log entries
//! (openraft's types around a [`Command`](super::Command)), a durable
//! node's raft log records and snapshot metadata, and the TCP messages.
//! All are postcard 1.x, whose wire format is documented and stable across
//! its 1.x releases: integers and lengths as varints (7 bits a byte), enum
//! variants as varint indexes, an `Option` as a tag byte then the value,
//! byte strings (keys, values) as a varint length then the bytes.
//!
//! Where the bytes go names the format's version: a raft log segment's
//! and a snapshot file's magic (`disk/format.rs`), a TCP frame's first two
//! bytes (`tcp/transport.rs`). A change to what any of them carries bumps
//! the version there, and the older versions are refused by name.

use serde::de::DeserializeOwned;
use serde::Serialize;

/// `prefix`, then `value` encoded after it.
///
/// # Errors
/// postcard's error for a value it cannot represent: a sequence of unknown
/// length, or a type that needs a self-describing format (none of the
/// replicated types is either).
pub(crate) fn encode_after<T: Serialize + ?Sized>(
    prefix: Vec<u8>,
    value: &T,
) -> Result<Vec<u8>, postcard::Error> {
    postcard::to_extend(value, prefix)
}

/// Decodes one `T` from the front of `bytes`: it and the bytes after it.
///
/// # Errors
/// postcard's reason (a truncation, a bad tag or varint, invalid UTF-8).
pub(crate) fn take<T: DeserializeOwned>(bytes: &[u8]) -> Result<(T, &[u8]), String> {
    postcard::take_from_bytes(bytes).map_err(|e| e.to_string())
}

/// Decodes one `T` that fills `bytes` exactly.
///
/// # Errors
/// What was wrong: postcard's reason (a truncation, a bad tag or varint,
/// invalid UTF-8), or the count of bytes left over after the value.
pub(crate) fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, String> {
    match postcard::take_from_bytes(bytes) {
        Ok((v, [])) => Ok(v),
        Ok((_, rest)) => Err(format!(
            "{} bytes left over after the value (of {})",
            rest.len(),
            bytes.len()
        )),
        Err(e) => Err(e.to_string()),
    }
}
