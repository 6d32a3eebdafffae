//! The names a client writes for processes: [`KillSignal`], the signals `PROCESS_KILL`
//! sends, and [`local_number`], the one parser of a process id's local part `p<N>`
//! (docs/processes.md). Every front door and the NATS routing read them here, so they
//! cannot drift apart.

use std::fmt;
use std::str::FromStr;

/// A signal `PROCESS_KILL` may send (its `signal` field; default [`KillSignal::Term`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KillSignal {
    /// `TERM`: ask the process to end.
    #[default]
    Term,
    /// `INT`: as Ctrl-C.
    Int,
    /// `HUP`: the terminal went away.
    Hup,
    /// `KILL`: end it now.
    Kill,
}

impl KillSignal {
    /// Every signal, in the order the docs list them.
    pub const ALL: [KillSignal; 4] = [Self::Term, Self::Int, Self::Hup, Self::Kill];

    /// Its wire name (`TERM`, `INT`, `HUP`, `KILL`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Term => "TERM",
            Self::Int => "INT",
            Self::Hup => "HUP",
            Self::Kill => "KILL",
        }
    }

    /// The kernel's signal.
    pub fn to_signal(self) -> nix::sys::signal::Signal {
        use nix::sys::signal::Signal;
        match self {
            Self::Term => Signal::SIGTERM,
            Self::Int => Signal::SIGINT,
            Self::Hup => Signal::SIGHUP,
            Self::Kill => Signal::SIGKILL,
        }
    }
}

impl fmt::Display for KillSignal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A signal name that is not one of [`KillSignal::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("signal must be TERM, INT, HUP or KILL, got '{0}'")]
pub struct UnknownSignal(pub String);

impl FromStr for KillSignal {
    type Err = UnknownSignal;

    /// A wire name, with or without `SIG`, in any case, blanks around it ignored.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let upper = text.trim().to_ascii_uppercase();
        let name = upper.strip_prefix("SIG").unwrap_or(&upper);
        Self::ALL
            .into_iter()
            .find(|signal| signal.name() == name)
            .ok_or_else(|| UnknownSignal(text.to_owned()))
    }
}

/// The number of a process id's local part `p<N>` (`p1`, `p42`): `N` in canonical
/// decimal, no sign, no leading zero (so one process has one id: `p01` is no id).
pub fn local_number(local: &str) -> Option<u64> {
    let digits = local.strip_prefix('p')?;
    let canonical = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && !(digits.len() > 1 && digits.starts_with('0'));
    canonical.then(|| digits.parse().ok()).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signal_reads_with_or_without_sig_in_any_case() {
        for (text, signal) in [
            ("TERM", KillSignal::Term),
            ("sigint", KillSignal::Int),
            (" Hup ", KillSignal::Hup),
            ("SIGKILL", KillSignal::Kill),
        ] {
            assert_eq!(text.parse::<KillSignal>(), Ok(signal), "{text}");
        }
        for text in ["", "SIG", "USR1", "9", "TERMX"] {
            assert!(text.parse::<KillSignal>().is_err(), "{text}");
        }
        for signal in KillSignal::ALL {
            assert_eq!(signal.name().parse::<KillSignal>(), Ok(signal));
        }
    }

    #[test]
    fn a_local_part_has_one_spelling() {
        assert_eq!(local_number("p1"), Some(1));
        assert_eq!(local_number("p10"), Some(10));
        assert_eq!(local_number("p0"), Some(0));
        for text in [
            "p",
            "p01",
            "p-1",
            "p+1",
            "1",
            "P1",
            "p1x",
            "p 1",
            "p18446744073709551616",
        ] {
            assert_eq!(local_number(text), None, "{text}");
        }
    }
}
