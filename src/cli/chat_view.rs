//! How `cmdr chat` shows a run ([`ChatView`]): the model's text as it streams, then each
//! command's progress — redrawn in place on a terminal, or as stable, greppable lines
//! when stdout is a pipe or a file.
//!
//! Terminal mode keeps a small *live region* at the bottom of the screen: the commands
//! of the current reply that have not ended (the running one with its last output lines,
//! then the queued ones). A redraw moves the cursor up to the region's first row, clears
//! to the end of the screen and prints the region again, with line wrapping off so each
//! region line is exactly one row. A command that ended leaves the region in its final
//! form and is never touched again. Commands are tracked by `commandId` only.

use std::collections::VecDeque;
use std::io::Write;
use std::time::{Duration, Instant};

use crate::agent::{AgentEvent, DoneReason, ToolStatus};

/// How often the running command's status line is redrawn on a terminal.
pub const TICK: Duration = Duration::from_millis(100);
/// Output lines shown under a command on a terminal (the rest is folded).
const FOLD_LINES: usize = 4;
/// Queued commands listed in the live region; more are summed up in one line.
const QUEUED_SHOWN: usize = 5;
/// Characters of one line drawn on a terminal (the terminal clips the rest anyway).
const LINE_CHARS: usize = 400;
/// Bytes kept of an unfinished output line (its end: progress bars rewrite it).
const PARTIAL_KEEP: usize = 4096;
/// Plain mode: an output line longer than this is written out in pieces.
const PLAIN_LINE_MAX: usize = 16 * 1024;
/// Spinner frames, one per [`TICK`].
const SPINNER: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
/// Prefix of a command's output lines.
const OUTPUT_BAR: &str = "  │ ";

/// ANSI: clear from the start of the current row to the end of the screen.
const CLEAR_BELOW: &str = "\r\x1b[J";
/// ANSI: line wrapping off (long lines are clipped at the right margin).
const WRAP_OFF: &str = "\x1b[?7l";
/// ANSI: line wrapping on.
const WRAP_ON: &str = "\x1b[?7h";
const DIM: &str = "2";
const BOLD: &str = "1";
const RED: &str = "31";
const GREEN: &str = "32";
const YELLOW: &str = "33";
const CYAN: &str = "36";

/// How events are shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// stdout is a terminal: status lines with symbols, redrawn in place.
    Terminal {
        /// Whether to use colours (off when `NO_COLOR` is set).
        colour: bool,
    },
    /// stdout is a pipe or a file: no escapes, one line per change.
    Plain,
}

/// Renders a chat's events and messages on stdout (errors and hints on stderr).
pub struct ChatView {
    out: Box<dyn Write + Send>,
    err: Box<dyn Write + Send>,
    mode: Mode,
    /// The iteration cap, named when it is reached.
    max_iterations: u32,
    /// Whether the cursor is at the start of a line on stdout.
    at_line_start: bool,
    /// Commands announced while the model's reply streams, shown once it ends.
    announced: Vec<CommandView>,
    /// Commands shown that have not ended (in terminal mode: the live region).
    commands: Vec<CommandView>,
    /// Terminal mode: rows of the live region drawn (the cursor is just below them).
    live_rows: usize,
}

impl ChatView {
    /// A view writing to `out` (stdout) and `err` (stderr) in `mode`.
    pub fn new(
        out: Box<dyn Write + Send>,
        err: Box<dyn Write + Send>,
        mode: Mode,
        max_iterations: u32,
    ) -> Self {
        Self {
            out,
            err,
            mode,
            max_iterations,
            at_line_start: true,
            announced: Vec::new(),
            commands: Vec::new(),
            live_rows: 0,
        }
    }

    /// Shows one event of a run.
    pub fn event(&mut self, event: AgentEvent) {
        match event {
            AgentEvent::Text { content } => self.text(&content),
            AgentEvent::ToolCall {
                command,
                command_id,
                ..
            } => self.announced.push(CommandView::new(command_id, command)),
            other => {
                self.end_reply();
                self.after_reply(other);
            }
        }
        self.flush();
    }

    /// Whether a running command's line should be redrawn every [`TICK`].
    pub fn animating(&self) -> bool {
        matches!(self.mode, Mode::Terminal { .. })
            && self
                .commands
                .iter()
                .any(|c| matches!(c.state, State::Running(_)))
    }

    /// Redraws the live region (spinner, elapsed time, latest output).
    pub fn tick(&mut self) {
        if self.animating() {
            self.redraw();
            self.flush();
        }
    }

    /// Closes a run: leaves what is on screen as it is and ends the line.
    pub fn turn_end(&mut self) {
        self.end_reply();
        self.settle();
        self.newline_if_needed();
        if matches!(self.mode, Mode::Terminal { .. }) {
            self.put("\n");
        }
        self.flush();
    }

    /// Prints the input prompt (the user's Enter ends its line).
    pub fn prompt(&mut self) {
        self.newline_if_needed();
        let prompt = self.paint(BOLD, "> ");
        self.put(&prompt);
        self.flush();
    }

    /// The user entered a line at the prompt: the terminal moved to the next line.
    pub fn line_entered(&mut self) {
        self.at_line_start = true;
    }

    /// The user's message, echoed in plain mode (a terminal shows what was typed), so a
    /// transcript shows where each turn begins: `» ` before each of its lines.
    pub fn user_message(&mut self, text: &str) {
        if self.mode == Mode::Plain {
            let lines: Vec<String> = text.lines().map(|l| format!("» {l}")).collect();
            self.say(&lines.join("\n"));
        }
    }

    /// An `<ask>` question of the agent: the next line typed answers it.
    pub fn question(&mut self, prompt: &str) {
        self.settle();
        let text = format!("? {prompt}");
        let text = self.paint(CYAN, &text);
        self.say(&text);
        if let Mode::Terminal { .. } = self.mode {
            self.prompt();
        }
    }

    /// The answer to a question: echoed in plain mode.
    pub fn answer(&mut self, text: &str) {
        match self.mode {
            Mode::Plain => self.say(&format!("» {text}")),
            Mode::Terminal { .. } => self.line_entered(),
        }
    }

    /// A line of information for people on stdout.
    pub fn say(&mut self, text: &str) {
        self.newline_if_needed();
        self.put(text);
        self.put("\n");
        self.flush();
    }

    /// A line on stderr (errors, hints), after whatever stdout still holds.
    pub fn warn(&mut self, text: &str) {
        self.settle();
        self.newline_if_needed();
        self.flush();
        let _ = writeln!(self.err, "{text}");
        let _ = self.err.flush();
    }

    /// Ends the current stdout line, if any (before exiting).
    pub fn finish(&mut self) {
        self.settle();
        self.newline_if_needed();
        self.flush();
    }

    fn text(&mut self, content: &str) {
        if !self.commands.is_empty() {
            self.settle();
        }
        self.put(content);
    }

    /// The model's reply ended: its commands are shown, queued.
    fn end_reply(&mut self) {
        if self.announced.is_empty() {
            return;
        }
        self.newline_if_needed();
        let announced = std::mem::take(&mut self.announced);
        if self.mode == Mode::Plain {
            for command in &announced {
                let line = format!("[{}] queued: {}\n", command.id, one_line(&command.command));
                self.put(&line);
            }
        }
        self.commands.extend(announced);
        self.redraw();
    }

    fn after_reply(&mut self, event: AgentEvent) {
        match event {
            AgentEvent::ToolStart {
                command,
                command_id,
            } => self.tool_start(command_id, command),
            AgentEvent::ToolOutput {
                command_id,
                content,
            } => self.tool_output(&command_id, &content),
            AgentEvent::ToolResult {
                command,
                command_id,
                result,
                status,
                exit_code,
                duration_ms,
                ..
            } => {
                let index = self.index_of(command_id, command);
                let ended = self.commands[index].end(status, exit_code, duration_ms, &result);
                self.commands[index].state = ended;
                self.tool_ended(index);
            }
            AgentEvent::CommandStep {
                name,
                step_index,
                total_steps,
                instruction,
            } => {
                self.say(&format!("── {name}: step {step_index}/{total_steps} ──"));
                let prompt: Vec<String> = instruction.lines().map(|l| format!("» {l}")).collect();
                let prompt = self.paint(DIM, &prompt.join("\n"));
                self.say(&prompt);
            }
            AgentEvent::Done { reason } => self.done(reason),
            AgentEvent::Error { code, message } => self.warn(&format!("error [{code}]: {message}")),
            AgentEvent::Text { .. }
            | AgentEvent::ToolCall { .. }
            | AgentEvent::IterationEnd { .. }
            | AgentEvent::Conversation { .. } => {}
        }
    }

    /// The position of command `id` among the shown ones, adding it if it is unknown.
    fn index_of(&mut self, id: String, command: String) -> usize {
        match self.commands.iter().position(|c| c.id == id) {
            Some(index) => index,
            None => {
                self.commands.push(CommandView::new(id, command));
                self.commands.len() - 1
            }
        }
    }

    fn tool_start(&mut self, id: String, command: String) {
        let index = self.index_of(id, command);
        self.commands[index].state = State::Running(Instant::now());
        if self.mode == Mode::Plain {
            let command = &self.commands[index];
            let line = format!("[{}] running: {}\n", command.id, one_line(&command.command));
            self.put(&line);
        } else {
            self.redraw();
        }
    }

    fn tool_output(&mut self, id: &str, content: &str) {
        let Some(command) = self.commands.iter_mut().find(|c| c.id == id) else {
            return;
        };
        if self.mode != Mode::Plain {
            // Drawn at the next tick: bursts of output cost one redraw.
            command.tail.push(content);
            return;
        }
        let lines = command.plain_lines(content);
        for line in lines {
            self.put(&format!("{OUTPUT_BAR}{line}\n"));
        }
    }

    fn tool_ended(&mut self, index: usize) {
        if self.mode != Mode::Plain {
            self.redraw();
            return;
        }
        let mut command = self.commands.remove(index);
        if !command.partial.is_empty() {
            let rest = std::mem::take(&mut command.partial);
            self.put(&format!("{OUTPUT_BAR}{}\n", rest.trim_end_matches('\r')));
        }
        let line = format!("[{}] {}\n", command.id, command.state.plain());
        self.put(&line);
    }

    fn done(&mut self, reason: DoneReason) {
        self.settle();
        self.newline_if_needed();
        match reason {
            DoneReason::Completed => {}
            DoneReason::Stopped => {
                let text = self.paint(YELLOW, "stopped");
                self.put(&format!("{text}\n"));
            }
            DoneReason::MaxIterations => {
                let note = format!(
                    "note: the iteration cap ({}) was reached; send a message to let the agent go on",
                    self.max_iterations
                );
                let note = self.paint(DIM, &note);
                self.put(&format!("{note}\n"));
            }
            DoneReason::MaxTokens => {
                let note = "note: the reply was cut off by the length limit (--max-tokens); its commands were not run";
                let note = self.paint(YELLOW, note);
                self.put(&format!("{note}\n"));
            }
            DoneReason::Repeating => {
                let note = "note: the agent kept repeating the same commands with the same results; stopped";
                let note = self.paint(YELLOW, note);
                self.put(&format!("{note}\n"));
            }
        }
    }

    /// Leaves the shown commands as they are and forgets them.
    fn settle(&mut self) {
        if self.mode == Mode::Plain {
            let rests: Vec<String> = self
                .commands
                .iter_mut()
                .map(|c| std::mem::take(&mut c.partial))
                .filter(|rest| !rest.is_empty())
                .collect();
            for rest in rests {
                self.put(&format!("{OUTPUT_BAR}{}\n", rest.trim_end_matches('\r')));
            }
        } else if !self.commands.is_empty() {
            self.redraw();
        }
        self.commands.clear();
        self.live_rows = 0;
    }

    /// Terminal mode: prints commands that ended for good, then the live region again.
    fn redraw(&mut self) {
        let Mode::Terminal { colour } = self.mode else {
            return;
        };
        let mut screen = String::new();
        if self.live_rows > 0 {
            screen.push_str(&format!("\x1b[{}A", self.live_rows));
        }
        screen.push_str(CLEAR_BELOW);
        let ended = self.commands.iter().take_while(|c| c.has_ended()).count();
        for command in self.commands.drain(..ended) {
            for line in command.block(colour) {
                screen.push_str(&line);
                screen.push('\n');
            }
        }
        let live = live_region(&self.commands, colour);
        self.live_rows = live.len();
        if !live.is_empty() {
            screen.push_str(WRAP_OFF);
            for line in live {
                screen.push_str(&line);
                screen.push('\n');
            }
            screen.push_str(WRAP_ON);
        }
        self.put(&screen);
    }

    fn paint(&self, code: &str, text: &str) -> String {
        paint(
            matches!(self.mode, Mode::Terminal { colour: true }),
            code,
            text,
        )
    }

    fn newline_if_needed(&mut self) {
        if !self.at_line_start {
            self.put("\n");
        }
    }

    /// Writes to stdout; a closed stdout is not an error worth stopping a chat for.
    fn put(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        self.at_line_start = text.ends_with('\n');
        let _ = self.out.write_all(text.as_bytes());
    }

    fn flush(&mut self) {
        let _ = self.out.flush();
    }
}

/// The live region's lines: the unfinished commands in order, at most
/// [`QUEUED_SHOWN`] of the queued ones listed.
fn live_region(commands: &[CommandView], colour: bool) -> Vec<String> {
    let mut lines = Vec::new();
    let mut queued = 0;
    for command in commands {
        if matches!(command.state, State::Queued) {
            queued += 1;
            if queued > QUEUED_SHOWN {
                continue;
            }
        }
        lines.extend(command.block(colour));
    }
    if queued > QUEUED_SHOWN {
        let more = format!("  … {} more queued", queued - QUEUED_SHOWN);
        lines.push(paint(colour, DIM, &more));
    }
    lines
}

/// One command as shown.
struct CommandView {
    id: String,
    command: String,
    state: State,
    /// Terminal mode: the last lines of its output.
    tail: OutputTail,
    /// Plain mode: the output line not finished yet.
    partial: String,
}

/// Where a command is.
enum State {
    Queued,
    Running(Instant),
    Ended {
        status: ToolStatus,
        exit_code: Option<i32>,
        elapsed: Option<Duration>,
        /// Why it failed, when no exit status says it.
        note: Option<String>,
    },
}

impl CommandView {
    fn new(id: String, command: String) -> Self {
        Self {
            id,
            command,
            state: State::Queued,
            tail: OutputTail::default(),
            partial: String::new(),
        }
    }

    fn has_ended(&self) -> bool {
        matches!(self.state, State::Ended { .. })
    }

    /// The state after its `tool-result`: elapsed time from `durationMs`, else measured.
    fn end(
        &self,
        status: ToolStatus,
        exit_code: Option<i32>,
        duration_ms: Option<u64>,
        result: &str,
    ) -> State {
        let measured = match self.state {
            State::Running(since) => Some(since.elapsed()),
            _ => None,
        };
        let note = match (status, exit_code) {
            (ToolStatus::Failed, None) => failure_note(result),
            _ => None,
        };
        State::Ended {
            status,
            exit_code,
            elapsed: duration_ms.map(Duration::from_millis).or(measured),
            note,
        }
    }

    /// Plain mode: the output lines `chunk` completes (very long ones in pieces).
    fn plain_lines(&mut self, chunk: &str) -> Vec<String> {
        self.partial.push_str(chunk);
        let mut lines = Vec::new();
        while let Some(end) = self.partial.find('\n') {
            let line: String = self.partial.drain(..=end).collect();
            lines.push(line.trim_end_matches(['\n', '\r']).to_owned());
        }
        if self.partial.len() > PLAIN_LINE_MAX {
            let cut = floor_boundary(&self.partial, PLAIN_LINE_MAX);
            lines.push(self.partial.drain(..cut).collect());
        }
        lines
    }

    /// Terminal mode: the status line, then the folded output.
    fn block(&self, colour: bool) -> Vec<String> {
        let mut lines = vec![self.status_line(colour)];
        if matches!(self.state, State::Queued) {
            return lines;
        }
        let (more, shown) = self.tail.fold();
        if more > 0 {
            let s = if more == 1 { "" } else { "s" };
            lines.push(paint(colour, DIM, &format!("  … {more} more line{s}")));
        }
        for line in shown {
            lines.push(paint(colour, DIM, &format!("{OUTPUT_BAR}{}", clean(line))));
        }
        if let State::Ended {
            note: Some(note), ..
        } = &self.state
        {
            lines.push(paint(colour, RED, &format!("  ! {}", clean(note))));
        }
        lines
    }

    fn status_line(&self, colour: bool) -> String {
        let command = clean(&one_line(&self.command));
        let look = match &self.state {
            State::Queued => Look::new("◌", DIM, "queued".to_owned(), DIM),
            State::Running(since) => {
                let elapsed = since.elapsed();
                let frame = (elapsed.as_millis() / TICK.as_millis()) as usize % SPINNER.len();
                let state = format!("running {:.1}s", elapsed.as_secs_f64());
                Look::new(&SPINNER[frame].to_string(), CYAN, state, CYAN)
            }
            State::Ended {
                status,
                exit_code,
                elapsed,
                ..
            } => Look::ended(*status, *exit_code, *elapsed),
        };
        let symbol = paint(colour, look.symbol_code, &look.symbol);
        let state = paint(colour, look.state_code, look.state.trim_end());
        format!("{symbol} {command}  {state}")
    }
}

/// A status line's symbol and state text, with their colours.
struct Look {
    symbol: String,
    symbol_code: &'static str,
    state: String,
    state_code: &'static str,
}

impl Look {
    fn new(
        symbol: &str,
        symbol_code: &'static str,
        state: String,
        state_code: &'static str,
    ) -> Self {
        Self {
            symbol: symbol.to_owned(),
            symbol_code,
            state,
            state_code,
        }
    }

    /// How a command that ended looks: `✓ 0.3s`, `✗ exit 2 0.1s`, `■ stopped`, `– skipped`.
    fn ended(status: ToolStatus, exit_code: Option<i32>, elapsed: Option<Duration>) -> Self {
        let time = elapsed.map(format_elapsed).unwrap_or_default();
        match status {
            ToolStatus::Completed => Self::new("✓", GREEN, time, DIM),
            ToolStatus::Failed => {
                let why = exit_code.map_or_else(|| "failed".to_owned(), |c| format!("exit {c}"));
                Self::new("✗", RED, format!("{why} {time}"), RED)
            }
            ToolStatus::Stopped => Self::new("■", YELLOW, format!("stopped {time}"), YELLOW),
            ToolStatus::Skipped => Self::new("–", DIM, "skipped".to_owned(), DIM),
        }
    }
}

impl State {
    /// Plain mode: the state of a command that ended, after its `[id] `.
    fn plain(&self) -> String {
        let State::Ended {
            status,
            exit_code,
            elapsed,
            note,
        } = self
        else {
            return "ended".to_owned();
        };
        let time = elapsed
            .map(|d| format!(" in {}", format_elapsed(d)))
            .unwrap_or_default();
        match status {
            ToolStatus::Completed => format!("completed{time}"),
            ToolStatus::Failed => {
                let exit = exit_code
                    .map(|c| format!(" (exit {c})"))
                    .unwrap_or_default();
                let note = note.as_ref().map(|n| format!(": {n}")).unwrap_or_default();
                format!("failed{exit}{time}{note}")
            }
            ToolStatus::Stopped => "stopped".to_owned(),
            ToolStatus::Skipped => "skipped".to_owned(),
        }
    }
}

/// The last lines of a command's output, in bounded memory.
#[derive(Default)]
struct OutputTail {
    /// The last [`FOLD_LINES`] complete lines.
    lines: VecDeque<String>,
    /// The line being written (its last [`PARTIAL_KEEP`] bytes at most).
    partial: String,
    /// Complete lines seen in all.
    complete: usize,
}

impl OutputTail {
    fn push(&mut self, chunk: &str) {
        let mut pieces = chunk.split('\n');
        if let Some(first) = pieces.next() {
            self.partial.push_str(first);
        }
        for piece in pieces {
            let line = std::mem::replace(&mut self.partial, piece.to_owned());
            self.complete += 1;
            self.lines.push_back(line);
            if self.lines.len() > FOLD_LINES {
                self.lines.pop_front();
            }
        }
        if self.partial.len() > 2 * PARTIAL_KEEP {
            let cut = floor_boundary(&self.partial, self.partial.len() - PARTIAL_KEEP);
            self.partial.drain(..cut);
        }
    }

    /// How many lines are folded away, and the last [`FOLD_LINES`] to show.
    fn fold(&self) -> (usize, Vec<&str>) {
        let mut shown: Vec<&str> = self.lines.iter().map(String::as_str).collect();
        let mut total = self.complete;
        if !self.partial.is_empty() {
            shown.push(&self.partial);
            total += 1;
        }
        let skip = shown.len().saturating_sub(FOLD_LINES);
        let shown = shown.split_off(skip);
        (total - shown.len(), shown)
    }
}

/// The last line of a failure's result when it is a `[note]`, without the brackets.
fn failure_note(result: &str) -> Option<String> {
    let last = result.trim_end().lines().last()?.trim();
    let note = last.strip_prefix('[')?.strip_suffix(']')?;
    Some(note.to_owned())
}

/// The first line of a command, with `…` when there is more.
fn one_line(command: &str) -> String {
    let command = command.trim();
    match command.split_once('\n') {
        Some((first, _)) => format!("{} …", first.trim_end()),
        None => command.to_owned(),
    }
}

/// A line made safe for the live region: the text after the last carriage return (what a
/// progress bar shows), without escape sequences or control characters, tabs expanded,
/// at most [`LINE_CHARS`] characters.
fn clean(raw: &str) -> String {
    let raw = raw.trim_end_matches('\r');
    let raw = raw.rsplit('\r').next().unwrap_or(raw);
    let mut out = String::new();
    let mut width = 0;
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if width >= LINE_CHARS {
            break;
        }
        match c {
            '\x1b' => skip_escape(&mut chars),
            '\t' => {
                let to = (width / 8 + 1) * 8;
                out.extend(std::iter::repeat_n(' ', to - width));
                width = to;
            }
            c if c.is_control() => {}
            c => {
                out.push(c);
                width += 1;
            }
        }
    }
    out
}

/// Skips the rest of an escape sequence (CSI `ESC [ … final`, OSC `ESC ] … BEL/ST`, or
/// `ESC x`).
fn skip_escape(chars: &mut std::str::Chars<'_>) {
    match chars.next() {
        Some('[') => {
            for c in chars.by_ref() {
                if ('@'..='~').contains(&c) {
                    break;
                }
            }
        }
        Some(']') => {
            while let Some(c) = chars.next() {
                if c == '\x07' {
                    break;
                }
                if c == '\x1b' {
                    chars.next();
                    break;
                }
            }
        }
        _ => {}
    }
}

/// `text` in an ANSI colour (SGR `code`) when `colour` is on.
fn paint(colour: bool, code: &str, text: &str) -> String {
    if colour && !text.is_empty() {
        format!("\x1b[{code}m{text}\x1b[0m")
    } else {
        text.to_owned()
    }
}

/// `12ms`, `1.2s`, `3m05s`.
fn format_elapsed(elapsed: Duration) -> String {
    let ms = elapsed.as_millis();
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        format!("{:.1}s", elapsed.as_secs_f64())
    } else {
        let secs = elapsed.as_secs();
        format!("{}m{:02}s", secs / 60, secs % 60)
    }
}

/// The largest char boundary of `text` at or below `index`.
fn floor_boundary(text: &str, index: usize) -> usize {
    let mut index = index.min(text.len());
    while !text.is_char_boundary(index) {
        index -= 1;
    }
    index
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_drops_escapes_and_keeps_the_last_rewrite() {
        assert_eq!(clean("\x1b[31mred\x1b[0m"), "red");
        assert_eq!(clean("10%\r50%\r"), "50%");
        assert_eq!(clean("a\tb"), "a       b");
        assert_eq!(clean("\x1b]0;title\x07ok"), "ok");
    }

    #[test]
    fn the_tail_folds_to_the_last_lines() {
        let mut tail = OutputTail::default();
        tail.push("1\n2\n3");
        tail.push("\n4\n5\n6");
        let (more, shown) = tail.fold();
        assert_eq!(more, 2);
        assert_eq!(shown, ["3", "4", "5", "6"]);
    }

    #[test]
    fn plain_lines_wait_for_the_newline() {
        let mut command = CommandView::new("cmd-1-0".into(), "ls".into());
        assert!(command.plain_lines("ab").is_empty());
        assert_eq!(command.plain_lines("c\r\nd\n"), ["abc", "d"]);
    }

    #[test]
    fn elapsed_times_read_well() {
        assert_eq!(format_elapsed(Duration::from_millis(12)), "12ms");
        assert_eq!(format_elapsed(Duration::from_millis(1250)), "1.2s");
        assert_eq!(format_elapsed(Duration::from_secs(65)), "1m05s");
    }

    #[test]
    fn failure_notes_come_from_the_last_bracketed_line() {
        assert_eq!(
            failure_note("out\n[timed out after 5s]").as_deref(),
            Some("timed out after 5s")
        );
        assert_eq!(failure_note("plain"), None);
    }
}
