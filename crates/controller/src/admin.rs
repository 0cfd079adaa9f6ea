//! The operator's endpoints: `/metrics` on the metrics port, `/healthz` and `/readyz` on the
//! health-probe port (ready once cluster state has listed everything).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;

use crate::Context;
use crate::cloudprovider::CloudProvider;

/// The `/metrics` router.
pub fn metrics_router<P: CloudProvider>(ctx: Arc<Context<P>>) -> Router {
    Router::new().route(
        "/metrics",
        get(move || {
            let ctx = ctx.clone();
            async move {
                crate::metrics::observe::cluster_state(&ctx);
                (
                    [(
                        header::CONTENT_TYPE,
                        "text/plain; version=0.0.4; charset=utf-8",
                    )],
                    ctx.metrics.encode(),
                )
            }
        }),
    )
}

/// The `/healthz` and `/readyz` router.
pub fn health_router<P: CloudProvider>(ctx: Arc<Context<P>>) -> Router {
    Router::new()
        .route(
            "/healthz",
            get({
                let ctx = ctx.clone();
                move || {
                    let ctx = ctx.clone();
                    async move {
                        let stopped = ctx.stopped_loops.names();
                        if stopped.is_empty() {
                            (StatusCode::OK, "ok".to_string()).into_response()
                        } else {
                            let message = format!("control loops stopped: {}", stopped.join(", "));
                            (StatusCode::INTERNAL_SERVER_ERROR, message).into_response()
                        }
                    }
                }
            }),
        )
        .route(
            "/readyz",
            get(move || {
                let ctx = ctx.clone();
                async move {
                    if ctx.cluster.synced() {
                        (StatusCode::OK, "ok").into_response()
                    } else {
                        (StatusCode::SERVICE_UNAVAILABLE, "cluster state not synced")
                            .into_response()
                    }
                }
            }),
        )
}

/// Serves both until `shutdown`.
pub async fn serve<P: CloudProvider>(
    metrics: SocketAddr,
    health: SocketAddr,
    ctx: Arc<Context<P>>,
    shutdown: tokio_util::sync::CancellationToken,
) -> std::io::Result<()> {
    let metrics_listener = tokio::net::TcpListener::bind(metrics).await?;
    let health_listener = tokio::net::TcpListener::bind(health).await?;
    let (s1, s2) = (shutdown.clone(), shutdown);
    let m = axum::serve(metrics_listener, metrics_router(ctx.clone()))
        .with_graceful_shutdown(async move { s1.cancelled().await });
    let h = axum::serve(health_listener, health_router(ctx))
        .with_graceful_shutdown(async move { s2.cancelled().await });
    let (a, b) = tokio::join!(m.into_future(), h.into_future());
    a.and(b)
}
