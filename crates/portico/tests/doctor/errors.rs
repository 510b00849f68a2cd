//! The texts of failures, asserted exactly: a dead URL's root cause, a failing child's stderr tail
//! in `portico servers`, the CA-bundle variables and their hint, `config check`'s warnings and hints,
//! and web_fetch's refusal of a loopback URL.

use serde_json::Value;

use crate::checks::{Home, free_port};
use crate::support::*;

#[test]
fn servers_shows_a_dead_urls_cause_and_a_failing_childs_stderr() {
    let marked = Marked::new();
    let dead = format!("http://127.0.0.1:{}/mcp", free_port());
    let crashy = marked.script("fault_crash_at_start.py");
    let python = python3().display().to_string();
    let home = Home::new(&format!(
        "{}{}{}",
        url_entry("dead", "http", &dead, "allow_private_network = true"),
        stdio_entry("crashy", &python3(), &[crashy.to_str().unwrap()], ""),
        stdio_entry(
            "nocmd",
            std::path::Path::new("no-such-portico-test-program"),
            &[],
            ""
        ),
    ));
    let (code, stdout, stderr) = home.portico(&["servers", "--json"], &[]);
    assert_eq!(code, 0, "{stderr}");
    let servers: Vec<Value> = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        servers[0]["last_error"],
        format!("server `dead`: cannot reach {dead}: connection refused")
    );
    assert_eq!(servers[0].get("stderr_tail"), None);
    assert_eq!(
        servers[1]["last_error"],
        format!(
            "server `crashy`: `{python}` exited or closed its stdout before answering the handshake; its stderr ended with:\n    fatal: cannot start"
        )
    );
    assert_eq!(
        servers[1]["stderr_tail"],
        serde_json::json!(["fatal: cannot start"])
    );
    assert_eq!(
        servers[2]["last_error"],
        "server `nocmd`: cannot start `no-such-portico-test-program`: no such program (is it installed, and on the PATH Portico was started with?)"
    );
    // No Rust type names anywhere the user looks; the answer says what failed, so the one-shot
    // command's log does not say it again.
    assert!(!stderr.contains("portico_mcp::"), "{stderr}");
    assert!(!stderr.contains("reqwest::"), "{stderr}");
    assert!(!stderr.contains("server `crashy`"), "{stderr}");
    // With -v the log shows the attempts, and the child's stderr is a WARN, not an INFO.
    let (code, _, stderr) = home.portico(&["servers", "--json", "-v"], &[]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr
            .lines()
            .any(|l| l.contains(" WARN ") && l.contains("server `crashy`: `")),
        "{stderr}"
    );
    // One log record is one line: the child's stderr is in it, its line breaks written out.
    assert!(
        stderr.contains("ended with:\\n    fatal: cannot start"),
        "{stderr}"
    );

    let (code, table, _) = home.portico(&["servers"], &[]);
    assert_eq!(code, 0);
    let lines: Vec<&str> = table.lines().collect();
    assert!(
        lines[1].starts_with("dead ")
            && lines[1].ends_with(&format!(
                "server `dead`: cannot reach {dead}: connection refused"
            )),
        "{table}"
    );
    assert!(
        lines[2].starts_with("crashy ")
            && lines[2].ends_with(&format!(
                "server `crashy`: `{python}` exited or closed its stdout before answering the handshake; its stderr ended with:"
            )),
        "{table}"
    );
    assert_eq!(lines[3], "    fatal: cannot start", "{table}");
    assert!(marked.processes().is_empty(), "{:#?}", marked.processes());
}

#[test]
fn a_childs_stderr_tail_is_bounded_to_its_last_20_lines() {
    let script =
        "import sys\nfor n in range(100):\n    sys.stderr.write(f'line {n}\\n')\nsys.exit(3)\n";
    let home = Home::new(&stdio_entry("chatty", &python3(), &["-c", script], ""));
    let (code, stdout, stderr) = home.portico(&["servers", "--json"], &[]);
    assert_eq!(code, 0, "{stderr}");
    let servers: Vec<Value> = serde_json::from_str(&stdout).unwrap();
    let tail: Vec<String> = (80..100).map(|n| format!("line {n}")).collect();
    assert_eq!(servers[0]["stderr_tail"], serde_json::json!(tail));
}

#[test]
fn ca_bundle_variables_reach_children_and_a_certificate_failure_names_the_unset_ones() {
    let marked = Marked::new();
    let home = Home::new(&stdio_entry(
        "envy",
        &python3(),
        &[marked.script("env_dump.py").to_str().unwrap()],
        "",
    ));
    let (code, stdout, stderr) = home.portico(
        &["call", "mcp_envy_env"],
        &[
            ("NODE_EXTRA_CA_CERTS", "/etc/corp/ca.pem"),
            ("SSL_CERT_FILE", "/etc/corp/ca.pem"),
            ("SSL_CERT_DIR", "/etc/corp/certs"),
            ("REQUESTS_CA_BUNDLE", "/etc/corp/ca.pem"),
            ("AWS_SECRET_ACCESS_KEY", "hunter2"),
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    let env: serde_json::Map<String, Value> = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(env["NODE_EXTRA_CA_CERTS"], "/etc/corp/ca.pem");
    assert_eq!(env["SSL_CERT_FILE"], "/etc/corp/ca.pem");
    assert_eq!(env["SSL_CERT_DIR"], "/etc/corp/certs");
    assert_eq!(env["REQUESTS_CA_BUNDLE"], "/etc/corp/ca.pem");
    assert!(!env.contains_key("AWS_SECRET_ACCESS_KEY"), "{env:?}");

    let script = "import sys\nsys.stderr.write('Error: self-signed certificate in certificate chain\\n')\nsys.exit(1)\n";
    let home = Home::new(&stdio_entry("tls", &python3(), &["-c", script], ""));
    let (_, stdout, stderr) = home.run(
        &home.config(),
        &["servers", "--json"],
        &[("SSL_CERT_FILE", "/etc/corp/ca.pem")],
        &["NODE_EXTRA_CA_CERTS", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE"],
    );
    let servers: Vec<Value> =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}{stderr}"));
    assert_eq!(
        servers[0]["last_error"],
        format!(
            "server `tls`: `{}` exited or closed its stdout before answering the handshake; its stderr ended with:\n    Error: self-signed certificate in certificate chain\n  (a TLS certificate problem? Portico passes NODE_EXTRA_CA_CERTS, SSL_CERT_FILE, SSL_CERT_DIR, REQUESTS_CA_BUNDLE to children from its environment (unset here: NODE_EXTRA_CA_CERTS, SSL_CERT_DIR, REQUESTS_CA_BUNDLE); export the one your server's runtime reads, pointing at your CA bundle)",
            python3().display()
        )
    );
}

#[test]
fn config_check_warns_of_what_this_environment_lacks_and_hints_right() {
    let config = "[[mcp_servers]]\nname = \"gh\"\n[mcp_servers.transport]\ntype = \"http\"\nurl = \"https://example.com/mcp\"\nheaders = { Authorization = \"Bearer ${PORTICO_DOCTOR_UNSET_GH}\" }\n\n[[mcp_servers]]\nname = \"local\"\n[mcp_servers.transport]\ntype = \"stdio\"\ncommand = \"no-such-portico-test-program\"\n";
    let home = Home::new(config);
    let path = home.config().display().to_string();
    let (code, stdout, _) = home.portico(&["config", "check"], &[]);
    assert_eq!(code, 0, "warnings only: {stdout}");
    assert_eq!(
        stdout,
        format!(
            "{path}:6:29: warning: mcp_servers.transport.headers.Authorization references ${{PORTICO_DOCTOR_UNSET_GH}}, which is set neither in this environment nor in the secret store (hint: run `portico secret set PORTICO_DOCTOR_UNSET_GH`, or export PORTICO_DOCTOR_UNSET_GH before starting Portico)\n\
             {path}:12:11: warning: server `local`: command `no-such-portico-test-program` is not on PATH (hint: install it, or give its full path (Portico searches the PATH it was started with))\n\
             {path}: ok, with 2 warning(s) about this environment (`portico doctor` checks more)\n"
        )
    );

    // An open listen address without a token is a problem `serve` would refuse on.
    let home = Home::new("[server]\nlisten = \"0.0.0.0:4200\"\n");
    let (code, stdout, _) = home.portico(&["config", "check"], &[]);
    assert_eq!(code, 2);
    assert_eq!(
        stdout,
        format!(
            "{}:2:10: [server] listen is 0.0.0.0:4200, which is not a loopback address, and no token is set: anyone who can reach it could use every tool (hint: set [server] token = \"${{PORTICO_TOKEN}}\", add [[server.clients]] with tokens (`portico clients add NAME`) or [server.oauth], or listen on 127.0.0.1)\n1 problem(s) found\n",
            home.config().display()
        )
    );

    // An unset ${PORTICO_TOKEN} is named too.
    let home = Home::new("[server]\ntoken = \"${PORTICO_TOKEN}\"\n");
    let (code, stdout, _) = home.portico(&["config", "check"], &[]);
    assert_eq!(code, 0);
    assert!(
        stdout.starts_with(&format!(
            "{}:2:9: warning: server.token references ${{PORTICO_TOKEN}}, which is set neither in this environment nor in the secret store",
            home.config().display()
        )),
        "{stdout}"
    );
    let (code, stdout, _) = home.portico(&["config", "check"], &[("PORTICO_TOKEN", "s3cret")]);
    assert_eq!(code, 0);
    assert_eq!(stdout, format!("{}: ok\n", home.config().display()));

    // `cmd` is short for `command`, not a typo of `cwd`.
    let home = Home::new(
        "[[mcp_servers]]\nname = \"n\"\n[mcp_servers.transport]\ntype = \"stdio\"\ncmd = \"node\"\n",
    );
    let (code, stdout, _) = home.portico(&["config", "check"], &[]);
    assert_eq!(code, 2);
    assert!(
        stdout.contains(
            ":5:1: unknown key `cmd` in a stdio transport (hint: did you mean `command`?"
        ),
        "{stdout}"
    );
}

#[test]
fn web_fetch_refusing_a_loopback_url_says_where_the_setting_goes() {
    let home = Home::new("");
    let (code, stdout, stderr) = home.portico(
        &[
            "call",
            "web_fetch",
            "--args",
            "{\"url\": \"http://127.0.0.1:9/\"}",
        ],
        &[],
    );
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert_eq!(
        stdout,
        "error: the tool reported a failure\nweb_fetch could not fetch http://127.0.0.1:9/: refused http://127.0.0.1:9/: 127.0.0.1 is a loopback address; set web_fetch_allow_private_network = true in the config's [builtins] section to allow it\n",
        "{stderr}"
    );
}

#[test]
fn a_package_runner_that_never_answers_points_at_the_ca_bundle_variables() {
    let home = Home::new("");
    // An `npx` that hangs silently, as one stuck downloading behind a TLS-inspecting proxy does.
    let npx = home.dir.path().join("npx");
    std::fs::write(&npx, "#!/bin/sh\nexec sleep 30\n").unwrap();
    std::fs::set_permissions(&npx, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::write(
        home.config(),
        stdio_entry(
            "fs",
            &npx,
            &["-y", "@modelcontextprotocol/server-filesystem"],
            "startup_timeout_secs = 1",
        ),
    )
    .unwrap();
    let (code, stdout, stderr) = home.run(
        &home.config(),
        &["doctor"],
        &[],
        &[
            "NODE_EXTRA_CA_CERTS",
            "SSL_CERT_FILE",
            "SSL_CERT_DIR",
            "REQUESTS_CA_BUNDLE",
        ],
    );
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(
        stdout.contains(
            "\nFAIL  server `fs`: no handshake answer within 1s (raise startup_timeout_secs if the server is just slow to start)\n  (a TLS certificate problem? Portico passes NODE_EXTRA_CA_CERTS, SSL_CERT_FILE, SSL_CERT_DIR, REQUESTS_CA_BUNDLE to children from its environment (unset here: NODE_EXTRA_CA_CERTS, SSL_CERT_FILE, SSL_CERT_DIR, REQUESTS_CA_BUNDLE); export the one your server's runtime reads, pointing at your CA bundle)\n"
        ),
        "{stdout}"
    );
}

/// A loopback HTTP server that is not MCP (Python's `http.server`), killed on drop.
struct PlainHttp(std::process::Child, u16);

impl PlainHttp {
    fn start() -> PlainHttp {
        use std::io::BufRead;
        let mut child = std::process::Command::new(python3())
            .args(["-u", "-m", "http.server", "0", "--bind", "127.0.0.1"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        // "Serving HTTP on 127.0.0.1 port N (http://127.0.0.1:N/) ..."
        let port = line
            .split(" port ")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|port| port.parse().ok())
            .unwrap_or_else(|| panic!("no port in {line:?}"));
        PlainHttp(child, port)
    }
}

impl Drop for PlainHttp {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_url_that_answers_but_not_mcp_is_named_with_what_it_answered() {
    let web = PlainHttp::start();
    let url = format!("http://127.0.0.1:{}/mcp", web.1);
    let home = Home::new(&url_entry(
        "web",
        "http",
        &url,
        "allow_private_network = true",
    ));
    let (code, stdout, stderr) = home.portico(&["servers", "--json"], &[]);
    assert_eq!(code, 0, "{stderr}");
    let servers: Vec<Value> = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        servers[0]["last_error"],
        format!("server `web`: handshake failed: {url}: send discover request: HTTP 501")
    );
}

#[test]
fn the_daemons_api_shows_a_failing_childs_stderr_tail() {
    use std::io::{Read, Write};
    let marked = Marked::new();
    let port = free_port();
    let crashy = marked.script("fault_crash_at_start.py");
    let home = Home::new(&format!(
        "[server]\nlisten = \"127.0.0.1:{port}\"\n\n{}",
        stdio_entry("crashy", &python3(), &[crashy.to_str().unwrap()], "")
    ));
    let daemon = crate::checks::start_daemon(&home);
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        stream,
        "GET /api/mcp/servers HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let body = answer.split_once("\r\n\r\n").map(|(_, body)| body).unwrap();
    let servers: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {answer}"));
    let crashy = &servers["connected"][0];
    assert_eq!(crashy["name"], "crashy");
    assert_eq!(
        crashy["stderr_tail"],
        serde_json::json!(["fatal: cannot start"])
    );
    drop(daemon);
}
