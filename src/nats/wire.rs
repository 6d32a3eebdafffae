//! The bus's own small messages (data only). Commands and results are the command
//! package's wire types.

use serde::{Deserialize, Serialize};

/// A header on a command request (core mode) by which its producer takes the command's
/// **terminal result** as the reply (an `OutputResult`, told from an [`Accepted`] by its
/// `status`): a worker sends it instead of [`Accepted`] when the command ends soon with
/// that one result. Its value is [`REPLY_RESULT`]. Without it (a producer in another
/// language, a plain request), the reply is [`Accepted`].
pub const REPLY_HEADER: &str = "Cmdr-Reply";

/// The value of [`REPLY_HEADER`].
pub const REPLY_RESULT: &str = "result";

/// Durable mode: a header on each stored result of a command's run (after its first) naming
/// the stream sequence of the run's previous stored result. A follower whose consumer hands
/// it a result whose predecessor it never delivered knows that its consumer skipped one (a
/// replica that missed it while the stream's leader died) and reads it from the leader.
pub const RESULT_AFTER_HEADER: &str = "Cmdr-Result-After";

/// A header naming the client scope a command runs in (docs/nats.md, "Scopes over the
/// bus"): the front door's own scope on the producer (an MCP session, a conversation, the
/// REST scope). The worker runs it in that scope *within the producer's*
/// ([`crate::scopes::nats_client`]), so one producer's clients see and end only their own
/// processes and sessions, and no producer can name another's. Absent or empty: the
/// producer's own scope. On a discovery request (`cmdr.workers.<producer>`) it names the
/// scope whose sessions are asked about.
pub const SCOPE_HEADER: &str = "Cmdr-Scope";

/// On a discovery request: every worker ends the scope named by [`SCOPE_HEADER`] (stops
/// its processes and sessions) before it answers. Its value is [`END_SCOPE_YES`].
pub const END_SCOPE_HEADER: &str = "Cmdr-End-Scope";

/// The value of [`END_SCOPE_HEADER`].
pub const END_SCOPE_YES: &str = "yes";

/// A worker's reply to a command it received (core mode): the producer knows at once that
/// a worker took it, or that none is listening. (Asked with [`REPLY_HEADER`], the reply
/// may instead be the command's terminal result.)
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Accepted {
    /// The command's id as sent (empty when the command has none: it then gets one when
    /// decoded, which the producer — having sent none — cannot follow anyway).
    pub command_id: String,
    /// The worker's id: the producer asks `cmdr.alive.<worker>` whether it still runs the
    /// command (absent from workers that predate the check; the producer then just waits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<String>,
    /// The worker is full and did not take the command: the producer tries again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub busy: bool,
}

/// A worker's answer on `cmdr.alive.<worker>.<producer>` to a producer asking about one
/// of its commands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Alive {
    /// The command asked about.
    pub command_id: String,
    /// Whether the worker still has it (queued or running, its terminal not yet published).
    pub running: bool,
}

/// A worker's question on `cmdr.input.<command_id>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputQuestion {
    /// The `REQUEST_USER_INPUT` command's id.
    pub command_id: String,
    /// What to ask.
    pub prompt: String,
    /// The command's description, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// The producer's answer to an [`InputQuestion`] (same shape as the HTTP input body).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputAnswer {
    /// The answer.
    pub value: String,
}

/// A worker's answer on `cmdr.workers.<producer>` (discovery): who it is and which of that
/// producer's shell sessions it holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerInfo {
    /// The worker's id (its process ids start with it).
    pub worker: String,
    /// The names of the producer's live sessions on this worker.
    #[serde(default)]
    pub sessions: Vec<String>,
}
