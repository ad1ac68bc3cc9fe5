//! Progress on stderr: the bar, a line per finished run, warnings, and a
//! phase's share of the bar.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// Progress on stderr: a bar with an ETA when stderr is a terminal, one
/// line per run otherwise (CI, `| tee`), nothing with `--no-progress`.
pub struct Progress {
    pub bar: ProgressBar,
    lines: bool,
    start: Instant,
}

impl Progress {
    pub(crate) fn new(total_ms: u64, enabled: bool) -> Progress {
        let tty = std::io::stderr().is_terminal();
        let bar = ProgressBar::with_draw_target(Some(total_ms), ProgressDrawTarget::stderr());
        if !enabled || !tty {
            bar.set_draw_target(ProgressDrawTarget::hidden());
        }
        bar.set_style(
            ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {wide_bar} {percent}% (about {eta} left) {msg}",
            )
            .expect("a valid progress template"),
        );
        Progress {
            bar,
            lines: enabled && !tty,
            start: Instant::now(),
        }
    }

    /// One line per finished run when stderr is not a terminal.
    pub(crate) fn line(&self, msg: std::fmt::Arguments<'_>) {
        if self.lines {
            let pos = self.bar.position();
            let len = self.bar.length().unwrap_or(0).max(1);
            eprintln!(
                "[{:>5.1} s, {:>3}%] {msg}",
                self.start.elapsed().as_secs_f64(),
                (pos * 100 / len).min(100)
            );
        }
    }

    /// A warning on stderr, above the bar; shown with `--no-progress` too.
    pub(crate) fn warn(&self, msg: std::fmt::Arguments<'_>) {
        self.bar.suspend(|| eprintln!("warning: {msg}"));
    }
}

/// A phase's share of the progress bar: it moves the bar by the time that
/// passes, but never by more than the phase's planned `secs`, so sleeps that
/// overshoot (a 0.01 s phase sleeps in 20-50 ms steps) never carry the bar
/// past 100%.
pub struct Budget<'a> {
    pb: &'a ProgressBar,
    left_ms: u64,
}

impl<'a> Budget<'a> {
    pub fn new(pb: &'a ProgressBar, secs: f64) -> Budget<'a> {
        Budget {
            pb,
            left_ms: (secs * 1000.0) as u64,
        }
    }

    pub fn advance(&mut self, d: Duration) {
        let ms = (d.as_millis() as u64).min(self.left_ms);
        self.left_ms -= ms;
        advance(self.pb, ms);
    }
}

/// Moves the bar by `ms`, clamped to its length.
pub fn advance(pb: &ProgressBar, ms: u64) {
    let len = pb.length().unwrap_or(u64::MAX);
    pb.set_position(pb.position().saturating_add(ms).min(len));
}
