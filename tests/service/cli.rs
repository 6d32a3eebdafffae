//! `cmdr agents|commands|conversations` end to end: the real binary, real folders, a
//! real SQLite file, the fake LLM server.

use std::path::Path;
use std::process::Output;

use crate::service::fake_llm::{FakeLlm, Reply};
use crate::service::World;

/// Runs `cmdr ARGS` against the world's agents and database (and `llm`, if any).
async fn cmdr(world: &World, llm: Option<&FakeLlm>, args: &[&str]) -> Output {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_cmdr"));
    command
        .args(args)
        .env("CMDR_AGENTS_DIR", world.agents())
        .env("CMDR_DB", world.db())
        .env_remove("CMDR_LLM_API_KEY")
        .env_remove("CMDR_LLM_BASE_URL")
        .env_remove("CMDR_LLM_MODEL")
        .current_dir(world.work())
        .stdin(std::process::Stdio::null());
    if let Some(llm) = llm {
        command
            .env("CMDR_LLM_BASE_URL", llm.base_url())
            .env("CMDR_LLM_MODEL", "fake-model");
    }
    command.output().await.unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[tokio::test]
async fn commands_list_shows_every_agent_and_why_a_file_is_disabled() {
    let world = World::new();
    world.command("helper", "broken", r#"{"Description":"  ","items":[]}"#);
    let listed = cmdr(&world, None, &["commands", "list"]).await;
    assert!(listed.status.success(), "{}", stderr(&listed));
    let out = stdout(&listed);
    assert!(out.contains("helper:\n"), "{out}");
    assert!(out.contains("  three  Three steps\n"), "{out}");
    assert!(
        out.contains("  broken  [disabled] Invalid command file: ") && out.contains("Description"),
        "{out}"
    );
    assert!(out.contains("other:\n  (no commands)\n"), "{out}");
    let agents = cmdr(&world, None, &["agents", "list"]).await;
    assert_eq!(
        stdout(&agents)
            .lines()
            .map(|l| l.split_whitespace().next().unwrap_or(""))
            .collect::<Vec<_>>(),
        ["helper", "other"]
    );
}

#[tokio::test]
async fn the_shipped_agents_list_from_the_repository_root() {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_cmdr"))
        .args(["commands", "list"])
        .env_remove("CMDR_AGENTS_DIR")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .await
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let out = stdout(&output);
    assert!(out.contains("planning_agent:\n  improve_plan  "), "{out}");
    assert!(!out.contains("[disabled]"), "{out}");
}

#[tokio::test]
async fn commands_run_shows_progress_and_the_transcript_keeps_the_steps() {
    let world = World::new();
    let llm = FakeLlm::start(vec![
        Reply::text("first <shell>echo hello</shell>"),
        Reply::text("first done"),
        Reply::text("second"),
        Reply::text("third"),
    ])
    .await;
    let run = cmdr(&world, Some(&llm), &["commands", "run", "helper", "three"]).await;
    assert!(run.status.success(), "{}\n{}", stdout(&run), stderr(&run));
    let out = stdout(&run);
    for step in ["1/3", "2/3", "3/3"] {
        assert!(out.contains(&format!("── three: step {step} ──")), "{out}");
    }
    assert!(
        out.contains("» Step one\n» second line\n"),
        "the step's prompt: {out}"
    );
    assert!(out.contains("[cmd-1-0] completed"), "{out}");
    assert!(out.contains("  │ hello"), "{out}");
    let id = out
        .split("in conversation ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap()
        .to_owned();

    let list = cmdr(&world, None, &["conversations", "list"]).await;
    assert!(
        stdout(&list).starts_with(&format!("{id}  helper  ")),
        "{}",
        stdout(&list)
    );
    let show = cmdr(&world, None, &["conversations", "show", &id]).await;
    let transcript = stdout(&show);
    assert!(
        transcript.contains("Command run: three (1/3)"),
        "{transcript}"
    );
    assert!(
        transcript.contains("Command run: three (3/3)"),
        "{transcript}"
    );
    assert!(transcript.contains("$ echo hello\nhello"), "{transcript}");

    // The conversation goes on with the same id.
    let again = cmdr(
        &world,
        Some(&llm),
        &["commands", "run", "helper", "three", "--conversation", &id],
    )
    .await;
    assert!(again.status.success(), "{}", stderr(&again));
    assert!(stdout(&again).contains(&format!("in conversation {id} ")));
}

#[tokio::test]
async fn errors_print_their_code_and_exit_non_zero() {
    let world = World::new();
    let llm = FakeLlm::start(vec![]).await;
    let cases: [(&[&str], &str); 6] = [
        (&["commands", "run", "helper", "../bad"], "COMMAND_INVALID"),
        (
            &["commands", "run", "helper", "missing"],
            "COMMAND_NOT_FOUND",
        ),
        (&["commands", "run", "nobody", "three"], "AGENT_NOT_FOUND"),
        (
            &[
                "commands",
                "run",
                "helper",
                "three",
                "--working-folder",
                "rel",
            ],
            "WORKING_FOLDER_INVALID",
        ),
        (
            &[
                "commands",
                "run",
                "helper",
                "three",
                "--conversation",
                "nope",
            ],
            "CONVERSATION_NOT_FOUND",
        ),
        (&["conversations", "show", "nope"], "CONVERSATION_NOT_FOUND"),
    ];
    for (args, code) in cases {
        let output = cmdr(&world, Some(&llm), args).await;
        assert_eq!(output.status.code(), Some(1), "{args:?}");
        let err = stderr(&output);
        assert!(
            err.starts_with(&format!("error [{code}]: ")),
            "{args:?}: {err}"
        );
    }
    let no_model = cmdr(&world, None, &["commands", "run", "helper", "three"]).await;
    assert!(stderr(&no_model).starts_with("error [LLM_UNAVAILABLE]: "));
    assert_eq!(llm.request_count(), 0);
    assert!(!Path::new(&world.work()).join("rel").exists());
}
