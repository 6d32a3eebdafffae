//! Writing results to stdout from the async runtime, without a thread of its own.
//!
//! A blocking `write` to a pipe whose reader is slow stalls the thread that makes it; on
//! `cmdr exec`'s one runtime thread that would stall every command's pump and timeout.
//! So results were written by a thread of their own, whose start, hand-offs and join were
//! ~0.5 ms of a one-shot run (BENCHMARKS.md, X3). [`Stdout::open`] finds a way to write
//! that cannot block instead:
//!
//! - a **pipe, FIFO or terminal** is reopened through `/proc/self/fd/1` non-blocking: a new
//!   open file description of the same pipe or terminal, so the flags of the descriptor
//!   cmdr was given — shared with whoever gave it (a shell's later commands) — are left
//!   alone, as they must be;
//! - a **socket** (Node's child processes get socket pairs) is written with `send` and
//!   `MSG_DONTWAIT` on a duplicate, which leaves the shared flags alone too;
//! - a **regular file or a device that is not a terminal** (`/dev/null`) never waits for
//!   a reader: written as it is.
//!
//! Anything else — no `/proc`, a pipe cmdr may not reopen, a pipe or terminal given
//! read-only, stdout closed — gets `None`, and the caller keeps the thread.

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use rustix::fs::{FileType, Mode, OFlags};
use rustix::net::SendFlags;
use tokio::io::unix::AsyncFd;

/// Where the process's stdout is reopened from.
const OWN_STDOUT: &str = "/proc/self/fd/1";

/// Stdout, written without blocking the runtime.
#[derive(Debug)]
pub enum Stdout {
    /// A pipe, FIFO or terminal, reopened non-blocking.
    Reopened(AsyncFd<File>),
    /// A socket, sent to without waiting.
    Socket(AsyncFd<OwnedFd>),
    /// A regular file or a device other than a terminal: writes never wait for a reader.
    Direct,
}

impl Stdout {
    /// A way to write stdout from the runtime, or `None` when only a thread can (see the
    /// module's documentation). Must be called within the runtime.
    pub fn open() -> Option<Self> {
        let stdout = io::stdout();
        let kind = FileType::from_raw_mode(rustix::fs::fstat(stdout.as_fd()).ok()?.st_mode);
        match kind {
            FileType::RegularFile | FileType::BlockDevice => Some(Self::Direct),
            FileType::CharacterDevice if !rustix::termios::isatty(stdout.as_fd()) => {
                Some(Self::Direct)
            }
            FileType::Fifo | FileType::CharacterDevice => {
                // Reopening asks for write access anew: a pipe or terminal given read-only
                // must stay unwritten, as the descriptor itself is.
                if !writable(&stdout).unwrap_or(false) {
                    return None;
                }
                let flags = OFlags::WRONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
                let fd = rustix::fs::open(OWN_STDOUT, flags, Mode::empty()).ok()?;
                register(File::from(fd)).map(Self::Reopened)
            }
            FileType::Socket => {
                let fd = stdout.as_fd().try_clone_to_owned().ok()?;
                register(fd).map(Self::Socket)
            }
            _ => None,
        }
    }

    /// Writes all of `buf`, waiting (without blocking the thread) while the reader is
    /// behind.
    pub async fn write_all(&self, mut buf: &[u8]) -> io::Result<()> {
        while !buf.is_empty() {
            let written = match self {
                Self::Direct => {
                    let mut out = io::stdout().lock();
                    return out.write_all(buf).and_then(|()| out.flush());
                }
                Self::Reopened(fd) => write_once(fd, |file| (&*file).write(buf)).await,
                Self::Socket(fd) => {
                    let flags = SendFlags::DONTWAIT | SendFlags::NOSIGNAL;
                    write_once(fd, |socket| Ok(rustix::net::send(socket, buf, flags)?)).await
                }
            };
            match written {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => buf = buf.get(n..).unwrap_or_default(),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// One write of `fd`: at once (there is usually room), and while the reader is behind,
/// again each time the runtime sees the descriptor writable.
async fn write_once<T: AsRawFd>(
    fd: &AsyncFd<T>,
    write: impl Fn(&T) -> io::Result<usize>,
) -> io::Result<usize> {
    loop {
        match write(fd.get_ref()) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            done => return done,
        }
        let mut ready = fd.writable().await?;
        if let Ok(done) = ready.try_io(|fd| write(fd.get_ref())) {
            return done;
        }
    }
}

/// Whether `fd` was opened for writing.
fn writable(fd: impl AsFd) -> io::Result<bool> {
    let mode = rustix::fs::fcntl_getfl(fd)? & OFlags::RWMODE;
    Ok(mode == OFlags::WRONLY || mode == OFlags::RDWR)
}

/// `fd` registered with the runtime for readiness.
fn register<T: AsRawFd>(fd: T) -> Option<AsyncFd<T>> {
    #[allow(
        unsafe_code,
        reason = "tokio's AsyncFd::register: the descriptor is owned by the AsyncFd"
    )]
    // SAFETY: the AsyncFd owns the descriptor for its whole life (it is moved in): nothing
    // else closes or replaces that descriptor while it is registered.
    unsafe { AsyncFd::register(fd) }.ok()
}
