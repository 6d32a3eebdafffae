//! How a command travels to a session's shell, and how the shell says it is done.
//!
//! A frame is a 40-character header — the command's token (32 hex digits: a fresh random
//! 128-bit nonce per command, so no command can predict and forge another's end marker)
//! and the body's length (8 hex digits) — followed by the body. The session's loop reads each with one `read -N`:
//! bash reads a pipe without buffering, so a NUL- or newline-terminated field costs it
//! one `read(2)` per byte, where `-N` takes the whole field in one.
//!
//! `read -N` counts characters in the shell's locale, which the user may change, so the
//! body is printable ASCII only (plus tab and newline): one byte, one character, in any
//! locale. A command holding any other byte travels ANSI-C quoted (`eval $'…\xe6…'`),
//! which bash turns back into the exact bytes before running them. A `working_dir`
//! becomes `cd -- DIR && eval CMD` (a `cd` that fails is the command's exit status 1).
//!
//! After the command the loop prints the end marker [`marker`]`<status>:<cwd>\0`.

/// The loop the session's bash runs. Commands come on fd 62 (a copy of the stdin pipe);
/// stdin becomes `/dev/null` and stderr joins stdout for the whole session, set once
/// rather than redirected around every command (which costs bash ~20 system calls).
/// `\x1e` (record separator) starts each marker.
pub(super) const LOOP: &str = r#"trap : INT
exec 62<&0 0</dev/null 2>&1
while read -r -N 40 -u 62 __cmdr_h; do
  read -r -N $((16#${__cmdr_h:32})) -u 62 __cmdr_c
  eval "$__cmdr_c"
  printf '\036CMDR:%s:%d:%s\0' "${__cmdr_h:0:32}" "$?" "$PWD"
done"#;

/// The most bytes a session command may have (its quoted body stays far below the
/// header's 8 hex digits).
pub(super) const MAX_COMMAND: usize = 16 * 1024 * 1024;

/// The frame that runs `command` (after `cd` to `dir`, when given) as command `token`.
pub(super) fn frame(token: u128, dir: Option<&[u8]>, command: &str) -> Vec<u8> {
    let body = body(dir, command.as_bytes());
    let mut frame = format!("{token:032x}{:08x}", body.len()).into_bytes();
    frame.extend_from_slice(body.as_bytes());
    frame
}

/// The start of command `token`'s end marker; its status, `:`, its cwd and a NUL follow.
pub(super) fn marker(token: u128) -> Vec<u8> {
    format!("\x1eCMDR:{token:032x}:").into_bytes()
}

/// A fresh token: 122 random bits (a UUID v4), so no command can guess the next one's.
pub(super) fn new_token() -> u128 {
    uuid::Uuid::new_v4().as_u128()
}

/// What the loop `eval`s: printable ASCII only.
fn body(dir: Option<&[u8]>, command: &[u8]) -> String {
    match dir {
        Some(dir) => format!("cd -- {} && eval {}", quoted(dir), quoted(command)),
        None if plain(command) => String::from_utf8_lossy(command).into_owned(),
        None => format!("eval {}", quoted(command)),
    }
}

/// Bytes that stand for themselves in a body.
fn plain(text: &[u8]) -> bool {
    text.iter()
        .all(|&b| matches!(b, b' '..=b'~' | b'\n' | b'\t'))
}

/// `text` as one shell word: `'…'` when plain, else `$'…'` with every other byte escaped.
fn quoted(text: &[u8]) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    if plain(text) {
        out.push('\'');
        for &b in text {
            if b == b'\'' {
                out.push_str("'\\''");
            } else {
                out.push(char::from(b));
            }
        }
        out.push('\'');
        return out;
    }
    out.push_str("$'");
    for &b in text {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'\'' => out.push_str("\\'"),
            b' '..=b'~' => out.push(char::from(b)),
            _ => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out.push('\'');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Header length: token (32 hex digits) and body length (8).
    const HEADER: usize = 40;

    #[test]
    fn a_plain_command_travels_as_is_behind_its_header() {
        assert_eq!(
            frame(0x1f, None, "echo hi"),
            b"0000000000000000000000000000001f00000007echo hi"
        );
        assert_eq!(marker(0x1f), b"\x1eCMDR:0000000000000000000000000000001f:");
        assert_ne!(new_token(), new_token());
    }

    #[test]
    fn other_bytes_are_escaped_so_the_body_is_ascii() {
        let f = frame(1, None, "echo 'é' \\ \r");
        let body = std::str::from_utf8(&f[HEADER..]).unwrap();
        assert_eq!(body, r"eval $'echo \'\xc3\xa9\' \\ \x0d'");
        assert_eq!(&f[32..HEADER], format!("{:08x}", body.len()).as_bytes());
        assert!(body.is_ascii());
    }

    #[test]
    fn a_directory_becomes_a_cd_before_the_command() {
        let f = frame(2, Some(b"/tmp/it's"), "ls");
        assert_eq!(&f[HEADER..], br"cd -- '/tmp/it'\''s' && eval 'ls'");
    }
}
