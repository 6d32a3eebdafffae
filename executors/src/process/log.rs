//! [`OutputLog`]: a process's output, addressed by byte offset.
//!
//! Every byte a process writes gets the next offset (0, 1, 2 …, counted over the process's
//! whole life). The log retains the most recent [`OutputLog::cap`] bytes: the newest (up
//! to [`OutputLog::memory`]) in memory, the older ones spilled to an unlinked temporary
//! file used as a ring (offset `o` at position `o % cap`), so the disk it takes is bounded
//! by the cap and nothing is left behind when the log is dropped (or cmdr dies). Bytes
//! older than the cap are dropped and a reader asking for them is told where retention
//! starts ([`Slice::truncated_before`]), then served from there. Readers never consume:
//! any number of them read the same bytes, each from the offset it chooses, so a reader
//! that reconnects resumes exactly where it stopped.
//!
//! Disk IO happens on the caller's thread (an actor's, or a reader's): spills are writes of
//! half the memory threshold (128 KiB by default) into the page cache, made under the
//! log's lock; reads of spilled bytes are made outside it (checked afterwards against
//! retention, and retried if the ring was overwritten meanwhile). Where no spill file can
//! be made, the log keeps only the memory threshold (and warns once).
//!
//! Slices are text: a slice never ends inside a UTF-8 character while more bytes may
//! come (its [`Slice::next_offset`] then points at the character's first byte), and never
//! starts on a continuation byte (those of a character cut by retention are skipped).
//! Invalid bytes become U+FFFD.
//!
//! A waiter can ask for "output after offset N, or the end of the process, or a
//! deadline" ([`OutputLog::wait_beyond`]) without polling. Output counts once it is
//! whole: bytes of a character whose other bytes have not come yet do not wake anyone
//! (a reader could not be given them), so a waiter whose output ends inside a character
//! sleeps until the rest comes instead of spinning.

use std::collections::VecDeque;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

/// The smallest cap and memory threshold.
const MIN_BYTES: usize = 4096;
/// Reads of spilled bytes retried outside the lock before one is made under it.
const UNLOCKED_READS: usize = 3;

/// What a reader gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slice {
    /// The text (bytes from `offset` to `next_offset`, invalid bytes as U+FFFD).
    pub text: String,
    /// Where the text starts (the offset asked for, or later: see `truncated_before`).
    pub offset: u64,
    /// Where to read next.
    pub next_offset: u64,
    /// Set when the offset asked for was older than what is retained: the first offset
    /// still kept (the text starts there).
    pub truncated_before: Option<u64>,
}

/// The state readers wait on: bytes written so far, how many of them are whole text
/// (`end` less the first bytes of a character still incomplete), and whether writing is
/// over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Progress {
    end: u64,
    whole: u64,
    closed: bool,
}

/// A process's output (see the module docs). Cheap to share behind an `Arc`; appends and
/// reads take a short lock.
#[derive(Debug)]
pub struct OutputLog {
    inner: std::sync::Mutex<Retained>,
    progress: watch::Sender<Progress>,
    memory: usize,
    cap: usize,
    /// Where the spill file is made (`None`: the system's temporary directory).
    spill_dir: Option<PathBuf>,
}

/// The retained bytes: offsets `start .. spilled_to` in the spill file, `spilled_to ..
/// spilled_to + bytes.len()` in memory.
#[derive(Debug, Default)]
struct Retained {
    start: u64,
    spilled_to: u64,
    bytes: VecDeque<u8>,
    spill: Spill,
}

/// The spill file, once needed.
#[derive(Debug, Default)]
enum Spill {
    /// Nothing spilled yet.
    #[default]
    None,
    /// The ring file (shared with readers, who read it outside the lock).
    File(Arc<File>),
    /// No file could be made: the log keeps its memory threshold only.
    Failed,
}

impl Retained {
    fn end(&self) -> u64 {
        self.spilled_to + self.bytes.len() as u64
    }
}

impl OutputLog {
    /// An empty log keeping at most `cap` bytes (at least 4 KiB), all in memory.
    pub fn new(cap: usize) -> Self {
        let cap = cap.max(MIN_BYTES);
        Self::build(cap, cap, None)
    }

    /// An empty log keeping at most `cap` bytes, at most `memory` of them in memory (at
    /// least 4 KiB, at most half the cap) and the older ones in a spill file; all in
    /// memory when `memory` is not below the cap.
    pub fn spilling(memory: usize, cap: usize) -> Self {
        let cap = cap.max(MIN_BYTES);
        let memory = if memory >= cap || cap / 2 < MIN_BYTES {
            cap
        } else {
            memory.clamp(MIN_BYTES, cap / 2)
        };
        Self::build(memory, cap, None)
    }

    /// Like [`Self::spilling`], with the spill file made in `dir`.
    pub fn spilling_in(memory: usize, cap: usize, dir: impl Into<PathBuf>) -> Self {
        let mut log = Self::spilling(memory, cap);
        log.spill_dir = Some(dir.into());
        log
    }

    fn build(memory: usize, cap: usize, spill_dir: Option<PathBuf>) -> Self {
        let (progress, _) = watch::channel(Progress {
            end: 0,
            whole: 0,
            closed: false,
        });
        Self {
            inner: std::sync::Mutex::new(Retained::default()),
            progress,
            memory,
            cap,
            spill_dir,
        }
    }

    /// The most bytes kept.
    pub fn cap(&self) -> usize {
        self.cap
    }

    /// The most bytes kept in memory (older ones are spilled).
    pub fn memory(&self) -> usize {
        self.memory
    }

    /// Bytes the log holds in memory now (its buffer's allocation).
    pub fn memory_bytes(&self) -> usize {
        self.lock().bytes.capacity()
    }

    /// Retained bytes that live in the spill file now.
    pub fn disk_bytes(&self) -> u64 {
        let retained = self.lock();
        retained.spilled_to.saturating_sub(retained.start)
    }

    /// The device and inode of the spill file, once there is one (it has no name: this
    /// identifies it among the process's open files).
    pub fn spill_file_id(&self) -> Option<(u64, u64)> {
        use std::os::unix::fs::MetadataExt;
        match &self.lock().spill {
            Spill::File(file) => file.metadata().ok().map(|m| (m.dev(), m.ino())),
            _ => None,
        }
    }

    fn spills(&self) -> bool {
        self.memory < self.cap
    }

    /// Appends output; past the memory threshold the oldest bytes in memory are spilled,
    /// past the cap the oldest bytes are dropped.
    pub fn append(&self, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        let (end, whole) = {
            let mut retained = self.lock();
            // Only the last `cap` bytes of a write larger than the cap can be kept.
            let keep = data.len().min(self.cap);
            let skipped = data.len() - keep;
            if skipped > 0 {
                let at = retained.end() + skipped as u64;
                retained.bytes.clear();
                (retained.start, retained.spilled_to) = (at, at);
            }
            let piece = (self.memory / 2).max(1);
            for part in data.get(skipped..).unwrap_or_default().chunks(piece) {
                self.grow(&mut retained.bytes, part.len());
                retained.bytes.extend(part);
                if retained.bytes.len() > self.memory {
                    self.overflow(&mut retained);
                }
            }
            let end = retained.end();
            retained.start = retained.start.max(end.saturating_sub(self.cap as u64));
            (end, end - held_back(&retained.bytes) as u64)
        };
        self.progress
            .send_modify(|p| (p.end, p.whole) = (end, whole));
    }

    /// Makes room for `more` bytes: doubling, but never beyond what the memory threshold
    /// lets the buffer hold (the threshold plus one piece), so the allocation stays below
    /// 1.5 × the threshold whatever the sizes of the writes.
    fn grow(&self, bytes: &mut VecDeque<u8>, more: usize) {
        let needed = bytes.len() + more;
        if needed <= bytes.capacity() {
            return;
        }
        let most = self.memory + (self.memory / 2).max(1);
        let target = (bytes.capacity() * 2).clamp(needed, most.max(needed));
        bytes.reserve_exact(target - bytes.len());
    }

    /// Moves the oldest bytes in memory to the spill file (down to half the threshold), or
    /// drops them (down to the threshold) when the log does not spill.
    fn overflow(&self, retained: &mut Retained) {
        let keep = if self.spills() {
            self.memory / 2
        } else {
            self.memory
        };
        let moved = retained.bytes.len().saturating_sub(keep);
        let spilled = self.spills() && self.spill(retained, moved);
        retained.bytes.drain(..moved);
        retained.spilled_to += moved as u64;
        if !spilled {
            retained.start = retained.start.max(retained.spilled_to);
        }
    }

    /// Writes the oldest `n` bytes in memory to the ring file; whether it worked.
    fn spill(&self, retained: &mut Retained, n: usize) -> bool {
        if matches!(retained.spill, Spill::None) {
            retained.spill = match self.spill_file() {
                Ok(file) => Spill::File(Arc::new(file)),
                Err(e) => {
                    tracing::warn!(
                        "cannot make a spill file for process output ({e}): keeping only the \
                         last {} bytes in memory",
                        self.memory
                    );
                    Spill::Failed
                }
            };
        }
        let Spill::File(file) = &retained.spill else {
            return false;
        };
        let (front, back) = retained.bytes.as_slices();
        let first = n.min(front.len());
        let parts = [
            front.get(..first).unwrap_or_default(),
            back.get(..n - first).unwrap_or_default(),
        ];
        let mut at = retained.spilled_to;
        for part in parts {
            if let Err(e) = write_ring(file, at, part, self.cap) {
                tracing::warn!("writing the process output spill file: {e}");
                retained.spill = Spill::Failed;
                return false;
            }
            at += part.len() as u64;
        }
        true
    }

    fn spill_file(&self) -> std::io::Result<File> {
        match &self.spill_dir {
            Some(dir) => tempfile::tempfile_in(dir),
            None => tempfile::tempfile(),
        }
    }

    /// No more output will come (the process exited and its pipes are drained).
    pub fn close(&self) {
        self.progress.send_modify(|p| p.closed = true);
    }

    /// Whether no more output will come.
    pub fn is_closed(&self) -> bool {
        self.progress.borrow().closed
    }

    /// Total bytes ever written (the offset the next byte gets).
    pub fn end(&self) -> u64 {
        self.progress.borrow().end
    }

    /// The end of what a reader can be given now: [`Self::end`] less the first bytes of
    /// a character still incomplete (all of it once the log is closed).
    pub fn available(&self) -> u64 {
        let progress = *self.progress.borrow();
        if progress.closed {
            progress.end
        } else {
            progress.whole
        }
    }

    /// The first offset still retained.
    pub fn start(&self) -> u64 {
        self.lock().start
    }

    /// Up to `max_bytes` (at least 4) of output from `offset` (see [`Slice`]).
    pub fn read(&self, offset: u64, max_bytes: usize) -> Slice {
        let closed = self.is_closed();
        let mut attempt = 0;
        let (from, truncated_before, end, mut bytes) = loop {
            attempt += 1;
            if let Some(raw) = self.read_raw(offset, max_bytes.max(4), attempt) {
                break raw;
            }
        };
        // A character cut by retention at the start: its continuation bytes are dropped.
        let lead = if truncated_before.is_some() {
            bytes
                .iter()
                .take_while(|&&b| is_continuation(b))
                .count()
                .min(3)
        } else {
            0
        };
        bytes.drain(..lead);
        // A character not complete yet at the end: left for the next read.
        let mut taken = bytes.len();
        let whole = from + lead as u64 + taken as u64 == end;
        if !(closed && whole) {
            taken -= incomplete_tail(&bytes);
        }
        bytes.truncate(taken);
        let start = from + lead as u64;
        Slice {
            text: String::from_utf8_lossy(&bytes).into_owned(),
            offset: start,
            next_offset: start + taken as u64,
            truncated_before,
        }
    }

    /// The bytes from `offset` (or the first retained one): where they start, the
    /// truncation, the end of the log and the bytes. `None` when spilled bytes read outside
    /// the lock were overwritten meanwhile (read again).
    fn read_raw(
        &self,
        offset: u64,
        max: usize,
        attempt: usize,
    ) -> Option<(u64, Option<u64>, u64, Vec<u8>)> {
        let mut retained = self.lock();
        let end = retained.end();
        let (mut from, mut truncated_before) = if offset < retained.start {
            (retained.start, Some(retained.start))
        } else {
            (offset.min(end), None)
        };
        let want = usize::try_from(end - from).unwrap_or(usize::MAX).min(max);
        let on_disk = usize::try_from(retained.spilled_to.saturating_sub(from))
            .unwrap_or(usize::MAX)
            .min(want);
        let mut bytes = vec![0; on_disk];
        let skip = usize::try_from((from + on_disk as u64).saturating_sub(retained.spilled_to))
            .unwrap_or(0);
        bytes.extend(retained.bytes.range(skip..skip + (want - on_disk)));
        if on_disk == 0 {
            return Some((from, truncated_before, end, bytes));
        }
        let Spill::File(file) = &retained.spill else {
            return Some((from, truncated_before, end, bytes));
        };
        let file = Arc::clone(file);
        let read = if attempt > UNLOCKED_READS {
            read_ring(&file, from, &mut bytes[..on_disk], self.cap)
        } else {
            drop(retained);
            let read = read_ring(&file, from, &mut bytes[..on_disk], self.cap);
            retained = self.lock();
            if retained.start > from {
                return None;
            }
            read
        };
        if let Err(e) = read {
            // Lost bytes: served as if retention had dropped them.
            tracing::warn!("reading the process output spill file: {e}");
            bytes.drain(..on_disk);
            from = retained.spilled_to;
            truncated_before = Some(from);
        }
        Some((from, truncated_before, end, bytes))
    }

    /// Waits until whole output (not only the first bytes of a character) exists beyond
    /// `offset`, the log is closed, or `timeout` passed; returns whether either of the
    /// first two happened.
    pub async fn wait_beyond(&self, offset: u64, timeout: Duration) -> bool {
        let mut progress = self.progress.subscribe();
        let ready = |p: &Progress| p.whole > offset || p.closed;
        let waited = tokio::time::timeout(timeout, progress.wait_for(ready)).await;
        matches!(waited, Ok(Ok(_)))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Retained> {
        // A panic while holding this lock cannot leave the bytes half-updated in a way
        // that matters more than losing the log: recover the guard.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Writes `data` (at most `cap` bytes) for offsets from `at` into the ring file.
fn write_ring(file: &File, at: u64, data: &[u8], cap: usize) -> std::io::Result<()> {
    let pos = usize::try_from(at % cap as u64).unwrap_or(0);
    let first = data.len().min(cap - pos);
    file.write_all_at(data.get(..first).unwrap_or_default(), pos as u64)?;
    file.write_all_at(data.get(first..).unwrap_or_default(), 0)
}

/// Reads the bytes of offsets from `at` from the ring file into `buf` (at most `cap`).
fn read_ring(file: &File, at: u64, buf: &mut [u8], cap: usize) -> std::io::Result<()> {
    let pos = usize::try_from(at % cap as u64).unwrap_or(0);
    let first = buf.len().min(cap - pos);
    let (head, tail) = buf.split_at_mut(first);
    file.read_exact_at(head, pos as u64)?;
    file.read_exact_at(tail, 0)
}

/// How many of the last bytes in memory start a character still incomplete (the newest
/// bytes are always in memory: the threshold is at least 4 KiB).
fn held_back(bytes: &VecDeque<u8>) -> usize {
    let mut last = [0; 3];
    let n = bytes.len().min(3);
    for (slot, byte) in last.iter_mut().zip(bytes.range(bytes.len() - n..)) {
        *slot = *byte;
    }
    incomplete_tail(&last[..n])
}

fn is_continuation(byte: u8) -> bool {
    byte & 0b1100_0000 == 0b1000_0000
}

/// How many bytes at the end of `bytes` are the start of a UTF-8 character whose other
/// bytes are missing (0 when the text ends on a whole character or an invalid byte).
fn incomplete_tail(bytes: &[u8]) -> usize {
    let tail = bytes.len().saturating_sub(3);
    for (i, &b) in bytes.iter().enumerate().skip(tail).rev() {
        if is_continuation(b) {
            continue;
        }
        let need = match b {
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => return 0,
        };
        let have = bytes.len() - i;
        return if have < need { have } else { 0 };
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readers_read_from_any_offset_without_consuming() {
        let log = OutputLog::new(4096);
        log.append(b"hello ");
        log.append(b"world\n");
        let all = log.read(0, 1024);
        assert_eq!(all.text, "hello world\n");
        assert_eq!(
            (all.offset, all.next_offset, all.truncated_before),
            (0, 12, None)
        );
        assert_eq!(log.read(6, 4).text, "worl");
        assert_eq!(log.read(6, 4).next_offset, 10);
        assert_eq!(log.read(0, 1024), all, "reading consumed nothing");
        let past = log.read(99, 10);
        assert_eq!((past.text.as_str(), past.next_offset), ("", 12));
    }

    #[test]
    fn beyond_the_cap_the_oldest_bytes_go_and_readers_are_told() {
        let log = OutputLog::new(4096);
        for i in 0..10u8 {
            log.append(&[b'a' + i; 1000]);
        }
        assert_eq!(log.end(), 10_000);
        assert_eq!(log.start(), 10_000 - 4096);
        let slice = log.read(0, 10);
        assert_eq!(slice.truncated_before, Some(5904));
        assert_eq!(slice.offset, 5904);
        assert_eq!(
            slice.text, "ffffffffff",
            "offsets 5904.. were the sixth write"
        );
        let fresh = log.read(9000, 1000);
        assert_eq!((fresh.truncated_before, fresh.text.len()), (None, 1000));
        // One write larger than the cap keeps its tail.
        log.append(&vec![b'z'; 10_000]);
        assert_eq!(log.start(), 20_000 - 4096);
        assert!(log.read(0, 8192).text.chars().all(|c| c == 'z'));
    }

    #[test]
    fn slices_never_split_a_character() {
        let log = OutputLog::new(4096);
        let text = "é日🦀";
        let bytes = text.as_bytes();
        log.append(&bytes[..2]);
        log.append(&bytes[2..4]);
        let first = log.read(0, 100);
        assert_eq!((first.text.as_str(), first.next_offset), ("é", 2));
        log.append(&bytes[4..]);
        let mut offset = 0;
        let mut out = String::new();
        while offset < log.end() {
            let slice = log.read(offset, 4);
            assert!(slice.next_offset > offset, "progress at {offset}");
            out.push_str(&slice.text);
            offset = slice.next_offset;
        }
        assert_eq!(out, text);
    }

    #[test]
    fn an_incomplete_character_at_the_end_of_a_closed_log_is_replaced() {
        let log = OutputLog::new(4096);
        log.append(&[b'a', 0xE6, 0x97]);
        assert_eq!(log.read(0, 10).text, "a");
        log.close();
        let last = log.read(0, 10);
        assert_eq!(last.text, "a\u{FFFD}");
        assert_eq!(last.next_offset, 3);
    }

    #[test]
    fn a_character_cut_by_retention_is_skipped_not_garbled() {
        let log = OutputLog::new(4096);
        log.append("日".repeat(2000).as_bytes());
        let slice = log.read(0, 9);
        assert_eq!(slice.truncated_before, Some(6000 - 4096));
        assert_eq!(slice.text, "日日");
        assert_eq!(slice.offset % 3, 0);
    }

    #[tokio::test]
    async fn waiters_wake_on_output_or_close_and_give_up_at_the_deadline() {
        let log = std::sync::Arc::new(OutputLog::new(4096));
        assert!(!log.wait_beyond(0, Duration::from_millis(20)).await);
        let writer = {
            let log = log.clone();
            tokio::spawn(async move {
                tokio::task::yield_now().await;
                log.append(b"x");
            })
        };
        assert!(log.wait_beyond(0, Duration::from_secs(30)).await);
        writer.await.unwrap();
        assert!(!log.wait_beyond(1, Duration::from_millis(20)).await);
        log.close();
        assert!(log.wait_beyond(1, Duration::from_secs(30)).await);
    }

    #[tokio::test]
    async fn half_a_character_wakes_no_waiter_and_its_rest_does() {
        let log = std::sync::Arc::new(OutputLog::new(4096));
        log.append(b"a\xE6");
        assert!(log.wait_beyond(0, Duration::from_millis(1)).await, "the a");
        assert_eq!(log.read(1, 10).next_offset, 1, "the half is held back");
        assert!(
            !log.wait_beyond(1, Duration::from_millis(20)).await,
            "half a character is not output yet"
        );
        log.append(b"\x97");
        assert!(!log.wait_beyond(1, Duration::from_millis(20)).await);
        log.append(b"\xA5");
        assert!(log.wait_beyond(1, Duration::from_millis(1)).await);
        assert_eq!(log.read(1, 10).text, "日");
        // Bytes that can never complete a character are output as they are.
        log.append(b"\xE6z");
        assert!(log.wait_beyond(4, Duration::from_millis(1)).await);
    }

    /// A byte pattern where every offset is recognisable: offset `o` holds `o % 251`.
    fn pattern(from: u64, len: usize) -> Vec<u8> {
        (from..from + len as u64).map(|o| (o % 251) as u8).collect()
    }

    /// Reads the raw bytes of `log` from `offset` to its end, `step` at a time (the
    /// pattern is not UTF-8: the lossy text is compared through its replacement).
    fn read_all(log: &OutputLog, mut offset: u64, step: usize) -> (Vec<Slice>, u64) {
        let mut slices = Vec::new();
        while offset < log.end() {
            let slice = log.read(offset, step);
            assert!(slice.next_offset > offset, "progress at {offset}");
            offset = slice.next_offset;
            slices.push(slice);
        }
        (slices, offset)
    }

    #[test]
    fn spilled_bytes_are_read_back_from_disk_exactly() {
        let dir = tempfile::tempdir().unwrap();
        let log = OutputLog::spilling_in(8192, 64 * 1024, dir.path());
        // ASCII only, so the text is the bytes: lines numbered by their offset.
        let mut written = String::new();
        while written.len() < 40_000 {
            let line = format!("line at {:08}\n", written.len());
            log.append(line.as_bytes());
            written.push_str(&line);
        }
        assert!(log.disk_bytes() > 30_000, "most of it is on disk");
        assert!(log.memory_bytes() <= 8192 + 4096, "{}", log.memory_bytes());
        assert!(log.spill_file_id().is_some());
        // A read entirely on disk, one across disk and memory, and everything.
        let old = log.read(100, 1000);
        assert_eq!(old.text, written[100..1100]);
        assert_eq!(old.truncated_before, None);
        let (slices, end) = read_all(&log, 0, 7000);
        let text: String = slices.iter().map(|s| s.text.as_str()).collect();
        assert_eq!(text, written, "nothing lost within retention");
        assert_eq!(end, written.len() as u64);
    }

    #[test]
    fn past_the_cap_the_ring_wraps_and_readers_are_told_where_retention_starts() {
        let dir = tempfile::tempdir().unwrap();
        let cap = 64 * 1024;
        let log = OutputLog::spilling_in(8192, cap, dir.path());
        let total = 10 * cap + 123;
        let mut at = 0u64;
        for size in [1, 4095, 70_000, 13, 5000].iter().cycle() {
            let n = (*size).min(total - at as usize);
            if n == 0 {
                break;
            }
            log.append(&pattern(at, n));
            at += n as u64;
        }
        assert_eq!(log.end(), total as u64);
        let start = total as u64 - cap as u64;
        assert_eq!(log.start(), start);
        assert!(log.memory_bytes() <= 8192 + 4096, "{}", log.memory_bytes());
        let first = log.read(0, 10);
        assert_eq!(first.truncated_before, Some(start));
        // Every retained byte, in reads of odd sizes crossing the ring's end.
        let mut offset = start;
        while offset < log.end() {
            let raw = log.read_raw(offset, 3001, 1).unwrap();
            assert_eq!(raw.0, offset);
            assert_eq!(raw.3, pattern(offset, raw.3.len()), "bytes at {offset}");
            offset += raw.3.len() as u64;
        }
        assert_eq!(offset, total as u64);
    }

    #[test]
    fn the_spill_file_has_no_name_and_is_closed_with_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let log = OutputLog::spilling_in(4096, 16 * 1024, dir.path());
        log.append(&[b'x'; 20_000]);
        let id = log.spill_file_id().expect("spilled");
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "unlinked"
        );
        assert!(open_files().contains(&id));
        drop(log);
        assert!(!open_files().contains(&id), "closed with the log");
    }

    /// The device and inode of every file this process has open.
    pub(crate) fn open_files() -> Vec<(u64, u64)> {
        use std::os::unix::fs::MetadataExt;
        std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .flatten()
            .filter_map(|e| std::fs::metadata(e.path()).ok())
            .map(|m| (m.dev(), m.ino()))
            .collect()
    }

    #[test]
    fn a_log_that_cannot_spill_keeps_its_memory_threshold() {
        let log = OutputLog::spilling_in(4096, 64 * 1024, "/nonexistent/cmdr-spill");
        log.append(&pattern(0, 20_000));
        assert_eq!(log.disk_bytes(), 0);
        let slice = log.read(0, 100);
        let kept = slice.truncated_before.expect("older bytes dropped");
        assert!(20_000 - kept <= 4096 + 2048, "{kept}");
        assert_eq!(log.end(), 20_000);
    }
}
