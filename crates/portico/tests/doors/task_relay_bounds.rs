//! The tasks relay at its edges: a task Portico cannot route (its client at its bound, an id that
//! clashes with another of the client's tasks) is cancelled on its server, two upstreams using the
//! same task ids keep their own routes, and a final result read with `tasks/get` is cut at
//! `max_response_bytes` as a `tools/call` result is. The conformance fixture numbers its tasks
//! `task-0`, `task-1`, … here ([`SEQUENTIAL_TASK_IDS_ENV`]), so ids meet and a test can name a task
//! it never saw.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::client::*;
use crate::tasks::{OTHER, OWNER, fixture_bin, request};

/// The fixture's `tasks::SEQUENTIAL_TASK_IDS_ENV` (the fixture is no dependency of this crate).
const SEQUENTIAL_TASK_IDS_ENV: &str = "CONFORMANCE_FIXTURE_SEQUENTIAL_TASK_IDS";

fn home(servers: &str, server_extra: &str) -> Home {
    Home::new(&format!(
        r#"[server]
listen = "127.0.0.1:0"
rate_limit = {{ enabled = false }}
{server_extra}

[[server.clients]]
name = "owner"
token = "{OWNER}"

[[server.clients]]
name = "other"
token = "{OTHER}"

{servers}"#
    ))
}

fn start(home: &Home) -> Daemon {
    tokio::task::block_in_place(|| {
        let mut daemon = Daemon::start(home);
        daemon.wait_for_line("portico: ready");
        daemon
    })
}

fn sequential_fixture(name: &str) -> String {
    crate::support::stdio_entry(
        name,
        &fixture_bin(),
        &["stdio"],
        &format!("env = {{ {SEQUENTIAL_TASK_IDS_ENV} = \"1\" }}"),
    )
}

/// Polls `task_id` as `token` to its end (at the interval the task suggests) and gives its final
/// state.
async fn poll_to_end(base: &str, token: &str, task_id: &str) -> Value {
    for _ in 0..50 {
        let state = request(base, token, "tasks/get", json!({"taskId": task_id}), true).await;
        assert_eq!(state["result"]["taskId"], task_id, "{state}");
        if state["result"]["status"] != "working" {
            return state;
        }
        let interval = state["result"]["pollIntervalMs"].as_u64().unwrap();
        tokio::time::sleep(Duration::from_millis(interval)).await;
    }
    panic!("task {task_id} did not finish");
}

fn created_id(created: &Value) -> &str {
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    created["result"]["taskId"].as_str().unwrap()
}

/// Regression test: routes were keyed by task id alone, so a task of another upstream with the same
/// id took the first one's route (the owner's `task-0` became the other client's, and the owner was
/// told it had no such task). A client's own clash is refused and cancelled instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_upstreams_using_the_same_task_ids_keep_their_own_routes() {
    let servers = format!("{}{}", sequential_fixture("one"), sequential_fixture("two"));
    let home = home(&servers, "");
    let mut daemon = start(&home);
    let base = daemon.base.clone();
    let call = |server: &str, label: &str| json!({"name": format!("mcp_{server}_slow_compute"), "arguments": {"seconds": 0, "label": label}});
    let a = request(&base, OWNER, "tools/call", call("one", "a"), true).await;
    assert_eq!(created_id(&a), "task-0");
    let b = request(&base, OTHER, "tools/call", call("two", "b"), true).await;
    assert_eq!(created_id(&b), "task-0");
    let c = request(&base, OWNER, "tools/call", call("two", "c"), true).await;
    assert_eq!(created_id(&c), "task-1");
    // `one`'s second task is `task-1` too, which the owner already has on `two`.
    let clash = request(&base, OWNER, "tools/call", call("one", "d"), true).await;
    assert_eq!(clash["error"]["code"], -32603, "{clash}");
    assert_eq!(
        clash["error"]["message"],
        "server `one` gave the new task the id `task-1`, which this client's task on server `two` already has; retry the call once that task has finished and expired, or ask the server's operator to use unique task ids; Portico cancelled the task on its server",
        "{clash}"
    );

    for (token, task_id, label) in [
        (OWNER, "task-0", "a"),
        (OTHER, "task-0", "b"),
        (OWNER, "task-1", "c"),
    ] {
        let done = poll_to_end(&base, token, task_id).await;
        assert_eq!(done["result"]["status"], "completed", "{done}");
        assert_eq!(
            done["result"]["result"]["content"][0]["text"],
            format!("slow_compute {label} finished after 0 s"),
            "{done}"
        );
    }
    assert!(tokio::task::block_in_place(|| daemon.stop()).success());
}

/// The conformance fixture over Streamable HTTP, on a free loopback port, stopped when dropped.
struct HttpFixture {
    child: crate::support::StopOnDrop,
    url: String,
}

impl HttpFixture {
    fn start() -> HttpFixture {
        let mut child = Command::new(fixture_bin())
            .args(["http", "--port", "0"])
            .env(SEQUENTIAL_TASK_IDS_ENV, "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the conformance fixture");
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        let url = loop {
            line.clear();
            assert!(
                stderr.read_line(&mut line).unwrap() > 0,
                "the fixture ended before listening"
            );
            if let Some(url) = line
                .trim()
                .strip_prefix("conformance-fixture: listening on ")
            {
                break url.to_string();
            }
        };
        // Keep draining its stderr so the fixture never blocks on a full pipe.
        std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
        HttpFixture {
            child: crate::support::StopOnDrop(child),
            url,
        }
    }

    /// `tasks/get` straight to the fixture, as a stateless 2026-07-28 client that declared tasks.
    async fn task_status(&self, task_id: &str) -> Value {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {
            "taskId": task_id,
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}}});
        let response = reqwest::Client::builder()
            .no_proxy()
            .build()
            .unwrap()
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tasks/get")
            .header("mcp-name", task_id)
            .json(&body)
            .send()
            .await
            .unwrap();
        let text = response.text().await.unwrap();
        // One JSON body, or one SSE event carrying it.
        let json = text
            .lines()
            .find_map(|line| line.strip_prefix("data:"))
            .unwrap_or(&text);
        let answer: Value =
            serde_json::from_str(json.trim()).unwrap_or_else(|e| panic!("{e}: {text}"));
        answer["result"]["status"].clone()
    }
}

/// Regression test: the per-client bound was checked after the upstream had made the task, and the
/// refused task ran on there to its ttl (five minutes) for nobody. It is cancelled now.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_refused_at_its_clients_bound_is_cancelled_on_its_server() {
    let fixture = tokio::task::block_in_place(HttpFixture::start);
    let entry = crate::support::url_entry(
        "fixture",
        "http",
        &fixture.url,
        "allow_private_network = true",
    );
    let home = home(&format!("[expose]\nprefix = false\n\n{entry}"), "");
    let mut daemon = start(&home);
    let base = daemon.base.clone();
    let max = portico_mcp_server::task_routes::MAX_ROUTED_TASKS_PER_CLIENT;
    let call = json!({"name": "slow_compute", "arguments": {"seconds": 120}});
    for n in 0..max {
        let created = request(&base, OWNER, "tools/call", call.clone(), true).await;
        assert_eq!(created_id(&created), format!("task-{n}"));
    }
    let refused = request(&base, OWNER, "tools/call", call.clone(), true).await;
    assert_eq!(refused["error"]["code"], -32603, "{refused}");
    assert_eq!(
        refused["error"]["message"],
        format!(
            "client `client:owner` already has {max} tasks running through Portico; wait for one to finish (poll it to its end) or cancel one; Portico cancelled the task on its server"
        ),
        "{refused}"
    );
    // The refused call's task is the fixture's task-64: cancelled, while the routed ones run on.
    assert_eq!(
        fixture.task_status(&format!("task-{max}")).await,
        "cancelled"
    );
    assert_eq!(
        fixture.task_status(&format!("task-{}", max - 1)).await,
        "working"
    );
    // Another client is not held to the owner's bound.
    let other = request(&base, OTHER, "tools/call", call.clone(), true).await;
    assert_eq!(created_id(&other), format!("task-{}", max + 1));
    // A task the owner cancels gives its place back at once (it once held it until its ttl).
    let cancelled = request(
        &base,
        OWNER,
        "tasks/cancel",
        json!({"taskId": "task-0"}),
        true,
    )
    .await;
    assert!(cancelled.get("error").is_none(), "{cancelled}");
    let again = request(&base, OWNER, "tools/call", call, true).await;
    assert_eq!(created_id(&again), format!("task-{}", max + 2), "{again}");
    assert!(tokio::task::block_in_place(|| daemon.stop()).success());
    drop(fixture.child);
}

/// Regression test: a final result read with `tasks/get` reached the client whatever its size,
/// while the same result from `tools/call` is cut at `max_response_bytes`. Both are an isError
/// result naming the limit now; the task's state is kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tasks_final_result_is_cut_at_max_response_bytes() {
    let home = home(
        &format!(
            "[expose]\nprefix = false\n\n{}",
            sequential_fixture("fixture")
        ),
        "max_response_bytes = 2000",
    );
    let mut daemon = start(&home);
    let base = daemon.base.clone();
    let label = "x".repeat(3000);
    let call = json!({"name": "slow_compute", "arguments": {"seconds": 0, "label": label}});

    let inline = request(&base, OWNER, "tools/call", call.clone(), false).await;
    assert_eq!(inline["result"]["isError"], true, "{inline}");
    let text = inline["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("the result of `slow_compute` is ")
            && text.ends_with(" bytes, over Portico's response limit of 2000 bytes; ask for less (e.g. a narrower query), or raise [server] max_response_bytes"),
        "{inline}"
    );

    let created = request(&base, OWNER, "tools/call", call, true).await;
    let task_id = created_id(&created).to_string();
    let done = poll_to_end(&base, OWNER, &task_id).await;
    let result = &done["result"];
    assert_eq!(result["status"], "completed", "{done}");
    assert_eq!(result["result"]["isError"], true, "{done}");
    let text = result["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with(&format!("the result of task `{task_id}` is "))
            && text.ends_with(" bytes, over Portico's response limit of 2000 bytes; ask for less (e.g. a narrower query), or raise [server] max_response_bytes"),
        "{done}"
    );
    assert!(!done.to_string().contains(&"x".repeat(3000)), "{done}");
    assert!(tokio::task::block_in_place(|| daemon.stop()).success());
}
