//! What a detected tag asks the loop to do, its attributes checked (docs/agents.md,
//! "Processes"): a one-shot command, a background process, a question, or a read, input
//! or kill of a background process. A tag the loop cannot make sense of is a sentence
//! for the model saying what is wrong; nothing runs.

use std::time::Duration;

use super::detector::{Attribute, TagKind};

/// How long `<process-output>` waits for output when there is none yet, by default.
pub const DEFAULT_OUTPUT_WAIT: Duration = Duration::from_millis(1000);

/// The longest wait a tag may ask for (`wait`, `timeout`).
const MAX_WAIT: Duration = Duration::from_secs(600);

/// Named keys `<process-input key="…">` sends, and their bytes.
pub const KEYS: &[(&str, &str)] = &[
    ("enter", "\n"),
    ("tab", "\t"),
    ("escape", "\u{1b}"),
    ("backspace", "\u{7f}"),
    ("space", " "),
    ("up", "\u{1b}[A"),
    ("down", "\u{1b}[B"),
    ("right", "\u{1b}[C"),
    ("left", "\u{1b}[D"),
    ("ctrl-c", "\u{3}"),
    ("ctrl-d", "\u{4}"),
    ("ctrl-z", "\u{1a}"),
];

/// A tag, understood.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TagRequest {
    /// `<shell>cmd</shell>`: run to its end.
    Shell {
        /// The shell command.
        command: String,
    },
    /// `<shell background …>cmd</shell>`: start a background process.
    Background {
        /// The shell command.
        command: String,
        /// Literal text of the output that says it is ready (`ready`).
        ready_text: Option<String>,
        /// A TCP port on 127.0.0.1 that accepts connections once ready (`port`).
        port: Option<u16>,
        /// An `http://` URL answering 2xx once ready (`url`).
        url: Option<String>,
        /// How long to wait for readiness (`timeout`, seconds).
        timeout: Option<Duration>,
    },
    /// `<ask>question</ask>`.
    Ask {
        /// The question.
        question: String,
    },
    /// `<process-output id="p1"/>`: the output since the last read.
    Output {
        /// The process.
        process_id: String,
        /// How long to wait for output when there is none yet.
        wait: Duration,
    },
    /// `<process-input id="p1">text</process-input>`: type into the process.
    Input {
        /// The process.
        process_id: String,
        /// The bytes to write.
        input: String,
        /// Close its stdin after (`eof`).
        close_stdin: bool,
        /// How long to collect the output that follows (`wait`).
        wait: Option<Duration>,
    },
    /// `<process-kill id="p1"/>`: stop the process and its tree.
    Kill {
        /// The process.
        process_id: String,
        /// `TERM`, `INT`, `HUP` or `KILL` (`signal`).
        signal: Option<String>,
    },
}

impl TagRequest {
    /// Understands a tag of `kind` with `attributes` and (trimmed) `content`; the error
    /// says what is wrong, for the model.
    pub fn parse(kind: TagKind, attributes: &[Attribute], content: &str) -> Result<Self, String> {
        let mut attrs = Attrs::new(kind, attributes)?;
        let request = match kind {
            TagKind::Shell => shell(&mut attrs, content)?,
            TagKind::Ask => TagRequest::Ask {
                question: content.to_owned(),
            },
            TagKind::ProcessOutput => TagRequest::Output {
                process_id: attrs.process_id(Some(content))?,
                wait: attrs.seconds("wait")?.unwrap_or(DEFAULT_OUTPUT_WAIT),
            },
            TagKind::ProcessInput => input(&mut attrs, content)?,
            TagKind::ProcessKill => TagRequest::Kill {
                process_id: attrs.process_id(Some(content))?,
                signal: attrs.signal()?,
            },
        };
        attrs.no_more()?;
        Ok(request)
    }

    /// The process the tag is about (output, input, kill).
    pub fn target(&self) -> Option<&str> {
        match self {
            TagRequest::Output { process_id, .. }
            | TagRequest::Input { process_id, .. }
            | TagRequest::Kill { process_id, .. } => Some(process_id),
            _ => None,
        }
    }
}

/// `<shell>`: one-shot, or background when `background` or a readiness check is given.
fn shell(attrs: &mut Attrs<'_>, content: &str) -> Result<TagRequest, String> {
    let background = attrs.flag("background")?;
    let ready_text = attrs.take("ready").map(str::to_owned);
    let port = attrs.port()?;
    let url = attrs.url()?;
    let timeout = attrs.seconds("timeout")?;
    let waits = ready_text.is_some() || port.is_some() || url.is_some();
    if background == Some(false) && (waits || timeout.is_some()) {
        return Err(
            "ready, port, url and timeout are for background processes: drop \
                    background=\"false\""
                .to_owned(),
        );
    }
    if background != Some(true) && !waits {
        if timeout.is_some() {
            return Err(
                "timeout is how long a background process may take to be ready: \
                        add background and ready, port or url"
                    .to_owned(),
            );
        }
        return Ok(TagRequest::Shell {
            command: content.to_owned(),
        });
    }
    if timeout.is_some() && !waits {
        return Err("timeout needs ready, port or url (what to wait for)".to_owned());
    }
    Ok(TagRequest::Background {
        command: content.to_owned(),
        ready_text,
        port,
        url,
        timeout,
    })
}

/// `<process-input>`: the content, then the key (a newline when no key is named).
fn input(attrs: &mut Attrs<'_>, content: &str) -> Result<TagRequest, String> {
    let process_id = attrs.process_id(None)?;
    let key = attrs.key()?;
    let close_stdin = attrs.flag("eof")?.unwrap_or(false);
    let wait = attrs.seconds("wait")?;
    let mut input = content.to_owned();
    match key {
        Some(bytes) => input.push_str(bytes),
        None if !content.is_empty() => input.push('\n'),
        None if close_stdin => {}
        None => {
            return Err(
                "nothing to send: write the text between the tags, or name a key \
                        (key=\"enter\", key=\"ctrl-c\" …), or eof to close its input"
                    .to_owned(),
            )
        }
    }
    Ok(TagRequest::Input {
        process_id,
        input,
        close_stdin,
        wait,
    })
}

/// A tag's attributes, taken one by one; what is left over is an error.
struct Attrs<'a> {
    kind: TagKind,
    left: Vec<&'a Attribute>,
}

impl<'a> Attrs<'a> {
    fn new(kind: TagKind, attributes: &'a [Attribute]) -> Result<Self, String> {
        for (i, a) in attributes.iter().enumerate() {
            if attributes.iter().skip(i + 1).any(|b| b.name == a.name) {
                return Err(format!("{} is given twice on <{}>", a.name, kind.name()));
            }
        }
        Ok(Self {
            kind,
            left: attributes.iter().collect(),
        })
    }

    /// The attribute `name`, if given: its value (`""` for a bare name).
    fn take(&mut self, name: &str) -> Option<&'a str> {
        let at = self.left.iter().position(|a| a.name == name)?;
        let attribute = self.left.remove(at);
        Some(attribute.value.as_deref().unwrap_or(""))
    }

    /// A yes/no attribute: a bare name is yes.
    fn flag(&mut self, name: &str) -> Result<Option<bool>, String> {
        match self.take(name) {
            None => Ok(None),
            Some("" | "true" | "yes" | "1") => Ok(Some(true)),
            Some("false" | "no" | "0") => Ok(Some(false)),
            Some(other) => Err(format!(
                "{name}=\"{other}\": write {name} or {name}=\"false\""
            )),
        }
    }

    /// A duration in seconds (`30`, `1.5`, `30s`, `500ms`).
    fn seconds(&mut self, name: &str) -> Result<Option<Duration>, String> {
        let Some(text) = self.take(name) else {
            return Ok(None);
        };
        let bad =
            || format!("{name}=\"{text}\" is not a duration: write seconds, e.g. {name}=\"30\"");
        let (number, scale) = match text.strip_suffix("ms") {
            Some(ms) => (ms, 0.001),
            None => (text.strip_suffix('s').unwrap_or(text), 1.0),
        };
        let value: f64 = number.trim().parse().map_err(|_| bad())?;
        let seconds = value * scale;
        if !seconds.is_finite() || seconds < 0.0 {
            return Err(bad());
        }
        // Capped before it becomes a `Duration`: a model's `1e30` must not overflow one.
        Ok(Some(Duration::from_secs_f64(
            seconds.min(MAX_WAIT.as_secs_f64()),
        )))
    }

    fn port(&mut self) -> Result<Option<u16>, String> {
        let Some(text) = self.take("port") else {
            return Ok(None);
        };
        match text.parse::<u16>() {
            Ok(port) if port > 0 => Ok(Some(port)),
            _ => Err(format!("port=\"{text}\" is not a TCP port (1-65535)")),
        }
    }

    fn url(&mut self) -> Result<Option<String>, String> {
        let Some(text) = self.take("url") else {
            return Ok(None);
        };
        if !text.starts_with("http://") {
            return Err(format!(
                "url=\"{text}\": an http:// address is checked for readiness (e.g. \
                 url=\"http://127.0.0.1:3000/\")"
            ));
        }
        Ok(Some(text.to_owned()))
    }

    /// `id`, or the content when the tag takes no other content.
    fn process_id(&mut self, content: Option<&str>) -> Result<String, String> {
        let kind = self.kind.name();
        match (self.take("id"), content) {
            (Some(id), Some(content)) if !content.is_empty() && content != id => Err(format!(
                "<{kind}> names two processes ({id} and {content}): write <{kind} id=\"{id}\"/>"
            )),
            (Some(""), _) | (None, None | Some("")) => Err(format!(
                "which process? write <{kind} id=\"p1\"/> with the processId its start returned"
            )),
            (Some(id), _) => Ok(id.to_owned()),
            (None, Some(content)) => Ok(content.to_owned()),
        }
    }

    fn key(&mut self) -> Result<Option<&'static str>, String> {
        let Some(name) = self.take("key") else {
            return Ok(None);
        };
        let wanted = name.to_ascii_lowercase().replace(['+', '_'], "-");
        let wanted = match wanted.as_str() {
            "return" => "enter",
            "esc" => "escape",
            "control-c" => "ctrl-c",
            "control-d" => "ctrl-d",
            other => other,
        };
        KEYS.iter()
            .find(|(key, _)| *key == wanted)
            .map(|(_, bytes)| Some(*bytes))
            .ok_or_else(|| {
                let names: Vec<&str> = KEYS.iter().map(|(key, _)| *key).collect();
                format!(
                    "key=\"{name}\" is not a key cmdr knows: {}",
                    names.join(", ")
                )
            })
    }

    fn signal(&mut self) -> Result<Option<String>, String> {
        let Some(text) = self.take("signal") else {
            return Ok(None);
        };
        match text.parse::<cmdr_executors::KillSignal>() {
            Ok(signal) => Ok(Some(signal.name().to_owned())),
            Err(_) => Err(format!("signal=\"{text}\": write TERM, INT, HUP or KILL")),
        }
    }

    /// Every attribute was understood.
    fn no_more(&self) -> Result<(), String> {
        let Some(extra) = self.left.first() else {
            return Ok(());
        };
        let allowed = match self.kind {
            TagKind::Shell => "background, ready, port, url, timeout",
            TagKind::Ask => "none",
            TagKind::ProcessOutput => "id, wait",
            TagKind::ProcessInput => "id, key, eof, wait",
            TagKind::ProcessKill => "id, signal",
        };
        Err(format!(
            "<{}> has no attribute {} (it takes: {allowed})",
            self.kind.name(),
            extra.name
        ))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::agent::ShellTagDetector;

    fn parse(text: &str) -> Result<TagRequest, String> {
        let found = ShellTagDetector::detect_all(text);
        assert_eq!(found.len(), 1, "{text}");
        let tag = &found[0];
        TagRequest::parse(tag.kind, &tag.attributes, &tag.command)
    }

    #[test]
    fn shell_tags() {
        assert_eq!(
            parse("<shell>ls</shell>"),
            Ok(TagRequest::Shell {
                command: "ls".into()
            })
        );
        assert_eq!(
            parse("<shell background>npm run dev</shell>"),
            Ok(TagRequest::Background {
                command: "npm run dev".into(),
                ready_text: None,
                port: None,
                url: None,
                timeout: None,
            })
        );
        // A readiness check alone means background.
        assert_eq!(
            parse("<shell ready=\"Serving HTTP\" port=8000 timeout=\"60s\">x</shell>"),
            Ok(TagRequest::Background {
                command: "x".into(),
                ready_text: Some("Serving HTTP".into()),
                port: Some(8000),
                url: None,
                timeout: Some(Duration::from_secs(60)),
            })
        );
        assert!(parse("<shell cwd=\"/\">ls</shell>")
            .unwrap_err()
            .contains("no attribute cwd"));
        assert!(parse("<shell port=99999>x</shell>").is_err());
        // Absurd durations are capped, never overflow.
        for huge in [
            "1e30",
            "18446744073709551616",
            "1e300ms",
            "9999999999999999999s",
        ] {
            let tag = format!("<process-output id=\"p1\" wait=\"{huge}\"></process-output>");
            match parse(&tag) {
                Ok(TagRequest::Output { wait, .. }) => assert_eq!(wait, MAX_WAIT),
                other => panic!("{huge}: {other:?}"),
            }
        }
        assert!(parse("<shell url=\"https://x\">x</shell>").is_err());
        assert!(parse("<shell background=maybe>x</shell>").is_err());
        assert!(parse("<shell background background>x</shell>").is_err());
        assert!(parse("<shell timeout=5>x</shell>").is_err());
    }

    #[test]
    fn process_tags() {
        assert_eq!(
            parse("<process-output id=\"p1\"/>"),
            Ok(TagRequest::Output {
                process_id: "p1".into(),
                wait: DEFAULT_OUTPUT_WAIT,
            })
        );
        assert_eq!(
            parse("<process-kill>p2</process-kill>"),
            Ok(TagRequest::Kill {
                process_id: "p2".into(),
                signal: None,
            })
        );
        assert_eq!(
            parse("<process-kill id=p2 signal=sigint/>"),
            Ok(TagRequest::Kill {
                process_id: "p2".into(),
                signal: Some("INT".into()),
            })
        );
        assert!(parse("<process-output/>")
            .unwrap_err()
            .contains("which process"));
        assert!(parse("<process-output id=p1>p2</process-output>").is_err());
        assert!(parse("<process-kill id=p1 signal=STOP/>").is_err());
    }

    #[test]
    fn process_input_tags() {
        let input = |text: &str| match parse(text) {
            Ok(TagRequest::Input {
                input, close_stdin, ..
            }) => Ok((input, close_stdin)),
            Ok(other) => panic!("{other:?}"),
            Err(e) => Err(e),
        };
        assert_eq!(
            input("<process-input id=\"p1\">y</process-input>"),
            Ok(("y\n".into(), false))
        );
        assert_eq!(
            input("<process-input id=p1 key=\"ctrl-c\"/>"),
            Ok(("\u{3}".into(), false))
        );
        assert_eq!(
            input("<process-input id=p1 key=Tab>ca</process-input>"),
            Ok(("ca\t".into(), false))
        );
        assert_eq!(
            input("<process-input id=p1 eof/>"),
            Ok((String::new(), true))
        );
        assert!(input("<process-input id=p1/>").is_err());
        assert!(input("<process-input id=p1 key=f13/>")
            .unwrap_err()
            .contains("ctrl-c"));
        assert!(input("<process-input>y</process-input>")
            .unwrap_err()
            .contains("which process"));
    }
}
