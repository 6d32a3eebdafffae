//! What `/proc` says about a process: resident memory, open file descriptors, bytes
//! written, whether it is gone.

/// Resident memory (`VmRSS`) of `pid` in KiB; `None` when the process is gone.
pub fn rss_kib(pid: i32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Open file descriptors of `pid`; `None` when the process is gone.
pub fn fd_count(pid: i32) -> Option<usize> {
    Some(std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count())
}

/// Bytes `pid` has written so far (`wchar` of `/proc/<pid>/io`: every `write`, pipes
/// included); `None` when the process is gone.
pub fn written_bytes(pid: i32) -> Option<u64> {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).ok()?;
    let line = io.lines().find(|l| l.starts_with("wchar:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// KiB as MiB, for messages.
pub fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}
