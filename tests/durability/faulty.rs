//! A file layer over [`MemFs`] that fails chosen operations on chosen
//! files, for faults `MemFs::fail_after` cannot aim (a create, a truncate,
//! the first write or sync of one kind of file).

use snapshot_engine::durability::{Fs, FsFile, FsLock, MemFs};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The operation a [`Rule`] fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Create,
    /// The first append to a file since it was created (a segment's header).
    FirstAppend,
    /// Any append.
    Append,
    /// The first sync of a file since it was created.
    FirstSync,
    /// Any file sync.
    Sync,
    SyncDir,
    Truncate,
    Remove,
}

/// Fails the `skip+1`-th operation `op` on a file whose name contains
/// `name`, once.
#[derive(Clone, Debug)]
pub struct Rule {
    pub op: Op,
    pub name: &'static str,
    pub skip: u64,
}

#[derive(Default)]
struct Rules {
    armed: Vec<Rule>,
    /// Rules that fire at every match until `disarm`.
    sticky: Vec<Rule>,
    /// The rules that fired, in order.
    fired: Vec<(Rule, PathBuf)>,
}

#[derive(Clone, Default)]
pub struct Faulty {
    pub mem: MemFs,
    rules: Arc<Mutex<Rules>>,
}

impl Faulty {
    pub fn new(mem: MemFs) -> Faulty {
        Faulty {
            mem,
            rules: Arc::default(),
        }
    }

    pub fn arm(&self, rule: Rule) {
        self.rules.lock().unwrap().armed.push(rule);
    }

    /// Arms `rule` to fire at every match (its `skip` unused) until
    /// [`Faulty::disarm`].
    pub fn arm_sticky(&self, rule: Rule) {
        self.rules.lock().unwrap().sticky.push(rule);
    }

    /// Removes every armed rule.
    pub fn disarm(&self) {
        let mut r = self.rules.lock().unwrap();
        r.armed.clear();
        r.sticky.clear();
    }

    /// The rules that fired so far.
    pub fn fired(&self) -> Vec<(Rule, PathBuf)> {
        self.rules.lock().unwrap().fired.clone()
    }

    fn check(&self, op: Op, path: &Path) -> io::Result<()> {
        let mut r = self.rules.lock().unwrap();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let matches = |rule: &Rule| rule.op == op && name.contains(rule.name);
        let injected = || {
            io::Error::new(
                io::ErrorKind::StorageFull,
                format!("injected {op:?} failure on {}", path.display()),
            )
        };
        if let Some(rule) = r.sticky.iter().find(|rule| matches(rule)).cloned() {
            r.fired.push((rule, path.to_path_buf()));
            return Err(injected());
        }
        let Some(i) = r.armed.iter().position(matches) else {
            return Ok(());
        };
        if r.armed[i].skip > 0 {
            r.armed[i].skip -= 1;
            return Ok(());
        }
        let rule = r.armed.remove(i);
        r.fired.push((rule, path.to_path_buf()));
        Err(injected())
    }
}

struct File {
    fs: Faulty,
    path: PathBuf,
    inner: Box<dyn FsFile>,
    appends: u64,
    syncs: u64,
}

impl FsFile for File {
    fn append(&mut self, buf: &[u8]) -> io::Result<()> {
        let first = self.appends == 0;
        self.appends += 1;
        let r = if first {
            self.fs.check(Op::FirstAppend, &self.path)
        } else {
            Ok(())
        }
        .and_then(|()| self.fs.check(Op::Append, &self.path));
        if let Err(e) = r {
            // As a full disk does: part of the buffer reaches the file.
            self.inner.append(&buf[..buf.len() / 2])?;
            return Err(e);
        }
        self.inner.append(buf)
    }

    fn sync(&mut self) -> io::Result<()> {
        let first = self.syncs == 0;
        self.syncs += 1;
        if first {
            self.fs.check(Op::FirstSync, &self.path)?;
        }
        self.fs.check(Op::Sync, &self.path)?;
        self.inner.sync()
    }
}

impl Fs for Faulty {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.mem.create_dir_all(dir)
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        self.mem.list(dir)
    }
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        self.mem.read(path)
    }
    fn create(&self, path: &Path) -> io::Result<Box<dyn FsFile>> {
        self.check(Op::Create, path)?;
        Ok(Box::new(File {
            fs: self.clone(),
            path: path.to_path_buf(),
            inner: self.mem.create(path)?,
            appends: 0,
            syncs: 0,
        }))
    }
    fn append_to(&self, path: &Path) -> io::Result<Box<dyn FsFile>> {
        Ok(Box::new(File {
            fs: self.clone(),
            path: path.to_path_buf(),
            inner: self.mem.append_to(path)?,
            appends: 1,
            syncs: 1,
        }))
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.mem.rename(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        self.check(Op::Remove, path)?;
        self.mem.remove(path)
    }
    fn truncate(&self, path: &Path, len: u64) -> io::Result<()> {
        self.check(Op::Truncate, path)?;
        self.mem.truncate(path, len)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.check(Op::SyncDir, dir)?;
        self.mem.sync_dir(dir)
    }
    fn lock(&self, path: &Path) -> io::Result<Option<Box<dyn FsLock>>> {
        self.mem.lock(path)
    }
}
