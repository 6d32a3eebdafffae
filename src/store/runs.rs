//! Run markers: the conversations with a run in progress, and which process runs each.
//!
//! A run marks its conversation when it starts and unmarks it when it ends, however it
//! ends (completed, failed, stopped). A marker left behind means its process died in the
//! middle of the run (SIGKILL, power loss): the next store to open the database finds it,
//! sees that its owner is gone, and closes the run (`recover`). The markers are not a
//! lock: the run lock is in memory, per process, and nothing of it survives a crash.

use rusqlite::{params, Connection};

use super::queries::{now, write_transaction};
use super::StoreError;

/// Marks `conversation_id` as run by `owner` from now on.
pub(super) fn begin(
    conn: &mut Connection,
    conversation_id: &str,
    owner: &str,
) -> Result<(), StoreError> {
    let tx = write_transaction(conn)?;
    tx.prepare_cached(
        "INSERT INTO runs (conversation_id, owner, started_at) VALUES (?1, ?2, ?3)
         ON CONFLICT (conversation_id) DO UPDATE SET owner = ?2, started_at = ?3",
    )?
    .execute(params![conversation_id, owner, now()])?;
    tx.commit()?;
    Ok(())
}

/// Removes `owner`'s marker of `conversation_id` (another owner's is left alone).
pub(super) fn end(
    conn: &mut Connection,
    conversation_id: &str,
    owner: &str,
) -> Result<(), StoreError> {
    conn.prepare_cached("DELETE FROM runs WHERE conversation_id = ?1 AND owner = ?2")?
        .execute(params![conversation_id, owner])?;
    Ok(())
}

/// Every marker: `(conversation_id, owner)`.
pub(super) fn all(conn: &mut Connection) -> Result<Vec<(String, String)>, StoreError> {
    let mut statement = conn.prepare_cached("SELECT conversation_id, owner FROM runs")?;
    let rows = statement.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}
