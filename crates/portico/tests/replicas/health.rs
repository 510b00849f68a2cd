//! `/api/health` through the balancer: both replicas answer in turn, each sees the same PostgreSQL
//! store (schema version, both replicas alive); the door's Host and Origin checks still judge what
//! comes through the balancer.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::cluster::*;

/// The test server's password, which no health answer may show.
fn test_password() -> Option<String> {
    let url = std::env::var(portico_store::testing::POSTGRES_URL_VAR).ok()?;
    let (_, rest) = url.split_once("://")?;
    let (userinfo, _) = rest.split_once('@')?;
    userinfo
        .split_once(':')
        .map(|(_, password)| password.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_through_the_balancer_alternates_between_replicas_sharing_one_store() {
    let Some(cluster) = tokio::task::block_in_place(|| Replicas::start(2, "")) else {
        return;
    };
    let lb = cluster.lb.base.clone();
    let password = test_password();

    // Each replica on its own port is itself.
    for replica in &cluster.replicas {
        let (status, body) = health(&replica.base).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["replica"], replica.name.as_str(), "{body}");
        assert_eq!(
            body["pid"],
            replica.daemon.child.id(),
            "{}: {body}",
            replica.name
        );
    }

    let mut answered = Vec::new();
    let mut versions = BTreeSet::new();
    let mut locations = BTreeSet::new();
    for _ in 0..6 {
        let (status, body) = health(&lb).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["status"], "ok", "{body}");
        let store = &body["store"];
        assert_eq!(store["backend"], "postgres", "{body}");
        assert_eq!(store["reachable"], true, "{body}");
        let version = store["schemaVersion"].as_u64().unwrap_or(0);
        assert!(version > 0, "{body}");
        versions.insert(version);
        let location = store["location"].as_str().unwrap().to_string();
        assert!(location.starts_with("postgres"), "{location}");
        if let Some(password) = &password {
            assert!(!location.contains(password.as_str()), "{location}");
        }
        locations.insert(location);
        let alive: BTreeSet<&str> = store["replicas"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["alive"] == true)
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        assert_eq!(alive, BTreeSet::from(["gw-a", "gw-b"]), "{body}");
        assert_eq!(store["replicas"].as_array().unwrap().len(), 2, "{body}");
        answered.push(body["replica"].as_str().unwrap().to_string());
    }
    assert_eq!(versions.len(), 1, "one schema version: {versions:?}");
    assert_eq!(locations.len(), 1, "one store: {locations:?}");
    // Round robin: a, b, a, b… (whichever first).
    let a = answered.iter().filter(|r| *r == "gw-a").count();
    assert_eq!((a, answered.len() - a), (3, 3), "{answered:?}");
    assert!(
        answered.windows(2).all(|w| w[0] != w[1]),
        "round robin alternates: {answered:?}"
    );
    // And nginx says the same: each health request went to the replica that named itself.
    let logged: Vec<Logged> = cluster
        .lb
        .access_log()
        .into_iter()
        .filter(|l| l.uri == "/api/health")
        .collect();
    let last: Vec<String> = logged[logged.len() - 6..]
        .iter()
        .map(|l| l.upstreams.join(","))
        .collect();
    assert_eq!(last, answered, "{logged:#?}");

    // Without the token: whether the store answers, not where it is.
    let response = http().get(format!("{lb}/api/health")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    let keys: Vec<&str> = body["store"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["backend", "reachable"], "{body}");

    // Host: the balancer's public name is accepted because `[server] allowed_hosts` lists it; any
    // other name is refused by Portico itself (nginx passes the client's Host on).
    let port = cluster.lb.port;
    for (host, expected) in [
        (format!("{PUBLIC_HOST}:{port}"), 200),
        (PUBLIC_HOST.to_string(), 200),
        (format!("evil.example:{port}"), 403),
    ] {
        let response = http()
            .get(format!("{lb}/api/servers"))
            .bearer_auth(TOKEN)
            .header("Host", &host)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        assert_eq!(status, expected, "Host {host}: {text}");
        if expected == 403 {
            assert!(
                text.contains(&format!("Host `{host}` is not allowed")),
                "{text}"
            );
        }
    }
    // Origin: a page served from the balancer's own origin is not the replica's origin (another
    // port): refused unless `[server] allowed_origins` lists it.
    let origin = format!("http://127.0.0.1:{port}");
    let response = http()
        .get(format!("{lb}/api/servers"))
        .bearer_auth(TOKEN)
        .header("Origin", &origin)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 403);
    let text = response.text().await.unwrap();
    assert!(
        text.contains(&format!("Origin `{origin}` is not allowed")),
        "{text}"
    );
}
