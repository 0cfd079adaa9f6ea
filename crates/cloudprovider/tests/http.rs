//! The shared HTTP client against a local server: what is retried, how often, and what is not.
#![cfg(feature = "http")]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::http::StatusCode;
use axum::response::IntoResponse;
use karpenter_cloudprovider::http::{HttpClient, RetryPolicy};

/// A server answering each request with the next status of `script` (the last one repeats).
async fn server(script: Vec<u16>) -> (String, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = calls.clone();
    let app = axum::Router::new().fallback(move || {
        let n = seen.fetch_add(1, Ordering::SeqCst);
        let status = script[n.min(script.len() - 1)];
        async move {
            let mut response = (StatusCode::from_u16(status).unwrap(), "body").into_response();
            if status == 429 {
                response
                    .headers_mut()
                    .insert("retry-after", "2".parse().unwrap());
            }
            response
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, calls)
}

fn get(url: &str) -> http::Request<bytes::Bytes> {
    http::Request::get(url).body(bytes::Bytes::new()).unwrap()
}

#[tokio::test]
async fn throttling_and_server_errors_are_retried_until_an_answer() {
    let (url, calls) = server(vec![503, 429, 200]).await;
    let client = HttpClient::new(Duration::from_secs(5)).unwrap();
    let policy = RetryPolicy {
        attempts: 3,
        base: Duration::from_millis(10),
        max: Duration::from_secs(3),
    };
    let started = std::time::Instant::now();
    let response = client.send_with_retries(&get(&url), policy).await.unwrap();
    assert_eq!(response.status, 200);
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "the 429's Retry-After is honoured"
    );
}

#[tokio::test]
async fn attempts_are_bounded_and_client_errors_are_not_retried() {
    let (url, calls) = server(vec![500]).await;
    let client = HttpClient::new(Duration::from_secs(5)).unwrap();
    let policy = RetryPolicy {
        attempts: 2,
        base: Duration::from_millis(1),
        max: Duration::from_millis(5),
    };
    let response = client.send_with_retries(&get(&url), policy).await.unwrap();
    assert_eq!((response.status, calls.load(Ordering::SeqCst)), (500, 2));

    let (url, calls) = server(vec![404, 200]).await;
    let response = client.send_with_retries(&get(&url), policy).await.unwrap();
    assert_eq!((response.status, calls.load(Ordering::SeqCst)), (404, 1));

    let (url, calls) = server(vec![503, 200]).await;
    let response = client
        .send_with_retries(&get(&url), RetryPolicy::NEVER)
        .await
        .unwrap();
    assert_eq!((response.status, calls.load(Ordering::SeqCst)), (503, 1));
}

#[tokio::test]
async fn a_reason_phrase_other_than_the_standard_one_is_kept() {
    let app = axum::Router::new()
        .route(
            "/custom",
            axum::routing::get(|| async {
                let mut response = (StatusCode::INTERNAL_SERVER_ERROR, "{}").into_response();
                response
                    .extensions_mut()
                    .insert(hyper::ext::ReasonPhrase::from_static(
                        b"Configuration file 'nodes/pve1/qemu-server/100.conf' does not exist",
                    ));
                response
            }),
        )
        .route(
            "/standard",
            axum::routing::get(|| async { StatusCode::INTERNAL_SERVER_ERROR }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let client = HttpClient::new(Duration::from_secs(5)).unwrap();

    let custom = client.send(&get(&format!("{url}/custom"))).await.unwrap();
    assert_eq!(custom.status, 500);
    assert_eq!(
        custom.reason.as_deref(),
        Some("Configuration file 'nodes/pve1/qemu-server/100.conf' does not exist")
    );
    let standard = client.send(&get(&format!("{url}/standard"))).await.unwrap();
    assert_eq!((standard.status, standard.reason), (500, None));
}
