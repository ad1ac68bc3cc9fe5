//! What the scheduler did to this process's threads, from
//! `/proc/self/task`: how many are runnable now, and their CPU, run-queue
//! and context-switch counters.

use serde::Serialize;

/// How many of this process's threads, other than the caller, are
/// runnable (running or waiting for a CPU) now, from
/// `/proc/self/task/*/stat`; `None` where that cannot be read.
pub fn runnable_threads() -> Option<u64> {
    let mut n = 0u64;
    for t in std::fs::read_dir("/proc/self/task").ok()? {
        let Ok(t) = t else { continue };
        let Ok(stat) = std::fs::read_to_string(t.path().join("stat")) else {
            continue;
        };
        // "pid (comm) S ...": the state follows the last ')'.
        let state = stat
            .rsplit_once(')')
            .and_then(|(_, r)| r.trim_start().chars().next());
        if state == Some('R') {
            n += 1;
        }
    }
    // The caller is running while it reads.
    Some(n.saturating_sub(1))
}

/// Scheduler counters summed over this process's threads, from
/// `/proc/self/task/*/schedstat` (ns on a CPU, ns waiting on a run queue)
/// and `/proc/self/task/*/status` (context switches).
#[derive(Serialize, Clone, Copy, Debug, Default)]
pub struct Sched {
    pub on_cpu_ns: u64,
    pub runqueue_wait_ns: u64,
    /// The thread blocked (a futex sleep, a lock parked, a sleep).
    pub voluntary_switches: u64,
    /// The thread was preempted while it could still run.
    pub involuntary_switches: u64,
}

impl Sched {
    /// Now, or `None` where the files cannot be read.
    pub fn now() -> Option<Sched> {
        let mut s = Sched::default();
        for t in std::fs::read_dir("/proc/self/task").ok()? {
            let Ok(t) = t else { continue };
            if let Ok(st) = std::fs::read_to_string(t.path().join("schedstat")) {
                let mut f = st.split_whitespace().map(|x| x.parse::<u64>().unwrap_or(0));
                s.on_cpu_ns += f.next().unwrap_or(0);
                s.runqueue_wait_ns += f.next().unwrap_or(0);
            }
            if let Ok(st) = std::fs::read_to_string(t.path().join("status")) {
                for l in st.lines() {
                    let v = |l: &str| {
                        l.split_once(':')
                            .and_then(|(_, v)| v.trim().parse::<u64>().ok())
                            .unwrap_or(0)
                    };
                    if l.starts_with("voluntary_ctxt_switches") {
                        s.voluntary_switches += v(l);
                    } else if l.starts_with("nonvoluntary_ctxt_switches") {
                        s.involuntary_switches += v(l);
                    }
                }
            }
        }
        Some(s)
    }

    /// `later - self`, counter by counter.
    pub fn until(&self, later: &Sched) -> Sched {
        Sched {
            on_cpu_ns: later.on_cpu_ns.saturating_sub(self.on_cpu_ns),
            runqueue_wait_ns: later.runqueue_wait_ns.saturating_sub(self.runqueue_wait_ns),
            voluntary_switches: later
                .voluntary_switches
                .saturating_sub(self.voluntary_switches),
            involuntary_switches: later
                .involuntary_switches
                .saturating_sub(self.involuntary_switches),
        }
    }
}
