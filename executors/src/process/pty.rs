//! [`Pty`]: the pseudo-terminal of a background process started with `tty: true`
//! (docs/processes.md, "Terminals").
//!
//! cmdr keeps the master side, non-blocking, registered with the runtime: the process's
//! actor reads the output from it and `PROCESS_INPUT` writes to it, so what is written
//! goes through the terminal's line discipline as typed keys do (echo, line editing,
//! `^C` → SIGINT to the foreground process group, `^D` → end-of-file). The shell gets the
//! other side (its stdin, stdout and stderr) and makes it its controlling terminal.
//! The terminal calls go through rustix's safe wrappers; the one `unsafe` is tokio's
//! registration of the master, which this type owns.

use std::io;
use std::os::fd::OwnedFd;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use rustix::pty::OpenptFlags;
use rustix::termios::{SpecialCodeIndex, Winsize};
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, ReadBuf};

/// Columns of a terminal when `cols` is not given.
pub const DEFAULT_COLS: u16 = 80;
/// Rows of a terminal when `rows` is not given.
pub const DEFAULT_ROWS: u16 = 24;

/// A terminal's size in character cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TermSize {
    /// Columns.
    pub cols: u16,
    /// Rows.
    pub rows: u16,
}

impl Default for TermSize {
    fn default() -> Self {
        Self {
            cols: DEFAULT_COLS,
            rows: DEFAULT_ROWS,
        }
    }
}

/// The master side of a pseudo-terminal (see the module docs).
#[derive(Debug)]
pub struct Pty {
    master: AsyncFd<OwnedFd>,
    /// Whether bytes were typed since the last line end: end-of-file then takes two
    /// `^D` (the first only ends the pending line).
    line_pending: AtomicBool,
}

impl Pty {
    /// A new pseudo-terminal of `size`: the master (registered with the current runtime)
    /// and the terminal side for the process.
    pub fn open(size: TermSize) -> io::Result<(Self, OwnedFd)> {
        let flags = OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC;
        let master = rustix::pty::openpt(flags)?;
        rustix::pty::grantpt(&master)?;
        rustix::pty::unlockpt(&master)?;
        let terminal = open_terminal(&master, flags)?;
        rustix::termios::tcsetwinsize(&terminal, winsize(size))?;
        rustix::io::ioctl_fionbio(&master, true)?;
        #[allow(
            unsafe_code,
            reason = "tokio's AsyncFd::register: the descriptor is owned by the AsyncFd"
        )]
        // SAFETY: the AsyncFd owns the master (an `OwnedFd`) for its whole life: nothing
        // else closes or replaces that descriptor while it is registered.
        let master = unsafe { AsyncFd::register(master)? };
        Ok((
            Self {
                master,
                line_pending: AtomicBool::new(false),
            },
            terminal,
        ))
    }

    /// Types `input` (all of it; waits while the terminal's input queue is full).
    pub async fn write_all(&self, mut input: &[u8]) -> io::Result<()> {
        while !input.is_empty() {
            let n = self.write_some(input).await?;
            input = input.get(n..).unwrap_or_default();
        }
        Ok(())
    }

    /// Types as much of `input` as the terminal's input queue takes, once it takes any:
    /// how many bytes went in. Cancel-safe: dropped while waiting, nothing was typed.
    pub async fn write_some(&self, input: &[u8]) -> io::Result<usize> {
        if input.is_empty() {
            return Ok(0);
        }
        loop {
            let mut guard = self.master.writable().await?;
            match guard.try_io(|fd| Ok(rustix::io::write(fd.get_ref(), input)?)) {
                Ok(Ok(n)) => {
                    if let Some(last) = input.get(..n).and_then(<[u8]>::last) {
                        let pending = !matches!(last, b'\n' | b'\r' | 0x03 | 0x04 | 0x15);
                        self.line_pending.store(pending, Ordering::Relaxed);
                    }
                    return Ok(n);
                }
                Ok(Err(e)) => return Err(e),
                Err(_would_block) => {}
            }
        }
    }

    /// Types end-of-file: the terminal's `VEOF` character (`^D`), twice when a line is
    /// pending (the first one only ends that line). The terminal stays open.
    pub async fn end_of_file(&self) -> io::Result<()> {
        let eof = rustix::termios::tcgetattr(self.master.get_ref())
            .map(|t| t.special_codes[SpecialCodeIndex::VEOF])
            .unwrap_or(0x04);
        let times = if self.line_pending.load(Ordering::Relaxed) {
            2
        } else {
            1
        };
        self.write_all(&vec![eof; times]).await?;
        self.line_pending.store(false, Ordering::Relaxed);
        Ok(())
    }

    /// Its size now.
    pub fn size(&self) -> io::Result<TermSize> {
        let ws = rustix::termios::tcgetwinsize(self.master.get_ref())?;
        Ok(TermSize {
            cols: ws.ws_col,
            rows: ws.ws_row,
        })
    }

    /// Resizes it (the kernel sends SIGWINCH to its foreground process group).
    pub fn resize(&self, size: TermSize) -> io::Result<()> {
        Ok(rustix::termios::tcsetwinsize(
            self.master.get_ref(),
            winsize(size),
        )?)
    }

    /// A reader of its output, for the actor.
    pub fn reader(self: &Arc<Self>) -> PtyReader {
        PtyReader(Arc::clone(self))
    }
}

/// The output side of a [`Pty`]: end-of-file once no process holds the terminal any more
/// (the kernel's `EIO` on the master).
#[derive(Debug)]
pub struct PtyReader(Arc<Pty>);

impl AsyncRead for PtyReader {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            let mut guard = ready!(self.0.master.poll_read_ready(cx))?;
            let unfilled = buf.initialize_unfilled();
            match guard.try_io(|fd| Ok(rustix::io::read(fd.get_ref(), &mut *unfilled)?)) {
                Ok(Ok(n)) => {
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                // Linux: every holder of the terminal side closed it.
                Ok(Err(e)) if e.raw_os_error() == Some(rustix::io::Errno::IO.raw_os_error()) => {
                    return Poll::Ready(Ok(()));
                }
                Ok(Err(e)) => return Poll::Ready(Err(e)),
                Err(_would_block) => {}
            }
        }
    }
}

/// The terminal side, opened from the master itself (`TIOCGPTPEER`: no path lookup that
/// a rename in `/dev/pts` could redirect), or by its name on kernels before 4.13.
fn open_terminal(master: &OwnedFd, flags: OpenptFlags) -> io::Result<OwnedFd> {
    match rustix::pty::ioctl_tiocgptpeer(master, flags) {
        Ok(fd) => Ok(fd),
        Err(_) => {
            let name = rustix::pty::ptsname(master, Vec::new())?;
            let mode = rustix::fs::OFlags::RDWR | rustix::fs::OFlags::NOCTTY;
            Ok(rustix::fs::open(
                name.as_c_str(),
                mode | rustix::fs::OFlags::CLOEXEC,
                rustix::fs::Mode::empty(),
            )?)
        }
    }
}

fn winsize(size: TermSize) -> Winsize {
    Winsize {
        ws_row: size.rows,
        ws_col: size.cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    }
}
