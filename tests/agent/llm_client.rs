//! [`OpenAiClient`] against [`FakeLlm`]: streaming, request shape, auth, and every
//! error mapping.

use std::collections::HashMap;
use std::time::Duration;

use cmdr::llm::{
    ChatMessage, ChatRequest, ChatRole, Delta, LlmClient, LlmConfig, LlmError, OpenAiClient,
};
use futures_util::StreamExt;
use serde_json::json;

use crate::agent::fake_llm::{FakeLlm, Reply};

const KEY: &str = "sk-test-SECRET-1234567890";

fn config(llm: &FakeLlm, key: Option<&str>) -> LlmConfig {
    LlmConfig {
        api_key: key.map(str::to_owned),
        // 503 is an answer here (its retry has tests of its own).
        loading_wait: Duration::ZERO,
        ..LlmConfig::new(llm.base_url(), "fake-model")
    }
}

fn client(llm: &FakeLlm, key: Option<&str>) -> OpenAiClient {
    OpenAiClient::new(config(llm, key)).unwrap()
}

fn request(text: &str) -> ChatRequest {
    ChatRequest {
        model: None,
        messages: vec![
            ChatMessage {
                role: ChatRole::System,
                content: "be brief".into(),
            },
            ChatMessage {
                role: ChatRole::User,
                content: text.into(),
            },
        ],
        ..ChatRequest::default()
    }
}

/// Every item of the stream: the `Ok` texts, then the error that ended it (if any).
async fn drain(client: &OpenAiClient, req: ChatRequest) -> (Vec<String>, Option<LlmError>) {
    let mut stream = client.stream_chat(req).await.unwrap();
    let mut texts = Vec::new();
    while let Some(item) = stream.next().await {
        match item {
            Ok(Delta::Text(text)) => texts.push(text),
            Ok(Delta::Finish(_)) => {}
            Err(error) => {
                assert!(
                    stream.next().await.is_none(),
                    "the stream ends after an error"
                );
                return (texts, Some(error));
            }
        }
    }
    (texts, None)
}

/// The error `stream_chat` itself fails with.
async fn start_error(client: &OpenAiClient) -> LlmError {
    match client.stream_chat(request("hi")).await {
        Ok(_) => panic!("stream_chat should have failed"),
        Err(error) => error,
    }
}

fn sse(data: &str) -> String {
    format!("data: {data}\n\n")
}

fn delta(text: &str) -> String {
    sse(
        &json!({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]})
            .to_string(),
    )
}

#[tokio::test]
async fn streams_text_in_order_and_sends_the_openai_request_shape() {
    let llm = FakeLlm::start(vec![Reply::chunks([
        "Hel",
        "lo, ",
        "<shell>ls</shell>",
        " wörld",
    ])])
    .await;
    let client = client(&llm, None);
    assert_eq!(client.default_model(), "fake-model");

    let (texts, error) = drain(&client, request("say hello")).await;

    assert_eq!(error, None);
    assert_eq!(texts, ["Hel", "lo, ", "<shell>ls</shell>", " wörld"]);
    assert_eq!(
        llm.requests(),
        [json!({
            "model": "fake-model",
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "say hello"},
            ],
            "stream": true,
        })]
    );
    let raw = String::from_utf8(llm.raw_requests()[0].clone()).unwrap();
    assert!(
        raw.starts_with(r#"{"model":"fake-model","messages":[{"role":"system""#),
        "{raw}"
    );
    let headers = &llm.headers()[0];
    assert_eq!(headers["accept"], "text/event-stream");
    assert_eq!(headers["content-type"], "application/json");
}

#[tokio::test]
async fn request_model_overrides_the_default_and_trailing_slash_is_trimmed() {
    let llm = FakeLlm::start(vec![Reply::text("ok")]).await;
    let client =
        OpenAiClient::new(LlmConfig::new(format!("{}/", llm.base_url()), "default")).unwrap();
    let req = ChatRequest {
        model: Some("other-model".into()),
        ..request("hi")
    };

    let (texts, error) = drain(&client, req).await;

    assert_eq!((texts, error), (vec!["ok".to_owned()], None));
    assert_eq!(llm.requests()[0]["model"], "other-model");
}

#[tokio::test]
async fn a_query_in_the_base_url_stays_a_query() {
    let llm = FakeLlm::start(vec![Reply::text("ok")]).await;
    let base = format!("{}?api-version=2024-10-21", llm.base_url());
    let client = OpenAiClient::new(LlmConfig::new(base, "m")).unwrap();

    let (texts, error) = drain(&client, request("hi")).await;

    assert_eq!((texts, error), (vec!["ok".to_owned()], None));
}

#[tokio::test]
async fn authorization_header_is_sent_only_with_a_key() {
    let llm = FakeLlm::start(vec![Reply::text("a"), Reply::text("b")]).await;

    drain(&client(&llm, Some(KEY)), request("hi")).await;
    drain(&client(&llm, None), request("hi")).await;

    assert_eq!(llm.authorization(0), Some(format!("Bearer {KEY}")));
    assert_eq!(llm.authorization(1), None);
}

#[tokio::test]
async fn http_500_gives_the_provider_message() {
    let body = json!({"error": {"message": "The model is overloaded", "type": "server_error"}});
    let llm = FakeLlm::start(vec![Reply::Status(500, body.to_string())]).await;

    let error = start_error(&client(&llm, Some(KEY))).await;

    assert_eq!(
        error,
        LlmError::Http {
            status: 500,
            message: "The model is overloaded".into()
        }
    );
    assert_eq!(error.code(), cmdr::executors::ErrorCode::LlmHttpError);
}

#[tokio::test]
async fn http_401_gives_the_provider_message_without_the_key() {
    // A provider echoing the key it rejected: the error must not repeat it.
    let body = json!({"error": {"message": format!("Incorrect API key provided: {KEY}."),
                                "code": "invalid_api_key"}});
    let llm = FakeLlm::start(vec![Reply::Status(401, body.to_string())]).await;

    let error = start_error(&client(&llm, Some(KEY))).await;

    let LlmError::Http { status, message } = &error else {
        panic!("{error:?}")
    };
    assert_eq!(*status, 401);
    assert!(
        message.starts_with("Incorrect API key provided"),
        "{message}"
    );
    assert!(!error.to_string().contains(KEY), "{error}");
    assert!(!format!("{error:?}").contains(KEY), "{error:?}");
}

#[tokio::test]
async fn gemini_array_wrapped_error_and_plain_text_bodies() {
    let gemini = json!([{"error": {"code": 400, "message": "API key not valid.",
                                   "status": "INVALID_ARGUMENT"}}]);
    let ollama = json!({"error": "model \"nope\" not found, try pulling it first"});
    let llm = FakeLlm::start(vec![
        Reply::Status(400, gemini.to_string()),
        Reply::Status(404, ollama.to_string()),
        Reply::Status(502, "  <html>Bad Gateway</html>\n".into()),
        Reply::Status(503, String::new()),
    ])
    .await;
    let client = client(&llm, None);

    let messages = [
        start_error(&client).await,
        start_error(&client).await,
        start_error(&client).await,
        start_error(&client).await,
    ];

    assert_eq!(
        messages,
        [
            LlmError::Http {
                status: 400,
                message: "API key not valid.".into()
            },
            LlmError::Http {
                status: 404,
                message: "model \"nope\" not found, try pulling it first".into()
            },
            LlmError::Http {
                status: 502,
                message: "<html>Bad Gateway</html>".into()
            },
            LlmError::Http {
                status: 503,
                message: "Service Unavailable".into()
            },
        ]
    );
}

#[tokio::test]
async fn long_text_error_body_is_cut_to_an_excerpt() {
    let llm = FakeLlm::start(vec![Reply::Status(500, "x".repeat(100_000))]).await;

    let error = start_error(&client(&llm, None)).await;

    let LlmError::Http { message, .. } = error else {
        panic!("{error:?}")
    };
    assert!(message.chars().count() <= 301, "{}", message.len());
    assert!(message.ends_with('…'));
}

#[tokio::test]
async fn sse_split_across_chunks_with_comments_usage_and_reasoning_is_parsed() {
    let reasoning = json!({"choices": [{"index": 0, "delta": {"reasoning_content": "hmm"}}]});
    let usage = json!({"choices": [], "usage": {"total_tokens": 3}});
    let whole = format!("{}{}", delta("A"), delta("B"));
    let (left, right) = whole.split_at(20); // in the middle of the first data line
    let llm = FakeLlm::start(vec![Reply::Raw(vec![
        ": keep-alive comment\n\n".into(),
        sse(&reasoning.to_string()),
        left.into(),
        right.into(),
        delta(""),
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\r\n\r\n"
            .into(),
        sse(&usage.to_string()),
        "data: [DONE]\n\n".into(),
    ])])
    .await;

    let (texts, error) = drain(&client(&llm, None), request("hi")).await;

    assert_eq!((texts, error), (vec!["A".to_owned(), "B".to_owned()], None));
}

#[tokio::test]
async fn finish_reason_without_done_is_a_normal_end() {
    let finish = json!({"choices": [{"index": 0, "delta": {"content": "!"},
                                     "finish_reason": "stop"}]});
    let llm = FakeLlm::start(vec![Reply::Raw(vec![
        delta("hi"),
        sse(&finish.to_string()),
    ])])
    .await;

    let (texts, error) = drain(&client(&llm, None), request("hi")).await;

    assert_eq!(
        (texts, error),
        (vec!["hi".to_owned(), "!".to_owned()], None)
    );
}

#[tokio::test]
async fn malformed_payload_fails_after_the_good_chunks() {
    let llm = FakeLlm::start(vec![Reply::Raw(vec![
        delta("good"),
        "data: {not json at all\n\n".into(),
        delta("never"),
    ])])
    .await;

    let (texts, error) = drain(&client(&llm, None), request("hi")).await;

    assert_eq!(texts, ["good"]);
    let error = error.unwrap();
    let LlmError::Malformed(message) = &error else {
        panic!("{error:?}")
    };
    assert!(message.contains("{not json at all"), "{message}");
    assert_eq!(error.code(), cmdr::executors::ErrorCode::LlmBadStream);
}

#[tokio::test]
async fn error_object_mid_stream_is_an_http_error() {
    let error_chunk = json!({"error": {"code": 429, "message": "Resource has been exhausted"}});
    let untyped_error = json!({"error": {"message": "internal"}});
    let llm = FakeLlm::start(vec![
        Reply::Raw(vec![delta("part"), sse(&error_chunk.to_string())]),
        Reply::Raw(vec![sse(&untyped_error.to_string())]),
    ])
    .await;
    let client = client(&llm, None);

    let first = drain(&client, request("hi")).await;
    let second = drain(&client, request("hi")).await;

    assert_eq!(
        first,
        (
            vec!["part".to_owned()],
            Some(LlmError::Http {
                status: 429,
                message: "Resource has been exhausted".into()
            })
        )
    );
    assert_eq!(
        second,
        (
            vec![],
            Some(LlmError::Http {
                status: 500,
                message: "internal".into()
            })
        )
    );
}

#[tokio::test]
async fn connection_dropped_mid_stream_is_stream_cut_after_the_chunks() {
    let llm = FakeLlm::start(vec![Reply::CutAfter(vec!["one ".into(), "two".into()])]).await;

    let (texts, error) = drain(&client(&llm, None), request("hi")).await;

    assert_eq!(
        texts,
        ["one ", "two"],
        "nothing yielded before the cut is lost"
    );
    let error = error.unwrap();
    assert!(matches!(error, LlmError::StreamCut(_)), "{error:?}");
    assert_eq!(error.code(), cmdr::executors::ErrorCode::LlmStreamCut);
}

#[tokio::test]
async fn body_ending_cleanly_without_finish_is_stream_cut() {
    let llm = FakeLlm::start(vec![Reply::Raw(vec![delta("half"), delta(" a reply")])]).await;

    let (texts, error) = drain(&client(&llm, None), request("hi")).await;

    assert_eq!(texts, ["half", " a reply"]);
    assert!(matches!(error, Some(LlmError::StreamCut(_))), "{error:?}");
}

#[tokio::test]
async fn connection_refused_is_llm_unavailable() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let config = LlmConfig {
        api_key: Some(KEY.into()),
        ..LlmConfig::new(format!("http://user:pw@127.0.0.1:{port}/v1?key=q"), "m")
    };
    let client = OpenAiClient::new(config).unwrap();

    let error = start_error(&client).await;

    let LlmError::Connect { url, .. } = &error else {
        panic!("{error:?}")
    };
    assert_eq!(url, &format!("http://127.0.0.1:{port}/v1/chat/completions"));
    assert_eq!(error.code(), cmdr::executors::ErrorCode::LlmUnavailable);
    let text = error.to_string();
    assert!(
        !text.contains(KEY) && !text.contains("pw") && !text.contains("key=q"),
        "{text}"
    );
}

#[tokio::test]
async fn silence_longer_than_the_idle_timeout_is_a_timeout() {
    let llm = FakeLlm::start(vec![Reply::Hang(vec!["still ".into(), "thinking".into()])]).await;
    let config = LlmConfig {
        idle_timeout: Duration::from_millis(300),
        ..config(&llm, None)
    };
    let client = OpenAiClient::new(config).unwrap();

    let (texts, error) = drain(&client, request("hi")).await;

    assert_eq!(texts, ["still ", "thinking"]);
    assert_eq!(error, Some(LlmError::Timeout(1)));
    assert_eq!(
        error.unwrap().code(),
        cmdr::executors::ErrorCode::LlmTimeout
    );
    // Timing out closes the connection.
    llm.wait_disconnects(1).await;
}

#[tokio::test]
async fn dropping_the_stream_closes_the_connection() {
    let llm = FakeLlm::start(vec![Reply::Hang(vec!["first".into()])]).await;
    let client = client(&llm, None);
    let mut stream = client.stream_chat(request("hi")).await.unwrap();
    assert_eq!(
        stream.next().await,
        Some(Ok(Delta::Text("first".to_owned())))
    );
    assert_eq!(llm.disconnects(), 0);

    drop(stream);

    llm.wait_disconnects(1).await;
    assert_eq!(llm.disconnects(), 1);
}

#[tokio::test]
async fn gated_reply_pauses_until_released() {
    let gate = std::sync::Arc::new(tokio::sync::Notify::new());
    let llm = FakeLlm::start(vec![Reply::Gated(
        vec!["a".into()],
        gate.clone(),
        vec!["b".into()],
    )])
    .await;
    let client = client(&llm, None);
    let mut stream = client.stream_chat(request("hi")).await.unwrap();
    assert_eq!(stream.next().await, Some(Ok(Delta::Text("a".to_owned()))));

    gate.notify_one();

    assert_eq!(stream.next().await, Some(Ok(Delta::Text("b".to_owned()))));
    assert_eq!(
        stream.next().await,
        Some(Ok(Delta::Finish("stop".to_owned())))
    );
    assert_eq!(stream.next().await, None);
}

#[tokio::test]
async fn exhausted_script_replies_done_and_wait_requests_counts() {
    let llm = FakeLlm::start(vec![]).await;
    let client = client(&llm, None);

    let (texts, error) = drain(&client, request("hi")).await;
    llm.wait_requests(1).await;

    assert_eq!((texts, error), (vec!["done.".to_owned()], None));
    assert_eq!(llm.request_count(), 1);
}

fn lookup(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let vars: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    move |name| vars.get(name).cloned()
}

#[test]
fn config_names_every_missing_variable() {
    let error = LlmConfig::from_lookup(lookup(&[("CMDR_LLM_API_KEY", KEY)])).unwrap_err();
    let LlmError::NotConfigured(message) = &error else {
        panic!("{error:?}")
    };
    assert!(message.contains("CMDR_LLM_BASE_URL"), "{message}");
    assert!(message.contains("CMDR_LLM_MODEL"), "{message}");
    assert_eq!(error.code(), cmdr::executors::ErrorCode::LlmUnavailable);

    let error = LlmConfig::from_lookup(lookup(&[
        ("CMDR_LLM_BASE_URL", "http://x/v1"),
        ("CMDR_LLM_MODEL", " "),
    ]))
    .unwrap_err();
    let LlmError::NotConfigured(message) = &error else {
        panic!("{error:?}")
    };
    assert!(
        message.contains("CMDR_LLM_MODEL") && !message.contains("BASE_URL"),
        "{message}"
    );
}

#[test]
fn config_reads_all_variables_and_hides_the_key() {
    let config = LlmConfig::from_lookup(lookup(&[
        ("CMDR_LLM_BASE_URL", "https://api.openai.com/v1"),
        ("CMDR_LLM_MODEL", "gpt-4o-mini"),
        ("CMDR_LLM_API_KEY", KEY),
        ("CMDR_LLM_IDLE_TIMEOUT_SECS", "7"),
    ]))
    .unwrap();

    assert_eq!(config.base_url, "https://api.openai.com/v1");
    assert_eq!(config.model, "gpt-4o-mini");
    assert_eq!(config.api_key.as_deref(), Some(KEY));
    assert_eq!(config.idle_timeout, Duration::from_secs(7));
    assert!(!format!("{config:?}").contains(KEY), "{config:?}");
}

#[test]
fn config_defaults_and_bad_idle_timeout() {
    let base = [
        ("CMDR_LLM_BASE_URL", "http://localhost:11434/v1"),
        ("CMDR_LLM_MODEL", "llama3"),
    ];
    let config = LlmConfig::from_lookup(lookup(&base)).unwrap();
    assert_eq!(config.api_key, None);
    assert_eq!(config.idle_timeout, Duration::from_secs(120));

    let bad = [base[0], base[1], ("CMDR_LLM_IDLE_TIMEOUT_SECS", "soon")];
    let error = LlmConfig::from_lookup(lookup(&bad)).unwrap_err();
    assert!(
        matches!(&error, LlmError::NotConfigured(m) if m.contains("CMDR_LLM_IDLE_TIMEOUT_SECS")),
        "{error:?}"
    );
}

#[test]
fn base_url_must_be_http() {
    let error = OpenAiClient::new(LlmConfig::new("ftp://example.com/v1", "m")).unwrap_err();
    assert!(matches!(error, LlmError::NotConfigured(_)), "{error:?}");
    let error = OpenAiClient::new(LlmConfig::new("not a url", "m")).unwrap_err();
    assert!(matches!(error, LlmError::NotConfigured(_)), "{error:?}");
}

#[tokio::test]
async fn a_model_still_loading_503_is_asked_again_until_it_answers() {
    let loading = r#"{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}"#;
    let llm = FakeLlm::start(vec![
        Reply::Status(503, loading.into()),
        Reply::Status(503, loading.into()),
        Reply::text("ready"),
    ])
    .await;
    let client = OpenAiClient::new(LlmConfig::new(llm.base_url(), "fake-model")).unwrap();
    let (texts, error) = drain(&client, request("hi")).await;
    assert_eq!((texts, error), (vec!["ready".to_owned()], None));
    assert_eq!(llm.request_count(), 3);
}

#[tokio::test]
async fn a_503_that_lasts_past_the_loading_wait_is_the_answer() {
    let loading = r#"{"error":{"message":"Loading model"}}"#;
    let llm = FakeLlm::start(
        (0..50)
            .map(|_| Reply::Status(503, loading.into()))
            .collect(),
    )
    .await;
    let config = LlmConfig {
        loading_wait: Duration::from_secs(1),
        ..LlmConfig::new(llm.base_url(), "fake-model")
    };
    let client = OpenAiClient::new(config).unwrap();
    let error = start_error(&client).await;
    assert_eq!(
        error,
        LlmError::Http {
            status: 503,
            message: "Loading model".into()
        }
    );
    let asked = llm.request_count();
    assert!(
        (2..50).contains(&asked),
        "asked {asked} times in about a second"
    );
}
