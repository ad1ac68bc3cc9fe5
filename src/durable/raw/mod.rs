//! The durability layer's one `unsafe` call: `flock(2)` for the directory
//! lock (Linux). Everything else in `durable/` is safe code.

/// Tries to take an exclusive `flock` on `f` without blocking: `Ok(true)`
/// when taken, `Ok(false)` when another open file description holds it.
///
/// # Errors
/// Any other failure of `flock`.
#[cfg(target_os = "linux")]
pub(crate) fn try_flock(f: &std::fs::File) -> std::io::Result<bool> {
    use std::os::fd::AsRawFd;
    // SAFETY: `flock` on a descriptor `f` owns and keeps open for the
    // duration of the call; no memory is passed to the kernel.
    let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if r == 0 {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    if e.kind() == std::io::ErrorKind::WouldBlock {
        Ok(false)
    } else {
        Err(e)
    }
}
