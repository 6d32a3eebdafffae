//! Whole-tree kill: every process a command started, including those that left its process
//! group (`setsid`, `daemon`, double forks), is found and killed when the command stops.
//!
//! Two mechanisms, chosen once per process:
//!
//! - **cgroup v2** (where cmdr may create cgroups: root, or a delegated subtree): each shell
//!   is created inside a cgroup of its own under `<cmdr's cgroup>/cmdr-<pid>/`
//!   (`clone3(CLONE_INTO_CGROUP)`, see `spawn`: moving a running process in cost 4–20 ms of
//!   the kernel's RCU grace period), so every descendant is born inside it; leaving it
//!   takes write access to cgroup files,
//!   which a confined shell lacks. A stop writes `1` to `cgroup.kill`: the kernel kills
//!   every member at once, forks included. Empty cgroups are reused (making and removing
//!   one per command cost a quarter of a `bash -c true`; a reused one costs one write).
//! - **environment marker** (no writable cgroup v2: containers with a read-only
//!   `/sys/fs/cgroup`, cgroup v1 hosts, or [`BashExecConfig::cgroups`] off): each shell
//!   carries [`MARKER_VAR`] with a value unique to the command; a stop kills every process
//!   whose environment holds it, in passes until none is left. A descendant that clears its
//!   environment *and* leaves the process group escapes this one.
//!
//! Both come on top of the process-group signals (the floor). A script that exits normally
//! leaves its background processes running (by design): its cgroup is reused only once
//! empty. The `cmdr` binary removes its empty cgroups at exit ([`remove_cgroups`]), and a
//! later cmdr removes those of a cmdr that is gone.
//!
//! [`BashExecConfig::cgroups`]: super::BashExecConfig::cgroups

use std::fs;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use super::spawn::CgroupFds;

/// The environment variable that marks a command's processes in the marker mechanism.
pub const MARKER_VAR: &str = "CMDR_TREE";

/// Passes of the marker scan: a process forked during one pass is found by the next.
const MARKER_PASSES: usize = 8;

/// Lingering cgroups retried at each release, at most.
const RETRY_PER_RELEASE: usize = 8;

/// Which mechanism finds a command's processes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TreeMechanism {
    /// A cgroup v2 per command under this directory.
    Cgroup(PathBuf),
    /// The [`MARKER_VAR`] environment marker (plus the process group).
    Marker,
}

impl std::fmt::Display for TreeMechanism {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TreeMechanism::Cgroup(base) => write!(f, "cgroup v2 ({})", base.display()),
            TreeMechanism::Marker => {
                write!(
                    f,
                    "process group + environment marker (no writable cgroup v2)"
                )
            }
        }
    }
}

/// Empty cgroups kept for reuse, at most (each holds one open file).
const POOL_MAX: usize = 64;

/// Process-wide: the cgroup base (created once), the command counter, idle cgroups ready
/// for reuse and cgroups still holding a finished script's background processes.
struct Shared {
    base: Option<PathBuf>,
    cgroups: Mutex<Cgroups>,
}

#[derive(Default)]
struct Cgroups {
    /// Empty, ready for the next command (making and removing a cgroup per command costs
    /// a quarter of a `bash -c true`; reusing one costs a write).
    idle: Vec<Cgroup>,
    /// Not empty when their command ended; checked again at later releases.
    lingering: Vec<Cgroup>,
}

static SHARED: OnceLock<Shared> = OnceLock::new();
static NEXT: AtomicU64 = AtomicU64::new(0);

fn shared() -> &'static Shared {
    SHARED.get_or_init(|| {
        let (base, idle) = match cgroup_base() {
            Some((base, first)) => (Some(base), vec![first]),
            None => (None, Vec::new()),
        };
        match &base {
            Some(base) => tracing::debug!(base = %base.display(), "process trees: cgroup v2"),
            None => tracing::debug!("process trees: no writable cgroup v2, environment marker"),
        }
        Shared {
            base,
            cgroups: Mutex::new(Cgroups {
                idle,
                lingering: Vec::new(),
            }),
        }
    })
}

/// Removes this process's cgroups at exit: the idle ones, the lingering ones that have
/// emptied since, and `cmdr-<pid>` itself when nothing is left in it (a script's
/// background processes that outlive cmdr keep theirs; a later cmdr sweeps it once they
/// are gone). Call once no command runs any more; does nothing when no command ever
/// asked for a cgroup. Without it, the next cmdr's start-up pays for the sweep.
pub fn remove_cgroups() {
    let Some(shared) = SHARED.get() else {
        return;
    };
    let (Some(base), Ok(mut cgroups)) = (&shared.base, shared.cgroups.lock()) else {
        return;
    };
    for cgroup in cgroups.idle.drain(..) {
        cgroup.remove();
    }
    let lingering = std::mem::take(&mut cgroups.lingering);
    for cgroup in lingering {
        if cgroup.is_empty() {
            cgroup.remove();
        } else {
            cgroups.lingering.push(cgroup);
        }
    }
    let _ = fs::remove_dir(base);
}

/// The mechanism in force: cgroups when `cgroups` is allowed and available.
pub fn mechanism(cgroups: bool) -> TreeMechanism {
    match (cgroups, &shared().base) {
        (true, Some(base)) => TreeMechanism::Cgroup(base.clone()),
        _ => TreeMechanism::Marker,
    }
}

/// One cgroup, with its directory (to start shells in) and its `cgroup.procs` (read to
/// see members; written by a shell that must move itself in) open.
#[derive(Debug)]
struct Cgroup {
    dir: PathBuf,
    handle: OwnedFd,
    procs: fs::File,
    /// `cgroup.kill` was written: never reused (Linux kills every child later cloned into
    /// a killed cgroup, see `spawn::INTO_CGROUP_FAILS`).
    killed: AtomicBool,
}

impl Cgroup {
    fn create(dir: PathBuf) -> std::io::Result<Self> {
        fs::create_dir(&dir)?;
        let opened = fs::File::open(&dir).and_then(|handle| {
            let procs = fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(dir.join("cgroup.procs"))?;
            Ok((OwnedFd::from(handle), procs))
        });
        match opened {
            Ok((handle, procs)) => Ok(Self {
                dir,
                handle,
                procs,
                killed: AtomicBool::new(false),
            }),
            Err(e) => {
                let _ = fs::remove_dir(&dir);
                Err(e)
            }
        }
    }

    /// The pids in it.
    fn members(&self) -> Vec<i32> {
        let mut text = Vec::new();
        let mut buf = [0u8; 4096];
        let mut offset = 0;
        while let Ok(n) = self.procs.read_at(&mut buf, offset) {
            if n == 0 {
                break;
            }
            text.extend_from_slice(&buf[..n]);
            offset += n as u64;
        }
        String::from_utf8_lossy(&text)
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }

    fn is_empty(&self) -> bool {
        let mut buf = [0u8; 1];
        matches!(self.procs.read_at(&mut buf, 0), Ok(0))
    }

    fn remove(self) {
        let Cgroup {
            dir, handle, procs, ..
        } = self;
        drop((handle, procs));
        let _ = fs::remove_dir(dir);
    }
}

/// One command's process tree.
#[derive(Debug)]
pub(super) struct Tree {
    cgroup: Option<Cgroup>,
    marker: String,
}

impl Tree {
    /// A new tree: its own (empty) cgroup when `cgroups` is allowed and one can be had.
    pub(super) fn new(cgroups: bool) -> Self {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let marker = format!("{}.{n}", std::process::id());
        let shared = shared();
        let cgroup = match (cgroups, &shared.base) {
            (true, Some(base)) => {
                let reused = shared.cgroups.lock().ok().and_then(|mut c| c.idle.pop());
                reused.or_else(|| {
                    let dir = base.join(format!("c{n}"));
                    Cgroup::create(dir)
                        .map_err(|e| tracing::debug!("cannot make a cgroup: {e}"))
                        .ok()
                })
            }
            _ => None,
        };
        Self { cgroup, marker }
    }

    /// The cgroup to start the shell in, if it has one (valid while the tree lives).
    pub(super) fn cgroup(&self) -> Option<CgroupFds> {
        self.cgroup.as_ref().map(|c| CgroupFds {
            dir: c.handle.as_raw_fd(),
            procs: c.procs.as_raw_fd(),
        })
    }

    /// The marker variable and value for the shell's environment (marker mode only).
    pub(super) fn marker(&self) -> Option<(&'static str, &str)> {
        self.cgroup
            .is_none()
            .then_some((MARKER_VAR, self.marker.as_str()))
    }

    /// Sends `signal` to every process of the tree.
    pub(super) fn signal(&self, signal: Signal) {
        match &self.cgroup {
            Some(cgroup) if signal == Signal::SIGKILL => {
                cgroup.killed.store(true, Ordering::Relaxed);
                if write_file(&cgroup.dir.join("cgroup.kill"), "1").is_err() {
                    // Kernels before 5.14: one by one.
                    signal_each(&cgroup.members(), signal);
                }
            }
            Some(cgroup) => signal_each(&cgroup.members(), signal),
            None => signal_marked(&self.marker, signal),
        }
    }

    /// Gives the cgroup back once empty (now, or at a later release): reused, or removed
    /// when enough are idle.
    pub(super) fn release(self) {
        let Ok(mut cgroups) = shared().cgroups.lock() else {
            return;
        };
        let budget = cgroups.lingering.len().min(RETRY_PER_RELEASE);
        let retry: Vec<Cgroup> = cgroups.lingering.drain(..budget).collect();
        for cgroup in retry.into_iter().chain(self.cgroup) {
            if !cgroup.is_empty() {
                cgroups.lingering.push(cgroup);
            } else if cgroups.idle.len() < POOL_MAX && !cgroup.killed.load(Ordering::Relaxed) {
                cgroups.idle.push(cgroup);
            } else {
                cgroup.remove();
            }
        }
    }
}

/// `cmdr-<pid>` under this process's own cgroup v2, created (with leftovers of dead cmdrs
/// swept), with a first cgroup made in it (the proof that it is usable, kept for the
/// first command), or `None` when there is no writable cgroup v2.
fn cgroup_base() -> Option<(PathBuf, Cgroup)> {
    let own = fs::read_to_string("/proc/self/cgroup").ok()?;
    let own = own.lines().find_map(|l| l.strip_prefix("0::"))?;
    let parent = own_cgroup_dir(own)?;
    sweep(&parent);
    let base = parent.join(format!("cmdr-{}", std::process::id()));
    match fs::create_dir(&base) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(_) => return None,
    }
    // Usable only if a cgroup can be made inside, with its `cgroup.procs` open.
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    match Cgroup::create(base.join(format!("c{n}"))) {
        Ok(first) => Some((base, first)),
        Err(_) => {
            let _ = fs::remove_dir(&base);
            None
        }
    }
}

/// Where cgroup v2 is mounted on most hosts: the unified hierarchy, or systemd's hybrid
/// layout beside the v1 controllers.
const USUAL_CGROUP2_MOUNTS: [&str; 2] = ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"];

/// The cgroup v2 mount point: one of [`USUAL_CGROUP2_MOUNTS`] when `statfs` says it is
/// cgroup2 (two system calls), else the one `/proc/self/mountinfo` lists (`/sys/fs/cgroup`
/// preferred), whose reading costs a one-shot `cmdr exec` ~0.1 ms.
fn cgroup2_mount() -> Option<PathBuf> {
    use nix::sys::statfs::{statfs, CGROUP2_SUPER_MAGIC};
    USUAL_CGROUP2_MOUNTS
        .iter()
        .find(|path| statfs(**path).is_ok_and(|fs| fs.filesystem_type() == CGROUP2_SUPER_MAGIC))
        .map(PathBuf::from)
        .or_else(mounted_cgroup2)
}

/// The cgroup v2 mount point that `/proc/self/mountinfo` lists (`/sys/fs/cgroup`
/// preferred, else the first).
fn mounted_cgroup2() -> Option<PathBuf> {
    let info = fs::read_to_string("/proc/self/mountinfo").ok()?;
    let all: Vec<String> = cgroup2_mounts(&info)
        .into_iter()
        .map(|(_, at)| at)
        .collect();
    let pick = all
        .iter()
        .find(|m| *m == "/sys/fs/cgroup")
        .or_else(|| all.first())?;
    Some(PathBuf::from(pick))
}

/// The cgroup2 file systems in `mountinfo`'s text: for each, the directory of the
/// hierarchy mounted (its root, `/` for the whole of it) and where, unescaped.
fn cgroup2_mounts(info: &str) -> Vec<(String, String)> {
    info.lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            if right.split_whitespace().next()? != "cgroup2" {
                return None;
            }
            let mut fields = left.split_whitespace().skip(3);
            Some((unescape(fields.next()?), unescape(fields.next()?)))
        })
        .collect()
}

/// A `mountinfo` path field as the path it names: the kernel writes a space, a tab, a
/// newline and a backslash as `\040`, `\011`, `\012` and `\134`. Any other backslash is
/// kept as it is.
fn unescape(field: &str) -> String {
    let mut path = String::with_capacity(field.len());
    let mut rest = field;
    while let Some(at) = rest.find('\\') {
        path.push_str(&rest[..at]);
        let code = rest
            .get(at + 1..at + 4)
            .filter(|digits| digits.bytes().all(|b| (b'0'..=b'7').contains(&b)));
        match code.and_then(|digits| u8::from_str_radix(digits, 8).ok()) {
            Some(byte @ (b' ' | b'\t' | b'\n' | b'\\')) => {
                path.push(char::from(byte));
                rest = &rest[at + 4..];
            }
            _ => {
                path.push('\\');
                rest = &rest[at + 1..];
            }
        }
    }
    path.push_str(rest);
    path
}

/// This process's own cgroup directory, `own` being its path in `/proc/self/cgroup`. That
/// path is from the root of the hierarchy (as this cgroup namespace sees it), which is
/// what a cgroup2 mount usually shows; where the mount shows only a subtree (a container
/// sharing the host's cgroup namespace, its own subtree bind-mounted on `/sys/fs/cgroup`),
/// the mount's root is taken off `own` first ([`beneath`]). A directory is taken only if
/// its `cgroup.procs` lists this process: under such a subtree mount, `<mount>/<own>` can
/// exist and be some other cgroup.
fn own_cgroup_dir(own: &str) -> Option<PathBuf> {
    let me = std::process::id();
    if let Some(mount) = cgroup2_mount() {
        let dir = mount.join(own.trim_start_matches('/'));
        if lists_process(&dir, me) {
            return Some(dir);
        }
    }
    let info = fs::read_to_string("/proc/self/mountinfo").ok()?;
    cgroup2_mounts(&info)
        .into_iter()
        .filter_map(|(root, at)| beneath(&root, &at, own))
        .find(|dir| lists_process(dir, me))
}

/// Whether the cgroup directory `dir` holds process `pid` (its `cgroup.procs` lists it).
fn lists_process(dir: &Path, pid: u32) -> bool {
    let Ok(members) = fs::read_to_string(dir.join("cgroup.procs")) else {
        return false;
    };
    let pid = pid.to_string();
    members.lines().any(|member| member == pid)
}

/// Where cgroup `own` is under a mount at `at` of the hierarchy's directory `root`; `None`
/// when `own` is not inside `root`.
fn beneath(root: &str, at: &str, own: &str) -> Option<PathBuf> {
    let rest = match root.trim_end_matches('/') {
        "" => own,
        root => {
            let rest = own.strip_prefix(root)?;
            if !(rest.is_empty() || rest.starts_with('/')) {
                return None;
            }
            rest
        }
    };
    Some(Path::new(at).join(rest.trim_start_matches('/')))
}

/// Removes the empty cgroups of cmdr processes that are gone.
fn sweep(parent: &Path) {
    let Ok(entries) = fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("cmdr-"))
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        if Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        if let Ok(children) = fs::read_dir(entry.path()) {
            for child in children.flatten() {
                if child.path().is_dir() {
                    let _ = fs::remove_dir(child.path());
                }
            }
        }
        let _ = fs::remove_dir(entry.path());
    }
}

fn signal_each(pids: &[i32], signal: Signal) {
    for pid in pids {
        let _ = kill(Pid::from_raw(*pid), signal);
    }
}

/// Signals every process whose environment carries `marker`, in passes until none is found
/// (SIGKILL) or once (other signals).
fn signal_marked(marker: &str, signal: Signal) {
    let needle = format!("{MARKER_VAR}={marker}");
    let passes = if signal == Signal::SIGKILL {
        MARKER_PASSES
    } else {
        1
    };
    for _ in 0..passes {
        let found = marked(needle.as_bytes());
        if found.is_empty() {
            return;
        }
        signal_each(&found, signal);
    }
}

/// The pids (not this process) whose environment holds the `needle` entry.
fn marked(needle: &[u8]) -> Vec<i32> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let me = std::process::id();
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != me)
        .filter(|pid| {
            fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|entry| entry == needle))
        })
        .filter_map(|pid| i32::try_from(pid).ok())
        .collect()
}

fn write_file(path: &Path, text: &str) -> std::io::Result<()> {
    fs::OpenOptions::new()
        .write(true)
        .open(path)
        .and_then(|mut file| std::io::Write::write_all(&mut file, text.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The two `statfs` calls find a cgroup2 mount that `/proc/self/mountinfo` lists
    /// (the one it would pick, on a host with only one), or none where it lists none.
    #[test]
    fn the_cgroup2_mount_found_by_statfs_is_one_mountinfo_lists() {
        let info = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let listed: Vec<String> = cgroup2_mounts(&info)
            .into_iter()
            .map(|(_, at)| at)
            .collect();
        match cgroup2_mount() {
            Some(found) => {
                assert!(
                    listed.iter().any(|m| Path::new(m) == found),
                    "{found:?} {listed:?}"
                );
                if listed.len() == 1 {
                    assert_eq!(Some(found), mounted_cgroup2());
                }
            }
            None => assert!(listed.is_empty(), "{listed:?}"),
        }
    }

    #[test]
    fn cgroup2_mounts_are_read_from_mountinfo_lines() {
        let info = "22 27 0:21 / /proc rw,relatime - proc proc rw\n\
                    35 31 0:30 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n\
                    36 31 0:31 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n\
                    40 27 0:30 / /mnt/cg rw - cgroup2 none rw\n";
        let owned = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(root, at)| ((*root).to_owned(), (*at).to_owned()))
                .collect()
        };
        assert_eq!(
            cgroup2_mounts(info),
            owned(&[("/", "/sys/fs/cgroup/unified"), ("/", "/mnt/cg")])
        );
        let container = "1385 1377 0:27 /docker/4f2a /sys/fs/cgroup ro - cgroup2 cgroup rw\n";
        assert_eq!(
            cgroup2_mounts(container),
            owned(&[("/docker/4f2a", "/sys/fs/cgroup")])
        );
        // The kernel escapes a space, a tab, a newline and a backslash in paths.
        let escaped = "41 27 0:30 /a\\040b\\134c /mnt/my\\040cg\\011x rw - cgroup2 none rw\n";
        assert_eq!(
            cgroup2_mounts(escaped),
            owned(&[("/a b\\c", "/mnt/my cg\tx")])
        );
    }

    #[test]
    fn mountinfo_escapes_are_decoded_and_other_backslashes_kept() {
        assert_eq!(unescape("/plain"), "/plain");
        assert_eq!(unescape("/a\\040b\\012c"), "/a b\nc");
        // Not one of the four escapes, or cut short: kept as written.
        assert_eq!(unescape("/a\\101b"), "/a\\101b");
        assert_eq!(unescape("/a\\04"), "/a\\04");
        assert_eq!(unescape("/a\\+12"), "/a\\+12");
        assert_eq!(unescape("/end\\"), "/end\\");
    }

    #[test]
    fn a_cgroup_is_found_under_a_mount_of_the_whole_hierarchy_or_of_its_subtree() {
        let at = "/sys/fs/cgroup";
        let path = |p: &str| Some(PathBuf::from(p));
        assert_eq!(
            beneath("/", at, "/user.slice/s"),
            path("/sys/fs/cgroup/user.slice/s")
        );
        assert_eq!(beneath("/", at, "/"), path("/sys/fs/cgroup"));
        // A container's subtree bind-mounted, the host's namespace shared.
        assert_eq!(
            beneath("/docker/4f2a", at, "/docker/4f2a"),
            path("/sys/fs/cgroup")
        );
        assert_eq!(
            beneath("/docker/4f2a/", at, "/docker/4f2a/w"),
            path("/sys/fs/cgroup/w")
        );
        assert_eq!(
            beneath("/docker/4f2a", at, "/docker/4f2ab"),
            None,
            "a sibling"
        );
        assert_eq!(beneath("/docker/4f2a", at, "/system.slice"), None);
    }

    /// A directory whose `cgroup.procs` does not list this process is not its cgroup,
    /// whatever its path: the look-up passes over it.
    #[test]
    fn a_cgroup_directory_is_ours_only_if_it_lists_this_process() {
        let dir = tempfile::tempdir().unwrap();
        let me = std::process::id();
        assert!(!lists_process(dir.path(), me), "no cgroup.procs at all");
        fs::write(dir.path().join("cgroup.procs"), format!("1\n{}7\n", me)).unwrap();
        assert!(
            !lists_process(dir.path(), me),
            "only a pid that starts like ours"
        );
        fs::write(dir.path().join("cgroup.procs"), format!("1\n{me}\n42\n")).unwrap();
        assert!(lists_process(dir.path(), me));
    }

    /// This process's own cgroup is found, and is the directory its `cgroup.procs` lists
    /// it in (where this host has a cgroup v2 at all).
    #[test]
    fn this_process_finds_its_own_cgroup() {
        let Some(own) = fs::read_to_string("/proc/self/cgroup")
            .ok()
            .and_then(|text| {
                text.lines()
                    .find_map(|l| l.strip_prefix("0::").map(str::to_owned))
            })
        else {
            return;
        };
        if cgroup2_mount().is_none() {
            return;
        }
        let dir = own_cgroup_dir(&own).expect("the own cgroup's directory");
        let members = fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
        let me = std::process::id().to_string();
        assert!(
            members.lines().any(|pid| pid == me),
            "{} lists {members:?}",
            dir.display()
        );
    }
}
