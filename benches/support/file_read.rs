//! Benchmark 3: `FILE_READ` of a large text file through `combine_output_results`,
//! against `tokio::fs::read` and against `tokio::fs::File` with 64 KiB reads. Every side
//! ends with the whole file as a `String` (UTF-8 checked), which is compared with the
//! content written, outside the timed part.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use cmdr_executors::{combine_output_results, Command, FileReadCommand, Registry};
use tokio::io::AsyncReadExt;
use tokio::runtime::Runtime;

use crate::harness::Unit;
use crate::harness::{check_failed, compare, ensure, refused, succeeded, Failure, Sample, Side};
use crate::table::{faster, Goal, Row};
use crate::Config;

/// Bytes per line of the test file.
const LINE: usize = 64;
/// The test file repeats one block of this many bytes.
const BLOCK: usize = 1 << 20;

/// Runs group 3.
pub fn run(rt: &Runtime, cfg: &Config) -> Result<Vec<Row>, Failure> {
    let mib = cfg.size(1024, 64);
    let dir = tempfile::Builder::new()
        .prefix("cmdr-bench-read-")
        .tempdir_in("/tmp")?;
    let path = dir.path().join("big.txt");
    let block = text_block();
    let started = Instant::now();
    write_file(&path, &block, mib)?;
    eprintln!(
        "    wrote {mib} MiB in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let registry = rt.block_on(async { Registry::with_defaults() });
    let expect = Expect {
        block: &block,
        len: mib * BLOCK,
    };
    let unit = Unit::Bytes(expect.len as f64);
    let timings = compare(
        cfg.warmup,
        cfg.size(5, 3),
        vec![
            Side::new("FILE_READ + combine", unit, || {
                rt.block_on(cmdr_read(&registry, &path, &expect))
            }),
            Side::new("tokio::fs::read", unit, || {
                rt.block_on(tokio_read(&path, &expect))
            }),
            Side::new("tokio File, 64 KiB reads", unit, || {
                rt.block_on(tokio_chunked(&path, &expect))
            }),
            Side::new("FILE_READ streamed, chunks dropped", unit, || {
                rt.block_on(cmdr_streamed(&registry, &path, &expect))
            }),
            Side::new("tokio File, 64 KiB reads dropped", unit, || {
                rt.block_on(tokio_streamed(&path, &expect))
            }),
        ],
    );
    let [cmdr, whole, chunked, cmdr_streamed, tokio_streamed] =
        <[_; 5]>::try_from(timings).map_err(|_| check_failed("five timings expected"))?;
    let name = format!("3 FILE_READ {}", size_name(mib));
    Ok(vec![
        Row::new(format!("{name} vs fs::read"), &cmdr, &whole, Goal::Info),
        Row::new(
            format!("{name} vs 64 KiB reads"),
            &cmdr,
            &chunked,
            Goal::Info,
        ),
        Row::new(
            format!("{name} vs the faster"),
            &cmdr,
            &faster(&whole, &chunked),
            Goal::AtLeast(0.5),
        ),
        Row::new(
            format!("{name} streamed, no String (info)"),
            &cmdr_streamed,
            &tokio_streamed,
            Goal::Info,
        ),
    ])
}

fn size_name(mib: usize) -> String {
    if mib.is_multiple_of(1024) {
        format!("{} GiB", mib / 1024)
    } else {
        format!("{mib} MiB")
    }
}

/// What a read must return: `block` repeated, `len` bytes in all.
struct Expect<'a> {
    block: &'a [u8],
    len: usize,
}

impl Expect<'_> {
    fn check(&self, who: &str, text: &str) -> Result<(), Failure> {
        ensure(text.len() == self.len, || {
            format!("{who}: {} bytes read, {} expected", text.len(), self.len)
        })?;
        let same = text
            .as_bytes()
            .chunks(self.block.len())
            .all(|chunk| chunk == self.block);
        ensure(same, || {
            format!("{who}: content differs from the file written")
        })
    }
}

impl Expect<'_> {
    /// Whether `chunk`, found at `offset`, starts and ends as the file does there (cheap
    /// enough to run inside the timed part of the streamed reads).
    fn spot_check(&self, offset: usize, chunk: &[u8]) -> bool {
        let at = |i: usize| self.block.get(i % self.block.len());
        let (Some(first), Some(last)) = (chunk.first(), chunk.last()) else {
            return true;
        };
        at(offset) == Some(first) && at(offset + chunk.len() - 1) == Some(last)
    }

    fn check_streamed(&self, who: &str, len: usize, spots_ok: bool) -> Result<(), Failure> {
        ensure(len == self.len && spots_ok, || {
            format!(
                "{who}: {len} bytes of {} streamed, spot checks ok: {spots_ok}",
                self.len
            )
        })
    }
}

/// 1 MiB of 64-byte numbered text lines.
fn text_block() -> Vec<u8> {
    let mut block = Vec::with_capacity(BLOCK);
    for i in 0..BLOCK / LINE {
        let line = format!("line {i:05}: the quick brown fox jumps over the lazy dog");
        block.extend_from_slice(format!("{line:<width$}\n", width = LINE - 1).as_bytes());
    }
    block
}

fn write_file(path: &Path, block: &[u8], blocks: usize) -> std::io::Result<()> {
    let mut file = std::fs::File::create(path)?;
    for _ in 0..blocks {
        file.write_all(block)?;
    }
    file.sync_all()
}

async fn cmdr_read(registry: &Registry, path: &Path, expect: &Expect<'_>) -> Sample {
    let command = Command::FileRead(FileReadCommand {
        file_path: PathBuf::from(path),
        ..FileReadCommand::default()
    });
    let started = Instant::now();
    let stream = registry.execute(command).await.map_err(refused)?;
    let result = combine_output_results(stream, None).await;
    let elapsed = started.elapsed();
    expect.check("FILE_READ", &succeeded(result)?.result_data)?;
    Ok(elapsed)
}

async fn tokio_read(path: &Path, expect: &Expect<'_>) -> Sample {
    let started = Instant::now();
    let text = String::from_utf8(tokio::fs::read(path).await?)?;
    let elapsed = started.elapsed();
    expect.check("tokio::fs::read", &text)?;
    Ok(elapsed)
}

async fn tokio_chunked(path: &Path, expect: &Expect<'_>) -> Sample {
    let started = Instant::now();
    let mut file = tokio::fs::File::open(path).await?;
    let len = file.metadata().await?.len();
    let mut bytes = Vec::with_capacity(usize::try_from(len)?);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = file.read(&mut buf).await?;
        let Some(read) = buf.get(..n).filter(|r| !r.is_empty()) else {
            break;
        };
        bytes.extend_from_slice(read);
    }
    let text = String::from_utf8(bytes)?;
    let elapsed = started.elapsed();
    expect.check("tokio File 64 KiB", &text)?;
    Ok(elapsed)
}

/// `FILE_READ` without `combine_output_results`: chunks are checked and dropped.
async fn cmdr_streamed(registry: &Registry, path: &Path, expect: &Expect<'_>) -> Sample {
    let command = Command::FileRead(FileReadCommand {
        file_path: PathBuf::from(path),
        ..FileReadCommand::default()
    });
    let started = Instant::now();
    let mut stream = registry.execute(command).await.map_err(refused)?;
    let (mut len, mut spots_ok, mut terminal) = (0, true, None);
    while let Some(message) = stream.next().await {
        spots_ok &= expect.spot_check(len, message.result_data.as_bytes());
        len += message.result_data.len();
        if message.status.is_terminal() {
            terminal = Some(message);
        }
    }
    let elapsed = started.elapsed();
    succeeded(terminal.ok_or_else(|| check_failed("FILE_READ: no terminal"))?)?;
    expect.check_streamed("FILE_READ streamed", len, spots_ok)?;
    Ok(elapsed)
}

/// 64 KiB `tokio::fs` reads, each checked as UTF-8 and dropped.
async fn tokio_streamed(path: &Path, expect: &Expect<'_>) -> Sample {
    let started = Instant::now();
    let mut file = tokio::fs::File::open(path).await?;
    let mut buf = vec![0u8; 64 * 1024];
    let (mut len, mut spots_ok) = (0, true);
    loop {
        let n = file.read(&mut buf).await?;
        let Some(read) = buf.get(..n).filter(|r| !r.is_empty()) else {
            break;
        };
        let text = std::str::from_utf8(read)?;
        spots_ok &= expect.spot_check(len, text.as_bytes());
        len += n;
    }
    let elapsed = started.elapsed();
    expect.check_streamed("tokio 64 KiB streamed", len, spots_ok)?;
    Ok(elapsed)
}
