//! A model's numbers cannot panic the loop (issue 32.9): durations a tag asks for are
//! parsed with bounds (absurd ones capped), and a panic inside a run, should one ever
//! happen, ends that run failed with `INTERNAL_ERROR` and its `error` event, never silence.

use std::sync::Arc;

use cmdr::agent::{AgentEvent, AgentLoop, RecordFuture, Recorder, RunOptions, RunOutcome, Session};
use cmdr::executors::Registry;
use cmdr::llm::{LlmClient, LlmConfig, OpenAiClient};
use cmdr::turn::Message;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::agent::fake_llm::{FakeLlm, Reply};

fn agent(llm: &FakeLlm) -> AgentLoop {
    let client: Arc<dyn LlmClient> =
        Arc::new(OpenAiClient::new(LlmConfig::new(llm.base_url(), "fake-model")).unwrap());
    AgentLoop::new(Some(client), Registry::with_defaults())
}

/// One turn to its end with `recorder`: its outcome and last event.
async fn turn(agent: &AgentLoop, recorder: &dyn Recorder) -> (RunOutcome, Option<AgentEvent>) {
    let (tx, mut rx) = mpsc::channel(64);
    let collector = tokio::spawn(async move {
        let mut last = None;
        while let Some(event) = rx.recv().await {
            last = Some(event);
        }
        last
    });
    let dir = tempfile::tempdir().unwrap();
    let mut session = Session::new(dir.path());
    let outcome = agent
        .run_turn_recorded(
            &mut session,
            "go".to_owned(),
            &RunOptions::default(),
            &tx,
            &CancellationToken::new(),
            recorder,
        )
        .await;
    drop(tx);
    (outcome, collector.await.unwrap())
}

#[tokio::test]
async fn absurd_durations_from_a_model_are_capped_and_the_run_goes_on() {
    let llm = FakeLlm::start(vec![
        Reply::Text(vec![
            "<shell background ready=\"never\" timeout=\"1e30\">echo hi</shell>".into(),
        ]),
        Reply::Text(vec![
            "<process-output id=\"p1\" wait=\"18446744073709551616\"></process-output>".into(),
        ]),
        Reply::Text(vec!["done".into()]),
    ])
    .await;
    let agent = agent(&llm);
    let (outcome, last) = turn(&agent, &cmdr::agent::NoRecorder).await;
    assert!(matches!(outcome, RunOutcome::Completed), "{outcome:?}");
    assert!(matches!(last, Some(AgentEvent::Done { .. })), "{last:?}");
}

/// A recorder that panics: a stand-in for any bug inside a run.
struct Panicking;

impl Recorder for Panicking {
    fn record<'a>(&'a self, _message: &'a Message) -> RecordFuture<'a> {
        Box::pin(async { panic!("a bug inside the run") })
    }
}

#[tokio::test]
async fn a_panic_inside_a_run_ends_it_failed_with_an_answer() {
    let llm = FakeLlm::start(vec![Reply::Text(vec!["done".into()])]).await;
    let agent = agent(&llm);
    let (outcome, last) = turn(&agent, &Panicking).await;
    match outcome {
        RunOutcome::Failed { code, .. } => assert_eq!(code, "INTERNAL_ERROR"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(last, Some(AgentEvent::Error { .. })), "{last:?}");
}
