//! `--allow-root`: every file command and `working_dir` confined to the allowed roots,
//! symlinks resolved; Landlock on `BASH_EXEC` writes where the kernel has it.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use cmdr_executors::{
    ExecutionStatus, OutputResult, PathPolicy, Registry, RegistryConfig, SandboxStatus, Scope,
};
use serde_json::{json, Value};

use super::processes::read_until;
use super::{assert_failed, data, run, terminal, PATIENCE};

/// A root with a file and a sub-directory, and an outside directory with a secret.
struct Layout {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    outside: PathBuf,
}

fn layout() -> Layout {
    let tmp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(tmp.path()).unwrap();
    let root = base.join("root");
    let outside = base.join("outside");
    std::fs::create_dir_all(root.join("sub")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(root.join("inside.txt"), "inside\n").unwrap();
    std::fs::write(outside.join("secret.txt"), "secret\n").unwrap();
    Layout {
        _tmp: tmp,
        root,
        outside,
    }
}

fn confined(root: &Path, landlock: bool) -> Registry {
    Registry::with_config(RegistryConfig {
        paths: PathPolicy::allow_roots([root]).unwrap(),
        landlock,
        ..RegistryConfig::default()
    })
}

/// Runs `json` and returns its terminal result.
async fn end_of(registry: &Registry, json: Value) -> OutputResult {
    terminal(&run(registry, json).await).clone()
}

/// A denial: `PATH_NOT_ALLOWED`, naming the field, the path and the rule.
fn assert_denied(result: &OutputResult, role: &str, root: &Path) {
    assert_failed(result, "PATH_NOT_ALLOWED");
    assert!(
        result.error.contains(role),
        "names the field: {}",
        result.error
    );
    assert!(
        result
            .error
            .contains("outside the allowed roots (--allow-root")
            && result.error.contains(&root.display().to_string()),
        "names the rule: {}",
        result.error
    );
}

fn patch_for(old: &str, new: &str) -> String {
    format!("--- a/f\n+++ b/f\n@@ -1 +1 @@\n-{old}\n+{new}\n")
}

#[tokio::test]
async fn every_file_command_works_inside_the_roots() {
    let l = layout();
    let registry = confined(&l.root, false);
    let read = run(
        &registry,
        json!({"commandType":"FILE_READ","file_path":l.root.join("inside.txt")}),
    )
    .await;
    assert_eq!(data(&read), "inside\n");
    let new = l.root.join("sub/deeper/new.txt");
    let wrote = end_of(
        &registry,
        json!({"commandType":"FILE_WRITE","file_path":new,"content":"x\n","create_dirs":true}),
    )
    .await;
    assert_eq!(wrote.status, ExecutionStatus::Succeeded, "{wrote:?}");
    let patched = end_of(
        &registry,
        json!({"commandType":"PATCH_FILE","file_path":new,"patch":patch_for("x","y")}),
    )
    .await;
    assert_eq!(patched.status, ExecutionStatus::Succeeded, "{patched:?}");
    assert_eq!(std::fs::read_to_string(&new).unwrap(), "y\n");
    let listed = end_of(
        &registry,
        json!({"commandType":"LIST_DIRECTORY","path":l.root}),
    )
    .await;
    assert!(listed.result_data.contains("inside.txt"), "{listed:?}");
    let shell = end_of(
        &registry,
        json!({"commandType":"BASH_EXEC","command":"pwd","working_dir":l.root.join("sub")}),
    )
    .await;
    assert_eq!(shell.status, ExecutionStatus::Succeeded, "{shell:?}");
}

#[tokio::test]
async fn every_file_command_is_denied_outside_the_roots_and_touches_nothing() {
    let l = layout();
    let registry = confined(&l.root, false);
    let secret = l.outside.join("secret.txt");
    let read = end_of(
        &registry,
        json!({"commandType":"FILE_READ","file_path":secret}),
    )
    .await;
    assert_denied(&read, "file_path", &l.root);
    assert!(
        read.result_data.is_empty(),
        "nothing of the file is returned"
    );
    let created = l.outside.join("created.txt");
    let write = end_of(
        &registry,
        json!({"commandType":"FILE_WRITE","file_path":created,"content":"x"}),
    )
    .await;
    assert_denied(&write, "file_path", &l.root);
    assert!(!created.exists(), "the denied write created nothing");
    let patch = end_of(
        &registry,
        json!({"commandType":"PATCH_FILE","file_path":secret,"patch":patch_for("secret","pwned")}),
    )
    .await;
    assert_denied(&patch, "file_path", &l.root);
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "secret\n");
    let list = end_of(
        &registry,
        json!({"commandType":"LIST_DIRECTORY","path":l.outside}),
    )
    .await;
    assert_denied(&list, "path", &l.root);
    let shell = end_of(
        &registry,
        json!({"commandType":"BASH_EXEC","command":"touch ran","working_dir":l.outside}),
    )
    .await;
    assert_denied(&shell, "working_dir", &l.root);
    assert!(
        !l.outside.join("ran").exists(),
        "the denied shell never ran"
    );
}

#[tokio::test]
async fn dot_dot_and_symlinks_cannot_lead_out() {
    let l = layout();
    symlink(&l.outside, l.root.join("escape")).unwrap();
    symlink(l.outside.join("planted.txt"), l.root.join("dangling")).unwrap();
    let registry = confined(&l.root, false);
    let dotdot = l.root.join("sub/../../outside/secret.txt");
    let read = end_of(
        &registry,
        json!({"commandType":"FILE_READ","file_path":dotdot}),
    )
    .await;
    assert_denied(&read, "file_path", &l.root);
    let via_link = l.root.join("escape/secret.txt");
    let read = end_of(
        &registry,
        json!({"commandType":"FILE_READ","file_path":via_link}),
    )
    .await;
    assert_denied(&read, "file_path", &l.root);
    assert!(
        read.error.contains(&format!(
            "resolves to {}",
            l.outside.join("secret.txt").display()
        )),
        "says where the link leads: {}",
        read.error
    );
    // Writing through a dangling link would create its target outside the root.
    let write = end_of(
        &registry,
        json!({"commandType":"FILE_WRITE","file_path":l.root.join("dangling"),"content":"x"}),
    )
    .await;
    assert_denied(&write, "file_path", &l.root);
    assert!(!l.outside.join("planted.txt").exists());
    let created_dirs = end_of(
        &registry,
        json!({"commandType":"FILE_WRITE","file_path":l.root.join("new/../../outside/x"),
               "content":"x","create_dirs":true}),
    )
    .await;
    assert_denied(&created_dirs, "file_path", &l.root);
    assert!(!l.outside.join("x").exists());
    let shell = end_of(
        &registry,
        json!({"commandType":"BASH_EXEC","command":"true","working_dir":l.root.join("escape")}),
    )
    .await;
    assert_denied(&shell, "working_dir", &l.root);
}

#[tokio::test]
async fn a_shell_without_working_dir_needs_cmdrs_own_directory_allowed() {
    let l = layout();
    // The test process runs in the crate's directory, outside the temporary root.
    let registry = confined(&l.root, false);
    let shell = end_of(
        &registry,
        json!({"commandType":"BASH_EXEC","command":"true"}),
    )
    .await;
    assert_denied(&shell, "no working_dir given", &l.root);
    let cwd = std::env::current_dir().unwrap();
    let allowed = confined(&cwd, false);
    let shell = end_of(
        &allowed,
        json!({"commandType":"BASH_EXEC","command":"true"}),
    )
    .await;
    assert_eq!(shell.status, ExecutionStatus::Succeeded, "{shell:?}");
}

#[tokio::test]
async fn landlock_confines_what_shells_write_or_says_it_cannot() {
    let l = layout();
    let registry = confined(&l.root, true);
    let status = registry.confinement().landlock.clone().unwrap();
    if let SandboxStatus::Unsupported(why) = &status {
        // Honest report, and nothing claimed: the write outside is not stopped.
        assert!(status.to_string().starts_with("not enforced: "), "{why}");
        return;
    }
    let inside = l.root.join("made-by-shell.txt");
    let outside = l.outside.join("made-by-shell.txt");
    let script = format!(
        "echo in > {}; echo out > {} || echo refused; echo quiet > /dev/null; echo visible",
        inside.display(),
        outside.display()
    );
    let messages = run(
        &registry,
        json!({"commandType":"BASH_EXEC","command":script,"working_dir":l.root}),
    )
    .await;
    let output = data(&messages);
    assert_eq!(std::fs::read_to_string(&inside).unwrap(), "in\n");
    assert!(
        !outside.exists(),
        "Landlock stopped the write outside: {output}"
    );
    assert!(output.contains("Permission denied"), "{output}");
    // stdout and stderr interleave in no fixed order: check each stream's lines apart.
    assert!(
        output.contains("refused\n") && output.contains("visible\n"),
        "{output}"
    );
    // The restriction stays on the shells: cmdr itself still writes anywhere.
    std::fs::write(l.outside.join("by-cmdr.txt"), "ok").unwrap();
    // Deleting and renaming outside are write accesses too.
    let rm = end_of(
        &registry,
        json!({"commandType":"BASH_EXEC","command":format!("rm {}", l.outside.join("secret.txt").display()),
               "working_dir":l.root}),
    )
    .await;
    assert_failed(&rm, "EXIT_STATUS");
    assert!(l.outside.join("secret.txt").exists());
}

#[tokio::test]
async fn background_processes_and_sessions_are_held_to_the_roots_like_one_shot_commands() {
    let l = layout();
    let registry = confined(&l.root, false);
    let ran = l.outside.join("ran");
    let touch = format!("touch {}", ran.display());
    let starts = [
        json!({"commandType":"BASH_EXEC","command":touch,"working_dir":l.outside,"background":true}),
        json!({"commandType":"BASH_EXEC","command":touch,"working_dir":l.outside,"background":true,
               "tty":true}),
        json!({"commandType":"BASH_EXEC","command":touch,"working_dir":l.outside,"session":"s"}),
        // Through `..` out of a root.
        json!({"commandType":"BASH_EXEC","command":touch,"working_dir":l.root.join("../outside"),
               "background":true}),
    ];
    for start in starts {
        assert_denied(&end_of(&registry, start).await, "working_dir", &l.root);
    }
    // Without working_dir they would run in cmdr's own directory, outside the root.
    for start in [
        json!({"commandType":"BASH_EXEC","command":touch,"background":true}),
        json!({"commandType":"BASH_EXEC","command":touch,"session":"t"}),
    ] {
        assert_denied(
            &end_of(&registry, start).await,
            "no working_dir given",
            &l.root,
        );
    }
    // A session made inside the root cannot be pointed outside by a later command.
    let inside = end_of(
        &registry,
        json!({"commandType":"BASH_EXEC","command":"pwd","working_dir":l.root,"session":"u"}),
    )
    .await;
    assert_eq!(inside.status, ExecutionStatus::Succeeded, "{inside:?}");
    let later = end_of(
        &registry,
        json!({"commandType":"BASH_EXEC","command":touch,"working_dir":l.outside,"session":"u"}),
    )
    .await;
    assert_denied(&later, "working_dir", &l.root);
    // A later command without working_dir stays where the session is (inside the root),
    // wherever cmdr's own directory lies.
    let sub = l.root.join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    let moved = end_of(
        &registry,
        json!({"commandType":"BASH_EXEC","command":"cd sub","session":"u"}),
    )
    .await;
    assert_eq!(moved.status, ExecutionStatus::Succeeded, "{moved:?}");
    let stayed = end_of(
        &registry,
        json!({"commandType":"BASH_EXEC","command":"pwd","session":"u"}),
    )
    .await;
    assert_eq!(stayed.status, ExecutionStatus::Succeeded, "{stayed:?}");
    assert_eq!(
        stayed.final_cwd.as_deref(),
        Some(sub.canonicalize().unwrap().to_str().unwrap())
    );
    assert!(!ran.exists(), "no denied process ran");
    registry.shutdown(std::time::Duration::from_secs(1)).await;
}

#[tokio::test]
async fn landlock_confines_background_processes_tty_processes_and_sessions() {
    let l = layout();
    let registry = confined(&l.root, true);
    let status = registry.confinement().landlock.clone().unwrap();
    if let SandboxStatus::Unsupported(why) = &status {
        // Honest report, and nothing claimed (as for one-shot commands).
        assert!(status.to_string().starts_with("not enforced: "), "{why}");
        return;
    }
    let attack = |kind: &str| {
        format!(
            "echo in > {}; echo out > {} || echo refused-{kind}",
            l.root.join(kind).display(),
            l.outside.join(kind).display()
        )
    };
    for (kind, tty) in [("background", false), ("tty", true)] {
        let started = end_of(
            &registry,
            json!({"commandType":"BASH_EXEC","command":attack(kind),"working_dir":l.root,
                   "background":true,"tty":tty,"yield_ms":0}),
        )
        .await;
        let id = started.process_id.clone().expect("started");
        let output = read_until(&registry, &id, &format!("refused-{kind}")).await;
        assert!(output.contains("Permission denied"), "{kind}: {output:?}");
        registry
            .processes()
            .get(&Scope::default(), &id)
            .unwrap()
            .wait_exit(PATIENCE)
            .await;
    }
    // The session, and a later command in the same shell.
    for kind in ["session", "session-again"] {
        let messages = run(
            &registry,
            json!({"commandType":"BASH_EXEC","command":attack(kind),"working_dir":l.root,
                   "session":"s"}),
        )
        .await;
        assert_eq!(terminal(&messages).status, ExecutionStatus::Succeeded);
        let output = data(&messages);
        assert!(output.contains(&format!("refused-{kind}")), "{output:?}");
    }
    for kind in ["background", "tty", "session", "session-again"] {
        assert!(
            !l.outside.join(kind).exists(),
            "Landlock stopped the {kind} write outside"
        );
    }
    for kind in ["background", "tty", "session"] {
        assert_eq!(std::fs::read_to_string(l.root.join(kind)).unwrap(), "in\n");
    }
    registry.shutdown(std::time::Duration::from_secs(1)).await;
}

#[test]
fn unrestricted_is_the_default() {
    let policy = PathPolicy::default();
    assert!(!policy.is_restricted());
    assert!(RegistryConfig::default().paths == policy);
}
