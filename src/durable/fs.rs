//! The file layer under the commit log and the checkpoints: [`Fs`], with
//! [`StdFs`] (the operating system's files) and [`MemFs`] (files in memory
//! that can fail on demand and lose, on a simulated crash, everything that
//! was not synced).

use parking_lot::Mutex;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

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

/// Which operation a [`MemFs`] fault hits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FaultOp {
    /// [`FsFile::append`]: the failed append writes half of its buffer.
    Append,
    /// [`FsFile::sync`]: nothing becomes durable.
    Sync,
}

#[derive(Default)]
struct Inode {
    data: Vec<u8>,
    /// The prefix a crash keeps.
    synced: usize,
}

#[derive(Default)]
struct MemState {
    inodes: Vec<Inode>,
    /// Directory entries now.
    names: HashMap<PathBuf, usize>,
    /// Directory entries a crash keeps (as of each directory's last sync).
    durable_names: HashMap<PathBuf, usize>,
    locks: HashSet<PathBuf>,
    /// Per operation: fail once this many more calls have succeeded.
    faults: HashMap<FaultOp, u64>,
    syncs: u64,
    sync_latency: std::time::Duration,
}

/// Files in memory, for tests and for embedding without a disk: every
/// operation of [`Fs`], plus [`MemFs::crash`] (the files as a power cut
/// would leave them: only what was synced, only the directory entries that
/// were synced) and injected failures ([`MemFs::fail_after`]). Clones share
/// the same files.
#[derive(Clone, Default)]
pub struct MemFs {
    st: Arc<Mutex<MemState>>,
}

impl fmt::Debug for MemFs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.st.lock();
        f.debug_struct("MemFs")
            .field("files", &st.names.len())
            .finish()
    }
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{} not found", path.display()),
    )
}

impl MemFs {
    /// An empty file system.
    pub fn new() -> MemFs {
        MemFs::default()
    }

    /// A new, separate file system holding what a crash now would leave:
    /// each file cut to what was synced, and only the directory entries
    /// made durable by [`Fs::sync_dir`]. Locks and faults are not carried.
    pub fn crash(&self) -> MemFs {
        let st = self.st.lock();
        let mut out = MemState::default();
        for (name, &ino) in &st.durable_names {
            let data = st.inodes[ino].data[..st.inodes[ino].synced].to_vec();
            let synced = data.len();
            out.inodes.push(Inode { data, synced });
            let id = out.inodes.len() - 1;
            out.names.insert(name.clone(), id);
            out.durable_names.insert(name.clone(), id);
        }
        MemFs {
            st: Arc::new(Mutex::new(out)),
        }
    }

    /// Makes the `n+1`-th next call of `op` fail (`n = 0`: the next one)
    /// with an I/O error, once.
    pub fn fail_after(&self, op: FaultOp, n: u64) {
        self.st.lock().faults.insert(op, n);
    }

    /// Makes every sync take `latency` (the lock on the file system is not
    /// held meanwhile), to make a disk's flush cost visible to group commit.
    pub fn set_sync_latency(&self, latency: std::time::Duration) {
        self.st.lock().sync_latency = latency;
    }

    /// How many file syncs have succeeded.
    pub fn syncs(&self) -> u64 {
        self.st.lock().syncs
    }

    /// A file's bytes now (synced or not).
    pub fn contents(&self, path: &Path) -> Option<Vec<u8>> {
        let st = self.st.lock();
        st.names.get(path).map(|&i| st.inodes[i].data.clone())
    }

    /// Writes a whole file and makes it and its directory entry durable.
    pub fn put_file(&self, path: &Path, data: &[u8]) {
        let mut st = self.st.lock();
        st.inodes.push(Inode {
            data: data.to_vec(),
            synced: data.len(),
        });
        let id = st.inodes.len() - 1;
        st.names.insert(path.to_path_buf(), id);
        st.durable_names.insert(path.to_path_buf(), id);
    }

    fn fault(st: &mut MemState, op: FaultOp) -> bool {
        match st.faults.get_mut(&op) {
            Some(0) => {
                st.faults.remove(&op);
                true
            }
            Some(n) => {
                *n -= 1;
                false
            }
            None => false,
        }
    }
}

struct MemFile {
    st: Arc<Mutex<MemState>>,
    ino: usize,
}

fn injected(op: &str) -> io::Error {
    io::Error::other(format!("injected {op} failure"))
}

impl FsFile for MemFile {
    fn append(&mut self, buf: &[u8]) -> io::Result<()> {
        let mut st = self.st.lock();
        if MemFs::fault(&mut st, FaultOp::Append) {
            st.inodes[self.ino]
                .data
                .extend_from_slice(&buf[..buf.len() / 2]);
            return Err(injected("write"));
        }
        st.inodes[self.ino].data.extend_from_slice(buf);
        Ok(())
    }
    fn sync(&mut self) -> io::Result<()> {
        let (len, latency) = {
            let mut st = self.st.lock();
            if MemFs::fault(&mut st, FaultOp::Sync) {
                return Err(injected("sync"));
            }
            (st.inodes[self.ino].data.len(), st.sync_latency)
        };
        if !latency.is_zero() {
            std::thread::sleep(latency);
        }
        let mut st = self.st.lock();
        let ino = &mut st.inodes[self.ino];
        ino.synced = ino.synced.max(len);
        st.syncs += 1;
        Ok(())
    }
}

struct MemLock {
    st: Arc<Mutex<MemState>>,
    path: PathBuf,
}

impl Drop for MemLock {
    fn drop(&mut self) {
        self.st.lock().locks.remove(&self.path);
    }
}

impl FsLock for MemLock {}

impl Fs for MemFs {
    fn create_dir_all(&self, _dir: &Path) -> io::Result<()> {
        Ok(())
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let st = self.st.lock();
        Ok(st
            .names
            .keys()
            .filter(|p| p.parent() == Some(dir))
            .filter_map(|p| p.file_name()?.to_str().map(str::to_owned))
            .collect())
    }
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        self.contents(path).ok_or_else(|| not_found(path))
    }
    fn create(&self, path: &Path) -> io::Result<Box<dyn FsFile>> {
        let mut st = self.st.lock();
        st.inodes.push(Inode::default());
        let ino = st.inodes.len() - 1;
        st.names.insert(path.to_path_buf(), ino);
        Ok(Box::new(MemFile {
            st: self.st.clone(),
            ino,
        }))
    }
    fn append_to(&self, path: &Path) -> io::Result<Box<dyn FsFile>> {
        let st = self.st.lock();
        let ino = *st.names.get(path).ok_or_else(|| not_found(path))?;
        Ok(Box::new(MemFile {
            st: self.st.clone(),
            ino,
        }))
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut st = self.st.lock();
        let ino = st.names.remove(from).ok_or_else(|| not_found(from))?;
        st.names.insert(to.to_path_buf(), ino);
        Ok(())
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        let mut st = self.st.lock();
        st.names
            .remove(path)
            .map(drop)
            .ok_or_else(|| not_found(path))
    }
    fn truncate(&self, path: &Path, len: u64) -> io::Result<()> {
        let mut st = self.st.lock();
        let ino = *st.names.get(path).ok_or_else(|| not_found(path))?;
        let f = &mut st.inodes[ino];
        f.data.truncate(len as usize);
        f.synced = f.data.len();
        Ok(())
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut st = self.st.lock();
        if MemFs::fault(&mut st, FaultOp::Sync) {
            return Err(injected("directory sync"));
        }
        st.durable_names.retain(|p, _| p.parent() != Some(dir));
        let now: Vec<_> = st
            .names
            .iter()
            .filter(|(p, _)| p.parent() == Some(dir))
            .map(|(p, &i)| (p.clone(), i))
            .collect();
        st.durable_names.extend(now);
        Ok(())
    }
    fn lock(&self, path: &Path) -> io::Result<Option<Box<dyn FsLock>>> {
        let mut st = self.st.lock();
        if !st.locks.insert(path.to_path_buf()) {
            return Ok(None);
        }
        Ok(Some(Box::new(MemLock {
            st: self.st.clone(),
            path: path.to_path_buf(),
        })))
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_crash_keeps_only_synced_bytes_and_synced_entries() {
        let fs = MemFs::new();
        let dir = Path::new("/d");
        let mut f = fs.create(&dir.join("a")).unwrap();
        f.append(b"one").unwrap();
        f.sync().unwrap();
        f.append(b"two").unwrap();
        // The entry was never synced: a crash loses the file.
        assert!(fs.crash().list(dir).unwrap().is_empty());
        fs.sync_dir(dir).unwrap();
        let c = fs.crash();
        assert_eq!(c.read(&dir.join("a")).unwrap(), b"one");
        assert_eq!(fs.read(&dir.join("a")).unwrap(), b"onetwo");
        fs.rename(&dir.join("a"), &dir.join("b")).unwrap();
        assert_eq!(fs.crash().list(dir).unwrap(), vec!["a".to_string()]);
    }

    #[test]
    fn faults_fire_once_after_n_calls() {
        let fs = MemFs::new();
        let mut f = fs.create(Path::new("/x")).unwrap();
        fs.fail_after(FaultOp::Append, 1);
        f.append(b"ok").unwrap();
        assert!(f.append(b"half").is_err());
        f.append(b"!").unwrap();
        assert_eq!(fs.contents(Path::new("/x")).unwrap(), b"okha!");
        fs.fail_after(FaultOp::Sync, 0);
        assert!(f.sync().is_err());
        f.sync().unwrap();
    }

    #[test]
    fn a_lock_is_exclusive_until_dropped() {
        let fs = MemFs::new();
        let l = fs.lock(Path::new("/d/LOCK")).unwrap();
        assert!(l.is_some());
        assert!(fs.lock(Path::new("/d/LOCK")).unwrap().is_none());
        drop(l);
        assert!(fs.lock(Path::new("/d/LOCK")).unwrap().is_some());
    }
}
