//! Run markers: the conversations with a run in progress, and which process runs each.
//!
//! A run marks its conversation when it starts and unmarks it when it ends, however it
//! ends (completed, failed, stopped). A marker left behind means its process died in the
//! middle of the run (SIGKILL, power loss): start-up recovery (`crate::recovery`, not the
//! store) lists the markers, decides whose owner is gone, and has the store close those
//! runs ([`close`]). The markers are not a lock: the run lock is in memory, per process,
//! and nothing of it survives a crash.

use rusqlite::{params, Connection};

use super::queries::{append_turn_in, now, turns_in, write_transaction};
use super::{ClosingTurn, RunMarker, StoreError};

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

/// Every marker.
pub(super) fn all(conn: &mut Connection) -> Result<Vec<RunMarker>, StoreError> {
    let mut statement = conn.prepare_cached("SELECT conversation_id, owner FROM runs")?;
    let rows = statement.query_map([], |row| {
        Ok(RunMarker {
            conversation_id: row.get(0)?,
            owner: row.get(1)?,
        })
    })?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

/// Closes `marker`'s run in one transaction: removes the marker and appends the turn
/// `closing` makes of the conversation's turns, if any. `false` (nothing written) when
/// the marker was already gone (another process closed the run first).
pub(super) fn close(
    conn: &mut Connection,
    marker: &RunMarker,
    closing: ClosingTurn,
) -> Result<bool, StoreError> {
    let tx = write_transaction(conn)?;
    let removed = tx
        .prepare_cached("DELETE FROM runs WHERE conversation_id = ?1 AND owner = ?2")?
        .execute([&marker.conversation_id, &marker.owner])?;
    if removed == 0 {
        return Ok(false);
    }
    let turns = turns_in(&tx, &marker.conversation_id)?;
    if let Some(message) = closing(&turns) {
        append_turn_in(&tx, &marker.conversation_id, &message)?;
    }
    tx.commit()?;
    Ok(true)
}
