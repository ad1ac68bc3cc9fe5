//! [`MemFs`]: files in memory that fail on demand and give the images a
//! crash may leave: what was synced, plus any part of the rest a power cut
//! may have written back.

use super::fs::{Fs, FsFile, FsLock};
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Which operation a [`MemFs`] fault hits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FaultOp {
    /// [`FsFile::append`]: the failed append writes half of its buffer.
    Append,
    /// [`FsFile::sync`] and [`Fs::sync_dir`]: nothing becomes durable.
    Sync,
}

/// What a [`MemFs::power_cut`] image keeps of the bytes a file holds past
/// its last sync (its *unsynced tail*).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WriteBack {
    /// None of it: every file is cut to what was synced.
    Synced,
    /// Any prefix of it: the file's length is anything from its synced
    /// length to its current one (a torn tail), every kept byte as written.
    TornTail,
    /// Any prefix of it, as [`WriteBack::TornTail`], and within that prefix
    /// each [`MemFs::PAGE`]-aligned page either written back or lost, in
    /// any combination (a later page kept while an earlier one is lost). A
    /// lost page reads as zeros past the synced length, as a block the file
    /// system allocated but never wrote does (POSIX allows any write-back
    /// order; ext4's delayed allocation produces these).
    AnyPages,
}

/// What [`MemFs::stop_at`] does at the mutating operation it names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Stop {
    /// That operation fails with an I/O error and changes nothing; later
    /// operations run as usual.
    Fail,
    /// That operation and every later mutating operation fail with an I/O
    /// error and change nothing: the files stay as they were just before
    /// it, the instant a crash image ([`MemFs::crash`],
    /// [`MemFs::power_cut`], [`MemFs::fork`]) is then taken of.
    Freeze,
}

#[derive(Clone, Default)]
struct Inode {
    data: Vec<u8>,
    /// The prefix that is durable: every crash image keeps it.
    synced: usize,
}

#[derive(Default)]
struct MemState {
    inodes: Vec<Inode>,
    /// Directory entries now.
    names: BTreeMap<PathBuf, usize>,
    /// Directory entries as of each directory's last sync: what
    /// [`MemFs::crash`] keeps.
    durable_names: BTreeMap<PathBuf, usize>,
    /// Per name changed since its directory's last sync, every binding it
    /// took since (`None`: removed), oldest first: a power cut leaves the
    /// name with its durable binding or any of these.
    pending: BTreeMap<PathBuf, Vec<Option<usize>>>,
    locks: HashSet<PathBuf>,
    /// Per operation: fail once this many more calls have succeeded.
    faults: HashMap<FaultOp, u64>,
    syncs: u64,
    sync_latency: std::time::Duration,
    /// Mutating operations attempted (`MemFs::mutations`).
    mutations: u64,
    /// The mutating operation `MemFs::stop_at` named, and what it does.
    stop: Option<(u64, Stop)>,
    /// Every mutating operation fails (`Stop::Freeze` fired).
    frozen: bool,
}

impl MemState {
    /// Points `path` at `ino` (`None`: removes it), durable once its
    /// directory is synced.
    fn bind(&mut self, path: &Path, ino: Option<usize>) {
        match ino {
            Some(i) => self.names.insert(path.to_path_buf(), i),
            None => self.names.remove(path),
        };
        self.pending
            .entry(path.to_path_buf())
            .or_default()
            .push(ino);
    }

    /// Counts a mutating operation (`what`) and fails it when a stop says
    /// so.
    fn mutate(&mut self, what: &str) -> io::Result<()> {
        self.mutations += 1;
        if self.frozen {
            return Err(io::Error::other(format!(
                "injected {what} failure: the file system is frozen"
            )));
        }
        match self.stop {
            Some((at, how)) if at == self.mutations => {
                self.stop = None;
                self.frozen = how == Stop::Freeze;
                Err(io::Error::other(format!(
                    "injected {what} failure at mutating operation {at}"
                )))
            }
            _ => Ok(()),
        }
    }
}

/// A small deterministic generator (splitmix64) for crash images.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A value in `0..n` (`n > 0`).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Files in memory, for tests and for embedding without a disk: every
/// operation of [`Fs`], injected failures ([`MemFs::fail_after`],
/// [`MemFs::stop_at`]) and crash images. Clones share the same files.
///
/// # The crash model
///
/// A file's bytes are durable up to the length of its last successful
/// [`FsFile::sync`] (or [`Fs::truncate`]); a directory entry (a create, a
/// rename's two names, a remove) is durable once [`Fs::sync_dir`] has run
/// on its directory after it. Nothing else is promised, so a crash image
/// holds:
/// * per file, its synced bytes and, of its unsynced tail, what
///   [`WriteBack`] allows: nothing ([`MemFs::crash`]), a torn tail, or
///   pages written back in any order with lost ones reading as zeros;
/// * per name, its binding at its directory's last sync or any binding it
///   took after that, each name chosen on its own: a missing directory sync
///   after a rename shows, and a remove can persist while an earlier rename
///   in the same directory does not. (A journaling file system is kinder:
///   it persists these in order. A create over an existing name binds a new
///   file to it.)
///
/// [`MemFs::power_cut`] picks one such image from a seed, deterministically,
/// so a test enumerates or samples seeds; [`MemFs::stop_at`] freezes the
/// files at any mutating operation, so a test takes the images of every
/// instant of an operation sequence.
#[derive(Clone, Default)]
pub struct MemFs {
    st: Arc<Mutex<MemState>>,
}

impl fmt::Debug for MemFs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.st.lock();
        f.debug_struct("MemFs")
            .field("files", &st.names.len())
            .field("mutations", &st.mutations)
            .field("frozen", &st.frozen)
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
    /// The write-back unit of [`WriteBack::AnyPages`]: a disk sector. A
    /// file system writes back whole blocks made of sectors, so a lost
    /// write-back is a run of whole zeroed sectors, cut only by the synced
    /// length and the end of the file; recovery relies on that shape
    /// ([`RecoveryReport::torn_tail`](crate::RecoveryReport::torn_tail)).
    pub const PAGE: usize = 512;

    /// An empty file system.
    pub fn new() -> MemFs {
        MemFs::default()
    }

    /// A new, separate file system holding what a crash now leaves when
    /// nothing unsynced reached the disk: each file cut to what was synced,
    /// and only the directory entries made durable by [`Fs::sync_dir`].
    /// Locks, faults and stops are not carried.
    pub fn crash(&self) -> MemFs {
        self.image(None, WriteBack::Synced)
    }

    /// A new, separate file system holding one of the images a power cut
    /// now may leave ([the crash model](MemFs#the-crash-model)): each file
    /// keeps its synced bytes and what `write_back` allows of the rest;
    /// each directory entry changed since its directory's last sync takes
    /// any binding it had since. The choices are a function of `seed` and
    /// the files alone. Locks, faults and stops are not carried.
    pub fn power_cut(&self, seed: u64, write_back: WriteBack) -> MemFs {
        self.image(Some(seed), write_back)
    }

    /// A new, separate file system holding the files as they are now (what
    /// a killed process leaves: synced or not), with the same durability:
    /// a later crash image of the copy is one of this one's. Locks, faults,
    /// stops and the mutation count are not carried.
    pub fn fork(&self) -> MemFs {
        let st = self.st.lock();
        let out = MemState {
            inodes: st.inodes.clone(),
            names: st.names.clone(),
            durable_names: st.durable_names.clone(),
            pending: st.pending.clone(),
            ..MemState::default()
        };
        MemFs {
            st: Arc::new(Mutex::new(out)),
        }
    }

    fn image(&self, seed: Option<u64>, write_back: WriteBack) -> MemFs {
        let st = self.st.lock();
        let mut rng = Rng(seed.unwrap_or(0));
        // Names first (in path order), then the files they reach (in inode
        // order), so that the draws depend only on the seed and the files.
        let mut chosen: BTreeMap<PathBuf, usize> = BTreeMap::new();
        let mut names: Vec<&PathBuf> = st.durable_names.keys().collect();
        if seed.is_some() {
            names.extend(st.pending.keys());
            names.sort();
            names.dedup();
        }
        for name in names {
            let durable = st.durable_names.get(name).copied();
            let binding = match st.pending.get(name).filter(|_| seed.is_some()) {
                Some(later) => {
                    let i = rng.below(later.len() as u64 + 1) as usize;
                    if i == 0 {
                        durable
                    } else {
                        later[i - 1]
                    }
                }
                None => durable,
            };
            if let Some(ino) = binding {
                chosen.insert(name.clone(), ino);
            }
        }
        let mut reached: Vec<usize> = chosen.values().copied().collect();
        reached.sort_unstable();
        reached.dedup();
        let mut out = MemState::default();
        let mut new_ino = HashMap::new();
        for ino in reached {
            let data = Self::written_back(&st.inodes[ino], write_back, &mut rng);
            out.inodes.push(Inode {
                synced: data.len(),
                data,
            });
            new_ino.insert(ino, out.inodes.len() - 1);
        }
        for (name, ino) in chosen {
            out.names.insert(name.clone(), new_ino[&ino]);
            out.durable_names.insert(name, new_ino[&ino]);
        }
        MemFs {
            st: Arc::new(Mutex::new(out)),
        }
    }

    /// What of `f` reaches the disk under `write_back`.
    fn written_back(f: &Inode, write_back: WriteBack, rng: &mut Rng) -> Vec<u8> {
        let (synced, len) = (f.synced, f.data.len());
        if write_back == WriteBack::Synced || synced >= len {
            return f.data[..synced.min(len)].to_vec();
        }
        // Both ends often, so that small sample sizes see them.
        let kept = match rng.below(4) {
            0 => synced,
            1 => len,
            _ => synced + rng.below((len - synced) as u64 + 1) as usize,
        };
        let mut data = f.data[..kept].to_vec();
        if write_back == WriteBack::AnyPages {
            let mut page = synced / Self::PAGE * Self::PAGE;
            while page < kept {
                let end = (page + Self::PAGE).min(kept);
                if rng.below(2) == 0 {
                    data[page.max(synced)..end].fill(0);
                }
                page += Self::PAGE;
            }
        }
        data
    }

    /// Makes the `n+1`-th next call of `op` fail (`n = 0`: the next one)
    /// with an I/O error, once.
    pub fn fail_after(&self, op: FaultOp, n: u64) {
        self.st.lock().faults.insert(op, n);
    }

    /// Stops at mutating operation number `k`, counting every mutating
    /// operation since this file system was made from 1 ([`MemFs::mutations`]
    /// is the count so far; `k` at or below it never comes, so `0` clears a
    /// stop): it fails, and with [`Stop::Freeze`] so does every later one.
    /// Mutating operations: [`Fs::create`], [`FsFile::append`],
    /// [`FsFile::sync`], [`Fs::rename`], [`Fs::remove`], [`Fs::truncate`],
    /// [`Fs::sync_dir`].
    pub fn stop_at(&self, k: u64, how: Stop) {
        self.st.lock().stop = Some((k, how));
    }

    /// How many mutating operations ([`MemFs::stop_at`]) have been
    /// attempted, failed ones included.
    pub fn mutations(&self) -> u64 {
        self.st.lock().mutations
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
    /// Not a mutating operation of [`MemFs::stop_at`]: it sets a test up.
    pub fn put_file(&self, path: &Path, data: &[u8]) {
        let mut st = self.st.lock();
        st.inodes.push(Inode {
            data: data.to_vec(),
            synced: data.len(),
        });
        let id = st.inodes.len() - 1;
        st.names.insert(path.to_path_buf(), id);
        st.durable_names.insert(path.to_path_buf(), id);
        st.pending.remove(path);
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
        st.mutate("write")?;
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
            st.mutate("sync")?;
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
        // A truncate meanwhile may have cut the file below `len`.
        ino.synced = ino.synced.max(len).min(ino.data.len());
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
        st.mutate("create")?;
        st.inodes.push(Inode::default());
        let ino = st.inodes.len() - 1;
        st.bind(path, Some(ino));
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
        st.mutate("rename")?;
        let ino = *st.names.get(from).ok_or_else(|| not_found(from))?;
        st.bind(from, None);
        st.bind(to, Some(ino));
        Ok(())
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        let mut st = self.st.lock();
        st.mutate("remove")?;
        if !st.names.contains_key(path) {
            return Err(not_found(path));
        }
        st.bind(path, None);
        Ok(())
    }
    fn truncate(&self, path: &Path, len: u64) -> io::Result<()> {
        let mut st = self.st.lock();
        st.mutate("truncate")?;
        let ino = *st.names.get(path).ok_or_else(|| not_found(path))?;
        let f = &mut st.inodes[ino];
        f.data.truncate(len as usize);
        f.synced = f.data.len();
        Ok(())
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut st = self.st.lock();
        st.mutate("directory sync")?;
        if MemFs::fault(&mut st, FaultOp::Sync) {
            return Err(injected("directory sync"));
        }
        st.durable_names.retain(|p, _| p.parent() != Some(dir));
        st.pending.retain(|p, _| p.parent() != Some(dir));
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

    /// The images of `seeds` seeds of one state.
    fn images(fs: &MemFs, wb: WriteBack) -> Vec<MemFs> {
        (0..64).map(|seed| fs.power_cut(seed, wb)).collect()
    }

    #[test]
    fn a_power_cut_image_is_a_function_of_its_seed() {
        let fs = MemFs::new();
        let dir = Path::new("/d");
        let mut f = fs.create(&dir.join("a")).unwrap();
        f.append(&[7; 3000]).unwrap();
        fs.rename(&dir.join("a"), &dir.join("b")).unwrap();
        for seed in 0..16 {
            let (x, y) = (
                fs.power_cut(seed, WriteBack::AnyPages),
                fs.power_cut(seed, WriteBack::AnyPages),
            );
            assert_eq!(x.list(dir).unwrap(), y.list(dir).unwrap());
            for n in x.list(dir).unwrap() {
                assert_eq!(
                    x.read(&dir.join(&n)).unwrap(),
                    y.read(&dir.join(&n)).unwrap()
                );
            }
        }
    }

    #[test]
    fn a_torn_tail_keeps_the_synced_bytes_and_any_prefix_of_the_rest() {
        let fs = MemFs::new();
        let p = Path::new("/d/a");
        let mut f = fs.create(p).unwrap();
        let data: Vec<u8> = (0..2000u32).map(|i| (i % 251 + 1) as u8).collect();
        f.append(&data[..700]).unwrap();
        f.sync().unwrap();
        fs.sync_dir(Path::new("/d")).unwrap();
        f.append(&data[700..]).unwrap();
        let mut lens = std::collections::BTreeSet::new();
        for img in images(&fs, WriteBack::TornTail) {
            let got = img.read(p).unwrap();
            assert!(got.len() >= 700 && data.starts_with(&got), "{}", got.len());
            lens.insert(got.len());
        }
        assert!(lens.contains(&700) && lens.contains(&2000), "{lens:?}");
        assert!(lens.len() > 3, "{lens:?}");
        assert_eq!(fs.crash().read(p).unwrap(), &data[..700]);
    }

    #[test]
    fn written_back_pages_come_in_any_order_and_lost_ones_read_as_zeros() {
        let fs = MemFs::new();
        let p = Path::new("/d/a");
        let mut f = fs.create(p).unwrap();
        fs.sync_dir(Path::new("/d")).unwrap();
        let data = vec![0xAB; 4 * MemFs::PAGE];
        f.append(&data[..100]).unwrap();
        f.sync().unwrap();
        f.append(&data[100..]).unwrap();
        let mut later_kept_earlier_lost = false;
        for img in images(&fs, WriteBack::AnyPages) {
            let got = img.read(p).unwrap();
            assert!(got.len() >= 100);
            assert!(got[..100].iter().all(|&b| b == 0xAB), "synced bytes kept");
            // Page by page: all written back, or (past the synced length)
            // all zeros.
            let pages: Vec<bool> = got
                .chunks(MemFs::PAGE)
                .enumerate()
                .map(|(i, c)| {
                    let from = if i == 0 { 100 } else { 0 };
                    let c = &c[from.min(c.len())..];
                    assert!(c.iter().all(|&b| b == 0xAB) || c.iter().all(|&b| b == 0));
                    c.iter().all(|&b| b == 0xAB)
                })
                .collect();
            later_kept_earlier_lost |= pages.windows(2).any(|w| !w[0] && w[1]);
        }
        assert!(
            later_kept_earlier_lost,
            "no image lost a page before a kept one"
        );
    }

    #[test]
    fn directory_entries_persist_one_by_one_until_the_directory_is_synced() {
        let fs = MemFs::new();
        let dir = Path::new("/d");
        for n in ["a", "c"] {
            let mut f = fs.create(&dir.join(n)).unwrap();
            f.append(n.as_bytes()).unwrap();
            f.sync().unwrap();
        }
        fs.sync_dir(dir).unwrap();
        fs.rename(&dir.join("a"), &dir.join("b")).unwrap();
        fs.remove(&dir.join("c")).unwrap();
        let mut seen = std::collections::BTreeSet::new();
        for img in images(&fs, WriteBack::Synced) {
            let names = img.list(dir).unwrap().join(",");
            if names.contains('b') {
                assert_eq!(img.read(&dir.join("b")).unwrap(), b"a");
            }
            seen.insert(names);
        }
        // The remove persisted while the rename before it did not ("a"
        // alone), and every other combination of the three entries.
        for want in ["a", "a,b", "a,b,c", "a,c", "b", "b,c", "", "c"] {
            assert!(seen.contains(want), "{want:?} not among {seen:?}");
        }
        fs.sync_dir(dir).unwrap();
        for img in images(&fs, WriteBack::Synced) {
            assert_eq!(img.list(dir).unwrap(), ["b"]);
        }
    }

    #[test]
    fn a_stop_fails_one_mutating_operation_or_freezes_the_files() {
        let fs = MemFs::new();
        let p = Path::new("/d/a");
        let mut f = fs.create(p).unwrap();
        f.append(b"one").unwrap();
        assert_eq!(fs.mutations(), 2);
        fs.stop_at(4, Stop::Fail);
        f.sync().unwrap();
        assert!(f.append(b"two").is_err());
        f.append(b"2").unwrap();
        assert_eq!(fs.read(p).unwrap(), b"one2");
        assert_eq!(fs.mutations(), 5);
        fs.stop_at(7, Stop::Freeze);
        fs.sync_dir(Path::new("/d")).unwrap();
        assert!(fs.rename(p, Path::new("/d/b")).is_err());
        assert!(f.sync().is_err());
        assert!(f.append(b"x").is_err());
        assert!(fs.create(Path::new("/d/c")).is_err());
        // Frozen as of just before operation 7: the append of "2" unsynced.
        assert_eq!(fs.read(p).unwrap(), b"one2");
        assert_eq!(fs.crash().read(p).unwrap(), b"one");
        assert_eq!(fs.fork().read(p).unwrap(), b"one2");
        // A fork is a fresh file system: not frozen, counting from zero.
        let g = fs.fork();
        assert_eq!(g.mutations(), 0);
        g.rename(p, Path::new("/d/b")).unwrap();
        assert_eq!(g.crash().list(Path::new("/d")).unwrap(), ["a"]);
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
