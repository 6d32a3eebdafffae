//! Group `confine`: what confinement costs. The same registry work, unconfined (the
//! reference) against `--allow-root` (a path check per command, then every open relative
//! to the root's handle with `openat2`, checked by the kernel) and, for `BASH_EXEC`,
//! `--allow-root` plus `--landlock` (every spawn handed to the Landlock-restricted
//! spawner thread).

use std::path::PathBuf;

use cmdr_executors::{
    BashExecCommand, Command, FileReadCommand, FileWriteCommand, ListDirectoryCommand, PathPolicy,
    Registry, RegistryConfig,
};
use tokio::runtime::Runtime;

use crate::bash::repeat;
use crate::harness::{check_failed, compare, drain, ensure, refused, Failure, Side, Unit};
use crate::table::{Goal, Row};
use crate::Config;

/// Shells at once in the `BASH_EXEC` rows.
const AT_ONCE: usize = 8;

/// Runs the group.
pub fn run(rt: &Runtime, cfg: &Config) -> Result<Vec<Row>, Failure> {
    let dir = tempfile::Builder::new()
        .prefix("cmdr-bench-confine-")
        .tempdir()?;
    let root = std::fs::canonicalize(dir.path())?;
    let file = root.join("small.txt");
    std::fs::write(&file, "x".repeat(4096))?;
    let listed = root.join("listed");
    std::fs::create_dir(&listed)?;
    for i in 0..100 {
        std::fs::write(listed.join(format!("entry-{i:03}.txt")), "x")?;
    }
    let written = root.join("written.txt");
    let (open, allowed, landlocked) = rt.block_on(async {
        let policy = PathPolicy::allow_roots([&root]).map_err(|e| check_failed(e.to_string()))?;
        let make = |landlock| {
            Registry::with_config(RegistryConfig {
                paths: policy.clone(),
                landlock,
                ..RegistryConfig::default()
            })
        };
        Ok::<_, Failure>((Registry::with_defaults(), make(false), make(true)))
    })?;
    let status = landlocked.confinement().landlock.clone();
    eprintln!("   confine: Landlock {status:?}");
    let reads = cfg.size(2000, 100);
    let per_worker = cfg.size(60, 5);
    let shells = per_worker * AT_ONCE;
    let read = |r: &Registry| {
        let (r, file) = (r.clone(), file.clone());
        move || read_small(r.clone(), file.clone())
    };
    let writes = cfg.size(300, 20);
    let write = |r: &Registry| {
        let (r, file) = (r.clone(), written.clone());
        move || write_small(r.clone(), file.clone())
    };
    let lists = cfg.size(1000, 50);
    let list = |r: &Registry| {
        let (r, dir) = (r.clone(), listed.clone());
        move || list_small(r.clone(), dir.clone())
    };
    let shell = |r: &Registry| {
        let (r, root) = (r.clone(), root.clone());
        move || true_in(r.clone(), root.clone())
    };
    let timings = compare(
        cfg.warmup,
        cfg.samples,
        vec![
            Side::new(
                "FILE_READ 4 KiB, --allow-root",
                Unit::Commands(reads as f64),
                || rt.block_on(repeat(1, reads, read(&allowed))),
            ),
            Side::new(
                "FILE_READ 4 KiB, unconfined",
                Unit::Commands(reads as f64),
                || rt.block_on(repeat(1, reads, read(&open))),
            ),
            Side::new(
                "FILE_WRITE 4 KiB, --allow-root",
                Unit::Commands(writes as f64),
                || rt.block_on(repeat(1, writes, write(&allowed))),
            ),
            Side::new(
                "FILE_WRITE 4 KiB, unconfined",
                Unit::Commands(writes as f64),
                || rt.block_on(repeat(1, writes, write(&open))),
            ),
            Side::new(
                "LIST_DIRECTORY 100 entries, --allow-root",
                Unit::Commands(lists as f64),
                || rt.block_on(repeat(1, lists, list(&allowed))),
            ),
            Side::new(
                "LIST_DIRECTORY 100 entries, unconfined",
                Unit::Commands(lists as f64),
                || rt.block_on(repeat(1, lists, list(&open))),
            ),
            Side::new(
                "BASH_EXEC true x8, --allow-root --landlock",
                Unit::Commands(shells as f64),
                || rt.block_on(repeat(AT_ONCE, per_worker, shell(&landlocked))),
            ),
            Side::new(
                "BASH_EXEC true x8, unconfined",
                Unit::Commands(shells as f64),
                || rt.block_on(repeat(AT_ONCE, per_worker, shell(&open))),
            ),
        ],
    );
    let [read_confined, read_open, write_confined, write_open, list_confined, list_open, bash_confined, bash_open] =
        <[_; 8]>::try_from(timings).map_err(|_| check_failed("eight timings expected"))?;
    Ok(vec![
        Row::new(
            "C1 FILE_READ 4 KiB, sequential: --allow-root vs unconfined",
            &read_confined,
            &read_open,
            Goal::AtLeast(0.9),
        ),
        Row::new(
            "C3 FILE_WRITE 4 KiB, sequential: --allow-root vs unconfined",
            &write_confined,
            &write_open,
            Goal::AtLeast(0.9),
        ),
        Row::new(
            "C4 LIST_DIRECTORY 100 entries, sequential: --allow-root vs unconfined",
            &list_confined,
            &list_open,
            Goal::AtLeast(0.9),
        ),
        Row::new(
            "C2 BASH_EXEC `true`, 8 at once: --allow-root --landlock vs unconfined",
            &bash_confined,
            &bash_open,
            Goal::AtLeast(0.9),
        ),
    ])
}

/// `FILE_READ` of `file`, drained; checks the content's length.
async fn read_small(registry: Registry, file: PathBuf) -> Result<(), Failure> {
    let command = Command::FileRead(FileReadCommand {
        file_path: file,
        ..FileReadCommand::default()
    });
    let stream = registry.execute(command).await.map_err(refused)?;
    let result = drain(stream).await?;
    ensure(
        result.exit_code.is_none() && result.message.contains("4096 bytes"),
        || format!("FILE_READ: {}", result.message),
    )
}

/// `FILE_WRITE` of 4 KiB to `file`, drained; checks it succeeded.
async fn write_small(registry: Registry, file: PathBuf) -> Result<(), Failure> {
    let command = Command::FileWrite(FileWriteCommand {
        file_path: file,
        content: "y".repeat(4096),
        ..FileWriteCommand::default()
    });
    let stream = registry.execute(command).await.map_err(refused)?;
    let result = drain(stream).await?;
    ensure(result.message.contains("4096 bytes written"), || {
        format!("FILE_WRITE: {}", result.message)
    })
}

/// `LIST_DIRECTORY` of `dir`, drained; checks the entry count.
async fn list_small(registry: Registry, dir: PathBuf) -> Result<(), Failure> {
    let command = Command::ListDirectory(ListDirectoryCommand {
        path: dir,
        ..ListDirectoryCommand::default()
    });
    let stream = registry.execute(command).await.map_err(refused)?;
    let result = drain(stream).await?;
    ensure(result.message.contains("(100 entries)"), || {
        format!("LIST_DIRECTORY: {}", result.message)
    })
}

/// `BASH_EXEC true` in `dir`, drained; checks exit code 0.
async fn true_in(registry: Registry, dir: PathBuf) -> Result<(), Failure> {
    let command = Command::BashExec(BashExecCommand {
        command: "true".to_owned(),
        working_dir: Some(dir),
        ..BashExecCommand::default()
    });
    let stream = registry.execute(command).await.map_err(refused)?;
    let result = drain(stream).await?;
    ensure(result.exit_code == Some(0), || {
        format!("BASH_EXEC true: exit code {:?}", result.exit_code)
    })
}
