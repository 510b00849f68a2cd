//! From first install to a working config, through the real binary: `portico init`, `portico import`
//! of Claude Desktop's, Cursor's and VS Code's configs (from where they keep them, into a config that
//! `portico mcp` then serves, with the real npm servers behind it), `portico completions`, and what
//! a first run is told (`portico export` is in export.rs).

#[path = "upstreams/support.rs"]
mod support;

#[path = "doors/client.rs"]
mod client;

#[path = "onramp/machine.rs"]
mod machine;
#[path = "onramp/secrets.rs"]
mod secrets;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use client::{Home, StdioSession};
use machine::Machine;
use support::*;

fn everything_stdio() -> Value {
    json!([everything_js().display().to_string(), "stdio"])
}

/// The tools `portico mcp --standalone` serves from `config`, the env given to it.
fn served_tools(config: &str, envs: &[(&str, &str)]) -> Vec<String> {
    let home = Home::new(config);
    let mut session = StdioSession::start_with_env(&home, &["--standalone"], envs);
    session.initialize("2025-06-18");
    let names = session.tool_names(1);
    assert!(session.finish().success());
    names
}

fn count_with_prefix(names: &[String], prefix: &str) -> usize {
    names.iter().filter(|n| n.starts_with(prefix)).count()
}

#[test]
fn init_writes_the_starter_config_and_never_overwrites() {
    let machine = Machine::new();
    let config = machine.config();
    let (code, stdout, stderr) = machine.portico(&["init"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        stdout,
        format!(
            "portico: wrote a starter config to {}\n\
             It has the built-in tools and the default agent `assistant`, and no MCP servers yet. Next:\n\
             \x20 portico import           add the MCP servers of Claude Desktop, Cursor or VS Code\n\
             \x20 portico config check     check the file after you edit it\n\
             \x20 portico export claude    the JSON that points Claude Desktop (or cursor, vscode) at Portico\n\
             \x20 portico serve            run the daemon: MCP at http://127.0.0.1:4200/mcp\n",
            config.display()
        )
    );
    assert_eq!(
        std::fs::read_to_string(&config).unwrap(),
        portico_config::STARTER_CONFIG
    );
    let (code, stdout, _) = machine.portico(&["config", "check"]);
    assert_eq!((code, stdout), (0, format!("{}: ok\n", config.display())));
    // The default agent survives the move from the embedded default to a file.
    let (code, stdout, stderr) = machine.portico(&["agents", "--json"]);
    assert_eq!(code, 0, "{stderr}");
    let agents: Vec<Value> = serde_json::from_str(&stdout).unwrap();
    let names: Vec<&str> = agents.iter().map(|a| a["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["assistant"]);
    let (code, stdout, _) = machine.portico(&["servers"]);
    assert_eq!(
        (code, stdout.as_str()),
        (
            0,
            "no MCP servers configured; `portico import` adds the ones Claude Desktop, Cursor or VS Code run\n"
        )
    );

    std::fs::write(&config, "# mine\n").unwrap();
    let (code, stdout, stderr) = machine.portico(&["init"]);
    assert_eq!((code, stdout.as_str()), (1, ""));
    assert_eq!(
        stderr,
        format!(
            "error: {} already exists, and `portico init` never overwrites a config; edit it (then `portico config check`), or move it away and run `portico init` again\n",
            config.display()
        )
    );
    assert_eq!(std::fs::read_to_string(&config).unwrap(), "# mine\n");

    // --config names another place, made with its directories; the user is told how to use it.
    let elsewhere = machine.root().join("a/b/portico.toml");
    let elsewhere_text = elsewhere.display().to_string();
    let (code, stdout, _) = machine.portico(&["--config", &elsewhere_text, "init"]);
    assert_eq!(code, 0);
    assert!(
        stdout.ends_with(&format!(
            "Portico reads this file when given `--config {0}` (or PORTICO_CONFIG={0}).\n",
            elsewhere_text
        )),
        "{stdout}"
    );
    assert_eq!(
        std::fs::read_to_string(&elsewhere).unwrap(),
        portico_config::STARTER_CONFIG
    );
}

#[test]
fn a_claude_desktop_config_is_imported_from_its_place_and_served() {
    let machine = Machine::new();
    let remote = HttpPeer::everything("streamableHttp");
    let source = machine
        .config_dir()
        .join("Claude/claude_desktop_config.json");
    let claude = json!({
        "globalShortcut": "",
        "mcpServers": {
            "everything": {
                "command": node().display().to_string(),
                "args": everything_stdio(),
                "env": {"EVERYTHING_TOKEN": "s3cret-env-value", "LOG_LEVEL": "debug"}
            },
            "remote": {
                "url": remote.url("/mcp"),
                "headers": {"Authorization": "Bearer s3cret-header-value"}
            }
        }
    });
    machine.write(&source, &serde_json::to_string_pretty(&claude).unwrap());

    let (code, stdout, stderr) = machine.portico(&["import", "claude"]);
    assert_eq!(code, 0, "{stderr}");
    let config = machine.config();
    let source = source.display();
    assert_eq!(
        stdout,
        format!(
            "portico: wrote a new config, {}: 2 server(s): everything, remote\n\
             Set these before starting Portico (the secret store keeps them where an IDE-started Portico finds them too; an exported variable works as well):\n\
             \x20 portico secret set EVERYTHING_TOKEN   # server `everything`: env EVERYTHING_TOKEN had a literal value (still in {source}; not copied)\n\
             \x20 portico secret set REMOTE_TOKEN   # server `remote`: header Authorization had a literal value (still in {source}; not copied)\n\
             Next: `portico servers` shows them connect; `portico serve` serves them to your IDEs.\n",
            config.display()
        )
    );
    let written = std::fs::read_to_string(&config).unwrap();
    assert_eq!(
        written,
        format!(
            "{}\n# Imported from {source}\n[[mcp_servers]]\nname = \"everything\"\n\
             env = {{ EVERYTHING_TOKEN = \"${{EVERYTHING_TOKEN}}\", LOG_LEVEL = \"debug\" }}\n\
             [mcp_servers.transport]\ntype = \"stdio\"\ncommand = {:?}\nargs = [{:?}, \"stdio\"]\n\n\
             # Imported from {source}\n[[mcp_servers]]\nname = \"remote\"\n\
             allow_private_network = true   # its URL is on this machine or a private network\n\
             [mcp_servers.transport]\n\
             type = \"sse\"   # no type was given: Streamable HTTP, else legacy HTTP+SSE\n\
             url = {:?}\nheaders = {{ Authorization = \"Bearer ${{REMOTE_TOKEN}}\" }}\n",
            portico_config::STARTER_CONFIG,
            node().display().to_string(),
            everything_js().display().to_string(),
            remote.url("/mcp"),
        )
    );
    assert!(
        !written.contains("s3cret") && !stdout.contains("s3cret") && !stderr.contains("s3cret")
    );
    // The variables to export are warned of until they are set (doctor14), then it is clean.
    let (code, stdout, _) = machine.portico(&["config", "check"]);
    assert_eq!(code, 0);
    assert!(
        stdout.ends_with(&format!(
            "{}: ok, with 2 warning(s) about this environment (`portico doctor` checks more)\n",
            config.display()
        )),
        "{stdout}"
    );
    let checked = machine
        .command(&["config", "check"])
        .env("EVERYTHING_TOKEN", "t")
        .env("REMOTE_TOKEN", "r")
        .output()
        .unwrap();
    assert_eq!(
        (
            checked.status.code(),
            String::from_utf8_lossy(&checked.stdout).into_owned()
        ),
        (Some(0), format!("{}: ok\n", config.display()))
    );

    let names = served_tools(
        &written,
        &[("EVERYTHING_TOKEN", "t1"), ("REMOTE_TOKEN", "t2")],
    );
    assert_eq!(
        count_with_prefix(&names, "mcp_everything_"),
        17,
        "{names:?}"
    );
    assert_eq!(count_with_prefix(&names, "mcp_remote_"), 17, "{names:?}");
    assert!(names.iter().any(|n| n == "mcp_everything_echo"));
    assert!(names.iter().any(|n| n == "mcp_remote_echo"));
    // The starter's default agent came along (a tool once Portico's environment gives it a model).
    let (code, stdout, stderr) = Home::new(&written).run(&["agents", "--json"], &[]);
    assert_eq!(code, 0, "{stderr}");
    let agents: Vec<Value> = serde_json::from_str(&stdout).unwrap();
    assert_eq!(agents[0]["name"], "assistant", "{stdout}");

    // The JSON itself given as the config: one hint, not a TOML error per line.
    let source = source.to_string();
    let (code, stdout, stderr) = machine.portico(&["--config", &source, "servers"]);
    assert_eq!((code, stdout.as_str()), (1, ""));
    let hint = format!(
        "{source}: this looks like a Claude Desktop config (JSON), not Portico's TOML; run `portico import {source}` to turn its servers into a Portico config"
    );
    assert_eq!(stderr, format!("error: {hint}\n"));
    let (code, stdout, _) = machine.portico(&["--config", &source, "config", "check"]);
    assert_eq!((code, stdout), (2, format!("{hint}\n")));
    let (code, _, stderr) = machine.portico(&["--config", &source, "import", "claude"]);
    assert_eq!(code, 1);
    assert_eq!(
        stderr,
        format!(
            "error: {source} is JSON, not Portico's TOML config, so nothing is imported into it; to import its servers run `portico import {source}`\n"
        )
    );
}

#[test]
fn a_cursor_config_is_merged_into_an_existing_config_and_clashes_are_refused_or_renamed() {
    let machine = Machine::new();
    let docs = machine.home().join("docs");
    machine.write(&docs.join("note-from-cursor.txt"), "hi");
    let existing = format!(
        "# my own config: this comment stays\n{}",
        client::config_with("", &["--tools", "t1"])
    );
    machine.write(&machine.config(), &existing);
    let source = machine.home().join(".cursor/mcp.json");
    let cursor = |root: &str| {
        json!({"mcpServers": {"files": {
            "command": node().display().to_string(),
            "args": [filesystem_js().display().to_string(), root],
        }}})
        .to_string()
    };
    machine.write(&source, &cursor("${userHome}/docs"));

    let (code, stdout, stderr) = machine.portico(&["import", "cursor"]);
    assert_eq!(code, 0, "{stderr}");
    let config = machine.config().display().to_string();
    assert_eq!(
        stdout,
        format!(
            "portico: added to {config}: 1 server(s): files\n\
             Next: `portico servers` shows them connect; `portico serve` serves them to your IDEs.\n"
        )
    );
    let written = std::fs::read_to_string(machine.config()).unwrap();
    assert!(written.starts_with(&existing), "{written}");
    assert!(
        written.ends_with(&format!(
            "args = [{:?}, {:?}]\n",
            filesystem_js().display().to_string(),
            docs.display().to_string()
        )),
        "{written}"
    );

    let home = Home::new(&written);
    let mut session = StdioSession::start(&home, &["--standalone"]);
    session.initialize("2025-06-18");
    let names = session.upstream_tool_names(1);
    assert!(names.iter().any(|n| n == "mcp_cat_t1"), "{names:?}");
    let (listed, _) = session.request(
        2,
        "tools/call",
        json!({"name": "mcp_files_list_directory", "arguments": {"path": docs.display().to_string()}}),
    );
    assert_eq!(
        listed["result"]["content"][0]["text"], "[FILE] note-from-cursor.txt",
        "{listed}"
    );
    assert!(session.finish().success());

    // The same server again: nothing to do. A different one under the name: refused, nothing written.
    let (code, stdout, _) = machine.portico(&["import", "cursor"]);
    assert_eq!(
        (code, stdout),
        (
            0,
            format!(
                "portico: nothing to import: {config} already has every server\n\
                 \x20 `files`: the config already has this server as `files`; left as it is\n"
            )
        )
    );
    machine.write(&source, &cursor("/tmp"));
    let (code, stdout, stderr) = machine.portico(&["import", "cursor"]);
    assert_eq!((code, stdout.as_str()), (1, ""));
    assert_eq!(
        stderr,
        format!(
            "error: server `files` from {}: {config} already has a different server `files`; nothing was written. Rename or remove them in the source or the config, or pass --rename to import them under new names\n",
            source.display()
        )
    );
    assert_eq!(std::fs::read_to_string(machine.config()).unwrap(), written);
    let (code, stdout, _) = machine.portico(&["import", "cursor", "--rename"]);
    assert_eq!(
        (code, stdout),
        (
            0,
            format!(
                "portico: added to {config}: 1 server(s): files-2\n\
                 \x20 `files` was imported as `files-2`: the config has a different server named `files`\n\
                 Next: `portico servers` shows them connect; `portico serve` serves them to your IDEs.\n"
            )
        )
    );
    let (code, stdout, _) = machine.portico(&["config", "check"]);
    assert_eq!((code, stdout), (0, format!("{config}: ok\n")));
}

#[test]
fn a_vs_code_mcp_json_with_inputs_is_previewed_then_written_and_served() {
    let machine = Machine::new();
    let remote = HttpPeer::everything("streamableHttp");
    let source = machine.project().join(".vscode/mcp.json");
    let text = format!(
        r#"{{
  // Written by hand, as VS Code allows: comments and trailing commas.
  "inputs": [
    {{"type": "promptString", "id": "everything-key", "description": "The everything key", "password": true}},
  ],
  "servers": {{
    "everything": {{
      "type": "stdio",
      "command": {node},
      "args": {args},
      "cwd": "${{workspaceFolder}}",
      "env": {{"EVERYTHING_KEY": "${{input:everything-key}}"}},
    }},
    "web": {{"type": "http", "url": {url}}},
  }},
}}"#,
        node = json!(node().display().to_string()),
        args = everything_stdio(),
        url = json!(remote.url("/mcp")),
    );
    machine.write(&source, &text);
    let output = machine.data().join("vscode.toml");
    let output_text = output.display().to_string();

    let (code, stdout, stderr) =
        machine.portico(&["import", "vscode", "--dry-run", "--output", &output_text]);
    assert_eq!(code, 0, "{stderr}");
    let source = source.display();
    let expected = format!(
        "{}\n# Imported from {source}\n[[mcp_servers]]\nname = \"everything\"\n\
         env = {{ EVERYTHING_KEY = \"${{EVERYTHING_KEY}}\" }}\n[mcp_servers.transport]\n\
         type = \"stdio\"\ncommand = {:?}\nargs = [{:?}, \"stdio\"]\ncwd = {:?}\n\n\
         # Imported from {source}\n[[mcp_servers]]\nname = \"web\"\n\
         allow_private_network = true   # its URL is on this machine or a private network\n\
         [mcp_servers.transport]\ntype = \"http\"\nurl = {:?}\n",
        portico_config::STARTER_CONFIG,
        node().display().to_string(),
        everything_js().display().to_string(),
        machine.project().display().to_string(),
        remote.url("/mcp"),
    );
    assert_eq!(stdout, expected);
    let report = "Set these before starting Portico (the secret store keeps them where an IDE-started Portico finds them too; an exported variable works as well):\n\
         \x20 portico secret set EVERYTHING_KEY   # server `everything`: env EVERYTHING_KEY was VS Code's input `everything-key` (The everything key)\n";
    assert_eq!(
        stderr,
        format!(
            "portico: dry run, nothing written; {output_text} would get 2 server(s): everything, web\n{report}"
        )
    );
    assert!(!output.exists());

    let (code, stdout, stderr) = machine.portico(&["import", "vscode", "--output", &output_text]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        stdout,
        format!(
            "portico: wrote a new config, {output_text}: 2 server(s): everything, web\n{report}\
             Next: `portico servers` shows them connect; `portico serve` serves them to your IDEs.\n"
        )
    );
    assert_eq!(std::fs::read_to_string(&output).unwrap(), expected);
    assert!(!machine.config().exists(), "--output wrote elsewhere");
    let checked = machine
        .command(&["--config", &output_text, "config", "check"])
        .env("EVERYTHING_KEY", "k")
        .output()
        .unwrap();
    assert_eq!(
        (
            checked.status.code(),
            String::from_utf8_lossy(&checked.stdout).into_owned()
        ),
        (Some(0), format!("{output_text}: ok\n"))
    );

    let names = served_tools(&expected, &[("EVERYTHING_KEY", "k")]);
    assert_eq!(
        count_with_prefix(&names, "mcp_everything_"),
        17,
        "{names:?}"
    );
    assert_eq!(count_with_prefix(&names, "mcp_web_"), 17, "{names:?}");
}

#[test]
fn import_says_where_it_looked_when_there_is_nothing() {
    let machine = Machine::new();
    let (code, stdout, stderr) = machine.portico(&["import", "claude"]);
    assert_eq!((code, stdout.as_str()), (1, ""));
    assert_eq!(
        stderr,
        format!(
            "error: found no Claude Desktop config; looked for:\n  {}\nname the file instead: `portico import PATH`\n",
            machine
                .config_dir()
                .join("Claude/claude_desktop_config.json")
                .display()
        )
    );
    let settings = machine.config_dir().join("Code/User/settings.json");
    machine.write(&settings, r#"{"editor.fontSize": 14}"#);
    let shown = settings.display().to_string();
    // Found by looking, a settings.json without servers is passed over; named, it is an error.
    let (code, _, stderr) = machine.portico(&["import", "vscode"]);
    assert_eq!(code, 1);
    assert_eq!(
        stderr,
        format!(
            "portico: no MCP servers in {shown}\nerror: found no MCP servers to import in {shown}\n"
        )
    );
    let (code, _, stderr) = machine.portico(&["import", &shown]);
    assert_eq!(code, 1);
    assert_eq!(
        stderr,
        format!(
            "error: {shown} has no MCP servers: expected an `mcpServers` object (Claude Desktop, Cursor) or `servers` (VS Code's mcp.json; `mcp.servers` in its settings.json)\n"
        )
    );
    assert!(!machine.config().exists());
}

/// `portico import /dev/zero` (endless), a FIFO nobody writes to (a read that never returns) and
/// a file over the bound are each refused at once, in words, before anything is read.
#[test]
fn import_refuses_what_is_not_a_regular_file_or_is_over_its_bound_at_once() {
    let machine = Machine::new();
    std::fs::create_dir_all(machine.home()).unwrap();
    let fifo = machine.home().join("servers.json");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let big = machine.home().join("big.json");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(4 * 1024 * 1024 + 1)
        .unwrap();
    // The FIFO first: a read that blocks fails the test at its deadline before an endless one
    // could fill memory.
    let cases = [
        (
            fifo.display().to_string(),
            "a named pipe (FIFO), not a regular file",
        ),
        (big.display().to_string(), "larger than 4 MiB"),
        ("/dev/zero".to_string(), "a device, not a regular file"),
    ];
    for (path, says) in cases {
        let mut child = machine
            .command(&["import", &path])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while child.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                child.kill().unwrap();
                child.wait().unwrap();
                panic!("`portico import {path}` still runs after 10 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let output = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{path}: {stderr}");
        assert!(
            stderr.starts_with(&format!("error: cannot import {path}: it is "))
                && stderr.contains(says),
            "{path}: {stderr}"
        );
    }
    assert!(!machine.config().exists());
}

#[test]
fn completions_cover_every_command() {
    let machine = Machine::new();
    for (shell, marker) in [
        ("bash", "complete -F _portico"),
        ("zsh", "#compdef portico"),
        ("fish", "complete -c portico"),
    ] {
        let (code, script, stderr) = machine.portico(&["completions", shell]);
        assert_eq!(code, 0, "{stderr}");
        assert!(script.contains(marker), "{shell}: {script}");
        for command in ["init", "import", "export", "serve", "completions"] {
            assert!(script.contains(command), "{shell} lacks {command}");
        }
    }
    let (code, stdout, _) = machine.portico(&["completions", "bash"]);
    assert_eq!(code, 0);
    assert!(
        stdout.contains("--dry-run"),
        "import's options are completed"
    );
}

#[test]
fn serve_without_a_config_file_says_to_run_init() {
    let machine = Machine::new();
    let mut child = machine
        .command(&["serve"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let child = StopOnDrop(child);
    let expected = format!(
        "no config file; run `portico init` to create one at {} (running on the embedded defaults: the built-in tools and the `assistant` agent)",
        machine.config().display()
    );
    let mut seen = Vec::new();
    let line = loop {
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| {
                panic!("serve never said it has no config (test guard): {seen:#?}")
            });
        if line.contains("no config file") {
            break line;
        }
        seen.push(line);
    };
    assert!(line.contains(" WARN "), "{line}");
    assert!(line.ends_with(&expected), "{line}");
    assert!(!line.contains("<embedded default>"), "{line}");
    drop(child);
}
