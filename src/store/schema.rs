//! The connection settings and the schema: an ordered list of migrations, the schema
//! version kept in `PRAGMA user_version` (`0` = empty database).
//!
//! A migration is never edited once shipped; a change is a new entry at the end. Each
//! runs in its own `BEGIN IMMEDIATE` transaction together with the `user_version` bump
//! (SQLite makes both atomic), re-reading the version inside the transaction so two
//! processes opening a fresh file at once migrate it exactly once.

use std::time::Duration;

use rusqlite::{Connection, TransactionBehavior};

use super::StoreError;

/// `PRAGMA synchronous` under WAL. `NORMAL`: a committed transaction survives a crash of
/// the process (it is in the WAL, in the OS page cache, when `COMMIT` returns) and the
/// database is never corrupted; a power loss or kernel crash may lose the commits since
/// the last checkpoint. `FULL` fsyncs the WAL on every commit to survive power loss as
/// well, at the price of one fsync per appended turn.
pub const SYNCHRONOUS: &str = "NORMAL";

/// How long a connection waits for another connection's write lock before failing.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// The migrations, in order: entry `i` takes the schema from version `i` to `i + 1`.
const MIGRATIONS: &[&str] = &[
    // 1: conversations and turns.
    "CREATE TABLE conversations (
         id          TEXT PRIMARY KEY NOT NULL,
         agent_name  TEXT NOT NULL,
         title       TEXT NOT NULL DEFAULT '',
         cwd         TEXT,
         archived    INTEGER NOT NULL DEFAULT 0 CHECK (archived IN (0, 1)),
         created_at  TEXT NOT NULL,
         updated_at  TEXT NOT NULL,
         activity    INTEGER NOT NULL
     ) STRICT;
     CREATE INDEX conversations_by_activity ON conversations (activity);
     CREATE INDEX conversations_by_agent ON conversations (agent_name, activity);
     CREATE TABLE turns (
         seq                 INTEGER PRIMARY KEY AUTOINCREMENT,
         id                  TEXT NOT NULL UNIQUE,
         conversation_id     TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
         role                TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'tool')),
         content             TEXT NOT NULL,
         status              TEXT NOT NULL CHECK (status IN ('ok', 'stopped', 'failed')),
         command_name        TEXT,
         command_step_index  INTEGER,
         command_total_steps INTEGER,
         tool_runs           TEXT,
         created_at          TEXT NOT NULL,
         updated_at          TEXT NOT NULL,
         CHECK ((command_name IS NULL) = (command_step_index IS NULL)
            AND (command_name IS NULL) = (command_total_steps IS NULL))
     ) STRICT;
     CREATE INDEX turns_by_conversation ON turns (conversation_id, seq);",
    // 2: runs in progress (see `runs`), so that a restart after a crash closes them.
    "CREATE TABLE runs (
         conversation_id TEXT PRIMARY KEY NOT NULL
                         REFERENCES conversations (id) ON DELETE CASCADE,
         owner           TEXT NOT NULL,
         started_at      TEXT NOT NULL
     ) STRICT;",
];

/// The schema version this build writes and reads.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Sets the connection up: busy timeout first (the other settings may wait on a lock),
/// then WAL, [`SYNCHRONOUS`] and foreign keys.
pub(super) fn configure(conn: &Connection) -> Result<(), StoreError> {
    conn.busy_timeout(BUSY_TIMEOUT)?;
    let mode: String =
        conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") && !mode.eq_ignore_ascii_case("memory") {
        tracing::warn!(journal_mode = %mode, "SQLite refused WAL; using its journal instead");
    }
    conn.pragma_update(None, "synchronous", SYNCHRONOUS)?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    Ok(())
}

/// Brings the schema to [`SCHEMA_VERSION`]; refuses a database written by a newer build.
pub(super) fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    let current = user_version(conn)?;
    if current > SCHEMA_VERSION {
        return Err(StoreError::Database(format!(
            "the database has schema version {current}; this cmdr knows up to {SCHEMA_VERSION}"
        )));
    }
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(version_index(current)) {
        apply(conn, index, sql)?;
    }
    Ok(())
}

/// Applies migration `index` unless another connection already did.
fn apply(conn: &mut Connection, index: usize, sql: &str) -> Result<(), StoreError> {
    let target = i64::try_from(index + 1)
        .map_err(|_| StoreError::Database("too many migrations".to_owned()))?;
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    if user_version(&tx)? < target {
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", target)?;
    }
    tx.commit()?;
    Ok(())
}

/// The schema version recorded in the file.
pub(super) fn user_version(conn: &Connection) -> Result<i64, StoreError> {
    Ok(conn.pragma_query_value(None, "user_version", |row| row.get(0))?)
}

/// How many migrations a database at `version` has already had.
fn version_index(version: i64) -> usize {
    usize::try_from(version).unwrap_or(0)
}
