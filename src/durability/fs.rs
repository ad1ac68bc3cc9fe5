//! The file layer under the commit log and the checkpoints: [`Fs`], with
//! [`StdFs`] (the operating system's files) and [`MemFs`](super::MemFs) (files in memory
//! that fail on demand and give the images a crash may leave: what was
//! synced, plus any part of the rest a power cut may have written back).

use std::io;
use std::path::Path;

/// An open file the log appends to.
pub trait FsFile: Send {
    /// Appends all of `buf` at the end of the file.
    ///
    /// # Errors
    /// The write failed; part of `buf` may have reached the file.
    fn append(&mut self, buf: &[u8]) -> io::Result<()>;
    /// Makes everything appended so far durable (`fdatasync`).
    ///
    /// # Errors
    /// The sync failed; what was appended may or may not be durable.
    fn sync(&mut self) -> io::Result<()>;
}

/// A held directory lock; dropping it releases the lock.
pub trait FsLock: Send + Sync {}

/// The file operations durability needs. Paths are absolute or relative to
/// the process's working directory, as `std::fs` takes them.
pub trait Fs: Send + Sync + 'static {
    /// Creates `dir` and its parents if missing.
    ///
    /// # Errors
    /// As `std::fs::create_dir_all`.
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// The names of the files in `dir`.
    ///
    /// # Errors
    /// As `std::fs::read_dir`.
    fn list(&self, dir: &Path) -> io::Result<Vec<String>>;
    /// The whole contents of a file.
    ///
    /// # Errors
    /// As `std::fs::read`.
    fn read(&self, path: &Path) -> io::Result<Vec<u8>>;
    /// Creates (or truncates) a file and opens it for appending.
    ///
    /// # Errors
    /// As `std::fs::File::create`.
    fn create(&self, path: &Path) -> io::Result<Box<dyn FsFile>>;
    /// Opens an existing file for appending at its end.
    ///
    /// # Errors
    /// As `std::fs::OpenOptions::open` with `append`; `NotFound` if it is
    /// missing.
    fn append_to(&self, path: &Path) -> io::Result<Box<dyn FsFile>>;
    /// Renames `from` to `to`, replacing `to`.
    ///
    /// # Errors
    /// As `std::fs::rename`.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Removes a file.
    ///
    /// # Errors
    /// As `std::fs::remove_file`.
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// Cuts a file to `len` bytes and syncs it.
    ///
    /// # Errors
    /// As `std::fs::File::set_len` and `sync_all`.
    fn truncate(&self, path: &Path, len: u64) -> io::Result<()>;
    /// Makes the directory's entries (creates, renames, removes) durable.
    ///
    /// # Errors
    /// As `fsync` on the directory.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// Takes an exclusive lock named by `path`: `Ok(None)` when another
    /// holder (another process, or another open engine) has it.
    ///
    /// # Errors
    /// The lock file could not be created or locked for another reason.
    fn lock(&self, path: &Path) -> io::Result<Option<Box<dyn FsLock>>>;
}

/// The operating system's files (`std::fs`); directory locks are the
/// platform's advisory file locks ([`std::fs::File::try_lock`]), released
/// by the kernel when the process dies, however it dies.
#[derive(Clone, Copy, Debug, Default)]
pub struct StdFs;

struct StdFile(std::fs::File);

impl FsFile for StdFile {
    fn append(&mut self, buf: &[u8]) -> io::Result<()> {
        io::Write::write_all(&mut self.0, buf)
    }
    fn sync(&mut self) -> io::Result<()> {
        self.0.sync_data()
    }
}

/// The directory lock: an open file holding an exclusive advisory lock
/// (`flock` on Unix, `LockFileEx` on Windows), released by the OS when the
/// file is closed, so a killed process leaves no stale lock behind.
struct StdLock(#[allow(dead_code)] std::fs::File);

impl FsLock for StdLock {}

impl Fs for StdFs {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        std::fs::create_dir_all(dir)
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(dir)? {
            if let Ok(name) = e?.file_name().into_string() {
                out.push(name);
            }
        }
        Ok(out)
    }
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        std::fs::read(path)
    }
    fn create(&self, path: &Path) -> io::Result<Box<dyn FsFile>> {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)?;
        Ok(Box::new(StdFile(f)))
    }
    fn append_to(&self, path: &Path) -> io::Result<Box<dyn FsFile>> {
        let f = std::fs::OpenOptions::new().append(true).open(path)?;
        Ok(Box::new(StdFile(f)))
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }
    fn truncate(&self, path: &Path, len: u64) -> io::Result<()> {
        let f = std::fs::OpenOptions::new().write(true).open(path)?;
        f.set_len(len)?;
        f.sync_all()
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        std::fs::File::open(dir)?.sync_all()
    }
    fn lock(&self, path: &Path) -> io::Result<Option<Box<dyn FsLock>>> {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        match f.try_lock() {
            Ok(()) => Ok(Some(Box::new(StdLock(f)))),
            Err(std::fs::TryLockError::WouldBlock) => Ok(None),
            Err(std::fs::TryLockError::Error(e)) => Err(e),
        }
    }
}

/// The in-memory file layer, also reachable here for the unit tests that
/// name it by this path.
#[cfg(all(test, not(loom)))]
pub(crate) use super::memfs::MemFs;
