//! Who owns a run marker: an identity of this process that cannot be confused with a
//! later process reusing its pid, and whether the process behind an identity still runs.
//!
//! The identity is `<boot id>:<pid>:<start time>` (Linux: `/proc/sys/kernel/random/boot_id`
//! and field 22 of `/proc/<pid>/stat`, in clock ticks since boot). A process is alive when
//! the same pid, booted the same time, started at the same tick and is not a zombie.
//! Without `/proc` the identity is `pid:<pid>` and is always taken as alive (runs it marks
//! are then never closed by a restart).

use std::fs;

/// This process's identity.
pub(crate) fn this_process() -> String {
    let pid = std::process::id();
    identity(pid).unwrap_or_else(|| format!("pid:{pid}"))
}

/// Whether the process that wrote `owner` still runs.
pub(crate) fn is_alive(owner: &str) -> bool {
    let mut parts = owner.splitn(3, ':');
    let (Some(_boot), Some(pid), Some(_start)) = (parts.next(), parts.next(), parts.next()) else {
        return true;
    };
    let Ok(pid) = pid.parse::<u32>() else {
        return true;
    };
    identity(pid).is_some_and(|now| now == owner)
}

/// The identity of a running (not zombie) process, if it exists.
fn identity(pid: u32) -> Option<String> {
    let boot = fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: read after the last ')'.
    let mut fields = stat.rsplit_once(')')?.1.split_whitespace();
    let state = fields.next()?;
    if state == "Z" || state == "X" {
        return None;
    }
    // After the state (field 3), the start time is field 22: 19 fields further.
    let start = fields.nth(18)?;
    Some(format!("{}:{pid}:{start}", boot.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_others_are_not() {
        let me = this_process();
        assert!(is_alive(&me), "{me}");
        let mut parts: Vec<&str> = me.split(':').collect();
        let later = format!("{}", parts[2].parse::<u64>().unwrap_or(0) + 1);
        parts[2] = &later;
        assert!(
            !is_alive(&parts.join(":")),
            "a reused pid is another process"
        );
        assert!(!is_alive("boot:4194304999:1"), "no such pid");
        assert!(is_alive("pid:12"), "without /proc: taken as alive");
    }
}
