//! The bearer token, the browser guard, the body limit, unknown routes and methods.

use cmdr::http::{HttpConfig, DEFAULT_BODY_LIMIT};
use reqwest::StatusCode;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::http::fake_llm::FakeLlm;
use crate::http::support::{assert_error, json_of, server, start, Options};

#[tokio::test]
async fn the_token_protects_every_route_but_health() {
    let llm = FakeLlm::start(vec![]).await;
    let server = start(
        Some(&llm),
        Options {
            token: Some("s3cret".into()),
            ..Options::default()
        },
    )
    .await;
    let get = |path: &str, token: Option<&str>| {
        let mut request = server.http.get(server.url(path));
        if let Some(token) = token {
            request = request.header("authorization", token);
        }
        request.send()
    };
    for path in [
        "/agents",
        "/agents/helper/commands",
        "/conversations",
        "/commands/inputs",
        "/nowhere",
    ] {
        for token in [
            None,
            Some("Bearer wrong"),
            Some("s3cret"),
            Some("Basic s3cret"),
        ] {
            let response = get(path, token).await.unwrap();
            assert_eq!(
                response.headers()["www-authenticate"].to_str().unwrap(),
                "Bearer"
            );
            let answer = json_of(response).await;
            assert_error(&answer, 401, "unauthorized", "UNAUTHORIZED");
        }
    }
    let (status, _) = json_of(get("/agents", Some("Bearer s3cret")).await.unwrap()).await;
    assert_eq!(status, StatusCode::OK);
    let answer = json_of(get("/nowhere", Some("Bearer s3cret")).await.unwrap()).await;
    assert_error(&answer, 404, "not_found", "ROUTE_NOT_FOUND");
    let (status, body) = json_of(get("/health", None).await.unwrap()).await;
    assert_eq!((status, &body["status"]), (StatusCode::OK, &json!("ok")));

    let response = server
        .http
        .post(server.url("/commands?combine=true"))
        .json(&json!({"commandType": "BASH_EXEC", "command": "echo no"}))
        .send()
        .await
        .unwrap();
    assert_error(
        &json_of(response).await,
        401,
        "unauthorized",
        "UNAUTHORIZED",
    );
    let response = server
        .http
        .post(server.url("/commands?combine=true"))
        .bearer_auth("s3cret")
        .json(&json!({"commandType": "BASH_EXEC", "command": "echo yes"}))
        .send()
        .await
        .unwrap();
    let (status, body) = json_of(response).await;
    assert_eq!(
        (status, &body["resultData"]),
        (StatusCode::OK, &json!("yes\n"))
    );
}

#[tokio::test]
async fn unknown_routes_and_wrong_methods_answer_json() {
    let llm = FakeLlm::start(vec![]).await;
    let server = server(&llm).await;
    for path in ["/", "/nowhere", "/agents/helper/nothing", "/commands/x/y/z"] {
        let answer = server.get(path).await;
        assert_error(&answer, 404, "not_found", "ROUTE_NOT_FOUND");
    }
    for (method, path) in [
        (reqwest::Method::DELETE, "/agents"),
        (reqwest::Method::GET, "/agents/helper/run"),
        (reqwest::Method::POST, "/conversations"),
        (reqwest::Method::POST, "/health"),
        (reqwest::Method::GET, "/commands"),
    ] {
        let response = server
            .http
            .request(method.clone(), server.url(path))
            .send()
            .await
            .unwrap();
        let answer = json_of(response).await;
        assert_error(&answer, 405, "method_not_allowed", "METHOD_NOT_ALLOWED");
    }
    let response = server
        .http
        .delete(server.url("/agents"))
        .send()
        .await
        .unwrap();
    let allow = response.headers()["allow"].to_str().unwrap().to_owned();
    assert!(allow.contains("GET"), "{allow}");
}

#[tokio::test]
async fn bodies_over_the_limit_are_413() {
    let llm = FakeLlm::start(vec![]).await;
    let config = HttpConfig {
        body_limit: 1024,
        ..HttpConfig::default()
    };
    let server = start(
        Some(&llm),
        Options {
            config,
            ..Options::default()
        },
    )
    .await;
    let big = "x".repeat(2048);
    for (path, body) in [
        ("/agents/helper/run", json!({"instruction": big})),
        (
            "/api/agent",
            json!({"messages": [{"role": "user", "content": big}]}),
        ),
        (
            "/commands",
            json!({"commandType": "FILE_WRITE", "file_path": "/tmp/x", "content": big}),
        ),
        ("/commands/x/input", json!({"value": big})),
    ] {
        let answer = server.post(path, body).await;
        assert_error(&answer, 413, "payload_too_large", "PAYLOAD_TOO_LARGE");
        assert!(answer.1["message"].as_str().unwrap().contains("1024"));
    }
    // Without Content-Length (chunked), the limit applies while reading.
    let chunks: Vec<Result<String, std::io::Error>> = vec![
        Ok(r#"{"instruction": ""#.to_owned()),
        Ok(big.clone()),
        Ok(r#""}"#.to_owned()),
    ];
    let response = server
        .http
        .post(server.url("/agents/helper/run"))
        .body(reqwest::Body::wrap_stream(futures_util::stream::iter(
            chunks,
        )))
        .send()
        .await
        .unwrap();
    let answer = json_of(response).await;
    assert_error(&answer, 413, "payload_too_large", "PAYLOAD_TOO_LARGE");
    assert_eq!(llm.request_count(), 0);
    let (status, _) = server
        .post(
            "/commands?combine=true",
            json!({"commandType": "BASH_EXEC", "command": "true"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "small bodies pass");
}

/// The default limit (4 MiB), announced by `Content-Length`: refused before the body is
/// sent, over a raw connection.
#[tokio::test]
async fn the_default_limit_is_four_mebibytes() {
    let llm = FakeLlm::start(vec![]).await;
    let server = server(&llm).await;
    let mut stream = tokio::net::TcpStream::connect(server.authority())
        .await
        .unwrap();
    let head = format!(
        "POST /commands HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        server.authority(),
        DEFAULT_BODY_LIMIT + 1
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 413 "), "{answer}");
    assert!(
        answer.contains("\"code\":\"PAYLOAD_TOO_LARGE\""),
        "{answer}"
    );
    assert!(answer.contains(&DEFAULT_BODY_LIMIT.to_string()), "{answer}");
}

/// Cross-site browser requests and DNS-rebinding hosts are refused.
#[tokio::test]
async fn the_browser_guard_refuses_foreign_origins_and_hosts() {
    let llm = FakeLlm::start(vec![]).await;
    let server = server(&llm).await;
    let post = |origin: Option<String>, host: Option<&str>| {
        let mut request = server
            .http
            .post(server.url("/commands?combine=true"))
            .header("content-type", "text/plain")
            .body(r#"{"commandType":"BASH_EXEC","command":"echo ran"}"#);
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        if let Some(host) = host {
            request = request.header("host", host);
        }
        request.send()
    };
    for origin in ["http://evil.example", "null", "http://127.0.0.1:1"] {
        let answer = json_of(post(Some(origin.to_owned()), None).await.unwrap()).await;
        assert_error(&answer, 403, "forbidden", "FORBIDDEN_ORIGIN");
    }
    let own = format!("http://{}", server.authority());
    let (status, body) = json_of(post(Some(own), None).await.unwrap()).await;
    assert_eq!(
        (status, &body["resultData"]),
        (StatusCode::OK, &json!("ran\n"))
    );
    let (status, _) = json_of(post(None, None).await.unwrap()).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "clients without Origin are not browsers"
    );

    let answer = json_of(post(None, Some("evil.example:5010")).await.unwrap()).await;
    assert_error(&answer, 403, "forbidden", "FORBIDDEN_HOST");
    let (status, _) = json_of(post(None, Some("localhost:5010")).await.unwrap()).await;
    assert_eq!(status, StatusCode::OK);

    // With a token, any host name may reach the server (e.g. behind a reverse proxy).
    let guarded = start(
        Some(&llm),
        Options {
            token: Some("t".into()),
            ..Options::default()
        },
    )
    .await;
    let response = guarded
        .http
        .get(guarded.url("/agents"))
        .header("host", "cmdr.example")
        .bearer_auth("t")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
}

/// Small holes an attacker found: the scheme's case, duplicate `Host`/`Origin`, roots
/// shown to anonymous callers, a name too long for any file.
#[tokio::test]
async fn small_holes_are_closed() {
    let server = start(
        None,
        Options {
            token: Some("s3cret-token-0123456789".into()),
            confined: true,
            ..Options::default()
        },
    )
    .await;
    let get = |path: &str, auth: Option<&str>| {
        let mut request = server.http.get(server.url(path));
        if let Some(auth) = auth {
            request = request.header("authorization", auth);
        }
        request.send()
    };
    for auth in [
        "bearer s3cret-token-0123456789",
        "BEARER s3cret-token-0123456789",
        "Bearer  s3cret-token-0123456789",
    ] {
        let (status, body) = json_of(get("/agents", Some(auth)).await.unwrap()).await;
        assert_eq!(status, StatusCode::OK, "{auth}: {body}");
    }
    for auth in [
        "bearer",
        "bearers3cret-token-0123456789",
        "Basic s3cret-token-0123456789",
    ] {
        let answer = json_of(get("/agents", Some(auth)).await.unwrap()).await;
        assert_error(&answer, 401, "unauthorized", "UNAUTHORIZED");
    }

    // /health: the allowed roots only for callers with the token.
    let (_, anonymous) = json_of(get("/health", None).await.unwrap()).await;
    assert_eq!(anonymous["confinement"]["roots"], json!([]), "{anonymous}");
    assert_eq!(anonymous["confinement"]["rootsHidden"], true, "{anonymous}");
    let root = server.state.registry.confinement().paths.roots()[0]
        .display()
        .to_string();
    assert!(!anonymous.to_string().contains(&root), "{anonymous}");
    let auth = Some("Bearer s3cret-token-0123456789");
    let (_, known) = json_of(get("/health", auth).await.unwrap()).await;
    assert_eq!(known["confinement"]["roots"], json!([root]), "{known}");
    assert!(known["confinement"].get("rootsHidden").is_none(), "{known}");

    // Two Host or two Origin headers: a proxy and cmdr could each read another one.
    for name in ["host", "origin"] {
        let mut headers = reqwest::header::HeaderMap::new();
        let same = format!("http://{}", server.authority());
        let values = match name {
            "host" => [server.authority().to_owned(), "evil.example".to_owned()],
            _ => [same, "http://evil.example".to_owned()],
        };
        for value in values {
            headers.append(name, value.parse().unwrap());
        }
        let response = server
            .http
            .post(server.url("/commands"))
            .headers(headers)
            .bearer_auth("s3cret-token-0123456789")
            .json(&json!({"commandType": "BASH_EXEC", "command": "echo hi"}))
            .send()
            .await
            .unwrap();
        let answer = json_of(response).await;
        assert_error(&answer, 400, "invalid_request", "DUPLICATE_HEADER");
    }

    // A 10,000-character agent name is a bad request, not an internal error.
    let long = "a".repeat(10_000);
    for path in [
        format!("/agents/{long}/commands"),
        format!("/agents/{long}/commands/run"),
    ] {
        let request = if path.ends_with("/run") {
            server
                .http
                .post(server.url(&path))
                .json(&json!({"commandName": "three"}))
        } else {
            server.http.get(server.url(&path))
        };
        let response = request
            .bearer_auth("s3cret-token-0123456789")
            .send()
            .await
            .unwrap();
        let answer = json_of(response).await;
        assert_error(&answer, 400, "invalid_request", "AGENT_NAME_INVALID");
        assert!(
            answer.1["message"].as_str().unwrap().len() < 200,
            "{}",
            answer.1
        );
    }
}
