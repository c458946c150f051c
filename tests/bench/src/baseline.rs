//! The baseline: a minimal axum server with the same routes that returns a fixed 1 KB item on
//! GET, echoes the body on POST, and answers a query POST with a fixed page of ten such items,
//! with no storage and no authentication. It stands in for the physical limit of HTTP on this
//! machine.

use axum::body::Bytes;
use axum::http::HeaderMap;
use axum::routing::{get, post};
use axum::Router;

pub async fn start(item_size: usize) -> String {
    let item = Bytes::from(format!(
        "{{\"id\":\"x\",\"pad\":\"{}\"}}",
        "x".repeat(item_size.saturating_sub(20))
    ));
    let page = Bytes::from(format!(
        "{{\"_rid\":\"x\",\"Documents\":[{}],\"_count\":10}}",
        vec![String::from_utf8_lossy(&item).into_owned(); 10].join(",")
    ));
    let app = Router::new()
        .route(
            "/dbs/{db}/colls/{c}/docs/{id}",
            get(move || {
                let item = item.clone();
                async move { ([("content-type", "application/json")], item) }
            }),
        )
        .route(
            "/dbs/{db}/colls/{c}/docs",
            post(move |headers: HeaderMap, body: Bytes| {
                let page = page.clone();
                async move {
                    let out = if headers.contains_key("x-ms-documentdb-isquery") {
                        page
                    } else {
                        body
                    };
                    ([("content-type", "application/json")], out)
                }
            }),
        );
    let l = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/", l.local_addr().expect("addr"));
    tokio::spawn(async move {
        let _ = axum::serve(l, app).await;
    });
    url
}
