//! [`SqliteStore`]: the embedded default [`Store`], one SQLite file under the data dir.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use rusqlite::Connection;

use super::actor::Worker;
use super::{
    markers, queries, schema, ClosingTurn, Conversation, RunMarker, Store, StoreError, StoreFuture,
    StoredTurn,
};
use crate::turn::Message;

/// The database's file name inside the data dir.
pub const DB_FILE_NAME: &str = "cmdr.sqlite3";

/// A [`Store`] in a SQLite file (or in memory), its connection owned by a store thread.
///
/// Several stores (in this process or others) may open the same file: WAL lets readers
/// run beside the one writer, and writers queue on the busy timeout.
#[derive(Debug)]
pub struct SqliteStore {
    worker: Worker,
    /// This process, as run markers name it.
    owner: String,
    /// `<database file>.locks` (the file's real path); `None` in memory.
    lock_dir: Option<PathBuf>,
}

impl SqliteStore {
    /// Opens (creating it and its parent directories if needed) and migrates the database
    /// at `path`. Nothing else: runs a dead process left open stay open until start-up
    /// recovery (`crate::recovery`) closes them. Blocking: call it at start-up, not on a
    /// busy runtime thread.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let name = file_name(path);
        create_parent(path, &name)?;
        let mut conn = Connection::open(path)
            .map_err(|err| StoreError::Database(format!("cannot open {name}: {err}")))?;
        schema::configure(&conn).map_err(|e| in_file(&name, e))?;
        schema::migrate(&mut conn).map_err(|e| in_file(&name, e))?;
        let mut store = Self::start(conn, &name)?;
        store.lock_dir = Some(lock_dir_of(path));
        Ok(store)
    }

    /// Where the database lives by default: `$CMDR_DATA_DIR`, else `$XDG_DATA_HOME/cmdr`
    /// (if absolute), else `$HOME/.local/share/cmdr`, else the current directory; the
    /// file is [`DB_FILE_NAME`].
    pub fn default_path() -> PathBuf {
        data_dir(|key| std::env::var_os(key)).join(DB_FILE_NAME)
    }

    /// A fresh database in memory, gone when the store is dropped (tests, and
    /// `cmdr chat --ephemeral`).
    pub fn open_in_memory() -> Result<Self, StoreError> {
        let name = ":memory:";
        let mut conn = Connection::open_in_memory()?;
        schema::configure(&conn).map_err(|e| in_file(name, e))?;
        schema::migrate(&mut conn).map_err(|e| in_file(name, e))?;
        Self::start(conn, name)
    }

    /// Hands the configured, migrated connection to the store thread.
    fn start(conn: Connection, name: &str) -> Result<Self, StoreError> {
        Ok(Self {
            worker: Worker::spawn(conn, name)?,
            owner: crate::owner::this_process(),
            lock_dir: None,
        })
    }
}

/// Prefixes a database error with the file's name.
fn in_file(name: &str, err: StoreError) -> StoreError {
    match err {
        StoreError::Database(message) => StoreError::Database(format!("{name}: {message}")),
        other => other,
    }
}

impl Store for SqliteStore {
    fn create_conversation<'a>(
        &'a self,
        id: &'a str,
        agent_name: &'a str,
        cwd: Option<&'a str>,
    ) -> StoreFuture<'a, Conversation> {
        let (id, agent_name, cwd) = (id.to_owned(), agent_name.to_owned(), cwd.map(str::to_owned));
        self.worker
            .call(move |conn| queries::create_conversation(conn, &id, &agent_name, cwd.as_deref()))
    }

    fn conversation<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<Conversation>> {
        let id = id.to_owned();
        self.worker
            .call(move |conn| queries::conversation(conn, &id))
    }

    fn conversations<'a>(
        &'a self,
        agent_name: Option<&'a str>,
    ) -> StoreFuture<'a, Vec<Conversation>> {
        let agent_name = agent_name.map(str::to_owned);
        self.worker
            .call(move |conn| queries::conversations(conn, agent_name.as_deref()))
    }

    fn append_turn<'a>(
        &'a self,
        conversation_id: &'a str,
        message: &'a Message,
    ) -> StoreFuture<'a, StoredTurn> {
        let (conversation_id, message) = (conversation_id.to_owned(), message.clone());
        self.worker
            .call(move |conn| queries::append_turn(conn, &conversation_id, &message))
    }

    fn turns<'a>(&'a self, conversation_id: &'a str) -> StoreFuture<'a, Vec<StoredTurn>> {
        let conversation_id = conversation_id.to_owned();
        self.worker
            .call(move |conn| queries::turns(conn, &conversation_id))
    }

    fn set_cwd<'a>(&'a self, conversation_id: &'a str, cwd: &'a str) -> StoreFuture<'a, ()> {
        let (conversation_id, cwd) = (conversation_id.to_owned(), cwd.to_owned());
        self.worker
            .call(move |conn| queries::set_cwd(conn, &conversation_id, &cwd))
    }

    fn set_archived<'a>(&'a self, conversation_id: &'a str, archived: bool) -> StoreFuture<'a, ()> {
        let conversation_id = conversation_id.to_owned();
        self.worker
            .call(move |conn| queries::set_archived(conn, &conversation_id, archived))
    }

    fn begin_run<'a>(&'a self, conversation_id: &'a str) -> StoreFuture<'a, ()> {
        let (conversation_id, owner) = (conversation_id.to_owned(), self.owner.clone());
        self.worker
            .call(move |conn| markers::begin(conn, &conversation_id, &owner))
    }

    fn end_run<'a>(&'a self, conversation_id: &'a str) -> StoreFuture<'a, ()> {
        let (conversation_id, owner) = (conversation_id.to_owned(), self.owner.clone());
        self.worker
            .call(move |conn| markers::end(conn, &conversation_id, &owner))
    }

    fn lock_dir(&self) -> Option<PathBuf> {
        self.lock_dir.clone()
    }

    fn run_markers(&self) -> StoreFuture<'_, Vec<RunMarker>> {
        self.worker.call(markers::all)
    }

    fn close_run<'a>(
        &'a self,
        marker: &'a RunMarker,
        closing: ClosingTurn,
    ) -> StoreFuture<'a, bool> {
        let marker = marker.clone();
        self.worker
            .call(move |conn| markers::close(conn, &marker, closing))
    }
}

/// The file's name, for messages that must not reveal the directory.
fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || DB_FILE_NAME.to_owned(),
        |name| name.to_string_lossy().into_owned(),
    )
}

/// The directory of the run locks of the database at `path`: beside its real path (a
/// symbolic link or a relative path names the same directory as the file itself), named
/// after it, so two databases in one directory do not share locks.
fn lock_dir_of(path: &Path) -> PathBuf {
    let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let mut dir = real.into_os_string();
    dir.push(".locks");
    PathBuf::from(dir)
}

/// Creates the directories the database file goes in.
fn create_parent(path: &Path, name: &str) -> Result<(), StoreError> {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => {
            std::fs::create_dir_all(parent).map_err(|err| {
                StoreError::Database(format!("cannot create the directory of {name}: {err}"))
            })
        }
        _ => Ok(()),
    }
}

/// The data dir from the environment (`env` looks a variable up; empty counts as unset).
fn data_dir(env: impl Fn(&str) -> Option<OsString>) -> PathBuf {
    let var = |key: &str| {
        env(key)
            .filter(|value| !value.is_empty())
            .map(PathBuf::from)
    };
    if let Some(dir) = var("CMDR_DATA_DIR") {
        return dir;
    }
    if let Some(xdg) = var("XDG_DATA_HOME").filter(|dir| dir.is_absolute()) {
        return xdg.join("cmdr");
    }
    match var("HOME") {
        Some(home) => home.join(".local").join("share").join("cmdr"),
        None => PathBuf::from("."),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<OsString> {
        move |key| {
            pairs
                .iter()
                .find(|(name, _)| *name == key)
                .map(|(_, value)| OsString::from(value))
        }
    }

    #[test]
    fn cmdr_data_dir_wins() {
        let vars = &[
            ("CMDR_DATA_DIR", "/data"),
            ("XDG_DATA_HOME", "/xdg"),
            ("HOME", "/h"),
        ];
        assert_eq!(data_dir(env(vars)), PathBuf::from("/data"));
    }

    #[test]
    fn xdg_data_home_when_absolute() {
        assert_eq!(
            data_dir(env(&[("XDG_DATA_HOME", "/xdg"), ("HOME", "/h")])),
            PathBuf::from("/xdg/cmdr")
        );
        assert_eq!(
            data_dir(env(&[("XDG_DATA_HOME", "rel"), ("HOME", "/h")])),
            PathBuf::from("/h/.local/share/cmdr")
        );
    }

    #[test]
    fn home_then_current_directory() {
        assert_eq!(
            data_dir(env(&[("CMDR_DATA_DIR", ""), ("HOME", "/h")])),
            PathBuf::from("/h/.local/share/cmdr")
        );
        assert_eq!(data_dir(env(&[])), PathBuf::from("."));
    }

    #[test]
    fn errors_name_the_file_not_its_directory() {
        let dir = tempfile::tempdir().unwrap();
        let blocker = dir.path().join("secret-dir");
        std::fs::write(&blocker, "a file, not a directory").unwrap();
        let err = SqliteStore::open(&blocker.join("cmdr.sqlite3")).unwrap_err();
        let message = err.to_string();
        assert_eq!(err.code(), cmdr_executors::ErrorCode::StoreError);
        assert!(message.contains("cmdr.sqlite3"), "{message}");
        assert!(!message.contains("secret-dir"), "{message}");
    }
}

#[cfg(test)]
mod closing {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    /// Dropping the store closes its connection before the drop returns, so a process that
    /// exits right after leaves no `-wal` or `-shm` file beside the database.
    #[tokio::test]
    async fn a_dropped_store_leaves_no_wal_or_shm_file() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("cmdr.db");
        let store = SqliteStore::open(&db).unwrap();
        store
            .create_conversation("c1", "agent", None)
            .await
            .unwrap();
        let beside = |suffix: &str| dir.path().join(format!("cmdr.db{suffix}"));
        assert!(beside("-wal").exists(), "WAL mode writes a -wal file");
        drop(store);
        assert!(!beside("-wal").exists(), "-wal left behind");
        assert!(!beside("-shm").exists(), "-shm left behind");
        // Nothing was lost by the close.
        let again = SqliteStore::open(&db).unwrap();
        assert!(again.conversation("c1").await.unwrap().is_some());
    }
}
