//! Disk full on `FILE_WRITE` and `PATCH_FILE`, on a real full file system: a 1 MiB tmpfs
//! mounted in a private mount namespace (`unshare --mount`, so nothing leaks to the host
//! and the mount goes away with the process), with the real `cmdr exec -` running inside
//! it. The test looks at the files through `/proc/<pid>/root`, i.e. inside that
//! namespace: the old file must be intact byte for byte, no temp file left behind, the
//! result a clean `FAILED` with a stable `errorCode`, and once space is freed the next
//! write succeeds.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{json, Value};

/// `cmdr exec -` inside a mount namespace with a 1 MiB tmpfs on `dir`.
struct Confined {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    dir: PathBuf,
}

impl Confined {
    fn start(dir: &Path) -> Self {
        let mut child = Command::new("unshare")
            .args(["--mount", "--propagation", "private", "--", "sh", "-c"])
            .arg(r#"mount -t tmpfs -o size=1m cmdr-faults "$0" || exit 97; exec "$1" exec --combine -"#)
            .arg(dir)
            .arg(env!("CARGO_BIN_EXE_cmdr"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run unshare (util-linux) for the disk-full test: {e}"));
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Self {
            child,
            stdin,
            stdout,
            dir: dir.to_path_buf(),
        }
    }

    /// Runs one command and returns its combined result (`--combine`: one JSON line).
    fn run(&mut self, command: Value) -> Value {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{command}").unwrap();
        stdin.flush().unwrap();
        let mut line = String::new();
        if self.stdout.read_line(&mut line).unwrap() == 0 {
            self.explain_exit();
        }
        serde_json::from_str(&line).unwrap()
    }

    /// Panics with why the namespace or the mount could not be set up.
    fn explain_exit(&mut self) -> ! {
        let status = self.child.wait().unwrap();
        let mut stderr = String::new();
        use std::io::Read;
        let _ = self
            .child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr);
        panic!(
            "cannot set up a full file system for this test: `unshare --mount` + \
             `mount -t tmpfs` exited with {status} ({}); it needs root or user namespaces. \
             stderr: {stderr}",
            if status.code() == Some(97) {
                "mount failed"
            } else {
                "unshare failed"
            }
        );
    }

    /// `name` in the tmpfs, as seen from inside the namespace.
    fn inside(&self, name: &str) -> PathBuf {
        PathBuf::from(format!("/proc/{}/root", self.child.id()))
            .join(self.dir.strip_prefix("/").unwrap())
            .join(name)
    }

    /// The tmpfs's entries, sorted.
    fn entries(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.inside(""))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    fn path(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }
}

impl Drop for Confined {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The old file intact, byte for byte, and no temp file left behind.
fn assert_untouched(fs: &Confined, original: &str) {
    assert_eq!(
        std::fs::read_to_string(fs.inside("data.txt")).unwrap(),
        original
    );
    assert_eq!(
        fs.entries(),
        ["data.txt", "filler"],
        "no temp file left behind"
    );
}

fn assert_disk_full(result: &Value) {
    assert_eq!(result["status"], "FAILED", "{result}");
    assert_eq!(result["errorCode"], "NO_SPACE", "{result}");
    let error = result["error"].as_str().unwrap();
    assert!(error.contains("no space left on the device"), "{result}");
}

#[test]
fn a_full_disk_fails_writes_and_patches_cleanly_and_keeps_the_old_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut fs = Confined::start(dir.path());
    let data = fs.path("data.txt");
    let original = "line 1\nline 2\nline 3\n";

    let written =
        fs.run(json!({"commandType": "FILE_WRITE", "file_path": data, "content": original}));
    assert_eq!(written["status"], "SUCCEEDED", "{written}");
    // The mount is real and private: the host's directory stays empty.
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "the tmpfs leaked out"
    );
    assert_eq!(
        std::fs::read_to_string(fs.inside("data.txt")).unwrap(),
        original
    );

    let filler = fs.path("filler");
    let filled = fs.run(json!({"commandType": "BASH_EXEC",
        "command": format!("cat /dev/zero > {filler} 2>/dev/null; df -k --output=avail {} | tail -1", fs.path(""))}));
    let avail = filled["resultData"]
        .as_str()
        .unwrap_or_default()
        .trim()
        .to_owned();
    assert_eq!(avail, "0", "the file system is full: {filled}");

    let big = format!("{}\n", "x".repeat(200 * 1024));
    let write = fs.run(json!({"commandType": "FILE_WRITE", "file_path": data, "content": big}));
    assert_disk_full(&write);
    assert_untouched(&fs, original);

    let patch = format!(
        "--- a/data.txt\n+++ b/data.txt\n@@ -1,3 +1,3 @@\n line 1\n-line 2\n+{}\n line 3\n",
        "y".repeat(8 * 1024)
    );
    let patched = fs.run(json!({"commandType": "PATCH_FILE", "file_path": data, "patch": patch}));
    assert_disk_full(&patched);
    assert_untouched(&fs, original);

    let freed = fs.run(json!({"commandType": "BASH_EXEC", "command": format!("rm {filler}")}));
    assert_eq!(freed["status"], "SUCCEEDED", "{freed}");
    let write = fs.run(json!({"commandType": "FILE_WRITE", "file_path": data, "content": big}));
    assert_eq!(write["status"], "SUCCEEDED", "{write}");
    assert_eq!(std::fs::read_to_string(fs.inside("data.txt")).unwrap(), big);
    let patch = format!("--- a/data.txt\n+++ b/data.txt\n@@ -1 +1 @@\n-{big}+short\n");
    let patched = fs.run(json!({"commandType": "PATCH_FILE", "file_path": data, "patch": patch}));
    assert_eq!(patched["status"], "SUCCEEDED", "{patched}");
    assert_eq!(
        std::fs::read_to_string(fs.inside("data.txt")).unwrap(),
        "short\n"
    );
    assert_eq!(fs.entries(), ["data.txt"]);
}
